/* concat_linear.cu — u = [a ; b] · W^T + bias without the concatenation, on the GPU; the CPU op
 * is src/ops/concat_linear.c. linear.cu's product on each column block of W, read in place through
 * W's row stride (cu_linear_cols_into: bias_rows, then a GEMM with beta 1 per input), and its
 * backward GEMMs per block (cu_linear_dx_cols, cu_linear_dw_cols). Kernels (besides cuBLAS's):
 * bias_rows forward, the bias's column sum (two) backward; against linear(concat(a, b)) no concat
 * kernel forward and none per input backward, one GEMM more forward and two more backward.
 */
#include "cu_util.cuh"

/* backward, with G = dL/du (N, OUT):
 *   da += G · W[:, :Da] ;  db += G · W[:, Da:]                (cu_linear_dx_cols)
 *   dW[:, :Da] += G^T · a ;  dW[:, Da:] += G^T · b           (cu_linear_dw_cols, W's flag read once)
 *   dbias += Σ_rows G                                         (cu_colsum, fixed order)
 * A fresh gradient is stored (beta 0, a store for the sum); a and b may be one tensor. */
void cu_concat_linear_grads(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, const float *G) {
    const int64_t Da = gf_tensor_cols(a);
    const int held = cu_bf16_hold(ctx, G, gf_tensor_rows(a), w->shape[0], w->shape[0]); /* bf16: G rounded once */
    cu_linear_dx_cols(ctx, a, w, 0, G);
    cu_linear_dx_cols(ctx, b, w, Da, G);
    if (gf_needs_grad(w)) {
        const int fresh = gf_grad_fresh(w);
        cu_linear_dw_cols(ctx, a, w, 0, fresh, G);
        cu_linear_dw_cols(ctx, b, w, Da, fresh, G);
    }
    cu_bf16_release(held);
}

static void concat_linear_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1], *w = n->in[2], *bias = n->in[3];
    const float *G = n->out->grad; // (N, OUT)
    const int64_t OUT = w->shape[0];
    cu_concat_linear_grads(ctx, a, b, w, G);
    if (gf_needs_grad(bias)) cu_colsum(ctx, bias->grad, gf_tensor_rows(a), OUT, gf_grad_fresh(bias), cu_rows{G, OUT});
}

static const gf_op_def concat_linear_cuda = {"concat_linear", GF_FAM_GEMM, concat_linear_backward_cuda, 1};

/* the entry has checked the shapes */
gf_tensor *gf_concat_linear_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias) {
    gf_tensor *u = cu_tensor_like_cols(ctx, a, w->shape[0]); // (N, OUT)
    cu_linear_cols_into(ctx, a, w, 0, bias, 0, u->data);
    cu_linear_cols_into(ctx, b, w, gf_tensor_cols(a), NULL, 1, u->data);
    gf_tensor *in[4] = {a, b, w, bias};
    gf_tape_record(ctx, &concat_linear_cuda, u, 4, in);
    return u;
}
