/* AdamW and global-norm clipping over the contiguous parameter block. */
#include <math.h>
#include <string.h>

#include "gflow/optim.h"

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
    memset(p->m, 0, (size_t)p->n * sizeof(float));
    memset(p->v, 0, (size_t)p->n * sizeof(float));
    st->step = 0;
}

void gf_adamw_step(gf_params *p, gf_adamw_state *st, const gf_adamw_cfg *cfg, double lr) {
    GF_ASSERT(p->allocated, "gf_adamw_step: parameters not allocated");
    st->step++;
    /* Scalars in double like torch's Python floats; element math in fp32 like torch's kernels. */
    const double bc1 = 1.0 - pow(cfg->beta1, (double)st->step);
    const double bc2 = 1.0 - pow(cfg->beta2, (double)st->step);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float b1 = (float)cfg->beta1, b2 = (float)cfg->beta2;
    const float omb1 = (float)(1.0 - cfg->beta1), omb2 = (float)(1.0 - cfg->beta2);
    const float eps = (float)cfg->eps;
    float *data = p->data, *grad = p->grad, *m = p->m, *v = p->v; // (n) each
    const int64_t n_items = p->n_items;
    gf_param *const *items = p->items;

    /* One parallel region; each tensor's elements are split statically. No
     * reductions, so the result does not depend on the thread count. */
#pragma omp parallel
    for (int64_t it = 0; it < n_items; it++) {
        const gf_param *q = items[it];
        const int decays = q->kind == GF_PK_WEIGHT || cfg->decay[q->kind];
        const float keep = decays ? (float)(1.0 - lr * cfg->weight_decay) : 1.0f;
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

double gf_clip_grad_norm(gf_params *p, double max_norm) {
    const double norm = gf_params_grad_norm(p);
    if (!(max_norm > 0.0) || !isfinite(norm)) return norm;
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        const float c = (float)coef;
        float *g = p->grad; // (n)
        const int64_t n = p->n;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) g[i] *= c;
    }
    return norm;
}
