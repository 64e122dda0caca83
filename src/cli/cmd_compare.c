/* cmd_compare.c — `gflow compare RUN_DIR...`: one table of runs and a plot of validation curves. */
#include "cli.h"
#include "gflow/fs.h"
#include "gflow/rundir.h"
#include "gflow/task.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_PLOT = 1 };
static const gf_cli_opt k_opts[] = {
    {O_PLOT, "plot", "FILE.png", "validation perplexity against step for every run (gnuplot, PNG;\n"
                                 "default compare.png; --plot none to skip)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "compare",
    "RUN_DIR... [--plot FILE.png]",
    "  A Markdown table, one row per run: family, parameters, best validation perplexity and its\n"
    "  epoch, test perplexity (of the best checkpoint), per-word test perplexity, training\n"
    "  tokens/s, and the gap to the first run in %. Runs still in progress show their best\n"
    "  validation so far.\n",
    k_opts,
    NULL,
};

/* best validation so far from metrics.tsv (for runs without a summary) */
typedef struct best_so_far { double ppl; long epoch; } best_so_far;

static void best_row(const gf_metrics_row *r, void *user) {
    best_so_far *b = user;
    if (r->n_fields != 7 || strcmp(r->split, "valid")) return;
    double p = strtod(r->ppl, NULL);
    if (p < b->ppl) { b->ppl = p; b->epoch = (long)r->epoch + 1; }
}

/* The plot must not land on an input (a run's metrics.tsv, summary.tsv) or on any run's own
 * file, however spelled (gf_output_check): gnuplot writes through symlinks. */
static gf_status check_plot(const char *plot, const char **dirs, int nd) {
    char (*in)[1100] = calloc((size_t)nd * 2, sizeof *in);
    const char **ptr = calloc((size_t)nd * 2, sizeof *ptr);
    gf_status st = in && ptr ? GF_OK : gf_error_set(GF_E_NOMEM, "compare: out of memory");
    for (int i = 0; !st && i < 2 * nd; i++) {
        snprintf(in[i], sizeof in[i], "%s/%s", dirs[i / 2], i % 2 ? "summary.tsv" : "metrics.tsv");
        ptr[i] = in[i];
    }
    if (!st) st = gf_output_check(plot, ptr, 2 * nd);
    free(in);
    free(ptr);
    return st;
}

static void valid_point(const gf_metrics_row *r, void *user) {
    double p = strtod(r->ppl, NULL); /* "-": an NLI run's rows have no perplexity */
    if (r->n_fields >= 5 && !strcmp(r->split, "valid") && p > 0 && isfinite(p)) fprintf(user, "%lld %.9g\n", r->step, p);
}

/* The validation curves, each run's points an inline datablock: neither a run directory nor its
 * name reaches a shell or a gnuplot command except as a quoted title (gf_gnuplot_string). */
static gf_status plot_runs(const char *plot, const char **dirs, int nd) {
    char *script = NULL;
    size_t len = 0;
    FILE *g = open_memstream(&script, &len);
    if (!g) return gf_error_set(GF_E_NOMEM, "compare: out of memory");
    fprintf(g, "set terminal pngcairo size 900,560\nset xlabel 'step'\nset ylabel 'validation perplexity'\n"
               "set logscale y\nset key top right noenhanced\n");
    for (int i = 0; i < nd; i++) {
        fprintf(g, "$run%d << EOD\n", i);
        gf_run_metrics_scan(dirs[i], valid_point, g); /* checked when the table was made */
        fprintf(g, "EOD\n");
    }
    fprintf(g, "plot ");
    for (int i = 0; i < nd; i++) {
        fprintf(g, "%s$run%d using 1:2 with linespoints title ", i ? ", " : "", i);
        gf_gnuplot_string(g, dirs[i]);
    }
    fprintf(g, "\n");
    if (fclose(g) != 0) { free(script); return gf_error_set(GF_E_NOMEM, "compare: out of memory"); }
    gf_status st = gf_gnuplot(script, 0, plot, "is gnuplot-nox installed?");
    free(script);
    return st;
}

/* The task of the run in dir (its recipe.ini's dataset), or the summary's kind of score when
 * the recipe cannot be read; NULL when neither says. */
static const char *run_task(const char *dir) {
    char path[1200];
    snprintf(path, sizeof path, "%s/recipe.ini", dir);
    gf_recipe r;
    const gf_task_ops *task = gf_recipe_load(path, NULL, 0, &r) ? NULL : gf_task_of(&r);
    if (task) return task->name;
    gf_run_summary k;
    if (!gf_run_summary_read(dir, &k)) return NULL;
    return gf_run_summary_get(&k, "best_val_acc") ? "nli" : gf_run_summary_get(&k, "best_val_ppl") ? "lm" : NULL;
}

/* One table ranks one kind of score: a perplexity (lower is better) and an accuracy (higher
 * is better) have no gap between them. */
static gf_status check_same_task(const char **dirs, int nd) {
    const char *first = NULL, *first_dir = NULL;
    for (int i = 0; i < nd; i++) {
        const char *t = run_task(dirs[i]);
        if (!t) continue;
        if (!first) { first = t; first_dir = dirs[i]; }
        else if (strcmp(t, first))
            return gf_error_set(GF_E_INVALID, "%s is a '%s' run and %s a '%s' run: one table cannot rank a perplexity "
                                "against an accuracy; compare them separately", first_dir, first, dirs[i], t);
    }
    return GF_OK;
}

int gf_cmd_compare(int argc, char **argv) {
    const char *plot = "compare.png";
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0)
        if (k == O_PLOT) plot = v;
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&p, 1, p.n_pos, "a run directory")) return GF_EXIT_USAGE;
    const char **dirs = (const char **)p.pos;
    int nd = p.n_pos;
    gf_status cs = check_same_task(dirs, nd);
    if (!cs && strcmp(plot, "none")) cs = check_plot(plot, dirs, nd);
    if (cs) return gf_cli_fail(cs);
    printf("| run | family | params | best val PPL or acc (epoch) | test PPL or acc | test PPL/word | tok/s | gap vs first |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    double first = NAN;
    int rc = GF_EXIT_OK;
    for (int i = 0; i < nd; i++) {
        gf_run_summary k;
        int n = gf_run_summary_read(dirs[i], &k);
        best_so_far bsf = {INFINITY, -1};
        gf_status ms = gf_run_metrics_scan(dirs[i], best_row, &bsf);
        if (ms == GF_E_NOTFOUND) fprintf(stderr, "gflow compare: %s: no metrics.tsv (not a run directory?)\n", dirs[i]);
        else if (ms) fprintf(stderr, "gflow compare: %s\n", gf_last_error());
        if (ms) {
            rc = GF_EXIT_ERROR;
            continue;
        }
        double best = bsf.ppl;
        long be = bsf.epoch;
        const char *fam = gf_run_summary_get(&k, "family"), *params = gf_run_summary_get(&k, "params");
        const char *tp = gf_run_summary_get(&k, "test_ppl"), *tw = gf_run_summary_get(&k, "test_ppl_word");
        int is_acc = gf_run_summary_get(&k, "best_val_acc") != NULL;
        if (is_acc) { /* NLI run: accuracies (higher is better) */
            best = strtod(gf_run_summary_get(&k, "best_val_acc"), NULL);
            tp = gf_run_summary_get(&k, "test_acc");
        }
        const char *tok = gf_run_summary_get(&k, "tokens_per_s");
        if (gf_run_summary_get(&k, "best_val_ppl")) best = strtod(gf_run_summary_get(&k, "best_val_ppl"), NULL);
        if (gf_run_summary_get(&k, "best_epoch")) be = strtol(gf_run_summary_get(&k, "best_epoch"), NULL, 10);
        const int is_first = isnan(first);
        if (is_first) first = best;
        /* a run with no validation row yet has no score, and no gap to or from it: "-", not inf or nan */
        char gap[32], score[64];
        double g = 100.0 * (best / first - 1.0);
        snprintf(gap, sizeof gap, is_first ? "—" : isfinite(g) ? "%+.1f%%" : "-", g);
        if (isfinite(best)) snprintf(score, sizeof score, is_acc ? "%.4f (%ld)" : "%.2f (%ld)", best, be);
        else snprintf(score, sizeof score, "-");
        printf("| %s | %s | %s | %s%s | %s | %s | %s | %s |\n", dirs[i], fam ? fam : "?", params ? params : "?", score,
               n ? "" : " running", tp ? tp : "-", tw ? tw : "-", tok ? tok : "-", gap);
    }
    if (strcmp(plot, "none") != 0 && rc == GF_EXIT_OK) {
        gf_status ps = plot_runs(plot, dirs, nd);
        if (ps) {
            fprintf(stderr, "gflow compare: %s\n", gf_last_error());
            rc = GF_EXIT_ERROR;
        } else {
            printf("\nplot: %s\n", plot);
        }
    }
    return rc;
}
