/* gemm.cu — cu_gemm_rm (cu_util.cuh), the one GEMM of the CUDA ops, in fp32 or bf16.
 *
 * gflow is row-major and cuBLAS column-major; a row-major (m, k) matrix with row stride ld is,
 * read column-major, its transpose (k, m) with leading dimension ld. So C^T = op(B)^T · op(A)^T
 * is computed with the operands swapped and nothing is moved:
 *   gemm(tb, ta, N, M, K, B ldb, A lda, beta, C ldc).
 * bf16 ([run] precision = bf16): cublasGemmEx with bf16 inputs, fp32 compute and an fp32 C:
 * parameters, gradients and everything between the products stay fp32. Each operand is read
 * from a rounded copy: the weights' mirror (gf_params_keep_bf16), a copy an op holds for several
 * of its products (cu_bf16_hold: linear's G for dX and dW, the head's rows), or else one rounded
 * here into a dense copy in the runtime's reusable scratch (gf_cuda_scratch: it lives only until
 * the product is done). All are gf_cuda_to_bf16's rounding, the CPU path's pack (src/ops/gemm.c),
 * so both devices multiply the same values, whichever copy a product reads.
 */
#include "cu_util.cuh"

#include <cuda_bf16.h>

/* cu_bf16_hold's copies, innermost last */
static struct {
    const float *src;
    int64_t rows, cols, ld;
    const __nv_bfloat16 *h;
    int written; /* by the caller's kernel (cu_bf16_hold_for): not src's rounding, nothing to check */
} held[CU_BF16_HOLDS];
static int n_held;

/* cu_bf16_keep's copies, each valid until its arena's next reset */
#define CU_BF16_KEPT 512
static struct {
    const float *src;
    int64_t rows, cols, ld;
    const __nv_bfloat16 *h;
    int64_t arena, resets; /* the arena's serial, and its resets when the copy was made */
} kept[CU_BF16_KEPT];
static int n_kept;

/* the copy of p (rows, cols; row stride ld) in a copy of src (its rows, cols; the same ld) */
static const __nv_bfloat16 *inside(const float *p, int64_t rows, int64_t cols, int64_t ld, const float *src,
                                   int64_t srows, int64_t scols, int64_t sld, const __nv_bfloat16 *h) {
    const int64_t at = p - src;
    return sld == ld && at >= 0 && at / ld + rows <= srows && at % ld + cols <= scols ? h + at : NULL;
}

/* an operand's rounded copy made already, with the operand's row stride: held (the innermost
 * first), kept in this step, or the weights' mirror (gf_cuda_bf16_mirror_of); NULL when it must be
 * rounded. With gf_cuda_bf16_reuse(2) the copy is checked against its source first. */
static const __nv_bfloat16 *reuse(const gf_ctx *ctx, const float *p, int64_t rows, int64_t cols, int64_t ld) {
    if (!gf_cuda_bf16_reuse(-1)) return NULL;
    const __nv_bfloat16 *h = NULL;
    for (int i = n_held - 1; i >= 0 && !h; i--)
        if ((h = inside(p, rows, cols, ld, held[i].src, held[i].rows, held[i].cols, held[i].ld, held[i].h)) &&
            held[i].written)
            return h;
    for (int i = 0; i < n_kept && !h; i++)
        if (kept[i].arena == ctx->cuda->serial && kept[i].resets == ctx->cuda->n_resets)
            h = inside(p, rows, cols, ld, kept[i].src, kept[i].rows, kept[i].cols, kept[i].ld, kept[i].h);
    if (!h) h = (const __nv_bfloat16 *)gf_cuda_bf16_mirror_of(p, (rows - 1) * ld + cols);
    if (h) gf_cuda_bf16_check(h, ld, p, ld, rows, cols);
    return h;
}

/* whether src (rows, cols; row stride ld) wants a copy: bf16, reuse on, and none made already */
static int wants_copy(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    return ctx->precision == GF_PREC_BF16 && rows > 0 && cols > 0 && gf_cuda_bf16_reuse(-1) &&
           !reuse(ctx, src, rows, cols, ld);
}

