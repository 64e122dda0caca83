/* masked_mean.c — masked mean pooling over the sequence: x (B, L, D), mask (B, L) -> (B, D).
 *
 * Forward:  y_b = Σ_t m_bt x_bt / Σ_t m_bt, and y_b = 0 when Σ_t m_bt = 0 (an unused batch row).
 * The mask holds non-negative weights (1 = token, 0 = padding); it is a constant (no gradient)
 * and is copied as the normalised weights w_bt = m_bt / Σ_t m_bt, so the caller may reuse it.
 * Backward:  dx_bt += w_bt dy_b.
 */
#include "op_util.h"

static void masked_mean_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const float *wt = n->saved, *dy = n->out->grad; // wt (B, L), dy (B, D)
    int64_t B = x->shape[0], L = x->shape[1], D = x->shape[2];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < B * L; r++) {
        float s = wt[r];
        if (s == 0.0f) continue;
        const float *g = dy + (r / L) * D;
        float *dx = x->grad + r * D;
        for (int64_t d = 0; d < D; d++) dx[d] += s * g[d];
    }
}

float *gf_masked_mean_weights(gf_ctx *ctx, const float *mask, int64_t B, int64_t L) {
    float *wt = gf_arena_floats(&ctx->arena, B * L); // (B, L) normalised weights
    for (int64_t bb = 0; bb < B; bb++) {
        double den = 0.0;
        for (int64_t t = 0; t < L; t++) {
            GF_ASSERT(mask[bb * L + t] >= 0.0f, "masked_mean: negative mask weight");
            den += mask[bb * L + t];
        }
        for (int64_t t = 0; t < L; t++) wt[bb * L + t] = den > 0 ? (float)(mask[bb * L + t] / den) : 0.0f;
    }
    return wt;
}

gf_tensor *gf_masked_mean(gf_ctx *ctx, gf_tensor *x, const float *mask) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(x->ndim == 3, "masked_mean: x must be (B, L, D)");
    gf_tensor *in[1] = {x};
    const gf_backend_ops *dev = gf_op_backend("masked_mean", 1, in);
    if (dev) return dev->masked_mean(ctx, x, mask);
    int64_t B = x->shape[0], L = x->shape[1], D = x->shape[2];
    float *wt = gf_masked_mean_weights(ctx, mask, B, L); // (B, L)
    gf_tensor *y = gf_tensor_new2(ctx, B, D); // (B, D)
#pragma omp parallel for schedule(static)
    for (int64_t bb = 0; bb < B; bb++) {
        float *yb = y->data + bb * D;
        memset(yb, 0, (size_t)D * sizeof(float));
        for (int64_t t = 0; t < L; t++) {
            float s = wt[bb * L + t];
            if (s == 0.0f) continue;
            const float *xt = x->data + (bb * L + t) * D;
            for (int64_t d = 0; d < D; d++) yb[d] += s * xt[d];
        }
    }
    gf_node *n = gf_tape_record(ctx, &gf_op_masked_mean, y, 1, in);
    if (n) n->saved = wt;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_masked_mean = {"masked_mean", GF_FAM_ELEMWISE, masked_mean_backward, 0};
