/* AdamW and global-norm clipping over the contiguous parameter block, on the host or (a block
 * moved to the GPU) on the device: the scalars are computed here for both, the element loops
 * are below and in cuda/adamw.cu. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gflow/backend.h"
#include "gflow/optim.h"
#include "cuda/optim_cuda.h"

void gf_adamw_cfg_default(gf_adamw_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->weight_decay = 0.01;
    cfg->decay[GF_PK_WEIGHT] = 1;
    cfg->decay[GF_PK_BIAS] = 0;
    cfg->decay[GF_PK_NORM] = 0;
    cfg->decay[GF_PK_EMBED] = 1;
}

void gf_adamw_reset(gf_params *p, gf_adamw_state *st) {
    GF_ASSERT(p->allocated, "gf_adamw_reset: parameters not allocated");
    if (p->device != GF_DEV_CPU) {
        gf_backend_of(p->device)->optim->adamw_reset(p);
    } else {
        memset(p->m, 0, (size_t)p->n * sizeof(float));
        memset(p->v, 0, (size_t)p->n * sizeof(float));
    }
    st->step = 0;
}

/* The bias corrections 1 - beta^t of AdamW step t (one home: the host step and the device table). */
static double bias_corr(double beta, int64_t t) { return 1.0 - pow(beta, (double)t); }

/* The fp32 scalars of AdamW step t (1-based), from doubles as torch does. */
static gf_adamw_scalars step_scalars(int64_t t, const gf_adamw_cfg *cfg, double lr) {
    /* Scalars in double like torch's Python floats; element math in fp32 like torch's kernels. */
    const double bc1 = bias_corr(cfg->beta1, t);
    const double bc2 = bias_corr(cfg->beta2, t);
    gf_adamw_scalars s = {
        .step_size = (float)(lr / bc1), .bc2_sqrt = (float)sqrt(bc2),
        .b1 = (float)cfg->beta1, .b2 = (float)cfg->beta2,
        .omb1 = (float)(1.0 - cfg->beta1), .omb2 = (float)(1.0 - cfg->beta2), .eps = (float)cfg->eps,
    };
    for (int k = 0; k < GF_PK_COUNT; k++) {
        const int decays = k == GF_PK_WEIGHT || cfg->decay[k];
        s.keep[k] = decays ? (float)(1.0 - lr * cfg->weight_decay) : 1.0f;
    }
    return s;
}

/* AdamW's element update on n elements (one span of a tensor, decay factor keep), in one
 * vector pass (it vectorises because meson.build compiles with -fno-math-errno: sqrtf's errno
 * branch kept it scalar); IEEE sqrt and division are exact, so it gives the scalar loop's bits. */
#define ADAMW_SPAN 4096
static void adamw_span(float *restrict w, const float *restrict grad, float *restrict m,
                       float *restrict v, int64_t n, float keep, const gf_adamw_scalars *sc) {
    const float step_size = sc->step_size, bc2_sqrt = sc->bc2_sqrt, b1 = sc->b1, b2 = sc->b2;
    const float omb1 = sc->omb1, omb2 = sc->omb2, eps = sc->eps;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        const float g = grad[i];
        const float mi = b1 * m[i] + omb1 * g;
        const float vi = b2 * v[i] + omb2 * g * g;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) / bc2_sqrt + eps;
        w[i] = w[i] * keep - step_size * (mi / denom);
    }
}

void gf_adamw_step(gf_params *p, gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr) {
    GF_ASSERT(p->allocated, "gf_adamw_step: parameters not allocated");
    st->step++;
    const gf_adamw_scalars sc = step_scalars(st->step, cfg, lr);
    if (p->device != GF_DEV_CPU) {
        gf_backend_of(p->device)->optim->adamw_step(p, &sc);
        return;
    }
    float *data = p->data, *grad = p->grad, *m = p->m, *v = p->v; // (n) each
    const int64_t n_items = p->n_items;
    gf_param *const *items = p->items;

    /* One parallel region; each tensor's elements are split statically in spans of
     * ADAMW_SPAN. No reductions, so the result does not depend on the thread count. */
#pragma omp parallel
    for (int64_t it = 0; it < n_items; it++) {
        const gf_param *q = items[it];
        const float keep = sc.keep[q->kind];
        const int64_t lo = q->offset, hi = q->offset + gf_tensor_numel(&q->t);
        const int64_t nb = (hi - lo + ADAMW_SPAN - 1) / ADAMW_SPAN;
#pragma omp for schedule(static) nowait
        for (int64_t b = 0; b < nb; b++) {
            const int64_t i0 = lo + b * ADAMW_SPAN, i1 = hi - i0 < ADAMW_SPAN ? hi : i0 + ADAMW_SPAN;
            adamw_span(data + i0, grad + i0, m + i0, v + i0, i1 - i0, keep, &sc);
        }
    }
}

