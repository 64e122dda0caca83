/* layernorm.cu — y = (x - mean) * rstd * gamma + beta over the last dim D, on the GPU; the CPU
 * op (src/ops/layernorm.c) is the spec: rstd = 1 / sqrt(var + eps), biased variance, eps inside
 * the sqrt; mean and variance accumulated in double, two passes; mean and rstd saved (N, 2).
 * One warp per row (LN_ROWS rows per block): each lane strides over the columns, the lane sums
 * are combined by shuffles in a fixed order.
 */
#include "cu_util.cuh"

#define LN_ROWS 4 /* warps (rows) per block */

__global__ static void ln_fwd(float *y, float *stats, const float *x, const float *gm, const float *bt, int64_t N,
                              int64_t D, float eps) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *xr = x + r * D;
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
    float *yr = y + r * D;
    for (int64_t c = lane; c < D; c += 32) yr[c] = (xr[c] - m) * rstd * gm[c] + bt[c];
    if (lane == 0) {
        stats[2 * r] = m;
        stats[2 * r + 1] = rstd;
    }
}

/* backward, per row with xhat = (x - mean) * rstd and dxhat = dy ⊙ gamma:
 *   dx     += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat ⊙ xhat))   (ln_bwd_x, warp per row)
 *   dgamma += sum_rows dy ⊙ xhat ;  dbeta += sum_rows dy                  (cu_colsum, fixed order) */
__global__ static void ln_bwd_x(float *dx, const float *g, const float *x, const float *gm, const float *stats,
                                int64_t N, int64_t D) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *xr = x + r * D, *gr = g + r * D;
    const float mean = stats[2 * r], rstd = stats[2 * r + 1];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t c = lane; c < D; c += 32) {
        float xh = (xr[c] - mean) * rstd;
        float dxh = gr[c] * gm[c];
        s1 += dxh;
        s2 += (double)dxh * xh;
    }
    const float m1 = (float)(cu_warp_sum(s1) / (double)D), m2 = (float)(cu_warp_sum(s2) / (double)D);
    float *dr = dx + r * D;
    for (int64_t c = lane; c < D; c += 32) {
        float xh = (xr[c] - mean) * rstd;
        dr[c] += rstd * (gr[c] * gm[c] - m1 - xh * m2);
    }
}

/* f(r, c) = dy[r, c] * xhat[r, c] */
struct ln_dgamma {
    const float *g, *x, *stats;
    int64_t D;
    __device__ float operator()(int64_t r, int64_t c) const {
        return g[r * D + c] * ((x[r * D + c] - stats[2 * r]) * stats[2 * r + 1]);
    }
};

static void layernorm_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    const float *g = n->out->grad, *stats = (const float *)n->saved; // stats (N, 2): mean, rstd
    if (gf_needs_grad(x) && N > 0) {
        ln_bwd_x<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            x->grad, g, x->data, gamma->data, stats, N, D);
        GF_CUDA_LAUNCHED("ln_bwd_x");
    }
    if (gf_needs_grad(gamma)) cu_colsum(ctx, gamma->grad, N, D, 0, ln_dgamma{g, x->data, stats, D});
    if (gf_needs_grad(beta)) cu_colsum(ctx, beta->grad, N, D, 0, cu_rows{g, D});
}

static const gf_op_def layernorm_cuda = {"layernorm", GF_FAM_ELEMWISE, layernorm_backward_cuda, 0};

gf_tensor *gf_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps) {
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    gf_tensor *y = cu_tensor_like(ctx, x);
    float *stats = gf_cuda_floats(ctx, 2 * N); // (N, 2)
    if (N > 0) {
        ln_fwd<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            y->data, stats, x->data, gamma->data, beta->data, N, D, eps);
        GF_CUDA_LAUNCHED("ln_fwd");
    }
    gf_tensor *in[3] = {x, gamma, beta};
    gf_node *n = gf_tape_record(ctx, &layernorm_cuda, y, 3, in);
    if (n) n->saved = stats;
    return y;
}
