/* add.c — y = a + b, b of a's shape or of a's trailing shape (broadcast over rows).
 * Position embeddings (L, D) added to token embeddings (B, L, D) use the broadcast.
 */
#include "op_util.h"

/* backward: da += dy ; db += dy summed over the broadcast rows */
static void add_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1];
    const float *g = n->out->grad;
    int64_t na = gf_tensor_numel(a), nb = gf_tensor_numel(b);
    if (gf_needs_grad(a)) {
        if (gf_grad_fresh(a)) {
            memcpy(a->grad, g, (size_t)na * sizeof(float));
        } else {
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < na; i++) a->grad[i] += g[i];
        }
    }
    if (gf_needs_grad(b)) {
        if (nb == na && gf_grad_fresh(b)) {
            memcpy(b->grad, g, (size_t)nb * sizeof(float));
        } else {
            if (b->flags & GF_T_GRAD_FRESH) { memset(b->grad, 0, (size_t)nb * sizeof(float)); b->flags &= ~GF_T_GRAD_FRESH; }
            gf_colsum_acc(ctx, b->grad, g, NULL, na / nb, nb);
        }
    }
}

gf_tensor *gf_add(gf_ctx *ctx, gf_tensor *a, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(gf_broadcastable(a, b), "add: shapes do not broadcast");
    gf_tensor *in[2] = {a, b};
    const gf_backend_ops *dev = gf_op_backend("add", 2, in);
    if (dev) return dev->add(ctx, a, b);
    int64_t na = gf_tensor_numel(a), nb = gf_tensor_numel(b);
    gf_tensor *y = gf_tensor_like(ctx, a);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < na; i++) y->data[i] = a->data[i] + b->data[i % nb];
    gf_tape_record(ctx, &gf_op_add, y, 2, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_add = {"add", GF_FAM_ELEMWISE, add_backward, 1};