gf_status gf_clip_grad(gf_params *p, double max_norm, double *norm_out) {
    double ss = NAN;
    const gf_status st = gf_params_grad_sumsq(p, &ss);
    const double norm = sqrt(ss);
    *norm_out = norm;
    if (st) return st;
    if (!(max_norm > 0.0) || !isfinite(norm)) return GF_OK;
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        const float c = (float)coef;
        if (p->device != GF_DEV_CPU) {
            gf_backend_of(p->device)->optim->grad_scale(p, c);
            return GF_OK;
        }
        float *g = p->grad; // (n)
        const int64_t n = p->n;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) g[i] *= c;
    }
    return GF_OK;
}

double gf_clip_grad_norm(gf_params *p, double max_norm) {
    double norm = NAN;
    return gf_clip_grad(p, max_norm, &norm) ? NAN : norm;
}

/* ---- the step queue (gflow/optim.h; the kernels are in cuda/adamw.cu) ---- */

gf_status gf_step_queue_open(gf_step_queue **q) {
    *q = calloc(1, sizeof **q);
    if (!*q) return gf_error_set(GF_E_NOMEM, "gf_step_queue_open");
    const gf_status st = gf_step_queue_alloc_cuda(*q);
    if (st) {
        free(*q);
        *q = NULL;
    }
    return st;
}

void gf_step_queue_close(gf_step_queue *q) {
    if (!q) return;
    gf_step_queue_free_cuda(q);
    free(q);
}

int gf_step_queue_count(const gf_step_queue *q) { return q->n; }

gf_status gf_step_queue_prepare(gf_step_queue *q, const gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr,
                                double max_norm, int stop_sticky) {
    GF_ASSERT(q->n < GF_STEP_RING, "gf_step_queue_prepare: %d steps pushed, not flushed", q->n);
    if (q->n == 0) { /* a new sequence: its steps apply at most AdamW steps st->step + 1 .. + GF_STEP_RING */
        q->tab.t_base = st->step;
        for (int j = 1; j <= GF_STEP_RING; j++) {
            q->tab.bc1[j] = bias_corr(cfg->beta1, st->step + j);
            q->tab.bc2_sqrt[j] = (float)sqrt(bias_corr(cfg->beta2, st->step + j));
        }
    }
    /* the decay factors and the betas; the kernels take step_size and bc2_sqrt of the t the
     * device reaches instead (these are step st->step + 1's) */
    q->host[q->n] = (gf_step_args){.tab = q->tab, .s = step_scalars(st->step + 1, cfg, lr), .lr = lr,
                                   .max_norm = max_norm, .slot = q->n, .stop_sticky = stop_sticky};
    GF_TRY(gf_step_queue_upload_cuda(q));
    q->prepared = 1;
    return GF_OK;
}

gf_status gf_step_queue_push(gf_step_queue *q, gf_params *p, const float *loss_dev) {
    GF_ASSERT(p->allocated && p->device != GF_DEV_CPU, "gf_step_queue_push: not a device block");
    GF_ASSERT(q->prepared, "gf_step_queue_push: slot %d not prepared (gf_step_queue_prepare)", q->n);
    GF_TRY(gf_step_queue_push_cuda(q, p, loss_dev));
    q->prepared = 0;
    q->n++;
    return GF_OK;
}

void gf_step_queue_push_replayed(gf_step_queue *q) {
    GF_ASSERT(q->prepared, "gf_step_queue_push_replayed: slot %d not prepared (gf_step_queue_prepare)", q->n);
    q->prepared = 0;
    q->n++;
}

void gf_step_queue_unpush(gf_step_queue *q) {
    GF_ASSERT(q->n > 0, "gf_step_queue_unpush: nothing pushed");
    q->n--;
    q->prepared = 0;
}

gf_status gf_step_queue_flush(gf_step_queue *q, gf_adamw_state *st, gf_step_rec *rec, int *n) {
    *n = 0;
    if (q->n == 0) return GF_OK;
    const int k = q->n;
    q->n = 0; /* a failed copy leaves nothing to flush: the stream's state is unknown */
    GF_TRY(gf_step_queue_download_cuda(q, rec, k));
    for (int i = 0; i < k; i++) st->step += !rec[i].skipped;
    *n = k;
    return GF_OK;
}
