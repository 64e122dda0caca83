/* cmd_ablate.c — `gflow ablate FILE`: run an ablation study (base recipe + variants), skipping
 * finished runs and resuming interrupted ones, then write the study's summary and curves. */
#include "cli.h"
#include "gflow/ablate.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

enum { O_ONLY = 1, O_DRY_RUN, O_REPORT, O_QUIET, O_STOP_AFTER };
static const gf_cli_opt k_opts[] = {
    {O_ONLY, "only", "VARIANT", "train only this variant (repeatable; the summary still lists all)"},
    {O_DRY_RUN, "dry-run", NULL, "print the plan (skip / resume / start per run) and exit"},
    {O_REPORT, "report", NULL, "only rewrite summary and curves from what the run directories hold"},
    {O_QUIET, "quiet", NULL, "no progress lines"},
    {O_STOP_AFTER, "stop-after", "N", "(testing) stop each run resumably after N optimizer steps in total"},
    {0},
};
static const gf_cli_spec k_spec = {
    "ablate",
    "FILE [--only VARIANT]... [--dry-run] [--report] [--quiet]",
    "  Runs every variant of an ablation file (see recipes/ablations/) as its own run directory,\n"
    "  <out_dir>/<name>/<variant> (or <variant>-seed<N> when the file lists seeds). The implicit\n"
    "  variant \"base\" (the base recipe unchanged) runs first. Finished runs (summary.tsv) are\n"
    "  skipped, interrupted ones (last.ckpt) resumed, the rest started; every variant's recipe\n"
    "  is checked before anything runs. Ctrl-C stops the current run resumably (exit 130);\n"
    "  running the same command again continues. A run that fails is reported with its error\n"
    "  (stderr, summary, failures.tsv) and the others go on (exit 1 at the end); running the\n"
    "  command again retries the failed runs.\n"
    "  Afterwards <out_dir>/<name>/ holds summary.tsv, summary.md (one row per variant: params,\n"
    "  best validation PPL (mean ± std over seeds), best epoch/step, test PPL, per-word PPL,\n"
    "  change vs base, tokens/s; \"failed\" with the error, or \"not run\" for the rest), curves.tsv\n"
    "  and curves.png.\n",
    k_opts,
    "exit codes: 0 done, 1 error or a failed run, 2 usage, 130 interrupted (resumable)\n",
};

static const char *state_name(gf_ablate_state s) {
    switch (s) {
    case GF_ABLATE_DONE: return "skip (finished)";
    case GF_ABLATE_RESUME: return "resume";
    case GF_ABLATE_RESTART: return "start (restart: no checkpoint yet)";
    default: return "start";
    }
}

static int in_only(const char **only, int n, const char *name) {
    if (!n) return 1;
    for (int i = 0; i < n; i++) if (!strcmp(only[i], name)) return 1;
    return 0;
}

static void print_plan(const gf_ablation *a, const char **only, int n_only) {
    printf("ablation %s: base %s, %lld variant(s) x %lld seed(s), results in %s/\n", a->name, a->base,
           (long long)a->n_variants, (long long)(a->n_seeds ? a->n_seeds : 1), a->study_dir);
    for (int64_t i = 0; i < a->n_runs; i++) {
        const gf_ablate_run *r = &a->runs[i];
        const char *v = a->variants[r->variant].name;
        if (!in_only(only, n_only, v)) printf("  %-28s %s\n", r->run_dir + strlen(a->study_dir) + 1,
                                              r->state == GF_ABLATE_DONE ? "finished" : "not selected (--only)");
        else if (r->failed)
            printf("  %-28s retry (failed: %.200s)\n", r->run_dir + strlen(a->study_dir) + 1, r->error);
        else if (r->state == GF_ABLATE_RESUME)
            printf("  %-28s resume from step %lld\n", r->run_dir + strlen(a->study_dir) + 1, (long long)r->step_done);
        else printf("  %-28s %s\n", r->run_dir + strlen(a->study_dir) + 1, state_name(r->state));
    }
}

