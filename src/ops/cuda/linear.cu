/* linear.cu — y = x W^T + b on the GPU through cuBLAS (FP32); the CPU op is src/ops/linear.c.
 *
 * forward:  Y (N, OUT) = X (N, IN) · W^T (IN, OUT) + b (OUT)
 * gflow is row-major and cuBLAS column-major. A row-major (m, k) matrix is, read column-major,
 * its transpose (k, m) with leading dimension k; so each product is computed transposed, with
 * the operands swapped, and nothing is copied:
 *   Y^T (OUT, N)  = W (OUT, IN) · X^T (IN, N):   sgemm(T, N, OUT, N, IN,  W ld IN, X ld IN, Y ld OUT)
 * The bias is written into Y first and the GEMM adds to it (beta = 1), as on the CPU.
 */
#include "cu_util.cuh"

/* backward, with G = dL/dY (N, OUT):
 *   dX (N, IN)   += G · W      ->  dX^T (IN, N)  = W^T (IN, OUT) · G^T (OUT, N):  sgemm(N, N, IN, N, OUT)
 *   dW (OUT, IN) += G^T · X    ->  dW^T (IN, OUT) = X^T (IN, N) · G (N, OUT):     sgemm(N, T, IN, OUT, N)
 *   db (OUT)     += sum_rows G     (cu_colsum, fixed order)
 * A fresh gradient (gf_grad_fresh) is stored: beta 0 for the GEMMs, a store for the sum. */
static void linear_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const float *G = n->out->grad; // (N, OUT)
    int N = gf_blas_int(gf_tensor_rows(x)), IN = gf_blas_int(w->shape[1]), OUT = gf_blas_int(w->shape[0]);
    cublasHandle_t h = gf_cuda_blas();
    const float one = 1.0f, zero = 0.0f;
    if (gf_needs_grad(x))
        GF_CUBLAS_NOTE(gf_cublas.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, IN, N, OUT, &one, w->data, IN, G, OUT,
                                   gf_grad_fresh(x) ? &zero : &one, x->grad, IN));
    if (gf_needs_grad(w))
        GF_CUBLAS_NOTE(gf_cublas.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, N, &one, x->data, IN, G, OUT,
                                   gf_grad_fresh(w) ? &zero : &one, w->grad, IN));
    if (gf_needs_grad(b)) cu_colsum(ctx, b->grad, N, OUT, gf_grad_fresh(b), cu_rows{G, OUT});
}

static const gf_op_def linear_cuda = {"linear", GF_FAM_GEMM, linear_backward_cuda, 1};

/* y[r, o] = b[o] */
__global__ static void bias_rows(float *y, const float *b, int64_t n, int64_t OUT) {
    CU_FOR(i, n) y[i] = b[i % OUT];
}

gf_tensor *gf_linear_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b) {
    int N = gf_blas_int(gf_tensor_rows(x)), IN = gf_blas_int(w->shape[1]), OUT = gf_blas_int(w->shape[0]);
    gf_tensor *y = cu_tensor_like_cols(ctx, x, OUT); // (N, OUT)
    const float one = 1.0f, zero = 0.0f;
    if (b) {
        int64_t n = (int64_t)N * OUT;
        bias_rows<<<cu_blocks(n, 256), 256, 0, gf_cuda_stream()>>>(y->data, b->data, n, OUT);
        GF_CUDA_LAUNCHED("bias_rows");
    }
    GF_CUBLAS_NOTE(gf_cublas.sgemm(gf_cuda_blas(), CUBLAS_OP_T, CUBLAS_OP_N, OUT, N, IN, &one, w->data, IN, x->data, IN,
                               b ? &one : &zero, y->data, OUT));
    gf_tensor *in[3] = {x, w, b};
    gf_tape_record(ctx, &linear_cuda, y, 3, in);
    return y;
}
