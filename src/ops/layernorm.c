/* layernorm.c — y = (x - mean) * rstd * gamma + beta over the last dim D.
 * rstd = 1 / sqrt(var + eps) with the biased variance and eps inside the sqrt (PyTorch).
 * Saved for backward: mean and rstd per row (N each); mean/var in double for stability.
 */
#include "op_util.h"
#include <math.h>

/* backward, per row with xhat = (x - mean) * rstd and dxhat = dy ⊙ gamma:
 *   dx     += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat ⊙ xhat))
 *   dgamma += sum_rows dy ⊙ xhat ;  dbeta += sum_rows dy
 */
static void layernorm_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    const float *g = n->out->grad, *stats = n->saved; // stats (N, 2): mean, rstd
    int need_gb = gf_needs_grad(gamma);
    float *xhat = need_gb ? gf_arena_floats(&ctx->arena, N * D) : NULL; // (N, D)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float *xr = x->data + r * D, *gr = g + r * D;
        float mean = stats[2 * r], rstd = stats[2 * r + 1];
        double s1 = 0.0, s2 = 0.0;
        for (int64_t c = 0; c < D; c++) {
            float xh = (xr[c] - mean) * rstd;
            float dxh = gr[c] * gamma->data[c];
            s1 += dxh;
            s2 += (double)dxh * xh;
            if (xhat) xhat[r * D + c] = xh;
        }
        if (gf_needs_grad(x)) {
            float m1 = (float)(s1 / (double)D), m2 = (float)(s2 / (double)D);
            float *dx = x->grad + r * D;
            for (int64_t c = 0; c < D; c++) {
                float xh = (xr[c] - mean) * rstd;
                dx[c] += rstd * (gr[c] * gamma->data[c] - m1 - xh * m2);
            }
        }
    }
    if (need_gb) gf_colsum_acc(ctx, gamma->grad, g, xhat, N, D);
    if (gf_needs_grad(beta)) gf_colsum_acc(ctx, beta->grad, g, NULL, N, D);
}

gf_tensor *gf_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps) {
    double t0 = gf_prof_begin(ctx);
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    GF_ASSERT(gamma->ndim == 1 && gamma->shape[0] == D && beta->ndim == 1 && beta->shape[0] == D,
              "layernorm %s: gain/shift must be [%lld]", gamma->name ? gamma->name : "?", (long long)D);
    gf_tensor *y = gf_tensor_like(ctx, x);
    float *stats = gf_arena_floats(&ctx->arena, 2 * N); // (N, 2)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float *xr = x->data + r * D;
        double s = 0.0, ss = 0.0;
        for (int64_t c = 0; c < D; c++) s += xr[c];
        double mean = s / (double)D;
        for (int64_t c = 0; c < D; c++) { double d = xr[c] - mean; ss += d * d; }
        float m = (float)mean, rstd = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
        float *yr = y->data + r * D;
        for (int64_t c = 0; c < D; c++) yr[c] = (xr[c] - m) * rstd * gamma->data[c] + beta->data[c];
        stats[2 * r] = m;
        stats[2 * r + 1] = rstd;
    }
    gf_tensor *in[3] = {x, gamma, beta};
    gf_node *n = gf_tape_record(ctx, GF_OP_layernorm, y, 3, in);
    if (n) n->saved = stats;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_layernorm = {"layernorm", GF_FAM_ELEMWISE, layernorm_backward};
