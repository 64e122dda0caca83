/* gemm_peak.c — what cuBLAS SGEMM reaches on this GPU: the denominator of `gflow bench`'s MFU
 * on the device, as cblas_sgemm's is on the CPU (src/cli/cmd_bench.c). See gflow/cuda.h.
 *
 * The product is the one the model's linear layers and tied head compute, row-major
 * Y (m, n) = X (m, k) · Wᵀ with W (n, k): for cuBLAS (column-major) Yᵀ = W · Xᵀ, the call of
 * src/ops/cuda/linear.cu's forward, sgemm(T, N, n, m, k). The operands hold pseudo-random
 * values in [-1, 1) (zeros would draw less power and flatter the GPU). Timing is by CUDA events
 * on the stream: two untimed calls first, then each rep times enough back-to-back calls to last
 * about a millisecond (a small GEMM alone is shorter than the events' resolution and a launch);
 * the best rep counts, as on the CPU.
 */
#include "gflow/cuda.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* n floats of the LCG stream from seed, uploaded in chunks of 1 Mi floats */
static gf_status fill(float *dev, size_t n, uint64_t seed) {
    const size_t chunk = (size_t)1 << 20;
    float *h = malloc((n < chunk ? n : chunk) * sizeof(float));
    if (!h) return gf_error_set(GF_E_NOMEM, "gemm peak: %zu bytes of host staging", chunk * sizeof(float));
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    gf_status st = GF_OK;
    for (size_t at = 0; at < n && !st; at += chunk) {
        size_t len = n - at < chunk ? n - at : chunk;
        for (size_t i = 0; i < len; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            h[i] = (float)((double)(x >> 40) / (double)(1ull << 23) - 1.0); /* [-1, 1) */
        }
        st = gf_cuda_upload(dev + at, h, len * sizeof(float));
    }
    free(h);
    return st;
}

/* seconds per call, best of reps; the buffers and events belong to the caller */
static gf_status time_calls(int m, int n, int k, const float *a, const float *b, float *c, int reps,
                            cudaEvent_t e0, cudaEvent_t e1, double *best) {
    cublasHandle_t h = gf_cuda_blas();
    cudaStream_t st = gf_cuda_stream();
    const float one = 1.0f, zero = 0.0f;
#define GEMM() GF_CUBLAS_TRY(gf_cublas.sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, k, a, k, &zero, c, n))
    GEMM();
    GEMM();
    /* one timed call sizes the batch: about 1 ms of calls, at least 1, at most 1000 */
    float ms = 0;
    GF_CUDA_TRY(cudaEventRecord(e0, st));
    GEMM();
    GF_CUDA_TRY(cudaEventRecord(e1, st));
    GF_CUDA_TRY(cudaEventSynchronize(e1));
    GF_CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    int inner = ms > 0 ? (int)ceil(1.0 / ms) : 1000;
    if (inner < 1) inner = 1;
    if (inner > 1000) inner = 1000;
    *best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        GF_CUDA_TRY(cudaEventRecord(e0, st));
        for (int i = 0; i < inner; i++) GEMM();
        GF_CUDA_TRY(cudaEventRecord(e1, st));
        GF_CUDA_TRY(cudaEventSynchronize(e1));
        GF_CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
        double s = 1e-3 * (double)ms / inner;
        if (s < *best) *best = s;
    }
#undef GEMM
    return gf_cuda_sync();
}

gf_status gf_cuda_sgemm_gflops(int64_t m, int64_t n, int64_t k, int tf32, int reps, double *gflops) {
    *gflops = 0;
    if (m < 1 || n < 1 || k < 1 || m > INT_MAX || n > INT_MAX || k > INT_MAX || reps < 1)
        return gf_error_set(GF_E_INVALID, "gemm peak: shape %lld x %lld x %lld, %d reps", (long long)m, (long long)n,
                            (long long)k, reps);
    GF_TRY(gf_cuda_init());
    float *a = NULL, *b = NULL, *c = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    gf_status st = gf_cuda_malloc((void **)&a, (size_t)m * (size_t)k * sizeof(float));
    if (!st) st = gf_cuda_malloc((void **)&b, (size_t)n * (size_t)k * sizeof(float));
    if (!st) st = gf_cuda_malloc((void **)&c, (size_t)m * (size_t)n * sizeof(float));
    if (!st) st = fill(a, (size_t)m * (size_t)k, 1);
    if (!st) st = fill(b, (size_t)n * (size_t)k, 2);
    if (!st) st = gf_cuda_status(cudaEventCreate(&e0), "cudaEventCreate(&e0)", __FILE__, __LINE__);
    if (!st) st = gf_cuda_status(cudaEventCreate(&e1), "cudaEventCreate(&e1)", __FILE__, __LINE__);
    cublasMath_t mode0 = CUBLAS_DEFAULT_MATH; /* the handle is the process's: put back what was set */
    if (!st && tf32) st = gf_cublas_status(gf_cublas.get_math_mode(gf_cuda_blas(), &mode0), "cublasGetMathMode",
                                           __FILE__, __LINE__);
    int switched = !st && tf32;
    if (switched)
        st = gf_cublas_status(gf_cublas.set_math_mode(gf_cuda_blas(), CUBLAS_TF32_TENSOR_OP_MATH),
                              "cublasSetMathMode(TF32)", __FILE__, __LINE__);
    double best = 0;
    if (!st) st = time_calls((int)m, (int)n, (int)k, a, b, c, reps, e0, e1, &best);
    if (switched) /* back to the mode found, the measurement's error first */
        gf_cublas_note(gf_cublas.set_math_mode(gf_cuda_blas(), mode0), "cublasSetMathMode(restore)", __FILE__,
                       __LINE__);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    gf_cuda_free(a);
    gf_cuda_free(b);
    gf_cuda_free(c);
    gf_status after = gf_cuda_sync(); /* a noted failure of the frees or the mode */
    if (!st) st = after;
    if (!st) *gflops = 2.0 * (double)m * (double)n * (double)k / best * 1e-9;
    return st;
}
