/* test_only_ops.c — gf_mul and gf_sum (see test_only_ops.h). */
#include "test_only_ops.h"
#include "ops/op_util.h"

/* mul — y = a ⊙ b, b of a's shape or of a's trailing shape (broadcast over rows). */

/* backward: da += dy ⊙ b ; db += sum over broadcast rows of dy ⊙ a */
static void mul_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1];
    const float *g = n->out->grad;
    int64_t na = gf_tensor_numel(a), nb = gf_tensor_numel(b);
    if (gf_needs_grad(a)) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < na; i++) a->grad[i] += g[i] * b->data[i % nb];
    }
    if (gf_needs_grad(b)) gf_colsum_acc(ctx, b->grad, g, a->data, na / nb, nb);
}

gf_tensor *gf_mul(gf_ctx *ctx, gf_tensor *a, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(gf_broadcastable(a, b), "mul: shapes do not broadcast");
    int64_t na = gf_tensor_numel(a), nb = gf_tensor_numel(b);
    gf_tensor *y = gf_tensor_like(ctx, a);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < na; i++) y->data[i] = a->data[i] * b->data[i % nb];
    gf_tensor *in[2] = {a, b};
    gf_tape_record(ctx, &gf_test_op_mul, y, 2, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_test_op_mul = {"mul", GF_FAM_ELEMWISE, mul_backward, 0};

/* sum — y = Σ_i x_i over all elements, shape (1); accumulated in double, serially. */

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
    gf_tape_record(ctx, &gf_test_op_sum, y, 1, in);
    return y;
}

const gf_op_def gf_test_op_sum = {"sum", GF_FAM_ELEMWISE, sum_backward, 0};
