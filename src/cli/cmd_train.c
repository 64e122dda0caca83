/* cmd_train.c — `gflow train RECIPE [--set k=v]... | gflow train --resume DIR`. */
#include "cli.h"
#include "gflow/train.h"
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static volatile int stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static void help(void) {
    printf("usage: gflow train RECIPE [--set section.key=value]... [--overwrite] [--quiet]\n"
           "       gflow train --resume RUN_DIR [--stop-after STEPS]\n\n"
           "  Trains the model the recipe describes and writes the run to <out_dir>/<name>/:\n"
           "  recipe.ini, metrics.tsv, speed.tsv, last.ckpt, best.ckpt, summary.tsv.\n"
           "  Ctrl-C (SIGINT) or SIGTERM finishes the current step, saves last.ckpt and exits;\n"
           "  --resume continues bit-identically (same metrics.tsv bytes, same weights).\n\n"
           "  --set k=v        override one recipe key (repeatable), e.g. --set model.r=16\n"
           "  --resume DIR     continue the run in DIR with the recipe stored in its checkpoint\n"
           "  --stop-after N   stop (resumably) after N optimizer steps in total\n"
           "  --overwrite      start afresh in a run directory that already holds a run\n"
           "  --quiet          no progress lines\n\n"
           "  Data parallel (built with MPI, the default when libopenmpi-dev is present):\n"
           "    mpirun -np N --bind-to none gflow train RECIPE\n"
           "  splits every global batch of [train] batch_size rows into N slices (N must divide it),\n"
           "  sums gradients with one MPI_Allreduce per step; rank 0 writes the run; --resume works\n"
           "  with any N. Ranks on one host share its cores unless [run] threads is set.\n\n"
           "exit codes: 0 done, 1 error, 2 usage, 130 interrupted (resumable)\n");
}

int gf_cmd_train(int argc, char **argv) {
    const char *recipe = NULL, *resume = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int64_t n_sets = 0;
    gf_train_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); free(sets); return GF_EXIT_OK; }
        else if (!strcmp(a, "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
        else if (!strncmp(a, "--set=", 6)) sets[n_sets++] = a + 6;
        else if (!strcmp(a, "--resume") && i + 1 < argc) resume = argv[++i];
        else if (!strcmp(a, "--stop-after") && i + 1 < argc) {
            long long v = 0;
            if (!gf_arg_int("train", a, argv[++i], 1, LLONG_MAX, &v)) { free(sets); return GF_EXIT_USAGE; }
            o.stop_after = v;
        }
        else if (!strcmp(a, "--overwrite")) o.overwrite = 1;
        else if (!strcmp(a, "--quiet")) o.quiet = 1;
        else if (a[0] == '-') { fprintf(stderr, "gflow train: unknown option '%s' (or missing value)\n", a); free(sets); return GF_EXIT_USAGE; }
        else if (!recipe) recipe = a;
        else { fprintf(stderr, "gflow train: unexpected argument '%s'\n", a); free(sets); return GF_EXIT_USAGE; }
    }
    if (!recipe == !resume) {
        fprintf(stderr, "gflow train: give a recipe file or --resume RUN_DIR (not both)\n");
        help();
        free(sets);
        return GF_EXIT_USAGE;
    }
    /* join the MPI job, if started by mpirun (a build without MPI refuses one) */
    gf_status st = gf_dist_init(&argc, &argv);
    if (st) { free(sets); return gf_cli_fail(st); }
    gf_recipe r;
    if (resume) {
        if (n_sets) { fprintf(stderr, "gflow train: --set cannot change a run being resumed\n"); free(sets); return GF_EXIT_USAGE; }
        char path[1100];
        snprintf(path, sizeof path, "%s/last.ckpt", resume);
        st = gf_ckpt_peek_recipe(path, &r, NULL);
        o.resume_dir = resume;
    } else {
        st = gf_recipe_load(recipe, sets, n_sets, &r);
    }
    free(sets);
    if (st) { /* every rank read the same recipe and failed alike: rank 0 says so */
        int rc = gf_dist_rank() == 0 ? gf_cli_fail(st) : GF_EXIT_ERROR;
        gf_dist_finalize();
        return rc;
    }
    char *text = NULL;
    if (gf_dist_rank() > 0) o.quiet = 1; /* rank 0 speaks for the job */
    if (!o.quiet && !gf_recipe_resolved_text(&r, &text)) {
        fprintf(stderr, "# resolved recipe\n%s\n", text);
        free(text);
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    o.stop_flag = &stop_flag;
    int interrupted = 0;
    st = gf_train_run(&r, &o, &interrupted);
    if (st) {
        if (gf_dist_size() > 1) {
            /* Setup failures are agreed on (every rank is here; the failing ranks speak). Any other
             * failure ends the job: the other ranks would wait in the next allreduce. */
            int together = gf_dist_failed_together();
            if (!together || !strstr(gf_last_error(), "ranks failed (their messages above)"))
                fprintf(stderr, "gflow: rank %d: error (%s): %s\n", gf_dist_rank(), gf_status_name(st), gf_last_error());
            if (!together) gf_dist_abort(GF_EXIT_ERROR);
            gf_dist_finalize();
            return GF_EXIT_ERROR;
        }
        return gf_cli_fail(st);
    }
    gf_dist_finalize();
    return interrupted && stop_flag ? 130 : GF_EXIT_OK;
}
