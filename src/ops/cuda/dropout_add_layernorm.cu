/* dropout_add_layernorm.cu — the post-LN residual y = LayerNorm(x + dropout(f, p)) on the GPU in
 * one kernel each way (plus the gain's and shift's column sums); the CPU op is
 * src/ops/dropout_add_layernorm.c. The mask is dropout.cu's (cu_drop: the same key, the same
 * hash), the products f * scale and ds * scale are __fmul_rn and the residual sum __fadd_rn as in
 * dropout.cu and add.cu, the row is cu_ln_row: the unfused chain's arithmetic. One warp per
 * row: a lane writes s = x + dropout(f) for its columns, then reads back only those. Saved: s
 * (N, D), the stats (N, 2) and the mask (uint8, N * D; NULL without dropout). Its launches are
 * shared with linear_dropout_add_layernorm.cu (cu_dal_forward, which adds a branch bias,
 * cu_dal_backward). */
#include "cu_ln.cuh"

/* f's element is f + fb (fb NULL: none): linear_dropout_add_layernorm.cu's branch bias, one
 * rounding of product + bias as the chain's bias_rows and GEMM give it */
__global__ static void dal_fwd(float *y, __nv_bfloat16 *y16, float *stats, float *s, uint8_t *keep, const float *x,
                               const float *f, const float *fb, const float *gm, const float *bt, int64_t N, int64_t D,
                               float eps, cu_drop d) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    const uint64_t key = keep ? cu_drop_key(d) : 0;
    float *sr = s + r * D;
    for (int64_t c = lane; c < D; c += 32) {
        const int64_t i = r * D + c;
        float t = fb ? __fadd_rn(f[i], fb[c]) : f[i];
        if (keep) {
            const uint8_t k = cu_drop_keeps(d, key, i);
            keep[i] = k;
            t = k ? __fmul_rn(t, d.scale) : 0.0f;
        }
        sr[c] = __fadd_rn(x[i], t);
    }
    cu_ln_row(y + r * D, stats + 2 * r, sr, gm, bt, D, eps, lane);
    if (y16) /* the lane's own elements of the row, as cu_ln_row wrote them */
        for (int64_t c = lane; c < D; c += 32) cu_bf16_put(y16, r * D + c, y[r * D + c]);
}

/* backward, with ds = rstd * (dshat - mean(dshat) - shat * mean(dshat ⊙ shat)), dshat = dy ⊙ gamma:
 *   dx (= if fresh, else +=) ds ;  df (= or +=) keep ? ds * scale : 0  (no mask: ds)
 * dx or df NULL: not needed. When x and f are one tensor its first term stores, the second adds. */
__global__ static void dal_bwd(float *dx, float *df, __nv_bfloat16 *df16, int dx_fresh, int df_fresh,
                               const uint8_t *keep, float scale, const float *g, const float *s, const float *gm,
                               const float *stats, int64_t N, int64_t D) {
    const int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;
    const float *sr = s + r * D, *gr = g + r * D;
    const float mean = stats[2 * r], rstd = stats[2 * r + 1];
    float m1, m2;
    cu_ln_row_means(&m1, &m2, gr, sr, gm, mean, rstd, D, lane);
    for (int64_t c = lane; c < D; c += 32) {
        const int64_t i = r * D + c;
        const float sh = (sr[c] - mean) * rstd;
        const float ds = rstd * (gr[c] * gm[c] - m1 - sh * m2);
        if (dx) dx[i] = dx_fresh ? ds : __fadd_rn(dx[i], ds);
        if (df) {
            const float t = keep ? (keep[i] ? __fmul_rn(ds, scale) : 0.0f) : ds;
            df[i] = df_fresh ? t : __fadd_rn(df[i], t);
            cu_bf16_put(df16, i, df[i]);
        }
    }
}

