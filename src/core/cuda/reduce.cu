/* reduce.cu — Σ x² over a float array, in double, deterministic: gf_cuda_sumsq (gflow/cuda.h),
 * the global gradient norm of a device parameter block (gf_params_grad_sumsq), so the clipping
 * and the non-finite check of the training step; gf_cuda_sumsq_to leaves it in device memory (a
 * step that does not wait). gf_cuda_first_nonfinite: the lowest index of a non-finite element,
 * the same two stages with a minimum (over doubles: an index < 2^53 is exact in one).
 *
 * Stage 1: G = clamp(ceil(n / (SUMSQ_THREADS · 8)), 1, GF_SUMSQ_BLOCKS) blocks of SUMSQ_THREADS
 * threads; thread t of block b adds x[i]² for i = b·T + t, then + G·T, ... in increasing i, in
 * double (a float's square is exact in double, so a fused multiply-add rounds the same as the
 * multiply and the add); then the block reduces its T sums (block_sum: a fixed xor butterfly
 * within each warp, then warp 0 does the same over the warps' sums) and writes part[b].
 * Stage 2: one block of GF_SUMSQ_BLOCKS threads, thread t takes part[t] (0 past G), the same block
 * reduction, the total into scratch[GF_SUMSQ_BLOCKS]; one 8-byte copy back to the host.
 * Every order depends on n alone: the same n gives the same bits on every run; no atomics.
 */
#include "gflow/cuda.h"

#include <math.h>

#define SUMSQ_THREADS 256

static double *scratch; /* (GF_SUMSQ_BLOCKS + 1) doubles: the partials, then the total */

/* a + b, or (is_min) the smaller of the two */
__device__ static inline double combine(double a, double b, int is_min) { return is_min ? fmin(a, b) : a + b; }

__device__ static double warp_reduce(double v, int is_min) {
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o), is_min);
    return v;
}

/* the sum (or minimum) over a block (blockDim.x a multiple of 32, at most 1024), valid in
 * thread 0; idle: what a missing warp contributes (0 or +inf); called once per kernel (its
 * shared array is not reused) */
__device__ static double block_reduce(double v, int is_min, double idle) {
    __shared__ double warps[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_reduce(v, is_min);
    if (lane == 0) warps[w] = v;
    __syncthreads();
    if (w == 0) v = warp_reduce(lane < (int)(blockDim.x >> 5) ? warps[lane] : idle, is_min);
    return v;
}
__device__ static double block_sum(double v) { return block_reduce(v, 0, 0.0); }

__global__ static void __launch_bounds__(SUMSQ_THREADS) sumsq_part(const float *__restrict__ x, int64_t n, double *__restrict__ part) {
    double s = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double d = (double)x[i];
        s += d * d;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* 1,024 threads: the bounds tell the compiler to fit its registers to that */
__global__ static void __launch_bounds__(GF_SUMSQ_BLOCKS) sumsq_final(const double *__restrict__ part, int nb, double *__restrict__ out) {
    double s = (int)threadIdx.x < nb ? part[threadIdx.x] : 0.0;
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

/* the stage-1 grid for n elements */
static unsigned reduce_blocks(int64_t n) {
    int64_t g = (n + SUMSQ_THREADS * 8 - 1) / (SUMSQ_THREADS * 8);
    if (g < 1) g = 1;
    if (g > GF_SUMSQ_BLOCKS) g = GF_SUMSQ_BLOCKS;
    return (unsigned)g;
}

static gf_status scratch_ready(void) {
    GF_TRY(gf_cuda_init());
    if (!scratch) GF_TRY(gf_cuda_malloc((void **)&scratch, (GF_SUMSQ_BLOCKS + 1) * sizeof(double)));
    return GF_OK;
}

extern "C" gf_status gf_cuda_sumsq_to(const float *x, int64_t n, double *out_dev) {
    GF_ASSERT(n >= 0, "gf_cuda_sumsq: %lld elements", (long long)n);
    GF_TRY(scratch_ready());
    const unsigned g = reduce_blocks(n);
    cudaStream_t st = gf_cuda_stream();
    sumsq_part<<<g, SUMSQ_THREADS, 0, st>>>(x, n, scratch);
    GF_CUDA_LAUNCHED("sumsq_part", 4 * n + 8 * (int64_t)g);
    sumsq_final<<<1, GF_SUMSQ_BLOCKS, 0, st>>>(scratch, (int)g, out_dev);
    GF_CUDA_LAUNCHED("sumsq_final", 8 * (int64_t)g + 8);
    return GF_OK;
}

extern "C" gf_status gf_cuda_sumsq(const float *x, int64_t n, double *out) {
    *out = NAN;
    GF_TRY(scratch_ready());
    GF_TRY(gf_cuda_sumsq_to(x, n, scratch + GF_SUMSQ_BLOCKS));
    double s = NAN;
    GF_TRY(gf_cuda_download(&s, scratch + GF_SUMSQ_BLOCKS, sizeof s));
    *out = s;
    return GF_OK;
}

/* The lowest i with x[i] not finite, as a double (+inf: none); both stages return at once
 * unless *when (every thread reads the same flag, so no barrier is left half-reached). */
__global__ static void __launch_bounds__(SUMSQ_THREADS) nonfinite_part(const float *__restrict__ x, int64_t n,
                                                                        const int32_t *__restrict__ when,
                                                                        double *__restrict__ part) {
    if (!*when) return;
    double lo = INFINITY;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) {
            lo = (double)i; /* increasing i: the thread's first is its lowest */
            break;
        }
    lo = block_reduce(lo, 1, INFINITY);
    if (threadIdx.x == 0) part[blockIdx.x] = lo;
}

__global__ static void __launch_bounds__(GF_SUMSQ_BLOCKS) nonfinite_final(const double *__restrict__ part, int nb,
                                                                          const int32_t *__restrict__ when,
                                                                          int64_t *__restrict__ out) {
    if (!*when) return;
    double lo = (int)threadIdx.x < nb ? part[threadIdx.x] : INFINITY;
    lo = block_reduce(lo, 1, INFINITY);
    if (threadIdx.x == 0) *out = isfinite(lo) ? (int64_t)lo : -1;
}

extern "C" gf_status gf_cuda_first_nonfinite(const float *x, int64_t n, const int32_t *when_dev, int64_t *out_dev) {
    GF_ASSERT(n >= 0 && n < ((int64_t)1 << 53), "gf_cuda_first_nonfinite: %lld elements", (long long)n);
    GF_TRY(scratch_ready());
    const unsigned g = reduce_blocks(n);
    cudaStream_t st = gf_cuda_stream();
    nonfinite_part<<<g, SUMSQ_THREADS, 0, st>>>(x, n, when_dev, scratch);
    GF_CUDA_LAUNCHED("nonfinite_part", 4 * n + 8 * (int64_t)g + 4);
    nonfinite_final<<<1, GF_SUMSQ_BLOCKS, 0, st>>>(scratch, (int)g, when_dev, out_dev);
    GF_CUDA_LAUNCHED("nonfinite_final", 8 * (int64_t)g + 12);
    return GF_OK;
}
