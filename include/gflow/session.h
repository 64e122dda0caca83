/* gflow/session.h — everything a run needs in one place: recipe, task (gflow/task.h),
 * tokenizer, the task's model and data, the step context; and the training step that
 * `gflow train` and `gflow bench` share. The trainer, the commands and the probes talk to a
 * model only through these functions, so every task shares one training loop.
 */
#ifndef GFLOW_SESSION_H
#define GFLOW_SESSION_H

#include "gflow/checkpoint.h"
#include "gflow/gpu_step.h"
#include "gflow/model.h"
#include "gflow/nli.h"
#include "gflow/optim.h"
#include "gflow/tape.h"
#include "gflow/task.h"
#include "gflow/tokenizer.h"

typedef struct gf_session {
    gf_recipe r;
    const gf_task_ops *task;
    void *task_data;         /* the task's own state: model, splits, loader, batch buffers */
    gf_tokenizer *tok;       /* NULL for a session without data (gf_session_open_model) */
    int64_t vocab;           /* ids the model embeds */
    gf_params *params;       /* the model's parameters (inside task_data) */
    int loaded[3];           /* per split (train, valid, test) */
    int64_t train_B;         /* training batch size */
    gf_rng rng;              /* the init stream, then (gf_session_open) the dropout stream */
    gf_ctx ctx;
    int ctx_ready;
    gf_gpu_step *gpu;        /* a GPU session's step (gflow/gpu_step.h); NULL on the host */
} gf_session;

/* Can the recipe's [run] device run here? GF_OK for cpu, and for cuda where a GPU is visible
 * to a build with CUDA and the process is alone (no MPI job); else a one-line GF_E_INVALID that
 * names the key: the build has no CUDA, no CUDA device is visible, or MPI ranks (docs/cuda.md). */
gf_status gf_session_device_check(const gf_recipe *r);
/* GF_E_NOMEM, naming the keys that size it, when a training step of B rows cannot fit: a lower
 * bound of its memory (activations, parameters x 4) above physical memory or what RLIMIT_AS
 * leaves. Checked before the first step (train, bench), whose arena would otherwise grow until
 * the allocation fails. CPU runs only. */
gf_status gf_session_memory_check(const gf_session *s, int64_t B);
/* The recipe's tokenizer alone (gf_recipe_tokenizer_path, verified; `gflow data encode`); log: a
 * line on stderr naming it and its vocabulary. */
gf_status gf_session_open_tokenizer(const gf_recipe *r, gf_tokenizer **tok, int log);
/* The same for the evaluation batch ([eval] batch_size rows, allocated whole): GF_E_NOMEM naming
 * the key when it cannot fit beside the training step's lower bound (training) or the weights.
 * Checked before the first step, so a run is not refused at its first evaluation. */
gf_status gf_session_eval_memory_check(const gf_session *s, int training);
/* Build tokenizer and model from the recipe (weights initialised from run.seed); checks the
 * device first (gf_session_device_check). */
gf_status gf_session_open(gf_session *s, const gf_recipe *r, int log);
/* gf_session_open_model's flags */
enum {
    GF_SESSION_INIT = 1, /* draw the weights from run.seed (s->rng continues that stream); else a
                          * checkpoint fills them */
    GF_SESSION_HOST = 2, /* the model on the host whatever [run] device says (gflow info, a
                          * checkpoint's readers); s->r keeps the recipe as given */
};
/* The model alone, for `vocab` ids, no tokenizer and no data; flags: GF_SESSION_*.
 * [run] device = cuda (without GF_SESSION_HOST): the weights are drawn on the host, then the
 * parameter block moves to the GPU (gf_params_to_device), the step context gets a device arena
 * and cuBLAS [run] tf32, and the session a gf_gpu_step; the loss, the gradients and AdamW then
 * stay on the device (gf_train_step). */
gf_status gf_session_open_model(gf_session *s, const gf_recipe *r, int64_t vocab, int flags);
/* The model of a checkpoint without any data, on the CPU whatever the checkpoint's device
 * (GF_SESSION_HOST): recipe and vocabulary come from its metadata. */
