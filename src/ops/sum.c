/* sum.c — y = Σ_i x_i over all elements, shape (1); accumulated in double, serially. */
#include "op_util.h"

/* backward: dx_i += dy */
static void sum_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    float g = n->out->grad[0];
    int64_t N = gf_tensor_numel(x);
    for (int64_t i = 0; i < N; i++) x->grad[i] += g;
}

gf_tensor *gf_sum(gf_ctx *ctx, gf_tensor *x) {
    int64_t N = gf_tensor_numel(x), one = 1;
    double s = 0.0;
    for (int64_t i = 0; i < N; i++) s += x->data[i];
    gf_tensor *y = gf_tensor_new(ctx, 1, &one);
    y->data[0] = (float)s;
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, GF_OP_sum, y, 1, in);
    return y;
}

const gf_op_def gf_op_sum = {"sum", GF_FAM_ELEMWISE, sum_backward, 0};
