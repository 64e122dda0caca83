/* gelu.c — exact GELU (PyTorch default, not the tanh form): y = x Φ(x) = 0.5 x (1 + erf(x/√2)). */
#include "op_util.h"
#include <math.h>

/* backward: dx += dy * (Φ(x) + x φ(x)),  φ(x) = exp(-x²/2) / √(2π) */
static void gelu_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const float *g = n->out->grad;
    int64_t N = gf_tensor_numel(x);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        float v = x->data[i];
        float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
        x->grad[i] += g[i] * (cdf + v * pdf);
    }
}

gf_tensor *gf_gelu(gf_ctx *ctx, gf_tensor *x) {
    double t0 = gf_prof_begin(ctx);
    gf_tensor *y = gf_tensor_like(ctx, x);
    int64_t N = gf_tensor_numel(x);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        float v = x->data[i];
        y->data[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, GF_OP_gelu, y, 1, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_gelu = {"gelu", GF_FAM_ELEMWISE, gelu_backward};