gf_status gf_session_from_ckpt(gf_session *s, const char *path);
/* The checkpoint's tokenizer (its kv "tokenizer", when recorded) must be the session's: one
 * line naming the checkpoint and both keys otherwise. */
gf_status gf_session_check_tokenizer(const gf_session *s, const char *path, const gf_ckpt_meta *m);
/* A checkpoint with its data (eval, sample, probes): tokenizer and model from r on the CPU
 * (GF_SESSION_HOST, whatever device trained it), the tokenizer checked against the checkpoint's
 * (gf_session_check_tokenizer), then its weights. */
gf_status gf_session_open_ckpt(gf_session *s, const gf_recipe *r, const char *path);
/* Load (tokenize, via the cache) one split. */
gf_status gf_session_load_split(gf_session *s, gf_split split, int log);
/* Training loader over the train split; returns the number of items (windows or pairs). */
gf_status gf_session_train_loader(gf_session *s, int64_t B, int64_t *n_items, int log);
/* Next training batch into the session's buffers; *rows = 0 only at an epoch boundary. */
gf_status gf_session_next(gf_session *s, int64_t *rows);
/* Forward of rows [lo, lo+n) of the current batch (a data-parallel rank's slice). */
gf_tensor *gf_session_forward_rows(gf_session *s, int64_t lo, int64_t n);
int64_t gf_session_tokens_per_row(const gf_session *s);
gf_status gf_session_loader_state(const gf_session *s, gf_loader_state *ls);
gf_status gf_session_set_loader_state(gf_session *s, const gf_loader_state *ls);
/* Evaluate on a split (max_batches 0 = the whole split). */
gf_status gf_session_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res);
void gf_session_close(gf_session *s);
/* Path of a split's file per the recipe (data dir + file name). */
void gf_session_split_path(const gf_session *s, gf_split split, char *path, size_t cap);
/* `eval`, `probe`: one warning on stderr when the split's file is not the one checkpoint `ckpt`
 * recorded (its sha256 differs): the numbers are then of another file than the run's. */
void gf_session_warn_split_changed(const gf_session *s, const char *ckpt, gf_split split);
/* `gflow export`: the weights as safetensors, with the task's format, the resolved recipe and
 * the vocabulary in the metadata (tools/load_gflow.py rebuilds the PyTorch model from these). */
gf_status gf_session_export(const gf_session *s, const char *path);

/* The language model of a session, NULL when its task is another. */
gf_lm *gf_session_lm(gf_session *s);
/* The token stream of a loaded split of a language-model session (NULL for other tasks). */
const gf_tokens *gf_session_tokens(const gf_session *s, gf_split split);
/* gf_session_export for a bare LM (what tools/load_gflow.py reads). */
gf_status gf_lm_export(const gf_lm *lm, const gf_recipe *r, const char *path);

/* ---- the training step ---- */

/* gf_step_in, gf_step_out: gflow/gpu_step.h */

/* One optimizer step on the current batch: zero gradients, forward and backward of this rank's
 * rows, one gradient allreduce (each rank's mean pre-scaled by n / rows), global-norm clip,
 * AdamW unless a value is not finite. Every rank calls it on the same global batch.
 * On the GPU (the session's block on the device, one process) its gf_gpu_step runs it
 * (gflow/gpu_step.h): the same steps as kernels on the stream, and the host waits for none of
 * them: the clip, the non-finite check and AdamW are decided on the device. in->defer leaves the outcome there
 * (out->queued; at most GF_STEP_RING steps before gf_train_flush); else the step is flushed at
 * once, one wait (the queue must be empty), and a CUDA failure in the step is returned then.
 * opt->step counts the applied steps once flushed. */
gf_status gf_train_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                        gf_step_out *out);
/* The deferred steps of a GPU session, one wait: their outcomes in order into outs (room for
 * GF_STEP_RING), *n of them (0 on the CPU or with none pending). A non-finite step names the loss
 * or the first parameter (in block order) whose gradient is not finite, as on the CPU. */
gf_status gf_train_flush(gf_session *s, gf_adamw_state *opt, gf_step_out *outs, int *n);
/* deferred steps not yet flushed */
int gf_train_pending(const gf_session *s);

#endif
