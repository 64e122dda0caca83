/* concat_linear.c — a linear layer over two inputs side by side, without joining them:
 *   u (N, OUT) = [a ; b] · W^T + bias = a · W[:, :Da]^T + b · W[:, Da:]^T + bias
 * with a (N, Da), b (N, Db), W (OUT, Da + Db) stored as gf_linear(gf_concat(a, b), W, bias) reads
 * it (the same parameter, the same checkpoint layout). The concatenation is never written: each
 * product reads its column block of W in place through W's row stride (linear.c's
 * gf_linear_cols_into: the first GEMM with the bias, gf_gemm_bias, the second adding to it, beta
 * 1). The Grassmann block's gate, α = σ(W [n ; g] + b).
 *
 * Not the chain's bits: the chain sums each output over K = Da + Db in one GEMM, this op over Da
 * then over Db, so u differs from it in the last bits (rounding; tests/ops/test_concat_linear.c
 * bounds it). The backward's products are the chain's dot products (each input gradient sums over
 * OUT, each weight gradient over N, as the chain's one GEMM does for its columns), but the
 * BLAS may block a narrower product differently, so they are not promised the same bits either.
 */
#include "op_util.h"

/* backward, with G = dL/du (N, OUT) and W_a = W[:, :Da], W_b = W[:, Da:]:
 *   da += G · W_a ;  db += G · W_b                  (gf_linear_dx_cols)
 *   dW[:, :Da] += G^T · a ;  dW[:, Da:] += G^T · b  (gf_linear_dw_cols; W's fresh flag read once)
 *   dbias += Σ_rows G
 * a and b may be one tensor: its first product stores where fresh, the second adds. */
void gf_concat_linear_grads(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, const float *G) {
    int64_t Da = gf_tensor_cols(a);
    gf_linear_dx_cols(ctx, a, w, 0, G);
    gf_linear_dx_cols(ctx, b, w, Da, G);
    if (gf_needs_grad(w)) {
        int fresh = gf_grad_fresh(w);
        gf_linear_dw_cols(ctx, a, w, 0, fresh, G);
        gf_linear_dw_cols(ctx, b, w, Da, fresh, G);
    }
}

static void concat_linear_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1], *w = n->in[2], *bias = n->in[3];
    const float *G = n->out->grad; // (N, OUT)
    int64_t N = gf_tensor_rows(a), OUT = w->shape[0];
    gf_concat_linear_grads(ctx, a, b, w, G);
    if (gf_needs_grad(bias)) {
        if (gf_grad_fresh(bias)) memset(bias->grad, 0, (size_t)OUT * sizeof(float));
        gf_colsum_acc(ctx, bias->grad, G, NULL, N, OUT);
    }
}

void gf_concat_linear_check(const char *op, const gf_tensor *a, const gf_tensor *b, const gf_tensor *w,
                            const gf_tensor *bias) {
    GF_ASSERT(a->ndim == b->ndim, "%s: a has %d dims, b %d", op, a->ndim, b->ndim);
    for (int32_t i = 0; i < a->ndim - 1; i++)
        GF_ASSERT(a->shape[i] == b->shape[i], "%s: dim %d differs (%lld vs %lld)", op, i, (long long)a->shape[i],
                  (long long)b->shape[i]);
    int64_t Da = gf_tensor_cols(a), Db = gf_tensor_cols(b);
    GF_ASSERT(w->ndim == 2 && w->shape[1] == Da + Db, "%s: a and b have %lld + %lld columns, weight %s is [%lld, %lld]",
              op, (long long)Da, (long long)Db, w->name ? w->name : "?", (long long)w->shape[0],
              (long long)(w->ndim == 2 ? w->shape[1] : 0));
    GF_ASSERT(!bias || (bias->ndim == 1 && bias->shape[0] == w->shape[0]), "%s: bias shape mismatch", op);
}

gf_tensor *gf_concat_linear(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias) {
    double t0 = gf_prof_begin(ctx);
    gf_concat_linear_check("concat_linear", a, b, w, bias);
    int64_t Da = gf_tensor_cols(a);
    gf_tensor *in[4] = {a, b, w, bias};
    const gf_backend_ops *dev = gf_op_backend("concat_linear", 4, in);
    if (dev) return dev->concat_linear(ctx, a, b, w, bias);
    gf_tensor *u = gf_tensor_like_cols(ctx, a, w->shape[0]); // (N, OUT)
    gf_linear_cols_into(ctx, a, w, 0, bias, 0, u->data);
    gf_linear_cols_into(ctx, b, w, Da, NULL, 1, u->data);
    gf_tape_record(ctx, &gf_op_concat_linear, u, 4, in);
    gf_prof_end(ctx, GF_FAM_GEMM, t0);
    return u;
}

const gf_op_def gf_op_concat_linear = {"concat_linear", GF_FAM_GEMM, concat_linear_backward, 1};
