/* gflow/train.h — the training loop, evaluation and run directories.
 *
 * A run lives in <out_dir>/<name>/: recipe.ini (resolved), metrics.tsv (append-only,
 * deterministic: no timings, so an interrupted-and-resumed run writes the same bytes as an
 * uninterrupted one), speed.tsv (timings), last.ckpt, best.ckpt, summary.tsv (written at the end).
 *
 * metrics.tsv columns: step  epoch  split  loss  ppl  ppl_word  acc  lr  gnorm
 *   step, epoch: of the weights the row describes (epoch 0-based)
 *   split "train": loss of that step's batch; lr and gnorm of the step
 *   split "valid": evaluation over the validation split (or eval_batches batches of it) after
 *     that step; the run's last step is evaluated once, over the whole split
 *   split "test": the last row, once the run has finished: the best checkpoint (best.ckpt,
 *     summary.tsv best_step) on the test split, so its step and epoch are the best
 *     checkpoint's and may be smaller than the row above it (rows are otherwise in step order)
 *   ppl_word only for full WikiText-2 splits; acc only for SNLI. Missing values are "-".
 */
#ifndef GFLOW_TRAIN_H
#define GFLOW_TRAIN_H

#include "gflow/recipe.h"

typedef struct gf_train_opts {
    const char *resume_dir;  /* resume from <dir>/last.ckpt (recipe taken from the checkpoint) */
    int restart;             /* resume_dir has no checkpoint yet: start its run again from step 0 */
    int allow_data_change;   /* resume even when a data file's sha256 differs from last.ckpt's record */
    int64_t stop_after;      /* > 0: save last.ckpt and stop once this many steps are done (resume test) */
    int quiet;               /* no progress lines */
    int overwrite;           /* allow a fresh run into an existing directory (replaces its files) */
    volatile int *stop_flag; /* set asynchronously (e.g. by a SIGINT handler): save and stop */
} gf_train_opts;

/* Train per recipe (or resume). On success the run directory holds the final checkpoint
 * and summary. *interrupted is set when SIGINT/SIGTERM or stop_after ended the run early
 * (last.ckpt is then consistent and `--resume` continues it). */
gf_status gf_train_run(const gf_recipe *r, const gf_train_opts *o, int *interrupted);

/* Evaluation results of one split. */
typedef struct gf_eval_result {
    double loss;         /* mean NLL per predicted token (LM) or per example (NLI) */
    double ppl;          /* exp(loss) (LM) */
    double ppl_word;     /* exp(total NLL / words) for full WikiText-2 splits, else NAN */
    int64_t n_tokens;    /* predicted tokens (LM) or examples (NLI) */
    double acc;          /* NLI accuracy, else NAN */
    int64_t confusion[3][3]; /* NLI: [gold][pred] */
} gf_eval_result;

/* Evaluate a run's checkpoint ("best" or "last") on a split (NULL: the recipe's eval split). */
gf_status gf_eval_run_dir(const char *run_dir, const char *which, const char *split, gf_eval_result *res);

/* The checkpoint a run directory holds ("best" or "last"), or run_dir_or_ckpt itself when it is a file;
 * a checkpoint in a directory holding recipe.ini (a run's) must belong to that run
 * (gf_run_ckpt_belongs), so every command that opens a run refuses another run's checkpoint. */
gf_status gf_run_ckpt_path(const char *run_dir_or_ckpt, const char *which, char *path, size_t cap);

/* GF_OK when the checkpoint cpath, whose recipe text is ckpt_recipe, belongs to the run whose
 * recipe.ini is rpath: equal texts but for '#' comment lines (they name the build), or equal
 * when parsed but for [run] device and threads (gf_recipe_same_run). Else one line naming both
 * files and the first differing line, then hint. */
gf_status gf_run_ckpt_belongs(const char *cpath, const char *ckpt_recipe, const char *rpath, const char *hint);

#endif
