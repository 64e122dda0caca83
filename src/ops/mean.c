/* mean.c — y = (1/N) Σ_i x_i over all elements, shape (1); accumulated in double. */
#include "op_util.h"

/* backward: dx_i += dy / N */
static void mean_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    int64_t N = gf_tensor_numel(x);
    float g = n->out->grad[0] / (float)N;
    for (int64_t i = 0; i < N; i++) x->grad[i] += g;
}

gf_tensor *gf_mean(gf_ctx *ctx, gf_tensor *x) {
    int64_t N = gf_tensor_numel(x), one = 1;
    double s = 0.0;
    for (int64_t i = 0; i < N; i++) s += x->data[i];
    gf_tensor *y = gf_tensor_new(ctx, 1, &one);
    y->data[0] = (float)(s / (double)N);
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, GF_OP_mean, y, 1, in);
    return y;
}

const gf_op_def gf_op_mean = {"mean", GF_FAM_ELEMWISE, mean_backward, 0};
