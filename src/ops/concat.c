/* concat.c — join along the last dim: (rows, Da) ++ (rows, Db) -> (rows, Da + Db). */
#include "op_util.h"

/* backward: split dy by columns; da += dy[:, :Da], db += dy[:, Da:] */
static void concat_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *a = n->in[0], *b = n->in[1];
    int64_t R = gf_tensor_rows(a), Da = gf_tensor_cols(a), Db = gf_tensor_cols(b), Dy = Da + Db;
    const float *g = n->out->grad;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; r++) {
        if (gf_needs_grad(a)) for (int64_t c = 0; c < Da; c++) a->grad[r * Da + c] += g[r * Dy + c];
        if (gf_needs_grad(b)) for (int64_t c = 0; c < Db; c++) b->grad[r * Db + c] += g[r * Dy + Da + c];
    }
}

gf_tensor *gf_concat(gf_ctx *ctx, gf_tensor *a, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(a->ndim == b->ndim, "concat: rank mismatch");
    for (int32_t i = 0; i < a->ndim - 1; i++) GF_ASSERT(a->shape[i] == b->shape[i], "concat: dim %d differs", i);
    gf_tensor *in[2] = {a, b};
    const gf_backend_ops *dev = gf_op_backend("concat", 2, in);
    if (dev) return dev->concat(ctx, a, b);
    int64_t R = gf_tensor_rows(a), Da = gf_tensor_cols(a), Db = gf_tensor_cols(b), Dy = Da + Db;
    gf_tensor *y = gf_tensor_like_cols(ctx, a, Dy);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; r++) {
        memcpy(y->data + r * Dy, a->data + r * Da, (size_t)Da * sizeof(float));
        memcpy(y->data + r * Dy + Da, b->data + r * Db, (size_t)Db * sizeof(float));
    }
    gf_tape_record(ctx, &gf_op_concat, y, 2, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_concat = {"concat", GF_FAM_ELEMWISE, concat_backward, 0};