void cu_dal_backward(gf_ctx *ctx, const gf_node *n, float *dx, int dx_fresh, float *df, int df_fresh,
                     __nv_bfloat16 *df16, gf_tensor *gamma, gf_tensor *beta, int64_t N, int64_t D) {
    const float *g = n->out->grad, *s = (const float *)n->saved, *stats = s + N * D; // s (N, D), then (N, 2)
    if ((dx || df) && N > 0) {
        dal_bwd<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            dx, df, df16, dx_fresh, df_fresh, (const uint8_t *)n->aux, (float)n->fp[0], g, s, gamma->data, stats, N, D);
        /* dy, s, gamma, stats; dx and df (read too unless fresh), df's copy; the mask */
        const int64_t wx = dx ? (dx_fresh ? 1 : 2) : 0, wf = df ? (df_fresh ? 1 : 2) : 0;
        GF_CUDA_LAUNCHED("dal_bwd", 4 * ((2 + wx + wf) * N * D + D + 2 * N) + (n->aux ? N * D : 0) +
                                        (df16 ? 2 * N * D : 0));
    }
    /* a fresh gain or shift (not a parameter) is stored, as its sum is the whole gradient */
    cu_ln_gain_shift_grads(ctx, 1, gamma, beta, g, s, stats, N, D);
}

static void dropout_add_layernorm_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *f = n->in[1];
    float *dx = NULL, *df = NULL;
    int dx_fresh = 0, df_fresh = 0;
    if (gf_needs_grad(x)) { dx = x->grad; dx_fresh = gf_grad_fresh(x); }
    if (gf_needs_grad(f)) { df = f->grad; df_fresh = gf_grad_fresh(f); }
    cu_dal_backward(ctx, n, dx, dx_fresh, df, df_fresh, NULL, n->in[2], n->in[3], gf_tensor_rows(x),
                    gf_tensor_cols(x));
}

static const gf_op_def dropout_add_layernorm_cuda = {"dropout_add_layernorm", GF_FAM_ELEMWISE,
                                                     dropout_add_layernorm_backward_cuda, 1};

gf_tensor *cu_dal_forward(gf_ctx *ctx, const gf_op_def *def, gf_tensor *x, const float *f, const float *fb, float p,
                          gf_tensor *gamma, gf_tensor *beta, float eps, int n_in, gf_tensor **in) {
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    const int drop = ctx->training && p > 0.0f;
    cu_drop d = {};
    d.scale = 1.0f;
    if (drop) d = cu_drop_draw(ctx, x, p);
    uint8_t *keep = drop ? (uint8_t *)gf_cuda_arena_alloc(ctx->cuda, (size_t)(N * D)) : NULL; // (N, D)
    gf_tensor *y = cu_tensor_like(ctx, x);
    float *s = gf_cuda_floats(ctx, N * D + 2 * N), *stats = s + N * D; // s (N, D), then stats (N, 2)
    /* bf16: y rounded as it is written, for the products that read it (the next layer's, the head) */
    __nv_bfloat16 *y16 = (__nv_bfloat16 *)cu_bf16_keep_out(ctx, y->data, N, D, D);
    if (N > 0) {
        dal_fwd<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), 32 * LN_ROWS, 0, gf_cuda_stream()>>>(
            y->data, y16, stats, s, keep, x->data, f, fb, gamma->data, beta->data, N, D, eps, d);
        GF_CUDA_LAUNCHED("dal_fwd", 4 * (4 * N * D + (fb ? 3 : 2) * D + 2 * N) + (keep ? N * D : 0) +
                                        (y16 ? 2 * N * D : 0));
    }
    gf_node *n = gf_tape_record(ctx, def, y, n_in, in);
    if (n) {
        n->saved = s;
        n->aux = keep;
        n->fp[0] = d.scale;
    }
    return y;
}

/* the entry has checked the shapes, p, ctx->rng and the rows */
gf_tensor *gf_dropout_add_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *f, float p, gf_tensor *gamma,
                                         gf_tensor *beta, float eps) {
    gf_tensor *in[4] = {x, f, gamma, beta};
    return cu_dal_forward(ctx, &dropout_add_layernorm_cuda, x, f->data, NULL, p, gamma, beta, eps, 4, in);
}
