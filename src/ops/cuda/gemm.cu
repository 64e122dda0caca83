/* gemm.cu — cu_gemm_rm (cu_util.cuh), the one GEMM of the CUDA ops, in fp32 or bf16.
 *
 * gflow is row-major and cuBLAS column-major; a row-major (m, k) matrix with row stride ld is,
 * read column-major, its transpose (k, m) with leading dimension ld. So C^T = op(B)^T · op(A)^T
 * is computed with the operands swapped and nothing is moved:
 *   gemm(tb, ta, N, M, K, B ldb, A lda, beta, C ldc).
 * bf16 ([run] precision = bf16): each operand is rounded into a dense bf16 copy in its stored
 * layout (the CPU path's pack, src/ops/gemm.c, so both devices multiply the same values), in the
 * runtime's reusable scratch (gf_cuda_scratch: the copies live only until the product is done),
 * then cublasGemmEx with bf16 inputs, fp32 compute and an fp32 C: parameters, gradients and
 * everything between the products stay fp32.
 */
#include "cu_util.cuh"

#include <cuda_bf16.h>

/* dst (rows, cols), dense = src (rows, cols; row stride ld) rounded to bf16 */
__global__ static void to_bf16(__nv_bfloat16 *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    CU_FOR(i, rows * cols) dst[i] = __float2bfloat16_rn(src[(i / cols) * ld + i % cols]);
}

static void round_into(__nv_bfloat16 *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    to_bf16<<<cu_blocks(rows * cols, 256), 256, 0, gf_cuda_stream()>>>(dst, src, rows, cols, ld);
    GF_CUDA_LAUNCHED("to_bf16", 6 * rows * cols);
}

static size_t padded(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

void cu_gemm_rm(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    const float one = 1.0f;
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (ctx->precision != GF_PREC_BF16 || M == 0 || N == 0 || K == 0) {
        GF_CUBLAS_NOTE(gf_cublas.sgemm(gf_cuda_blas(), opb, opa, gf_blas_int(N), gf_blas_int(M), gf_blas_int(K), &one,
                                       B, gf_blas_int(ldb), A, gf_blas_int(lda), &beta, C, gf_blas_int(ldc)));
        return;
    }
    /* stored shapes: A is (M, K), or (K, M) transposed; B is (K, N), or (N, K) */
    const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const size_t abytes = padded((size_t)(ar * ac) * sizeof(__nv_bfloat16));
    unsigned char *s = (unsigned char *)gf_cuda_scratch(abytes + (size_t)(br * bc) * sizeof(__nv_bfloat16));
    if (!s) return; /* noted */
    __nv_bfloat16 *a16 = (__nv_bfloat16 *)s, *b16 = (__nv_bfloat16 *)(s + abytes);
    round_into(a16, A, ar, ac, lda);
    round_into(b16, B, br, bc, ldb);
    GF_CUBLAS_NOTE(gf_cublas.gemm_ex(gf_cuda_blas(), opb, opa, gf_blas_int(N), gf_blas_int(M), gf_blas_int(K), &one,
                                     b16, CUDA_R_16BF, gf_blas_int(bc), a16, CUDA_R_16BF, gf_blas_int(ac), &beta, C,
                                     CUDA_R_32F, gf_blas_int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
