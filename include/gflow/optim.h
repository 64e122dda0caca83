/* gflow/optim.h — AdamW over the parameter block, global-norm clipping, LR schedules.
 *
 * AdamW follows torch.optim.AdamW's order exactly: decoupled decay
 * p -= lr*wd*p first, then the bias-corrected Adam update. m and v live in the
 * parameter block (gf_params.m/.v); the only other state is the step counter,
 * a POD struct the checkpoint stores with memcpy. Elements are independent, so
 * the OpenMP loop is bitwise deterministic for any thread count.
 * A block on the GPU (gf_params_to_device) gets the same step as one kernel
 * (src/optim/cuda/adamw.cu) with the same scalars and the same fp32 operations in
 * the same order: the CPU's bits from the same inputs. Its clipping norm is a
 * deterministic reduction on the device (gf_params_grad_sumsq), read back; or, for a training
 * step that does not wait (gf_step_queue below), left on the device, where the clip, the
 * non-finite check and AdamW read it.
 */
#ifndef GFLOW_OPTIM_H
#define GFLOW_OPTIM_H

#include <stdint.h>

#include "gflow/params.h"

typedef struct gf_adamw_cfg {
    double beta1, beta2, eps;
    double weight_decay;
    /* Decay per parameter kind; GF_PK_WEIGHT always decays (gf_adamw_step
     * ignores decay[GF_PK_WEIGHT]). 1 = decay, 0 = not. */
    int32_t decay[GF_PK_COUNT];
} gf_adamw_cfg;

/* torch defaults: betas (0.9, 0.999), eps 1e-8, wd 0.01; bias/norm not decayed, embeddings decayed. */
void gf_adamw_cfg_default(gf_adamw_cfg *cfg);

/* Optimizer state besides m/v (POD, saved in checkpoints). */
typedef struct gf_adamw_state {
    int64_t step; /* optimizer steps taken so far; the next step is step+1 */
} gf_adamw_state;

/* step = 0 and m = v = 0 over the whole block. */
void gf_adamw_reset(gf_params *p, gf_adamw_state *st);

/* One AdamW step at learning rate `lr` using p->grad (not modified).
 * Increments st->step first, as torch does. */
void gf_adamw_step(gf_params *p, gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr);

/* Global-norm clipping, torch.nn.utils.clip_grad_norm_'s formula: the norm is
 * gf_params_grad_norm(p); when coef = max_norm/(norm+1e-6) < 1 every grad is
 * multiplied by coef. max_norm <= 0 disables clipping. A non-finite norm is
 * returned without touching the grads (the trainer's nonfinite policy decides).
 * Returns the pre-clip norm. */
double gf_clip_grad_norm(gf_params *p, double max_norm);
/* The same with a status: *norm the pre-clip norm (NAN when the status is not GF_OK). A device
 * block's norm is read back, one synchronisation, which also reports a CUDA failure noted
 * since the last one (the step's ops'); gf_clip_grad_norm then returns NAN. */
gf_status gf_clip_grad(gf_params *p, double max_norm, double *norm);

/* ---- a step of a device block without a host wait (docs/cuda.md "A step without a host wait") ----
 * gf_clip_grad + the non-finite check + gf_adamw_step decided on the device: Σg² goes into device
 * memory (gf_cuda_sumsq_to), and one single-thread kernel turns it and the loss (device memory)
 * into the norm, the skip flag and the clip coefficient, into the step's slot of a ring of
 * records; the scale and AdamW kernels read them there (AdamW returns at once on a skipped step).
 * Which AdamW step t a step is, only the device knows (skipped steps do not count): the bias
 * corrections of the GF_STEP_RING steps a sequence can apply are computed on the host at its
 * first push, from st->step, with gf_adamw_step's doubles (1 - beta^t by pow, sqrt), and AdamW's
 * step size is lr / bc1[t], a double division on the device: the CPU's bits. Steps are pushed
 * until a flush reads their records back, one wait. */
#define GF_STEP_RING 16

/* one pushed step's outcome */
typedef struct gf_step_rec {
    double grad_norm; /* before clipping */
    float loss;
    int32_t skipped;  /* AdamW did not apply it: the loss or Σg² not finite, or (stop_sticky) an
                       * earlier step of the sequence was */
    int64_t bad;      /* the lowest index of a non-finite gradient when the loss is finite and Σg² is
                       * not; else -1 */
} gf_step_rec;