/* a kept copy's memory, registered; NULL when CU_BF16_KEPT copies are kept this step */
static __nv_bfloat16 *push_kept(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    int n = 0; /* the other steps' copies go */
    for (int i = 0; i < n_kept; i++)
        if (kept[i].arena == ctx->cuda->serial && kept[i].resets == ctx->cuda->n_resets) kept[n++] = kept[i];
    n_kept = n;
    if (n_kept == CU_BF16_KEPT) return NULL; /* the products round their own */
    __nv_bfloat16 *h = (__nv_bfloat16 *)gf_cuda_arena_alloc(ctx->cuda, (size_t)((rows - 1) * ld + cols) * 2);
    kept[n_kept].src = src, kept[n_kept].rows = rows, kept[n_kept].cols = cols, kept[n_kept].ld = ld;
    kept[n_kept].h = h, kept[n_kept].arena = ctx->cuda->serial, kept[n_kept].resets = ctx->cuda->n_resets;
    n_kept++;
    return h;
}

void cu_bf16_keep(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    __nv_bfloat16 *h = wants_copy(ctx, src, rows, cols, ld) ? push_kept(ctx, src, rows, cols, ld) : NULL;
    if (h) gf_cuda_to_bf16(h, ld, src, ld, rows, cols);
}

void *cu_bf16_keep_out(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    return wants_copy(ctx, src, rows, cols, ld) ? push_kept(ctx, src, rows, cols, ld) : NULL;
}

static __nv_bfloat16 *push_held(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld, int written) {
    GF_ASSERT(n_held < CU_BF16_HOLDS, "cu_bf16_hold: more than %d copies held", CU_BF16_HOLDS);
    __nv_bfloat16 *h = (__nv_bfloat16 *)gf_cuda_arena_alloc(ctx->cuda, (size_t)((rows - 1) * ld + cols) * 2);
    held[n_held].src = src, held[n_held].rows = rows, held[n_held].cols = cols, held[n_held].ld = ld;
    held[n_held].written = written;
    held[n_held++].h = h;
    return h;
}

void *cu_bf16_hold_for(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    return push_held(ctx, src, rows, cols, ld, 1);
}

void *cu_bf16_hold_out(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    return wants_copy(ctx, src, rows, cols, ld) ? push_held(ctx, src, rows, cols, ld, 0) : NULL;
}

int cu_bf16_hold(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    if (!wants_copy(ctx, src, rows, cols, ld)) return 0;
    gf_cuda_to_bf16(push_held(ctx, src, rows, cols, ld, 0), ld, src, ld, rows, cols);
    return 1;
}

void cu_bf16_release(int n) {
    GF_ASSERT(n >= 0 && n <= n_held, "cu_bf16_release(%d) with %d held", n, n_held);
    n_held -= n;
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
    const __nv_bfloat16 *a16 = reuse(ctx, A, ar, ac, lda), *b16 = reuse(ctx, B, br, bc, ldb);
    int64_t la = a16 ? lda : ac, lb = b16 ? ldb : bc; /* a copy made here is dense */
    const size_t abytes = a16 ? 0 : padded((size_t)(ar * ac) * sizeof(__nv_bfloat16));
    const size_t bbytes = b16 ? 0 : (size_t)(br * bc) * sizeof(__nv_bfloat16);
    if (abytes + bbytes) {
        unsigned char *s = (unsigned char *)gf_cuda_scratch(abytes + bbytes);
        if (!s) return; /* noted */
        if (!a16) {
            gf_cuda_to_bf16(s, ac, A, lda, ar, ac);
            a16 = (const __nv_bfloat16 *)s;
        }
        if (!b16) {
            gf_cuda_to_bf16(s + abytes, bc, B, ldb, br, bc);
            b16 = (const __nv_bfloat16 *)(s + abytes);
        }
    }
    GF_CUBLAS_NOTE(gf_cublas.gemm_ex(gf_cuda_blas(), opb, opa, gf_blas_int(N), gf_blas_int(M), gf_blas_int(K), &one,
                                     b16, CUDA_R_16BF, gf_blas_int(lb), a16, CUDA_R_16BF, gf_blas_int(la), &beta, C,
                                     CUDA_R_32F, gf_blas_int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
