/* cu_loss.cuh — what the two loss ops on the GPU share (cross_entropy.cu, head_ce.cu; internal).
 *
 * One thread block per row of logits (V columns). Thread k takes columns k, k + blockDim.x, ...;
 * a row's max and sum of exponentials are combined over the block in a fixed order (a butterfly
 * within each warp, then the warps' values in warp order, read by every thread), so the result
 * depends only on the shape and the same bits come back run to run. The CPU ops sum the exps in
 * float within blocks of 256 columns and in double across them; here each thread sums its own
 * columns in float (V / blockDim.x of them: 30 at V = 30,522) and the threads' sums are added in
 * double: the same precision in both places. exp is CUDA's expf (≤ 2 ulp, no fast math) where
 * the CPU has gf_expf (≤ 2 ulp); log of the double sum is in double on both.
 *
 * The per-row losses (double) are added into the mean by one block, again in a fixed order
 * (cu_nll_mean), never by atomics. The sum is read back to the host only when the caller asks
 * for it (nll_sum non-NULL): that is a synchronisation of the stream.
 */
#ifndef GF_CU_LOSS_CUH
#define GF_CU_LOSS_CUH

#include "cu_util.cuh"

#include <math.h>

#define CU_LOSS_MAX_THREADS 1024 /* blockDim.x of the row kernels: a multiple of 32, at most 1024 */

/* threads per row: enough for the row to be read in a few sweeps, a full warp at least */
static inline int cu_row_threads(int64_t V) { return V >= 8192 ? 1024 : 256; }

/* the block's max of v; every thread gets it (blockDim.x a multiple of 32) */
__device__ static inline float cu_block_max(float v) {
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    __syncthreads(); /* sh may still be read by an earlier call */
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    v = sh[0];
    for (unsigned k = 1; k < blockDim.x / 32; k++) v = sh[k] > v ? sh[k] : v;
    return v;
}

/* the block's sum of v, warps added in warp order; every thread gets the same bits */
__device__ static inline double cu_block_sum(double v) {
    __shared__ double sh[32];
    v = cu_warp_sum(v);
    __syncthreads();
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    v = sh[0];
    for (unsigned k = 1; k < blockDim.x / 32; k++) v += sh[k];
    return v;
}

/* m = max_j l[j] and s = Σ_j exp(l[j] - m) of one row, by the whole block (every thread must
 * call it; every thread gets both). m is subtracted so that exp never overflows. Reads l only. */
__device__ static inline void cu_row_stats(const float *l, int64_t V, float *m, double *s) {
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = l[j] > mx ? l[j] : mx;
    mx = cu_block_max(mx);
    float ts = 0.0f;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) ts += expf(l[j] - mx);
    *m = mx;
    *s = cu_block_sum((double)ts);
}

/* tot[0] = Σ_i nll[i] (ignored rows hold 0), y[0] = cnt ? tot / cnt : 0 (the CPU ops' loss);
 * one block: thread k adds rows k, k + blockDim.x, ... in double, then cu_block_sum */
__global__ static void cu_nll_mean(float *y, double *tot, const double *nll, int64_t N, int64_t cnt) {
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += nll[i];
    s = cu_block_sum(s);
    if (threadIdx.x == 0) {
        tot[0] = s;
        y[0] = cnt ? (float)(s / (double)cnt) : 0.0f;
    }
}

/* the scalar loss y (1) and the device sum of nll (N) into it, read back into *nll_sum when asked */
static inline gf_tensor *cu_loss_mean(gf_ctx *ctx, const double *nll, int64_t N, int64_t cnt, double *nll_sum) {
    int64_t one = 1;
    gf_tensor *y = gf_cuda_tensor_new(ctx, 1, &one); // (1)
    double *tot = (double *)gf_cuda_arena_alloc(ctx->cuda, sizeof(double));
    cu_nll_mean<<<1, 256, 0, gf_cuda_stream()>>>(y->data, tot, nll, N, cnt);
    GF_CUDA_LAUNCHED("cu_nll_mean", 8 * N + 4 + 8);
    if (nll_sum) { /* a synchronisation: the GPU step should pass NULL and read y when it logs */
        *nll_sum = NAN;
        GF_CUDA_NOTE(cudaMemcpyAsync(nll_sum, tot, sizeof(double), cudaMemcpyDeviceToHost, gf_cuda_stream()));
        GF_CUDA_NOTE(cudaStreamSynchronize(gf_cuda_stream()));
    }
    return y;
}

/* the number of rows whose target is not ignore_index; a counted target outside [0, V) aborts,
 * with the CPU op's message (targets are host data, checked before anything is launched) */
static inline int64_t cu_count_targets(const char *op, const int32_t *targets, int64_t N, int64_t V,
                                       int32_t ignore_index) {
    int64_t cnt = 0;
    for (int64_t i = 0; i < N; i++) {
        if (targets[i] == ignore_index) continue;
        GF_ASSERT(targets[i] >= 0 && targets[i] < V, "%s: target %d at row %lld outside [0, %lld)", op, targets[i],
                  (long long)i, (long long)V);
        cnt++;
    }
    return cnt;
}

#endif