/* A backend's optimizer loops over a parameter block on its device (gflow/backend.h, the
 * table's `optim`; src/optim/<dev>/backend_<dev>.c): gf_adamw_reset's m = v = 0, one AdamW step
 * from the scalars gf_adamw_step computes on the host, and gf_clip_grad's grad *= c. The host's
 * loops are adamw.c's own. */
struct gf_adamw_scalars;
typedef struct gf_backend_optim {
    void (*adamw_reset)(gf_params *p);
    void (*adamw_step)(gf_params *p, const struct gf_adamw_scalars *s);
    void (*grad_scale)(gf_params *p, float c);
} gf_backend_optim;

typedef struct gf_step_queue gf_step_queue;

/* the queue's device memory (a build with CUDA; the block is on the GPU) */
gf_status gf_step_queue_open(gf_step_queue **q);
void gf_step_queue_close(gf_step_queue *q);
/* steps pushed since the last flush (GF_STEP_RING at most) */
int gf_step_queue_count(const gf_step_queue *q);
/* A step's clip (max_norm <= 0: none), check and AdamW at lr in two calls. Before the step's work
 * (before its capture as a CUDA graph, so that a replay of the graph reads the new values):
 * prepare copies the step's scalars into device memory, on the stream. After its backward: push
 * queues the kernels that read them and loss_dev (the step's loss, one float in device memory).
 * st->step must be what the last flush left (the applied steps): the device counts on from it.
 * stop_sticky ([train] nonfinite = stop): once a step is skipped for a non-finite value, no later
 * step of the sequence applies (the CPU trainer stops there). The queue must not be full. */
gf_status gf_step_queue_prepare(gf_step_queue *q, const gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr,
                                double max_norm, int stop_sticky);
gf_status gf_step_queue_push(gf_step_queue *q, gf_params *p, const float *loss_dev);
/* The prepared step's kernels ran in a replayed CUDA graph (captured from an earlier push of the
 * same slot layout): count it pushed, as gf_step_queue_push does. */
void gf_step_queue_push_replayed(gf_step_queue *q);
/* Take back the last push, whose work never ran (its capture as a CUDA graph was dropped: the
 * step is pushed again, gf_cuda_graph_launch) */
void gf_step_queue_unpush(gf_step_queue *q);
/* One wait for the stream: the records of the pushed steps, in order, into rec (room for
 * GF_STEP_RING), *n of them; st->step counts the applied ones; the queue is empty again. A CUDA
 * failure noted since the last wait is returned here. */
gf_status gf_step_queue_flush(gf_step_queue *q, gf_adamw_state *st, gf_step_rec *rec, int *n);

typedef enum gf_schedule_kind {
    GF_SCHED_CONSTANT = 0,     /* lr (after optional linear warmup) */
    GF_SCHED_COSINE = 1,       /* linear warmup, then per-step cosine from lr to min_lr */
    GF_SCHED_EPOCH_COSINE = 2, /* torch CosineAnnealingLR(T_max=epochs) stepped per epoch */
} gf_schedule_kind;

typedef struct gf_schedule_cfg {
    gf_schedule_kind kind;
    double lr;            /* peak / base learning rate */
    double min_lr;        /* cosine floor */
    int64_t warmup_steps; /* linear warmup length in steps (0 = none) */
} gf_schedule_cfg;

/* Learning rate for the 0-based optimizer step `step`.
 * Warmup (all kinds): step < W gives lr*(step+1)/W, so step W-1 reaches lr.
 * cosine: for step >= W, t = (step-W)/max(1, total_steps-W) clamped to [0,1],
 *   lr_t = min_lr + (lr-min_lr)*(1+cos(pi*t))/2 (min_lr from step total_steps on).
 * epoch_cosine: e = step/steps_per_epoch, E = ceil(total_steps/steps_per_epoch),
 *   lr_e = min_lr + (lr-min_lr)*(1+cos(pi*e/E))/2, constant within an epoch
 *   (warmup, if any, multiplies the first W steps by (step+1)/W).
 * The trainer passes total_steps = epochs * steps_per_epoch: [train] max_steps cuts a run short
 * without shortening its schedule (test smoke/train_lr_column_follows_cosine_schedule). */
double gf_schedule_lr(const gf_schedule_cfg *cfg, int64_t step, int64_t steps_per_epoch,
                      int64_t total_steps);

const char *gf_schedule_kind_name(gf_schedule_kind k);

#endif
