/* plucker.cuh — the device pieces the two Plücker mixing ops share (plucker_mix.cu,
 * plucker_window.cu; internal to src/ops/cuda).
 *
 * Both ops give one block to each (batch row, position) and one Plücker coordinate k to each
 * thread (k = threadIdx.x, + blockDim.x, ...): the pair p_k = a_i c_j - a_j c_i, (i, j) the
 * k-th pair of the row-major upper triangle, (0,1),(0,2),...,(R-2,R-1), as in the CPU ops. A
 * block's shared memory holds the two vectors of the pair, its threads' pair table, the
 * coordinates it accumulates, and 32 floats for its block sums. The norms and dot products
 * over P are block sums in a fixed order (plk_block_sum), so every kernel is deterministic.
 */
#ifndef GF_PLUCKER_CUH
#define GF_PLUCKER_CUH

#include "cu_util.cuh"

/* threads per block: a warp multiple, one coordinate per thread up to 256 */
static inline int plk_threads(int64_t P) {
    int64_t t = (P + 31) / 32 * 32;
    return t < 32 ? 32 : t > 256 ? 256 : (int)t;
}

/* the first pair of row i: pair (i, j), i < j, is k = plk_row0(i, R) + j - i - 1 */
__device__ static inline int plk_row0(int i, int R) { return i * (2 * R - i - 1) / 2; }

/* (i, j) of pair k < R(R-1)/2, packed i << 16 | j: the root of plk_row0(i) = k, then corrected
 * to the exact row (float rounding moves it by at most one) */
__device__ static inline uint32_t plk_pair(int k, int R) {
    const float b = 2.0f * (float)R - 1.0f;
    int i = (int)((b - sqrtf(fmaxf(b * b - 8.0f * (float)k, 0.0f))) * 0.5f);
    i = i < 0 ? 0 : i > R - 2 ? R - 2 : i;
    while (i > 0 && plk_row0(i, R) > k) i--;
    while (i < R - 2 && plk_row0(i + 1, R) <= k) i++;
    return (uint32_t)i << 16 | (uint32_t)(k - plk_row0(i, R) + i + 1);
}

/* p_k = a_i c_j - a_j c_i for the packed pair ij: both products rounded, as the CPU op's C (no
 * contraction into a fused multiply-add), so p is the CPU's p bit for bit; in particular p = 0
 * exactly for parallel vectors (c = a, c = 2a), where the eps branch must be taken as on the CPU */
__device__ static inline float plk_p(const float *a, const float *c, uint32_t ij) {
    const int i = (int)(ij >> 16), j = (int)(ij & 0xffffu);
    return __fmul_rn(a[i], c[j]) - __fmul_rn(a[j], c[i]);
}

/* Σ v over the block, every thread gets the same value: each warp's sum by shuffles, lane 0's
 * copy to red[warp], then the warps' sums added in warp order. red: 32 floats of shared memory.
 * Holds two __syncthreads (red is free again on return): call it from every thread. */
__device__ static inline float plk_block_sum(float v, float *red) {
    v = cu_warp_sum(v);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float s = red[0];
    for (int w = 1; w < (int)(blockDim.x / 32); w++) s += red[w];
    __syncthreads();
    return s;
}

/* One partner of the block's row a (the forward kernels' inner step): loads it from src into c,
 * adds p = a ∧ c, scaled by 1 / max(|p|, eps) where normalize (else 1), to pb and returns |p|.
 * pr: the pair table. Holds __syncthreads: call it from every thread. */
__device__ static inline float plk_add_partner(const float *a, float *c, const float *src, const uint32_t *pr,
                                               float *pb, float *red, int R, int P, float eps, int normalize) {
    const int tid = threadIdx.x, T = blockDim.x;
    __syncthreads(); /* a is loaded; the previous partner's c is no longer read */
    for (int i = tid; i < R; i += T) c[i] = src[i];
    __syncthreads();
    float ss = 0.0f;
    for (int k = tid; k < P; k += T) {
        const float p = plk_p(a, c, pr[k]);
        ss += p * p;
    }
    const float nrm = sqrtf(plk_block_sum(ss, red));
    const float s = normalize ? 1.0f / (nrm > eps ? nrm : eps) : 1.0f;
    for (int k = tid; k < P; k += T) pb[k] += plk_p(a, c, pr[k]) * s;
    return nrm;
}

/* Σ_j M_ij w_j for the antisymmetric M with M_ij = dp_k (k = pair (i, j), i < j), M_ji = -dp_k.
 * Through p = a ∧ c (da_i += dp_k c_j, da_j -= dp_k c_i, dc_i -= dp_k a_j, dc_j += dp_k a_i):
 * the gradient reaching a is M c (w = c), the one reaching c is -M a (w = a). */
__device__ static inline float plk_contract(const float *dp, const float *w, int i, int R) {
    float s = 0.0f;
    int k = i - 1; /* pair (0, i); pair (j, i) is plk_row0(j) + i - j - 1 */
    for (int j = 0; j < i; j++) {
        s -= dp[k] * w[j];
        k += R - j - 2;
    }
    k = plk_row0(i, R) - i - 1; /* pair (i, j) is k + j */
    for (int j = i + 1; j < R; j++) s += dp[k + j] * w[j];
    return s;
}

#endif
