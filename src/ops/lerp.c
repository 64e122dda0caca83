/* lerp.c — gated blend y = α ⊙ a + (1 − α) ⊙ b (the Grassmann block's gated fusion).
 * alpha may be NULL: then the constant `alpha_const` is used (the no-gate ablation, 0.5).
 */
#include "op_util.h"

/* backward: dα += dy ⊙ (a − b);  da += dy ⊙ α;  db += dy ⊙ (1 − α) */
static void lerp_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *al = n->in[0], *a = n->in[1], *b = n->in[2];
    const float *g = n->out->grad;
    float c = (float)n->fp[0];
    int64_t N = gf_tensor_numel(a);
    int ga = gf_needs_grad(a), gb = gf_needs_grad(b), gal = gf_needs_grad(al);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        float w = al ? al->data[i] : c;
        if (gal) al->grad[i] += g[i] * (a->data[i] - b->data[i]);
        if (ga) a->grad[i] += g[i] * w;
        if (gb) b->grad[i] += g[i] * (1.0f - w);
    }
}

gf_tensor *gf_lerp(gf_ctx *ctx, gf_tensor *alpha, gf_tensor *a, gf_tensor *b, float alpha_const) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(gf_tensor_same_shape(a, b) && (!alpha || gf_tensor_same_shape(a, alpha)), "lerp: shape mismatch");
    gf_tensor *in[3] = {alpha, a, b};
    const gf_backend_ops *dev = gf_op_backend("lerp", 3, in);
    if (dev) return dev->lerp(ctx, alpha, a, b, alpha_const);
    int64_t N = gf_tensor_numel(a);
    gf_tensor *y = gf_tensor_like(ctx, a);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        float w = alpha ? alpha->data[i] : alpha_const;
        y->data[i] = w * a->data[i] + (1.0f - w) * b->data[i];
    }
    gf_node *n = gf_tape_record(ctx, &gf_op_lerp, y, 3, in);
    if (n) n->fp[0] = alpha_const;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_lerp = {"lerp", GF_FAM_ELEMWISE, lerp_backward, 0};
