/* adamw.cu — AdamW and the clipping scale over a device parameter block (the CUDA twins of the
 * loops in src/optim/adamw.c, whose comment and code are the spec).
 *
 * AdamW: one kernel, one thread block per chunk of the block's chunk table (gf_params.chunks:
 * at most GF_PARAM_CHUNK floats of one parameter, and its kind), its threads striding over the
 * chunk. Per element, the CPU's fp32 expression in the CPU's order, every operation an explicitly
 * rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn), so nvcc cannot fuse a multiply
 * and an add into an fma that the CPU (C11: -ffp-contract=off) does not do:
 *     w  = data·keep[kind]
 *     m' = b1·m + (1-b1)·g                v' = b2·v + ((1-b2)·g)·g
 *     data = w - step_size·(m' / (sqrt(v')/sqrt(bc2) + eps))
 * The scalars come from the host, computed in double and rounded to float as the CPU does; or,
 * in a pushed step (gf_step_queue_push, gflow/optim.h), from device memory: the decay factors
 * and betas from the step's gf_step_args, step_size and sqrt(bc2) from the step kernel below. With the same inputs, every element gets the CPU's bits.
 * Elements are independent: no reduction, deterministic. A block that keeps its weights' bf16
 * copy (gf_params_keep_bf16: a bf16 run) gets each new weight rounded there too, in the same pass.
 * Scale (clipping): grad·c per element, a grid-stride loop (c the device's in a pushed step).
 * step_decide: one thread, gf_clip_grad's and the trainer's decisions of a pushed step from Σg²
 * and the loss in device memory: the same doubles (sqrt, max_norm / (norm + 1e-6), lr / bc1[t]:
 * correctly rounded on both), into the step's record and the shared gf_step_dev.
 */
#include "gflow/cuda.h"

#include "optim_cuda.h"

#include <cuda_bf16.h>

#define ADAMW_THREADS 256

/* a full queue of pushed steps never waits for a staging buffer (gflow/cuda.h); asserted here,
 * where both stages' headers meet, not in src/core (which must not include the optimizer's) */
static_assert(GF_CUDA_STAGES == GF_STEP_RING + 1, "GF_CUDA_STAGES: one staging buffer per queued step, and one");

__global__ static void adamw_chunks(float *__restrict__ data, const float *__restrict__ grad, float *__restrict__ m,
                                    float *__restrict__ v, __nv_bfloat16 *__restrict__ d16,
                                    const gf_param_chunk *__restrict__ chunks,
                                    gf_adamw_scalars s, const gf_step_dev *__restrict__ dev,
                                    const gf_step_args *__restrict__ args) {
    if (dev) { /* a pushed step: every thread reads the same flag, so all return or none */
        if (dev->skip) return;
        s = args->s;
        s.step_size = dev->step_size;
        s.bc2_sqrt = dev->bc2_sqrt;
    }
    const gf_param_chunk c = chunks[blockIdx.x];
    const float keep = s.keep[c.kind];
    for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) {
        const float g = grad[i];
        float w = __fmul_rn(data[i], keep);
        const float mi = __fadd_rn(__fmul_rn(s.b1, m[i]), __fmul_rn(s.omb1, g));
        const float vi = __fadd_rn(__fmul_rn(s.b2, v[i]), __fmul_rn(__fmul_rn(s.omb2, g), g));
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
        w = __fsub_rn(w, __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
        data[i] = w;
        if (d16) d16[i] = __float2bfloat16_rn(w);
    }
}

__global__ static void scale(float *__restrict__ g, int64_t n, float c, const gf_step_dev *__restrict__ dev) {
    if (dev) {
        if (!dev->clip) return;
        c = dev->coef;
    }
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        g[i] = __fmul_rn(g[i], c);
}

/* data, m, v read and written, grad read, the chunk table; the weights' bf16 copy written */
static int64_t adamw_bytes(const gf_params *p) {
    return 4 * 7 * p->n + p->n_chunks * (int64_t)sizeof(gf_param_chunk) + (p->data16 ? 2 * p->n : 0);
}

extern "C" void gf_adamw_step_cuda(gf_params *p, const gf_adamw_scalars *s) {
    GF_ASSERT(p->device == GF_DEV_CUDA && p->chunks, "gf_adamw_step_cuda: not a device block");
    GF_ASSERT(p->n_chunks <= 0x7fffffff, "gf_adamw_step_cuda: %lld chunks", (long long)p->n_chunks);
    if (p->n_chunks == 0) return;
    adamw_chunks<<<(unsigned)p->n_chunks, ADAMW_THREADS, 0, gf_cuda_stream()>>>(
        p->data, p->grad, p->m, p->v, (__nv_bfloat16 *)p->data16, p->chunks, *s, (const gf_step_dev *)NULL,
        (const gf_step_args *)NULL);
    GF_CUDA_LAUNCHED("adamw_chunks", adamw_bytes(p));
}

static void launch_scale(gf_params *p, float c, const gf_step_dev *dev) {
    if (p->n == 0) return;
    int64_t b = (p->n + 255) / 256;
    if (b > 65536) b = 65536;
    scale<<<(unsigned)b, 256, 0, gf_cuda_stream()>>>(p->grad, p->n, c, dev);
    GF_CUDA_LAUNCHED("scale", 4 * 2 * p->n);
}

extern "C" void gf_grad_scale_cuda(gf_params *p, float c) { launch_scale(p, c, (const gf_step_dev *)NULL); }

extern "C" void gf_adamw_reset_cuda(gf_params *p) {
    GF_CUDA_NOTE(cudaMemsetAsync(p->m, 0, (size_t)p->n * sizeof(float), gf_cuda_stream()));
    GF_CUDA_NOTE(cudaMemsetAsync(p->v, 0, (size_t)p->n * sizeof(float), gf_cuda_stream()));
}

