/* AdamW and global-norm clipping over the contiguous parameter block, on the host or (a block
 * moved to the GPU) on the device: the scalars are computed here for both, the element loops
 * are below and in cuda/adamw.cu. */
#include <math.h>
#include <string.h>

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
        gf_adamw_reset_cuda(p);
    } else {
        memset(p->m, 0, (size_t)p->n * sizeof(float));
        memset(p->v, 0, (size_t)p->n * sizeof(float));
    }
    st->step = 0;
}

/* The fp32 scalars of step st->step (already incremented), from doubles as torch does. */
static gf_adamw_scalars step_scalars(const gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr) {
    /* Scalars in double like torch's Python floats; element math in fp32 like torch's kernels. */
    const double bc1 = 1.0 - pow(cfg->beta1, (double)st->step);
    const double bc2 = 1.0 - pow(cfg->beta2, (double)st->step);
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

void gf_adamw_step(gf_params *p, gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr) {
    GF_ASSERT(p->allocated, "gf_adamw_step: parameters not allocated");
    st->step++;
    const gf_adamw_scalars sc = step_scalars(st, cfg, lr);
    if (p->device != GF_DEV_CPU) {
        gf_adamw_step_cuda(p, &sc);
        return;
    }
    const float step_size = sc.step_size, bc2_sqrt = sc.bc2_sqrt, b1 = sc.b1, b2 = sc.b2;
    const float omb1 = sc.omb1, omb2 = sc.omb2, eps = sc.eps;
    float *data = p->data, *grad = p->grad, *m = p->m, *v = p->v; // (n) each
    const int64_t n_items = p->n_items;
    gf_param *const *items = p->items;

    /* One parallel region; each tensor's elements are split statically. No
     * reductions, so the result does not depend on the thread count. */
#pragma omp parallel
    for (int64_t it = 0; it < n_items; it++) {
        const gf_param *q = items[it];
        const float keep = sc.keep[q->kind];
        const int64_t lo = q->offset, hi = q->offset + gf_tensor_numel(&q->t);
#pragma omp for schedule(static) nowait
        for (int64_t i = lo; i < hi; i++) {
            const float g = grad[i];
            float w = data[i] * keep;
            const float mi = b1 * m[i] + omb1 * g;
            const float vi = b2 * v[i] + omb2 * g * g;
            m[i] = mi;
            v[i] = vi;
            const float denom = sqrtf(vi) / bc2_sqrt + eps;
            w -= step_size * (mi / denom);
            data[i] = w;
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
            gf_grad_scale_cuda(p, c);
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
