/* linear.c — y = x W^T + b through gf_gemm (cblas_sgemm, or bf16: gemm.c), PyTorch (OUT, IN) weight layout.
 *
 * forward:  Y (N, OUT) = X (N, IN) · W^T (IN, OUT) + b (OUT)
 * The tied LM head is this op with W = tok_emb (V, D) and no bias. The product and the two weight
 * and input GEMMs of the backward are also the fused linear_gelu.c's (gf_linear_into,
 * gf_linear_grads), so both give the same bits, and concat_linear.c's, which multiplies by a
 * column block of W (its columns c0.., read through the row stride: gf_linear_cols_into,
 * gf_linear_dx_cols, gf_linear_dw_cols).
 */
#include "op_util.h"
#include <cblas.h>

void gf_linear_check(const char *op, const gf_tensor *x, const gf_tensor *w, const gf_tensor *b) {
    GF_ASSERT(w->ndim == 2 && w->shape[1] == gf_tensor_cols(x),
              "%s: x has %lld columns, weight %s is [%lld, %lld]", op, (long long)gf_tensor_cols(x),
              w->name ? w->name : "?", (long long)w->shape[0], (long long)w->shape[1]);
    GF_ASSERT(!b || (b->ndim == 1 && b->shape[0] == w->shape[0]), "%s: bias shape mismatch", op);
}

void gf_linear_dx_cols(gf_ctx *ctx, gf_tensor *x, const gf_tensor *w, int64_t c0, const float *G) {
    if (!gf_needs_grad(x)) return;
    int N = gf_blas_int(gf_tensor_rows(x)), IN = gf_blas_int(gf_tensor_cols(x)), OUT = gf_blas_int(w->shape[0]);
    /* beta 0 on a fresh buffer: the GEMM stores */
    gf_gemm(ctx, 0, 0, N, IN, OUT, G, OUT, w->data + c0, w->shape[1], gf_grad_fresh(x) ? 0.0f : 1.0f, x->grad, IN);
}

void gf_linear_dw_cols(gf_ctx *ctx, const gf_tensor *x, gf_tensor *w, int64_t c0, int fresh, const float *G) {
    int N = gf_blas_int(gf_tensor_rows(x)), IN = gf_blas_int(gf_tensor_cols(x)), OUT = gf_blas_int(w->shape[0]);
    gf_gemm_dw(ctx, N, OUT, IN, G, OUT, x->data, IN, fresh ? 0.0f : 1.0f, w->grad + c0, w->shape[1]);
}

void gf_linear_grads(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, const float *G) {
    gf_linear_dx_cols(ctx, x, w, 0, G);
    if (gf_needs_grad(w)) gf_linear_dw_cols(ctx, x, w, 0, gf_grad_fresh(w), G);
}

/* backward, with G = dL/dY (N, OUT):
 *   dX (N, IN)  += G · W          (sgemm NN)
 *   dW (OUT, IN) += G^T · X       (sgemm TN)
 *   db (OUT)    += sum_rows G
 */
static void linear_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const float *G = n->out->grad; // (N, OUT)
    gf_linear_grads(ctx, x, w, G);
    if (gf_needs_grad(b)) {
        int64_t N = gf_tensor_rows(x), OUT = w->shape[0];
        if (gf_grad_fresh(b)) memset(b->grad, 0, (size_t)OUT * sizeof(float));
        gf_colsum_acc(ctx, b->grad, G, NULL, N, OUT);
    }
}

void gf_linear_cols_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, int64_t c0, const gf_tensor *b,
                         int add, float *y) {
    int N = gf_blas_int(gf_tensor_rows(x)), IN = gf_blas_int(gf_tensor_cols(x)), OUT = gf_blas_int(w->shape[0]);
    int ldw = gf_blas_int(w->shape[1]);
    GF_ASSERT(!(b && add), "linear: a bias with add");
    float beta = add ? 1.0f : 0.0f;
    if (ctx->grad_enabled && gf_needs_grad(w)) gf_gemm_dw_hold_x(ctx, N, OUT, IN, x->data, IN);
    if (N == 1 && ctx->precision == GF_PREC_FP32) { /* one row (a decode step): OpenBLAS's gemm does not forward to gemv itself */
        if (b) memcpy(y, b->data, (size_t)OUT * sizeof(float)), beta = 1.0f;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, OUT, IN, 1.0f, w->data + c0, ldw, x->data, 1, beta, y, 1);
    } else if (b) {
        gf_gemm_bias(ctx, 0, 1, N, OUT, IN, x->data, IN, w->data + c0, ldw, b->data, y, OUT);
    } else {
        gf_gemm(ctx, 0, 1, N, OUT, IN, x->data, IN, w->data + c0, ldw, beta, y, OUT);
    }
}

void gf_linear_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, const gf_tensor *b, float *y) {
    gf_linear_cols_into(ctx, x, w, 0, b, 0, y);
}

gf_tensor *gf_linear(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    gf_linear_check("linear", x, w, b);
    gf_tensor *in[3] = {x, w, b};
    const gf_backend_ops *dev = gf_op_backend("linear", 3, in);
    if (dev) return dev->linear(ctx, x, w, b);
    gf_tensor *y = gf_tensor_like_cols(ctx, x, w->shape[0]); // (N, OUT)
    gf_linear_into(ctx, x, w, b, y->data);
    gf_tape_record(ctx, &gf_op_linear, y, 3, in);
    gf_prof_end(ctx, GF_FAM_GEMM, t0);
    return y;
}

const gf_op_def gf_op_linear = {"linear", GF_FAM_GEMM, linear_backward, 1};
