/* sigmoid.c — y = 1 / (1 + exp(-x)), evaluated without overflow for large |x| (gf_sigmoidf). */
#include "op_util.h"

/* elementwise over spans, so the vector kernel can be multiversioned (GF_KERNEL_CLONES) while
 * OpenMP splits the spans across threads (as gelu.c) */
#define SIGMOID_SPAN 4096

GF_KERNEL_CLONES static void sigmoid_span(float *restrict y, const float *restrict x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = gf_sigmoidf(x[i]);
}

/* backward: dx += dy * y * (1 - y), using the saved output y */
static void sigmoid_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const float *y = n->out->data, *g = n->out->grad;
    int64_t N = gf_tensor_numel(x);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < N; i++) x->grad[i] += g[i] * y[i] * (1.0f - y[i]);
}

gf_tensor *gf_sigmoid(gf_ctx *ctx, gf_tensor *x) {
    double t0 = gf_prof_begin(ctx);
    gf_tensor *in[1] = {x};
    const gf_backend_ops *dev = gf_op_backend("sigmoid", 1, in);
    if (dev) return dev->sigmoid(ctx, x);
    gf_tensor *y = gf_tensor_like(ctx, x);
    int64_t N = gf_tensor_numel(x), nb = (N + SIGMOID_SPAN - 1) / SIGMOID_SPAN;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < nb; s++) {
        int64_t lo = s * SIGMOID_SPAN;
        sigmoid_span(y->data + lo, x->data + lo, N - lo < SIGMOID_SPAN ? N - lo : SIGMOID_SPAN);
    }
    gf_tape_record(ctx, &gf_op_sigmoid, y, 1, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_sigmoid = {"sigmoid", GF_FAM_ELEMWISE, sigmoid_backward, 0};
