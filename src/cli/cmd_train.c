/* cmd_train.c — `gflow train RECIPE [--set k=v]... | gflow train --resume DIR`. */
#include "cli.h"
#include "gflow/train.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

enum { O_SET = 1, O_RESUME, O_ALLOW_DATA_CHANGE, O_STOP_AFTER, O_OVERWRITE, O_QUIET };
static const gf_cli_opt k_opts[] = {
    {O_SET, "set", "section.key=value", "override one recipe key (repeatable), e.g. --set model.r=16"},
    {O_RESUME, "resume", "RUN_DIR",
     "continue the run in RUN_DIR with the recipe stored in its checkpoint; a run\n"
     "stopped before its first checkpoint starts again from step 0 with its\n"
     "recipe.ini. Refused when a data file (a split, the tokenizer corpus)\n"
     "differs from the sha256 that last.ckpt recorded. --set may change where\n"
     "it runs, nothing else: run.device (a GPU run continues on the CPU, or\n"
     "back) and run.threads"},
    {O_ALLOW_DATA_CHANGE, "allow-data-change", NULL, "resume on changed data anyway (its rows no longer continue the run's)"},
    {O_STOP_AFTER, "stop-after", "N", "stop (resumably) after N optimizer steps in total"},
    {O_OVERWRITE, "overwrite", NULL, "start afresh in a run directory that already holds a run: its files\n"
                                     "(checkpoints, tables, probe outputs) are removed first"},
    {O_QUIET, "quiet", NULL, "no progress lines"},
    {0},
};
static const gf_cli_spec k_spec = {
    "train",
    "RECIPE [--set section.key=value]... [--overwrite] [--quiet]\n"
    "--resume RUN_DIR [--set run.device=D] [--set run.threads=N] [--stop-after N] [--allow-data-change]",
    "  Trains the model the recipe describes and writes the run to <out_dir>/<name>/:\n"
    "  recipe.ini, metrics.tsv, speed.tsv, last.ckpt, best.ckpt, summary.tsv.\n"
    "  Ctrl-C (SIGINT) or SIGTERM finishes the current step, saves last.ckpt and exits;\n"
    "  --resume continues bit-identically (same metrics.tsv bytes, same weights).\n",
    k_opts,
    "  Data parallel (built with MPI, the default when libopenmpi-dev is present):\n"
    "    mpirun -np N --bind-to none gflow train RECIPE\n"
    "  splits every global batch of [train] batch_size rows into N slices (N must divide it),\n"
    "  sums gradients with one MPI_Allreduce per step; rank 0 writes the run; --resume works\n"
    "  with any N. Ranks on one host share its cores unless [run] threads is set.\n\n"
    "exit codes: 0 done, 1 error, 2 usage, 130 interrupted (resumable)\n",
};

/* --resume DIR: the recipe in DIR/last.ckpt; a run stopped before its first checkpoint (no
 * last.ckpt, no best.ckpt) has nothing to continue, so it starts again from step 0 with its
 * recipe.ini and rewrites the same metrics.tsv rows. */
static gf_status resume_recipe(const char *dir, gf_recipe *r, gf_train_opts *o) {
    char ck[1100], best[1100], ini[1100];
    snprintf(ck, sizeof ck, "%s/last.ckpt", dir);
    snprintf(best, sizeof best, "%s/best.ckpt", dir);
    snprintf(ini, sizeof ini, "%s/recipe.ini", dir);
    if (access(ck, F_OK) == 0 || errno != ENOENT || access(ini, F_OK) != 0) return gf_ckpt_peek_recipe(ck, r, NULL);
    if (access(best, F_OK) == 0)
        return gf_error_set(GF_E_NOTFOUND, "%s: missing, though %s exists: nothing to resume from; start the run "
                            "afresh with `gflow train %s --overwrite`", ck, best, ini);
    o->restart = 1;
    return gf_recipe_load(ini, NULL, 0, r);
}

/* The command line into *o, the recipe or run directory and the --set list (sets: argc slots);
 * -1 to go on, else the exit code (a message printed). */
static int parse(int argc, char **argv, gf_train_opts *o, const char **recipe, const char **resume,
                 const char **sets, int64_t *n_sets) {
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0) {
        switch (k) {
        case O_SET: sets[(*n_sets)++] = v; break;
        case O_RESUME: *resume = v; break;
        case O_ALLOW_DATA_CHANGE: o->allow_data_change = 1; break;
        case O_STOP_AFTER:
            if (!gf_arg_stop_after("train", v, &o->stop_after)) return GF_EXIT_USAGE;
            break;
        case O_OVERWRITE: o->overwrite = 1; break;
        case O_QUIET: o->quiet = 1; break;
        }
    }
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&p, 0, 1, "a recipe file")) return GF_EXIT_USAGE;
    if (p.n_pos) *recipe = p.pos[0];
    for (int64_t i = 0; *resume && i < *n_sets; i++)
        if (!gf_recipe_set_is_placement(sets[i])) {
            fprintf(stderr, "gflow train: --set %s with --resume: a run being resumed keeps its recipe; only "
                    "run.device and run.threads may change\n", sets[i]);
            return GF_EXIT_USAGE;
        }
    if (!*recipe == !*resume) return gf_cli_usage(&k_spec, "give a recipe file or --resume RUN_DIR (not both)");
    return -1;
}

int gf_cmd_train(int argc, char **argv) {
    const char *recipe = NULL, *resume = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int64_t n_sets = 0;
    gf_train_opts o = {0};
    int rc = sets ? parse(argc, argv, &o, &recipe, &resume, sets, &n_sets) : GF_EXIT_ERROR;
    if (rc >= 0) {
        free(sets);
        return rc;
    }
    /* join the MPI job, if started by mpirun (a build without MPI refuses one) */
    gf_status st = gf_dist_init(&argc, &argv);
    if (st) { free(sets); return gf_cli_fail(st); }
    gf_recipe r;
    if (resume) {
        st = resume_recipe(resume, &r, &o);
        if (!st) st = gf_recipe_resume_sets(&r, sets, n_sets); /* where it runs, nothing else */
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
