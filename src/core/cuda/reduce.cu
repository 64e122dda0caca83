/* reduce.cu — Σ x² over a float array, in double, deterministic: gf_cuda_sumsq (gflow/cuda.h),
 * the global gradient norm of a device parameter block (gf_params_grad_sumsq), so the clipping
 * and the non-finite check of the training step.
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

__device__ static double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* the sum over a block (blockDim.x a multiple of 32, at most 1024), valid in thread 0; called
 * once per kernel (its shared array is not reused) */
__device__ static double block_sum(double v) {
    __shared__ double warps[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warps[w] = v;
    __syncthreads();
    if (w == 0) v = warp_sum(lane < (int)(blockDim.x >> 5) ? warps[lane] : 0.0);
    return v;
}

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

extern "C" gf_status gf_cuda_sumsq(const float *x, int64_t n, double *out) {
    *out = NAN;
    GF_ASSERT(n >= 0, "gf_cuda_sumsq: %lld elements", (long long)n);
    GF_TRY(gf_cuda_init());
    if (!scratch) GF_CUDA_TRY(cudaMalloc((void **)&scratch, (GF_SUMSQ_BLOCKS + 1) * sizeof(double)));
    int64_t g = (n + SUMSQ_THREADS * 8 - 1) / (SUMSQ_THREADS * 8);
    if (g < 1) g = 1;
    if (g > GF_SUMSQ_BLOCKS) g = GF_SUMSQ_BLOCKS;
    cudaStream_t st = gf_cuda_stream();
    sumsq_part<<<(unsigned)g, SUMSQ_THREADS, 0, st>>>(x, n, scratch);
    GF_CUDA_LAUNCHED("sumsq_part");
    sumsq_final<<<1, GF_SUMSQ_BLOCKS, 0, st>>>(scratch, (int)g, scratch + GF_SUMSQ_BLOCKS);
    GF_CUDA_LAUNCHED("sumsq_final");
    double s = NAN;
    GF_TRY(gf_cuda_download(&s, scratch + GF_SUMSQ_BLOCKS, sizeof s));
    *out = s;
    return GF_OK;
}
