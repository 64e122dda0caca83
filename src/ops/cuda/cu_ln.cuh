/* cu_ln.cuh — LayerNorm's row work on the GPU (internal): layernorm.cu and the fused
 * dropout_add_layernorm.cu share it, so both give the same bits. One warp per row (LN_ROWS rows
 * per block): each lane strides over the columns, the lane sums are combined by shuffles in a
 * fixed order; mean and variance in double over two passes, as the CPU's gf_layernorm_row. */
#ifndef GF_CU_LN_CUH
#define GF_CU_LN_CUH

#include "cu_util.cuh"

#define LN_ROWS 4 /* warps (rows) per block */

/* one row by one warp: yr = (xr - mean) * rstd * gm + bt; stat = {mean, rstd} (lane 0 writes) */
__device__ static inline void cu_ln_row(float *yr, float *stat, const float *xr, const float *gm, const float *bt,
                                        int64_t D, float eps, int lane) {
    double s = 0.0;
    for (int64_t c = lane; c < D; c += 32) s += xr[c];
    const double mean = cu_warp_sum(s) / (double)D;
    double ss = 0.0;
    for (int64_t c = lane; c < D; c += 32) {
        double d = xr[c] - mean;
        ss += d * d;
    }
    ss = cu_warp_sum(ss);
    const float m = (float)mean, rstd = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
    for (int64_t c = lane; c < D; c += 32) yr[c] = (xr[c] - m) * rstd * gm[c] + bt[c];
    if (lane == 0) {
        stat[0] = m;
        stat[1] = rstd;
    }
}

/* a row's input gradient dxr = rstd * (dxhat - m1 - xhat * m2), dxhat = dy ⊙ gamma,
 * m1 = mean(dxhat), m2 = mean(dxhat ⊙ xhat): the two means of one row, by one warp */
__device__ static inline void cu_ln_row_means(float *m1, float *m2, const float *gr, const float *xr, const float *gm,
                                              float mean, float rstd, int64_t D, int lane) {
    double s1 = 0.0, s2 = 0.0;
    for (int64_t c = lane; c < D; c += 32) {
        float xh = (xr[c] - mean) * rstd;
        float dxh = gr[c] * gm[c];
        s1 += dxh;
        s2 += (double)dxh * xh;
    }
    *m1 = (float)(cu_warp_sum(s1) / (double)D);
    *m2 = (float)(cu_warp_sum(s2) / (double)D);
}

/* the row's dxr = rstd * (dxhat - m1 - xhat * m2) written (fresh) or added, by one warp
 * (layernorm.cu and layernorm_dropout.cu: the same expression, so the same bits) */
__device__ static inline void cu_ln_row_dx(float *dr, int fresh, const float *gr, const float *xr, const float *gm,
                                           float mean, float rstd, int64_t D, int lane) {
    float m1, m2;
    cu_ln_row_means(&m1, &m2, gr, xr, gm, mean, rstd, D, lane);
    for (int64_t c = lane; c < D; c += 32) {
        float xh = (xr[c] - mean) * rstd;
        if (fresh) dr[c] = rstd * (gr[c] * gm[c] - m1 - xh * m2);
        else dr[c] += rstd * (gr[c] * gm[c] - m1 - xh * m2);
    }
}

/* f(r, c) = dy[r, c] * xhat[r, c], for cu_colsum (the gain's gradient) */
struct ln_dgamma {
    const float *g, *x, *stats;
    int64_t D;
    int64_t bytes(int64_t N, int64_t C) const { return 4 * (2 * N * C + 2 * N); }
    __device__ float operator()(int64_t r, int64_t c) const {
        return g[r * D + c] * ((x[r * D + c] - stats[2 * r]) * stats[2 * r + 1]);
    }
};

/* (dy * xhat, dy) at (r, c): the gain's and the shift's terms from one read of dy */
struct ln_dgamma_dbeta {
    ln_dgamma gm;
    int64_t bytes(int64_t N, int64_t C) const { return gm.bytes(N, C); }
    __device__ cu_sums<2> operator()(int64_t r, int64_t c) const {
        return cu_sums<2>{{gm(r, c), gm.g[r * gm.D + c]}};
    }
};

/* LayerNorm's gain and shift gradients from dy (N, D) over the normalised rows of x: both
 * column sums in one launch where both are wanted (each the bits it has alone).
 * stores_fresh: the op's (gf_op_def), so that a fresh gain or shift (not a parameter) is stored,
 * its sum being its whole gradient; the gain's flag is taken first, as a gain that is also the
 * shift gets two sums, the second added */
static inline void cu_ln_gain_shift_grads(gf_ctx *ctx, int stores_fresh, gf_tensor *gamma, gf_tensor *beta,
                                          const float *dy, const float *x, const float *stats, int64_t N, int64_t D) {
    const ln_dgamma f{dy, x, stats, D};
    const int need_g = gf_needs_grad(gamma), need_b = gf_needs_grad(beta);
    const int fresh_g = need_g && stores_fresh && gf_grad_fresh(gamma);
    const int fresh_b = need_b && stores_fresh && gf_grad_fresh(beta);
    if (need_g && need_b && gamma != beta) {
        cu_colsums<2>(ctx, cu_sum_dsts<2>{{gamma->grad, beta->grad}, {fresh_g, fresh_b}}, N, D, ln_dgamma_dbeta{f});
        return;
    }
    if (need_g) cu_colsum(ctx, gamma->grad, N, D, fresh_g, f);
    if (need_b) cu_colsum(ctx, beta->grad, N, D, fresh_b, cu_rows{dy, D});
}

/* dropout_add_layernorm.cu's launches, shared with linear_dropout_add_layernorm.cu:
 * y = LN(x + dropout(f + fb)) (fb (D) NULL: none; the mask keyed on x's rows) recorded as def's
 * node with its n_in inputs (s, the stats and the mask saved), y's bf16 copy written where a
 * bf16 step keeps one (cu_bf16_keep_out); and its backward, dx and df (NULL: not needed; stored
 * where fresh; df16: df's bf16 copy to fill, or NULL), the gain's and shift's sums */
gf_tensor *cu_dal_forward(gf_ctx *ctx, const gf_op_def *def, gf_tensor *x, const float *f, const float *fb, float p,
                          gf_tensor *gamma, gf_tensor *beta, float eps, int n_in, gf_tensor **in);
void cu_dal_backward(gf_ctx *ctx, const gf_node *n, float *dx, int dx_fresh, float *df, int df_fresh,
                     __nv_bfloat16 *df16, gf_tensor *gamma, gf_tensor *beta, int64_t N, int64_t D);

#endif
