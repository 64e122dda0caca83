/* sigmoid_lerp.c — the Grassmann block's gated fusion in one pass:
 *   y = σ(u) ⊙ a + (1 − σ(u)) ⊙ b
 * = gf_lerp(gf_sigmoid(u), a, b, 0), with the same arithmetic in the same order (σ is
 * gf_sigmoidf), so the bits are the unfused chain's. α = σ(u) is neither stored nor saved: the
 * backward recomputes it from u, which the tape keeps anyway.
 */
#include "op_util.h"

/* backward, with α = σ(u) and g = dL/dy:
 *   da += g ⊙ α ;  db += g ⊙ (1 − α) ;  du += (g ⊙ (a − b)) ⊙ α ⊙ (1 − α)
 * (the lerp's dα times the sigmoid's slope α (1 − α), in the order the two ops multiply).
 * One element at a time over every buffer, so inputs that share a buffer add up. */
static void sigmoid_lerp_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *u = n->in[0], *a = n->in[1], *b = n->in[2];
    const float *g = n->out->grad;
    int64_t N = gf_tensor_numel(a);
    int gu = gf_needs_grad(u), ga = gf_needs_grad(a), gb = gf_needs_grad(b);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        const float w = gf_sigmoidf(u->data[i]);
        if (gu) u->grad[i] += g[i] * (a->data[i] - b->data[i]) * w * (1.0f - w);
        if (ga) a->grad[i] += g[i] * w;
        if (gb) b->grad[i] += g[i] * (1.0f - w);
    }
}

gf_tensor *gf_sigmoid_lerp(gf_ctx *ctx, gf_tensor *u, gf_tensor *a, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(gf_tensor_same_shape(a, b) && gf_tensor_same_shape(a, u), "sigmoid_lerp: shape mismatch");
    gf_tensor *in[3] = {u, a, b};
    const gf_backend_ops *dev = gf_op_backend("sigmoid_lerp", 3, in);
    if (dev) return dev->sigmoid_lerp(ctx, u, a, b);
    int64_t N = gf_tensor_numel(a);
    gf_tensor *y = gf_tensor_like(ctx, a);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        const float w = gf_sigmoidf(u->data[i]);
        y->data[i] = w * a->data[i] + (1.0f - w) * b->data[i];
    }
    gf_tape_record(ctx, &gf_op_sigmoid_lerp, y, 3, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_sigmoid_lerp = {"sigmoid_lerp", GF_FAM_ELEMWISE, sigmoid_lerp_backward, 0};