/* The plot, the summary table on stdout, and where the files are. */
static void show_summary(const gf_ablation *ab, int quiet) {
    gf_status ps = gf_ablation_plot(ab);
    if (ps) fprintf(stderr, "gflow ablate: warning: %s\n", gf_last_error());
    char md[1200];
    snprintf(md, sizeof md, "%s/summary.md", ab->study_dir);
    FILE *f = fopen(md, "r");
    if (f && !quiet) {
        char line[2048];
        printf("\n");
        while (fgets(line, sizeof line, f)) if (line[0] == '|') fputs(line, stdout);
    }
    if (f) fclose(f);
    char png[1200];
    snprintf(png, sizeof png, "%s/curves.png", ab->study_dir);
    printf("\nsummary: %s/summary.md, summary.tsv%s\n", ab->study_dir, !ps && access(png, F_OK) == 0 ? ", curves.png" : "");
}

/* The runs this command trained (all, or --only's) that failed, on stderr: the study went on
 * without them, and the exit status says so. */
static int report_failed(const gf_ablation *ab, const char *file, const char **only, int n_only) {
    int n = 0;
    for (int64_t i = 0; i < ab->n_runs; i++) {
        const gf_ablate_run *r = &ab->runs[i];
        if (!r->failed || !in_only(only, n_only, ab->variants[r->variant].name)) continue;
        fprintf(stderr, "%s %s", n++ ? "," : "gflow ablate: failed:", r->run_dir + strlen(ab->study_dir) + 1);
    }
    if (!n) return GF_EXIT_OK;
    fprintf(stderr, " (errors above and in %s/summary.md); run `gflow ablate %s` again to retry\n", ab->study_dir,
            file);
    return GF_EXIT_ERROR;
}

int gf_cmd_ablate(int argc, char **argv) {
    const char *file = NULL;
    const char **only = calloc((size_t)argc, sizeof *only);
    int n_only = 0, dry = 0, report_only = 0;
    gf_ablate_opts o = {0};
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0) {
        if (k == O_ONLY) only[n_only++] = v;
        else if (k == O_DRY_RUN) dry = 1;
        else if (k == O_REPORT) report_only = 1;
        else if (k == O_QUIET) o.quiet = 1;
        else if (k == O_STOP_AFTER && !gf_arg_stop_after("ablate", v, &o.stop_after)) k = GF_CLI_USAGE;
        if (k < 0) break;
    }
    if (k < 0 || !gf_cli_args(&p, 1, 1, "the ablation file")) { free(only); return k < 0 ? gf_cli_exit(k) : GF_EXIT_USAGE; }
    file = p.pos[0];
    gf_ablation ab;
    gf_status st = gf_ablation_load(file, &ab);
    if (st) { free(only); return gf_cli_fail(st); }
    for (int i = 0; i < n_only; i++)
        if (gf_ablation_find(&ab, only[i]) < 0) {
            fprintf(stderr, "gflow ablate: --only %s: no such variant in %s (variants:", only[i], file);
            for (int64_t v = 0; v < ab.n_variants; v++) fprintf(stderr, " %s", ab.variants[v].name);
            fprintf(stderr, ")\n");
            gf_ablation_free(&ab);
            free(only);
            return GF_EXIT_USAGE;
        }
    if (dry) {
        print_plan(&ab, only, n_only);
        gf_ablation_free(&ab);
        free(only);
        return GF_EXIT_OK;
    }
    int interrupted = 0;
    if (!report_only) {
        if (!o.quiet) { print_plan(&ab, only, n_only); fflush(stdout); }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        o.stop_flag = &stop_flag;
        o.only = only;
        o.n_only = n_only;
        st = gf_ablation_run(&ab, &o, &interrupted);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
    }
    /* the summary is written even after an error or an interruption: it shows what is done */
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "gflow ablate %s --report", file);
    gf_status rs = gf_ablation_report(&ab, cmd);
    int rc = GF_EXIT_OK;
    if (st) rc = gf_cli_fail(st);
    else if (rs) rc = gf_cli_fail(rs);
    if (!rs) show_summary(&ab, o.quiet);
    if (rc == GF_EXIT_OK && interrupted) {
        fprintf(stderr, "gflow ablate: stopped; run `gflow ablate %s` again to continue\n", file);
        rc = stop_flag ? 130 : GF_EXIT_OK;
    }
    if (rc == GF_EXIT_OK && !report_only) rc = report_failed(&ab, file, only, n_only);
    gf_ablation_free(&ab);
    free(only);
    return rc;
}
