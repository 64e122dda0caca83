/* optim_cuda.h — the CUDA twins of the optimizer's loops over a device parameter block
 * (internal to src/optim). src/optim/adamw.c computes the scalars on the host, exactly as for
 * the CPU loop, and hands a block whose device is GF_DEV_CUDA to the CUDA backend's table
 * (backend_cuda.c beside it), which holds the update loops. A build without CUDA compiles neither
 * the .cu files nor the table; the queue's names expand to an abort that cannot be reached (no
 * block can be moved to the GPU there: gf_params_to_device refuses).
 */
#ifndef GF_OPTIM_CUDA_H
#define GF_OPTIM_CUDA_H

#include "gflow/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fp32 scalars of one AdamW step (gf_adamw_step computes them from its doubles). */
typedef struct gf_adamw_scalars {
    float step_size, bc2_sqrt, b1, b2, omb1, omb2, eps;
    float keep[GF_PK_COUNT]; /* the decoupled decay factor per parameter kind (1 = no decay) */
} gf_adamw_scalars;

/* The bias corrections of a sequence of pushed steps: entry j (1 .. GF_STEP_RING) for AdamW step
 * t_base + j (gf_step_queue_prepare makes it from gf_adamw_step's doubles). */
typedef struct gf_step_tab {
    int64_t t_base;
    double bc1[GF_STEP_RING + 1];      /* 1 - beta1^t */
    float bc2_sqrt[GF_STEP_RING + 1];  /* (float)sqrt(1 - beta2^t) */
} gf_step_tab;

/* A pushed step's host values, which its kernels read from device memory: gf_step_queue_prepare
 * copies them there before the step is captured, so a replayed graph reads the new step's. */
typedef struct gf_step_args {
    gf_step_tab tab;
    gf_adamw_scalars s; /* the decay factors and the betas (step size and bc2 are the device's) */
    double lr, max_norm;
    int32_t slot, stop_sticky; /* the step's ring record; [train] nonfinite = stop */
} gf_step_args;

/* What the step kernels share, in device memory (src/optim/cuda/adamw.cu writes and reads it). */
typedef struct gf_step_dev {
    double sumsq;                   /* Σg² of the step being queued */
    int64_t bad;                    /* the lowest non-finite gradient index (when find) */
    int64_t t;                      /* AdamW steps applied (the table's t_base at slot 0) */
    float coef, step_size, bc2_sqrt; /* the clip coefficient; AdamW's scalars of this step */
    int32_t clip, skip, find, stopped; /* scale by coef; AdamW returns; search the bad index; sticky stop */
} gf_step_dev;

struct gf_step_queue {
    int n;               /* steps pushed since the last flush: ring slots 0 .. n-1 */
    gf_step_tab tab;     /* this sequence's, made at its first push */
    gf_step_dev *dev;    /* device memory */
    gf_step_rec *ring;   /* device memory, GF_STEP_RING records */
    gf_step_args *args;  /* device memory: the step being pushed */
    gf_step_args *host;  /* pinned, GF_STEP_RING: slot j's, read by its copy (no slot is reused before a flush) */
    int prepared;        /* gf_step_queue_prepare ran for slot n */
};

#ifdef GF_HAVE_CUDA
/* one AdamW step over the block's chunks (one kernel on the stream; a failure is noted) */
void gf_adamw_step_cuda(gf_params *p, const gf_adamw_scalars *s);
/* q->dev, q->ring, q->args and q->host; their cudaFree */
gf_status gf_step_queue_alloc_cuda(gf_step_queue *q);
void gf_step_queue_free_cuda(gf_step_queue *q);
/* q->host[q->n] copied to q->args on the stream */
gf_status gf_step_queue_upload_cuda(gf_step_queue *q);
/* the kernels of gf_step_queue_push (the slot, the scalars and the table from q->args) */
gf_status gf_step_queue_push_cuda(gf_step_queue *q, gf_params *p, const float *loss_dev);
/* the records of slots 0 .. n-1 (a synchronous copy) */
gf_status gf_step_queue_download_cuda(const gf_step_queue *q, gf_step_rec *rec, int n);
/* grad *= c over the block (one kernel) */
void gf_grad_scale_cuda(gf_params *p, float c);
/* m = v = 0 (two memsets on the stream) */
void gf_adamw_reset_cuda(gf_params *p);
#else
static inline void gf_no_cuda_optim(const char *what) {
    gf_abort(__FILE__, __LINE__, "%s: a device parameter block in a build without CUDA", what);
}
#define gf_step_queue_alloc_cuda(...) gf_error_set(GF_E_INVALID, "gf_step_queue_open: a build without CUDA")
#define gf_step_queue_free_cuda(...) gf_no_cuda_optim("gf_step_queue_close")
/* its arguments evaluated, so the caller's values count as used */
#define gf_step_queue_upload_cuda(q) ((void)(q), gf_no_cuda_optim("gf_step_queue_prepare"), GF_E_INVALID)
#define gf_step_queue_push_cuda(q, p, loss)                                                                         \
    ((void)(q), (void)(p), (void)(loss), gf_no_cuda_optim("gf_step_queue_push"), GF_E_INVALID)
#define gf_step_queue_download_cuda(...) (gf_no_cuda_optim("gf_step_queue_flush"), GF_E_INVALID)
#endif

#ifdef __cplusplus
}
#endif

#endif
