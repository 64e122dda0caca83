/* layernorm_dropout.cu — y = dropout(LayerNorm(x), p) on the GPU in one kernel each way (plus the
 * gain's and shift's column sums); the CPU op is src/ops/layernorm_dropout.c. The row is
 * cu_ln_row (layernorm.cu's), the mask dropout.cu's (cu_drop: the same key, the same hash), the
 * products z * scale and dy * scale __fmul_rn as in dropout.cu, the input gradient ln_bwd_x's
 * arithmetic: the unfused chain's. One warp per row; a lane reads back only the columns it wrote.
 * Saved: the stats (N, 2) and the mask (uint8, N * D). The entry runs layernorm itself when not
 * training or p == 0. Against dropout(layernorm(x)): one kernel fewer forward (ln_fwd and
 * dropout_fwd in one) and one fewer backward (dropout_bwd in ld_bwd).
 */
#include "cu_ln.cuh"

__global__ static void ld_fwd(float *y, __nv_bfloat16 *y16, float *stats, uint8_t *keep, const float *x,
                              const float *gm, const float *bt, int64_t N, int64_t D, float eps, cu_drop d) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    const uint64_t key = cu_drop_key(d);
    float *yr = y + r * D;
    cu_ln_row(yr, stats + 2 * r, x + r * D, gm, bt, D, eps, lane);
    for (int64_t c = lane; c < D; c += 32) {
        const uint8_t k = cu_drop_keeps(d, key, r * D + c);
        keep[r * D + c] = k;
        yr[c] = k ? __fmul_rn(yr[c], d.scale) : 0.0f;
        cu_bf16_put(y16, r * D + c, yr[c]);
    }
}

/* backward, per row: dz = keep ? dy * scale : 0 (stored: the column sums read it), then with
 * xhat = (x - mean) * rstd and dzhat = dz ⊙ gamma:
 *   dx (= if fresh, else +=) rstd * (dzhat - mean(dzhat) - xhat * mean(dzhat ⊙ xhat))  (dx NULL: not needed) */
__global__ static void ld_bwd(float *dx, int dx_fresh, float *dz, const float *dy, const uint8_t *keep, float scale,
                              const float *x, const float *gm, const float *stats, int64_t N, int64_t D) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    float *gr = dz + r * D;
    for (int64_t c = lane; c < D; c += 32) gr[c] = keep[r * D + c] ? __fmul_rn(dy[r * D + c], scale) : 0.0f;
    if (!dx) return;
    cu_ln_row_dx(dx + r * D, dx_fresh, gr, x + r * D, gm, stats[2 * r], stats[2 * r + 1], D, lane);
}

static void layernorm_dropout_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *gamma = n->in[1], *beta = n->in[2];
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    const float *stats = (const float *)n->saved; // (N, 2): mean, rstd
    float *dz = gf_cuda_floats(ctx, N * D);        // (N, D)
    float *dx = NULL;
    int dx_fresh = 0;
    if (gf_needs_grad(x)) { dx = x->grad; dx_fresh = gf_grad_fresh(x); }
    if (N > 0) {
        ld_bwd<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            dx, dx_fresh, dz, n->out->grad, (const uint8_t *)n->aux, (float)n->fp[0], x->data, gamma->data, stats, N, D);
        /* dy and the mask in, dz out; with dx: x, dz again, gamma, stats in, dx out (and in unless fresh) */
        GF_CUDA_LAUNCHED("ld_bwd", 4 * 2 * N * D + N * D + (dx ? 4 * ((dx_fresh ? 3 : 4) * N * D + D + 2 * N) : 0));
    }
    /* a fresh gain or shift (not a parameter) is stored, as its sum is the whole gradient */
    cu_ln_gain_shift_grads(ctx, 1, gamma, beta, dz, x->data, stats, N, D);
}

static const gf_op_def layernorm_dropout_cuda = {"layernorm_dropout", GF_FAM_ELEMWISE, layernorm_dropout_backward_cuda,
                                                 1};

/* the entry has checked the shapes, p, ctx->rng and the rows, and is training with p > 0 */
gf_tensor *gf_layernorm_dropout_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps, float p) {
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    const cu_drop d = cu_drop_draw(ctx, x, p);
    uint8_t *keep = (uint8_t *)gf_cuda_arena_alloc(ctx->cuda, (size_t)(N * D)); // (N, D)
    float *stats = gf_cuda_floats(ctx, 2 * N);                                   // (N, 2)
    gf_tensor *y = cu_tensor_like(ctx, x);
    /* bf16: y rounded as it is written, for the product that reads it (the FFN's first) */
    __nv_bfloat16 *y16 = (__nv_bfloat16 *)cu_bf16_keep_out(ctx, y->data, N, D, D);
    if (N > 0) {
        ld_fwd<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            y->data, y16, stats, keep, x->data, gamma->data, beta->data, N, D, eps, d);
        GF_CUDA_LAUNCHED("ld_fwd", 4 * (2 * N * D + 2 * D + 2 * N) + N * D + (y16 ? 2 * N * D : 0));
    }
    gf_tensor *in[3] = {x, gamma, beta};
    gf_node *n = gf_tape_record(ctx, &layernorm_dropout_cuda, y, 3, in);
    if (n) {
        n->saved = stats;
        n->aux = keep;
        n->fp[0] = d.scale;
    }
    return y;
}
