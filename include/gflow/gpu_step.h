/* gflow/gpu_step.h — one optimizer step's inputs and outcome (on either device), and the
 * training step on the GPU with its one owner, gf_gpu_step.
 *
 * A GPU session (gflow/session.h, one process) hands its step here through gf_train_step. The
 * step waits for nothing: the host's pass queues the forward and backward on the stream, then the
 * clip, the non-finite check and AdamW are pushed to the device (gf_step_queue_push,
 * gflow/optim.h), the loss stays there, and gf_gpu_step_flush reads the records of the pushed
 * steps back, one wait for all of them. With [run] cuda_graph every step after the first (which
 * sizes the device arena and the staging) is captured from the stream and launched as one CUDA
 * graph (docs/cuda.md "CUDA graphs"); a step whose inputs were all fed before the capture (the
 * LM's) is captured once and its graph replayed on the next steps of the same shape, without the
 * host's pass (docs/cuda.md "Captured once").
 *
 * gf_gpu_step owns the queue, the graph and the key it was captured with, the arena bytes a replay
 * holds, and the counters; it knows the session only as a gf_gpu_work, which gf_train_step fills.
 */
#ifndef GFLOW_GPU_STEP_H
#define GFLOW_GPU_STEP_H

#include "gflow/optim.h"
#include "gflow/tape.h"

typedef struct gf_step_in {
    int64_t rows;             /* rows of the global batch */
    int64_t lo, n;            /* this rank's rows [lo, lo+n) of it in the task's buffers */
    double lr, clip;          /* clip <= 0: none (the norm is still computed) */
    volatile int *stop_flag;  /* summed with the gradients: any rank's flag stops them all */
    int defer;                /* a GPU session: leave the outcome on the device (gf_train_flush) */
    int stop_nonfinite;       /* [train] nonfinite = stop: after a skipped step, no later deferred step
                               * applies until the flush (the trainer stops at the first) */
} gf_step_in;

typedef struct gf_step_out {
    float loss;               /* the global batch's mean loss */
    double grad_norm;         /* global gradient norm before clipping */
    const char *nonfinite;    /* non-NULL: the loss or a gradient is not finite (names it); no update */
    int stop_all;             /* N > 1: some rank's stop flag was set */
    int queued;               /* deferred on the GPU: loss, grad_norm, nonfinite come from gf_train_flush */
    double s_forward, s_backward, s_comm, s_update; /* seconds per phase (a queued step: the host's) */
} gf_step_out;

/* What the GPU step runs: the step context (with its device arena) and the parameter block on
 * the device, whether to capture ([run] cuda_graph), and the host's two parts of a step, each
 * handed self. feed copies the batch's rows [lo, lo+n) to device memory before the capture
 * (gf_ctx_feed) and returns their signature, or -1 when its pass stages them itself (no replay).
 * pass zeroes the gradients, runs the forward (then sets *t_fwd) and the backward, and returns
 * the loss (one float on the device). */
typedef struct gf_gpu_work {
    gf_ctx *ctx;
    gf_params *params;
    int capture;
    void *self;
    int64_t (*feed)(void *self, int64_t lo, int64_t n);
    gf_tensor *(*pass)(void *self, int64_t lo, int64_t n, double *t_fwd);
} gf_gpu_work;

typedef struct gf_gpu_step gf_gpu_step;
struct gf_cuda_graph;

/* an owner without steps yet: its queue is opened at the first step, its graph at the first capture */
gf_status gf_gpu_step_open(gf_gpu_step **g);
/* One step of all in->n rows (one process): queued, captured or replayed; nothing read back.
 * in->defer leaves the outcome on the device (out->queued; at most GF_STEP_RING steps before
 * gf_gpu_step_flush); else it is flushed at once, one wait (nothing may be pending then), and a
 * CUDA failure in the step is returned then. */
gf_status gf_gpu_step_run(gf_gpu_step *g, const gf_gpu_work *w, gf_adamw_state *opt, const gf_adamw_cfg *cfg,
                          const gf_step_in *in, gf_step_out *out);
/* The pending steps' outcomes in order, one wait (gf_train_flush); g NULL: none. A skipped step
 * names the loss or the first parameter of p (in block order) whose gradient is not finite. */
gf_status gf_gpu_step_flush(gf_gpu_step *g, const gf_params *p, gf_adamw_state *opt, gf_step_out *outs, int *n);
/* steps pushed and not yet flushed (0 for g NULL) */
int gf_gpu_step_pending(const gf_gpu_step *g);
/* the step's CUDA graph and its counts (gflow/cuda.h), NULL before the first capture or for g NULL */
const struct gf_cuda_graph *gf_gpu_step_graph(const gf_gpu_step *g);
void gf_gpu_step_close(gf_gpu_step *g);

#endif
