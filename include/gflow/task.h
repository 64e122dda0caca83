/* gflow/task.h — the task interface: what the session and the trainer need to know about a
 * task (language modelling on WikiText-2 or the user's text, NLI on SNLI, ...). Everything else — the training
 * step, data parallelism, checkpoints, metrics.tsv, the eval cadence — is shared.
 *
 * A task is one file, src/train/task_<name>.c, defining one gf_task_ops, plus its line in the
 * task table of src/train/session.c (chosen by the kind of the [data] dataset: gflow/datasets.def).
 * Its private state (model, tokenized splits, training loader, batch buffers) hangs off
 * gf_session.task_data.
 */
#ifndef GFLOW_TASK_H
#define GFLOW_TASK_H

#include "gflow/data.h"
#include "gflow/recipe.h"
#include "gflow/train.h"
#include <stdio.h>

typedef struct gf_session gf_session;

/* What the end of a run reports (the `done:` line). */
typedef struct gf_run_end {
    const gf_eval_result *val, *test; /* best checkpoint on the validation and test splits */
    int64_t best_step, best_epoch;    /* best_epoch 0-based */
    double tokens_per_s, seconds;
} gf_run_end;

typedef struct gf_task_ops {
    const char *name;          /* "lm", "nli" */
    gf_dataset_kind kind;      /* the kind of data set it trains on (the data set table's) */
    const char *rows;          /* what a training row is, plural ("windows", "sentence pairs") */
    const char *format;        /* safetensors metadata "format" of `gflow export` */
    int language_model;        /* 1: the model is a gf_lm (gflow sample and gflow probe apply) */
    /* Build the model for `vocab` ids (weights uninitialised) and set s->params. */
    gf_status (*open)(gf_session *s, int64_t vocab);
    void (*init_weights)(gf_session *s, gf_rng *rng);
    /* Tokenize (via the cache) the split in `path`; train_fraction applies to the train split. */
    gf_status (*load_split)(gf_session *s, gf_split split, const char *path, int log);
    /* Shuffled loader over the loaded train split and buffers of B rows; *n_items its rows. */
    gf_status (*train_loader)(gf_session *s, int64_t B, int64_t *n_items);
    /* Next training batch into the buffers; *rows = 0 only at an epoch boundary. */
    gf_status (*next_batch)(gf_session *s, int64_t *rows);
    /* B rows of ids drawn uniformly from `rng` (gflow bench); buffers grow as needed. */
    gf_status (*random_batch)(gf_session *s, int64_t B, gf_rng *rng);
    /* Mean loss (shape (1)) of rows [lo, lo+n) of the current batch; s->ctx.training decides dropout. */
    gf_tensor *(*forward_rows)(gf_session *s, int64_t lo, int64_t n);
    /* Optional (NULL: none). Before a GPU training step's capture: rows [lo, lo+n)'s inputs into
     * device memory (gflow/device.h, gf_ctx_feed), for the forward_rows of the same rows in the
     * same context step to take. Returns what else of the batch its captured graph depends on
     * (the LM: the targets counted; >= 0): a graph is replayed only on a step with the same. */
    int64_t (*feed_rows)(gf_session *s, int64_t lo, int64_t n);
    int64_t (*tokens_per_row)(const gf_recipe *r);
    void (*loader_state)(const gf_session *s, gf_loader_state *ls);
    gf_status (*set_loader_state)(gf_session *s, const gf_loader_state *ls);
    /* Evaluate a loaded split, data parallel (max_batches 0 = the whole split); res is pre-zeroed. */
    gf_status (*eval)(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res);
    /* Model selection: lower is better (validation loss, or minus accuracy). */
    double (*score)(const gf_eval_result *res);
    /* The ppl column of a training step's metrics.tsv line (NAN where it has no meaning). */
    double (*train_ppl)(float loss);
    void (*log_eval)(const gf_eval_result *res, int64_t step, int64_t epoch, int full);
    /* The task's summary.tsv lines (between best_epoch and tokens_per_s). */
    void (*summary)(const gf_session *s, FILE *f, const gf_eval_result *val, const gf_eval_result *test);
    void (*log_done)(const gf_session *s, const gf_run_end *e);
    /* `gflow info`: the model line and what else describes its size (FLOPs). */
    void (*describe)(const gf_session *s, FILE *f);
    void (*close)(gf_session *s);
} gf_task_ops;

/* Evaluation plumbing the tasks share: no gradients and no dropout during the pass, batch nb
 * belongs to rank nb mod N, the sums are added over ranks at the end. A task's eval:
 *   gf_eval_begin(&p, s, max_batches);
 *   while (gf_eval_more(&p)) { read a batch (stop at 0 rows); if (!gf_eval_mine(&p)) continue; sum it }
 *   gf_eval_end(&p, status, sums, n);  */
typedef struct gf_eval_pass {
    gf_session *s;
    int64_t max_batches, nb;  /* nb: batches read so far */
    int rank, world, old_grad, old_train;
} gf_eval_pass;
void gf_eval_begin(gf_eval_pass *p, gf_session *s, int64_t max_batches);
int gf_eval_more(const gf_eval_pass *p);
int gf_eval_mine(gf_eval_pass *p);
/* Restore the context; when status is GF_OK, sum sums (n) over the ranks. Returns the status. */
gf_status gf_eval_end(gf_eval_pass *p, gf_status status, double *sums, int n);

/* The task a recipe describes (by the kind of its [data] dataset). */
const gf_task_ops *gf_task_of(const gf_recipe *r);

#endif
