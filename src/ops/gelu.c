/* gelu.c — exact GELU (PyTorch default, not the tanh form): y = x Φ(x) = 0.5 x (1 + erf(x/√2)).
 * Φ comes from gf_normal_cdf (op_util.h): a branch-free erfc fit with < 1.2e-7 relative error,
 * so the loops vectorise (libm's erff/expf are scalar calls and were ~1/3 of elementwise time). */
#include "op_util.h"

/* backward: dx += dy * (Φ(x) + x φ(x)),  φ(x) = exp(-x²/2) / √(2π) */
/* d/dv [v Φ(v)] = Φ(v) + v φ(v) */
static inline float gelu_slope(float v) {
    float pdf = 0.39894228040143268f * gf_expf(-0.5f * v * v);
    return gf_normal_cdf(v) + v * pdf;
}

static void gelu_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const float *restrict g = n->out->grad, *restrict xd = x->data;
    float *restrict dx = x->grad;
    int64_t N = gf_tensor_numel(x);
    if (gf_grad_fresh(x)) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < N; i++) dx[i] = g[i] * gelu_slope(xd[i]);
    } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < N; i++) dx[i] += g[i] * gelu_slope(xd[i]);
    }
}

gf_tensor *gf_gelu(gf_ctx *ctx, gf_tensor *x) {
    double t0 = gf_prof_begin(ctx);
    gf_tensor *y = gf_tensor_like(ctx, x);
    int64_t N = gf_tensor_numel(x);
    const float *restrict xd = x->data;
    float *restrict yd = y->data;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < N; i++) yd[i] = xd[i] * gf_normal_cdf(xd[i]);
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, &gf_op_gelu, y, 1, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_gelu = {"gelu", GF_FAM_ELEMWISE, gelu_backward, 1};