/* ---- the step queue (gflow/optim.h) ---- */

/* slot 0 starts a sequence: the applied count from the host's, no sticky stop yet */
__global__ static void step_decide(gf_step_dev *__restrict__ d, const float *__restrict__ loss,
                                   gf_step_rec *__restrict__ ring, const gf_step_args *__restrict__ a) {
    const int slot = a->slot;
    if (slot == 0) {
        d->t = a->tab.t_base;
        d->stopped = 0;
    }
    const float L = *loss;
    const double norm = sqrt(d->sumsq);
    const int bad = !isfinite(L) || !isfinite(norm);
    const int skip = bad || d->stopped;
    if (bad && a->stop_sticky) d->stopped = 1;
    d->skip = skip;
    d->find = isfinite(L) && !isfinite(norm); /* gf_train_step names "the loss" before a gradient */
    d->clip = 0;
    if (a->max_norm > 0.0 && isfinite(norm)) { /* gf_clip_grad: only a coefficient below 1 scales */
        const double coef = a->max_norm / (norm + 1e-6);
        d->clip = coef < 1.0;
        if (d->clip) d->coef = (float)coef; /* only then: a float holds it */
    }
    if (!skip) {
        const int64_t t = ++d->t;
        d->step_size = (float)(a->lr / a->tab.bc1[t - a->tab.t_base]);
        d->bc2_sqrt = a->tab.bc2_sqrt[t - a->tab.t_base];
    }
    gf_step_rec r;
    r.grad_norm = norm;
    r.loss = L;
    r.skipped = skip;
    r.bad = -1;
    ring[slot] = r;
}

/* the search's index into the step's record (the search writes d->bad, at an address that does
 * not depend on the slot) */
__global__ static void step_bad(const gf_step_dev *__restrict__ d, gf_step_rec *__restrict__ ring,
                                const gf_step_args *__restrict__ a) {
    if (d->find) ring[a->slot].bad = d->bad;
}

extern "C" gf_status gf_step_queue_alloc_cuda(gf_step_queue *q) {
    gf_status st = gf_cuda_malloc((void **)&q->dev, sizeof *q->dev);
    if (!st) st = gf_cuda_malloc((void **)&q->ring, GF_STEP_RING * sizeof *q->ring);
    if (!st) st = gf_cuda_malloc((void **)&q->args, sizeof *q->args);
    if (!st) st = gf_cuda_status(cudaHostAlloc((void **)&q->host, GF_STEP_RING * sizeof *q->host, cudaHostAllocDefault),
                                 "cudaHostAlloc(&q->host)", __FILE__, __LINE__);
    if (st) gf_step_queue_free_cuda(q);
    return st;
}

extern "C" void gf_step_queue_free_cuda(gf_step_queue *q) {
    if (q->host) /* a prepared step's copy may still read it */
        gf_cuda_note(cudaStreamSynchronize(gf_cuda_stream()), "cudaStreamSynchronize (queue)", __FILE__, __LINE__);
    if (q->host) gf_cuda_note(cudaFreeHost(q->host), "cudaFreeHost(q->host)", __FILE__, __LINE__);
    gf_cuda_free(q->args);
    gf_cuda_free(q->ring);
    gf_cuda_free(q->dev);
    q->host = NULL;
    q->args = NULL;
    q->ring = NULL;
    q->dev = NULL;
}

extern "C" gf_status gf_step_queue_upload_cuda(gf_step_queue *q) {
    GF_CUDA_TRY(cudaMemcpyAsync(q->args, &q->host[q->n], sizeof *q->args, cudaMemcpyHostToDevice, gf_cuda_stream()));
    return GF_OK;
}

extern "C" gf_status gf_step_queue_push_cuda(gf_step_queue *q, gf_params *p, const float *loss_dev) {
    GF_ASSERT(p->device == GF_DEV_CUDA && p->chunks, "gf_step_queue_push: not a device block");
    GF_ASSERT(p->n_chunks <= 0x7fffffff, "gf_step_queue_push: %lld chunks", (long long)p->n_chunks);
    cudaStream_t st = gf_cuda_stream();
    GF_TRY(gf_cuda_sumsq_to(p->grad, p->n, &q->dev->sumsq));
    step_decide<<<1, 1, 0, st>>>(q->dev, loss_dev, q->ring, q->args);
    GF_CUDA_LAUNCHED("step_decide", (int64_t)sizeof(gf_step_dev));
    GF_TRY(gf_cuda_first_nonfinite(p->grad, p->n, &q->dev->find, &q->dev->bad));
    step_bad<<<1, 1, 0, st>>>(q->dev, q->ring, q->args);
    GF_CUDA_LAUNCHED("step_bad", (int64_t)sizeof(gf_step_dev));
    launch_scale(p, 1.0f, q->dev);
    if (p->n_chunks > 0) {
        adamw_chunks<<<(unsigned)p->n_chunks, ADAMW_THREADS, 0, st>>>(p->data, p->grad, p->m, p->v,
                                                                      (__nv_bfloat16 *)p->data16, p->chunks,
                                                                      gf_adamw_scalars{}, q->dev, q->args);
        GF_CUDA_LAUNCHED("adamw_chunks", adamw_bytes(p));
    }
    return GF_OK;
}

extern "C" gf_status gf_step_queue_download_cuda(const gf_step_queue *q, gf_step_rec *rec, int n) {
    return gf_cuda_download(rec, q->ring, (size_t)n * sizeof *rec);
}
