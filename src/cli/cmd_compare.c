/* cmd_compare.c — `gflow compare RUN_DIR...`: one table of runs and a plot of validation curves. */
#include "cli.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(void) {
    printf("usage: gflow compare RUN_DIR... [--plot FILE.png] [--markdown]\n\n"
           "  One row per run: family, parameters, best validation perplexity and its epoch, test\n"
           "  perplexity (of the best checkpoint), per-word test perplexity, training tokens/s, and the\n"
           "  gap to the first run in %%. Runs still in progress show their best validation so far.\n"
           "  --plot writes validation perplexity against step for every run (gnuplot, PNG;\n"
           "  default compare.png; --plot none to skip).\n");
}

typedef struct { char key[64]; char val[512]; } kv;

static int read_summary(const char *dir, kv *out, int cap) {
    char path[1100];
    snprintf(path, sizeof path, "%s/summary.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1200];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        line[strcspn(line, "\0")] = 0;
        char *v = tab + 1;
        v[strcspn(v, "\r\n")] = 0;
        snprintf(out[n].key, sizeof out[n].key, "%.63s", line);
        snprintf(out[n].val, sizeof out[n].val, "%.511s", v);
        n++;
    }
    fclose(f);
    return n;
}

static const char *get(const kv *k, int n, const char *key) {
    for (int i = 0; i < n; i++) if (!strcmp(k[i].key, key)) return k[i].val;
    return NULL;
}

/* best validation so far from metrics.tsv (for runs without a summary) */
static int scan_metrics(const char *dir, double *best_ppl, long *best_epoch, int *has_acc) {
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    *best_ppl = INFINITY;
    *best_epoch = -1;
    *has_acc = 0;
    while (fgets(line, sizeof line, f)) {
        long step, epoch;
        char split[16], loss[32], ppl[32], pw[32], acc[32];
        if (sscanf(line, "%ld\t%ld\t%15s\t%31s\t%31s\t%31s\t%31s", &step, &epoch, split, loss, ppl, pw, acc) != 7) continue;
        if (strcmp(split, "valid")) continue;
        double p = strtod(ppl, NULL);
        if (p < *best_ppl) { *best_ppl = p; *best_epoch = epoch + 1; }
        if (strcmp(acc, "-")) *has_acc = 1;
    }
    fclose(f);
    return 1;
}

int gf_cmd_compare(int argc, char **argv) {
    const char *plot = "compare.png";
    const char **dirs = calloc((size_t)argc, sizeof *dirs);
    int nd = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); free(dirs); return GF_EXIT_OK; }
        else if (!strcmp(argv[i], "--plot") && i + 1 < argc) plot = argv[++i];
        else if (argv[i][0] == '-') { fprintf(stderr, "gflow compare: unknown option '%s'\n", argv[i]); free(dirs); return GF_EXIT_USAGE; }
        else dirs[nd++] = argv[i];
    }
    if (nd == 0) { help(); free(dirs); return GF_EXIT_USAGE; }
    printf("| run | family | params | best val PPL or acc (epoch) | test PPL or acc | test PPL/word | tok/s | gap vs first |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    double first = NAN;
    int rc = GF_EXIT_OK;
    for (int i = 0; i < nd; i++) {
        kv k[64];
        int n = read_summary(dirs[i], k, 64);
        double best;
        long be;
        int has_acc;
        if (!scan_metrics(dirs[i], &best, &be, &has_acc)) {
            fprintf(stderr, "gflow compare: %s: no metrics.tsv (not a run directory?)\n", dirs[i]);
            rc = GF_EXIT_ERROR;
            continue;
        }
        const char *fam = n ? get(k, n, "family") : NULL, *params = n ? get(k, n, "params") : NULL;
        const char *tp = n ? get(k, n, "test_ppl") : NULL, *tw = n ? get(k, n, "test_ppl_word") : NULL;
        int is_acc = n && get(k, n, "best_val_acc") != NULL;
        if (is_acc) { /* NLI run: accuracies (higher is better) */
            best = strtod(get(k, n, "best_val_acc"), NULL);
            tp = get(k, n, "test_acc");
        }
        const char *tok = n ? get(k, n, "tokens_per_s") : NULL;
        if (n && get(k, n, "best_val_ppl")) best = strtod(get(k, n, "best_val_ppl"), NULL);
        if (n && get(k, n, "best_epoch")) be = strtol(get(k, n, "best_epoch"), NULL, 10);
        if (isnan(first)) first = best;
        if (!n && has_acc) { /* running NLI: best dev accuracy so far is not tracked in the table */ }
        char gap[32];
        snprintf(gap, sizeof gap, i == 0 ? "—" : "%+.1f%%", 100.0 * (best / first - 1.0));
        printf(is_acc ? "| %s | %s | %s | %.4f (%ld)%s | %s | %s | %s | %s |\n" : "| %s | %s | %s | %.2f (%ld)%s | %s | %s | %s | %s |\n",
               dirs[i], fam ? fam : "?", params ? params : "?", best, be, n ? "" : " running", tp ? tp : "-", tw ? tw : "-", tok ? tok : "-", gap);
    }
    if (strcmp(plot, "none") != 0 && rc == GF_EXIT_OK) {
        char script[8192];
        int off = snprintf(script, sizeof script,
                           "set terminal pngcairo size 900,560; set output '%s'; set xlabel 'step'; "
                           "set ylabel 'validation perplexity'; set logscale y; set key top right; "
                           "set datafile separator '\\t'; plot ", plot);
        for (int i = 0; i < nd && off < (int)sizeof script - 512; i++)
            off += snprintf(script + off, sizeof script - (size_t)off,
                            "%s\"< awk -F'\\t' '$3==\\\"valid\\\"' %s/metrics.tsv\" using 1:5 with linespoints title '%s'",
                            i ? ", " : "", dirs[i], dirs[i]);
        FILE *g = popen("gnuplot 2>&1", "w");
        if (!g) { fprintf(stderr, "gflow compare: cannot run gnuplot: %s\n", strerror(errno)); return GF_EXIT_ERROR; }
        fprintf(g, "%s\n", script);
        if (pclose(g) != 0) { fprintf(stderr, "gflow compare: gnuplot failed (is gnuplot-nox installed?)\n"); rc = GF_EXIT_ERROR; }
        else printf("\nplot: %s\n", plot);
    }
    free(dirs);
    return rc;
}
