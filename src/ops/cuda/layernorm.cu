/* layernorm.cu — y = (x - mean) * rstd * gamma + beta over the last dim D, on the GPU; the CPU
 * op (src/ops/layernorm.c) is the spec: rstd = 1 / sqrt(var + eps), biased variance, eps inside
 * the sqrt; mean and variance accumulated in double, two passes; mean and rstd saved (N, 2).
 * One warp per row (cu_ln.cuh, shared with the fused dropout_add_layernorm.cu).
 */
#include "cu_ln.cuh"

__global__ static void ln_fwd(float *y, __nv_bfloat16 *y16, float *stats, const float *x, const float *gm,
                              const float *bt, int64_t N, int64_t D, float eps) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    cu_ln_row(y + r * D, stats + 2 * r, x + r * D, gm, bt, D, eps, lane);
    if (y16) /* the lane's own elements of the row, as cu_ln_row wrote them */
        for (int64_t c = lane; c < D; c += 32) cu_bf16_put(y16, r * D + c, y[r * D + c]);
}

/* backward, per row with xhat = (x - mean) * rstd and dxhat = dy ⊙ gamma:
 *   dx     += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat ⊙ xhat))   (ln_bwd_x, warp per row)
 *   dgamma += sum_rows dy ⊙ xhat ;  dbeta += sum_rows dy   (cu_ln_gain_shift_grads: both column
 *   sums in one launch, each in its fixed order) */
__global__ static void ln_bwd_x(float *dx, const float *g, const float *x, const float *gm, const float *stats,
                                int64_t N, int64_t D) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    cu_ln_row_dx(dx + r * D, 0, g + r * D, x + r * D, gm, stats[2 * r], stats[2 * r + 1], D, lane);
}

static void layernorm_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    const float *g = n->out->grad, *stats = (const float *)n->saved; // stats (N, 2): mean, rstd
    if (gf_needs_grad(x) && N > 0) {
        ln_bwd_x<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            x->grad, g, x->data, gamma->data, stats, N, D);
        GF_CUDA_LAUNCHED("ln_bwd_x", 4 * (4 * N * D + D + 2 * N));
    }
    cu_ln_gain_shift_grads(ctx, 0, gamma, beta, g, x->data, stats, N, D);
}

static const gf_op_def layernorm_cuda = {"layernorm", GF_FAM_ELEMWISE, layernorm_backward_cuda, 0};

gf_tensor *gf_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps) {
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    gf_tensor *y = cu_tensor_like(ctx, x);
    float *stats = gf_cuda_floats(ctx, 2 * N); // (N, 2)
    if (N > 0) {
        /* bf16: y rounded as it is written, for the products that read it (a pre-LN block's) */
        __nv_bfloat16 *y16 = (__nv_bfloat16 *)cu_bf16_keep_out(ctx, y->data, N, D, D);
        ln_fwd<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            y->data, y16, stats, x->data, gamma->data, beta->data, N, D, eps);
        GF_CUDA_LAUNCHED("ln_fwd", 4 * (2 * N * D + 2 * D + 2 * N) + (y16 ? 2 * N * D : 0));
    }
    gf_tensor *in[3] = {x, gamma, beta};
    gf_node *n = gf_tape_record(ctx, &layernorm_cuda, y, 3, in);
    if (n) n->saved = stats;
    return y;
}
