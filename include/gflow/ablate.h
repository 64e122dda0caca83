/* gflow/ablate.h — ablation studies: one base recipe, named variants of overrides, one run each.
 *
 * An ablation file is INI (parsed with inih, same comment rules as recipes):
 *
 *   [ablation]
 *   name = study                 # [A-Za-z0-9._-]+ ; results go to <out_dir>/<name>/
 *   base = ../study.ini          # recipe, relative to the ablation file
 *   out_dir = checkpoints/ablations   # optional (this is the default), relative to the cwd
 *   seeds = 1,2,3                # optional: every variant runs once per seed
 *
 *   [variant r16]                # name [A-Za-z0-9._-]+, unique, not "base"
 *   model.r = 16                 # section.key = value, applied like `--set section.key=value`
 *
 * The implicit variant "base" (no overrides) is always first. Run directories:
 * run.out_dir = <out_dir>/<name>, run.name = <variant> (no seeds key) or <variant>-seed<N> with
 * run.seed = N, i.e. exactly what `gflow train BASE --set run.out_dir=... --set run.name=...`
 * makes by hand. Variants may not set run.name, run.out_dir or (with seeds) run.seed.
 * Loading validates every variant's recipe (errors name ablation-file:line) before anything runs.
 *
 * A run that fails (its error, e.g. a non-finite loss or a data file missing) does not stop the
 * study: the error is printed and kept in <out_dir>/<name>/failures.tsv (run name, error), the
 * summary lists the run as failed with that error, and the remaining runs go on. Running the
 * study again retries every failed run, in its place in the order (base first), like any other
 * unfinished run; a run that then finishes (or a run directory holding summary.tsv) drops its
 * line from failures.tsv.
 */
#ifndef GFLOW_ABLATE_H
#define GFLOW_ABLATE_H

#include "gflow/error.h"
#include "gflow/recipe.h"

#define GF_ABLATE_NAME 64 /* bytes per variant / study name, NUL included */

typedef struct gf_ablate_variant {
    char name[GF_ABLATE_NAME];
    int line;           /* line of its [variant NAME] header (0 for the implicit base) */
    int64_t n_sets;
    char **sets;        /* (n_sets) "section.key=value" */
    int *set_lines;     /* (n_sets) line of each override */
} gf_ablate_variant;

typedef enum gf_ablate_state {
    GF_ABLATE_DONE = 0,  /* summary.tsv present: skipped */
    GF_ABLATE_RESUME,    /* last.ckpt but no summary.tsv: resumed */
    GF_ABLATE_START,     /* nothing there: started */
    GF_ABLATE_RESTART,   /* metrics.tsv but no last.ckpt (killed before its first checkpoint): started afresh */
} gf_ablate_state;

/* One variant x seed. */
typedef struct gf_ablate_run {
    int64_t variant;       /* index into gf_ablation.variants */
    int64_t seed;          /* the seed (run.seed) */
    char run_dir[1100];    /* <out_dir>/<name>/<run.name> */
    gf_recipe recipe;      /* fully resolved */
    gf_ablate_state state; /* at load / last gf_ablation_refresh */
    int64_t step_done;     /* RESUME: steps in last.ckpt */
    int failed;            /* its last attempt failed (this process, or failures.tsv) */
    char error[512];       /* failed: the error (one line) */
} gf_ablate_run;

typedef struct gf_ablation {
    char path[1024];                 /* the ablation file as given */
    char name[GF_ABLATE_NAME];
    char base[1024];                 /* recipe path, resolved against the file's directory */
    int base_line;                   /* line of the base key (messages) */
    char out_dir[GF_RECIPE_STR];
    char study_dir[1100];            /* <out_dir>/<name>: summary.tsv, summary.md, curves.png */
    int64_t n_seeds;                 /* 0: no seeds key (one run per variant, the recipe's seed) */
    int64_t seeds[GF_RECIPE_LIST_MAX];
    int64_t n_variants;              /* variants[0] is "base" */
    gf_ablate_variant *variants;
    int64_t n_runs;                  /* n_variants * max(n_seeds, 1), variant-major */
    gf_ablate_run *runs;
} gf_ablation;

/* Parse and validate (every variant's recipe is loaded); fills runs[] with their states.
 * GF_E_PARSE / GF_E_INVALID name "file:line". On error *a is left empty (free is safe). */
gf_status gf_ablation_load(const char *path, gf_ablation *a);
void gf_ablation_free(gf_ablation *a);

/* Re-read every run directory's state (done / resume / start / restart). */
gf_status gf_ablation_refresh(gf_ablation *a);

/* Index of the variant named `name`, or -1. */
int64_t gf_ablation_find(const gf_ablation *a, const char *name);

typedef struct gf_ablate_opts {
    const char *const *only; /* (n_only) variant names to train; n_only 0 = all */
    int64_t n_only;
    int quiet;               /* no progress lines (passed on to the trainer) */
    volatile int *stop_flag; /* set asynchronously (SIGINT): the current run saves and stops */
    int64_t stop_after;      /* tests: > 0 stops each started/resumed run after this many steps in total */
} gf_ablate_opts;

/* Train what is not finished, in order (base first): skip DONE, resume RESUME, start the rest
 * (failed runs included: they are retried). A run that fails is reported on stderr, marked
 * failed (failures.tsv), and the next one starts; GF_OK then, count them with
 * gf_ablation_failed. An error returned is the study's own (its files, a run directory's state).
 * *interrupted = 1 when a run stopped early (stop_flag or stop_after); the remaining runs are
 * then not started. */
gf_status gf_ablation_run(gf_ablation *a, const gf_ablate_opts *o, int *interrupted);

/* Runs whose last attempt failed. */
int64_t gf_ablation_failed(const gf_ablation *a);

/* Write <study_dir>/summary.tsv and summary.md from whatever the run directories hold
 * (unfinished variants show "not run", failed ones "failed" and the error), and curves.tsv (step, validation perplexity, mean over
 * seeds). `command` is the command line written into summary.md to regenerate it. */
gf_status gf_ablation_report(const gf_ablation *a, const char *command);

/* Plot curves.tsv to <study_dir>/curves.png with gnuplot (GF_E_EXTERNAL if gnuplot fails). */
gf_status gf_ablation_plot(const gf_ablation *a);

#endif
