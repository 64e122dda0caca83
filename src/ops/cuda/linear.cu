/* linear.cu — y = x W^T + b on the GPU through cuBLAS (FP32); the CPU op is src/ops/linear.c.
 *
 * forward:  Y (N, OUT) = X (N, IN) · W^T (IN, OUT) + b (OUT)
 * Each product is one row-major GEMM (cu_gemm_rm in cu_util.cuh: cuBLAS with the operands
 * swapped, nothing copied). The bias is written into Y first and the GEMM adds to it (beta = 1),
 * as on the CPU. The product and the backward's GEMMs are also the fused linear_gelu.cu's
 * (cu_linear_into, cu_linear_grads) and, on a column block of W read through its row stride,
 * concat_linear.cu's (cu_linear_cols_into, cu_linear_dx_cols, cu_linear_dw_cols).
 */
#include "cu_util.cuh"

void cu_linear_dx_cols(gf_ctx *ctx, gf_tensor *x, const gf_tensor *w, int64_t c0, const float *G) {
    if (!gf_needs_grad(x)) return;
    int64_t N = gf_tensor_rows(x), IN = gf_tensor_cols(x), OUT = w->shape[0];
    cu_gemm_rm(ctx, 0, 0, N, IN, OUT, G, OUT, w->data + c0, w->shape[1], gf_grad_fresh(x) ? 0.0f : 1.0f, x->grad, IN);
}

void cu_linear_dw_cols(gf_ctx *ctx, const gf_tensor *x, gf_tensor *w, int64_t c0, int fresh, const float *G) {
    int64_t N = gf_tensor_rows(x), IN = gf_tensor_cols(x), OUT = w->shape[0];
    cu_gemm_rm(ctx, 1, 0, OUT, IN, N, G, OUT, x->data, IN, fresh ? 0.0f : 1.0f, w->grad + c0, w->shape[1]);
}

void cu_linear_grads(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, const float *G) {
    const int64_t N = gf_tensor_rows(x), OUT = w->shape[0];
    /* in bf16 both products read one rounded copy of G */
    const int held = gf_needs_grad(x) && gf_needs_grad(w) ? cu_bf16_hold(ctx, G, N, OUT, OUT) : 0;
    cu_linear_dx_cols(ctx, x, w, 0, G);
    if (gf_needs_grad(w)) cu_linear_dw_cols(ctx, x, w, 0, gf_grad_fresh(w), G);
    cu_bf16_release(held);
}

/* backward, with G = dL/dY (N, OUT):
 *   dX (N, IN)   += G · W          (cu_gemm_rm N, N)
 *   dW (OUT, IN) += G^T · X        (cu_gemm_rm T, N)
 *   db (OUT)     += sum_rows G     (cu_colsum, fixed order)
 * A fresh gradient (gf_grad_fresh) is stored: beta 0 for the GEMMs, a store for the sum. */
static void linear_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const float *G = n->out->grad; // (N, OUT)
    cu_linear_grads(ctx, x, w, G);
    if (gf_needs_grad(b))
        cu_colsum(ctx, b->grad, gf_tensor_rows(x), w->shape[0], gf_grad_fresh(b), cu_rows{G, w->shape[0]});
}

static const gf_op_def linear_cuda = {"linear", GF_FAM_GEMM, linear_backward_cuda, 1};

/* y[r, o] = b[o] */
__global__ static void bias_rows(float *y, const float *b, int64_t n, int64_t OUT) {
    CU_FOR(i, n) y[i] = b[i % OUT];
}

void cu_linear_cols_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, int64_t c0, const gf_tensor *b, int add,
                         float *y) {
    int64_t N = gf_tensor_rows(x), IN = gf_tensor_cols(x), OUT = w->shape[0];
    if (b) {
        int64_t n = N * OUT;
        bias_rows<<<cu_blocks(n, 256), 256, 0, gf_cuda_stream()>>>(y, b->data, n, OUT);
        GF_CUDA_LAUNCHED("bias_rows", 4 * (n + OUT));
    }
    if (ctx->grad_enabled && gf_needs_grad(w)) cu_bf16_keep(ctx, x->data, N, IN, IN); /* bf16: dW reads it again */
    cu_gemm_rm(ctx, 0, 1, N, OUT, IN, x->data, IN, w->data + c0, w->shape[1], b || add ? 1.0f : 0.0f, y, OUT);
}

void cu_linear_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, const gf_tensor *b, float *y) {
    cu_linear_cols_into(ctx, x, w, 0, b, 0, y);
}

gf_tensor *gf_linear_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b) {
    gf_tensor *y = cu_tensor_like_cols(ctx, x, w->shape[0]); // (N, OUT)
    cu_linear_into(ctx, x, w, b, y->data);
    gf_tensor *in[3] = {x, w, b};
    gf_tape_record(ctx, &linear_cuda, y, 3, in);
    return y;
}
