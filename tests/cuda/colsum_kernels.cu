/* colsum_kernels.cu — the CUDA ops' column sums (cu_colsums, src/ops/cuda/cu_util.cuh) called
 * directly, for their test (test_cuda_colsum.c). */
#include "ops/cuda/cu_util.cuh"

/* f(r, c) = (a[r * C + c], b[r * C + c]): two sums over the same rows, as LayerNorm's */
struct ck_pair {
    const float *a, *b;
    int64_t C;
    int64_t bytes(int64_t N, int64_t C_) const { return 8 * N * C_; }
    __device__ cu_sums<2> operator()(int64_t r, int64_t c) const { return cu_sums<2>{{a[r * C + c], b[r * C + c]}}; }
};

extern "C" {

/* da (C) (= when store_a, else +=) the column sums of a (N, C); with b, db those of b (N, C) in
 * the same launch (cu_colsums<2>), else cu_colsum alone */
void gf_ck_colsums(gf_ctx *ctx, float *da, const float *a, int store_a, float *db, const float *b, int store_b,
                   int64_t N, int64_t C) {
    if (!b) cu_colsum(ctx, da, N, C, store_a, cu_rows{a, C});
    else cu_colsums<2>(ctx, cu_sum_dsts<2>{{da, db}, {store_a, store_b}}, N, C, ck_pair{a, b, C});
}
}
