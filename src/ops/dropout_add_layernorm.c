/* dropout_add_layernorm.c — the post-LN residual in one op:
 *   s = x + dropout(f, p),  y = LayerNorm(s) = (s - mean) * rstd * gamma + beta  (over the last dim D)
 * = gf_layernorm(gf_add(x, gf_dropout(f, p)), gamma, beta, eps), with the same arithmetic in the
 * same order: the mask is gf_dropout's (one key from ctx->rng, gf_dropout_mask), the row is
 * gf_layernorm_row, the backward gf_layernorm_backward_rows, so the bits are the unfused chain's.
 * The dropped branch is never written as a tensor; s, the stats (N, 2) and the mask (uint8, N)
 * are saved for backward. p == 0 or not training: no mask, y = LayerNorm(x + f). Its passes are
 * shared with linear_dropout_add_layernorm.c (gf_dal_check, gf_dal_forward, gf_dal_backward).
 */
#include "op_util.h"

/* backward, with ds = LayerNorm's input gradient (layernorm.c):
 *   dx += ds ;  df += keep ? ds / (1 - p) : 0   (no mask: df += ds)
 *   dgamma += sum_rows dy ⊙ shat ;  dbeta += sum_rows dy */
void gf_dal_backward(gf_ctx *ctx, const gf_node *n, gf_ln_dx *o, gf_tensor *gamma, gf_tensor *beta, int64_t N,
                     int64_t D) {
    const float *s = n->saved, *stats = s + N * D; // s (N, D), then stats (N, 2): mean, rstd
    GF_ASSERT(!o->df16 || o->df_fresh, "dropout_add_layernorm backward: bf16 bits of a df added to");
    o->keep = n->aux;
    o->scale = (float)n->fp[0];
    gf_tensor *gb[2] = {gamma, beta};
    for (int i = 0; i < 2; i++) /* the gain and shift are added to: a fresh one starts at zero */
        if (gf_needs_grad(gb[i]) && gf_grad_fresh(gb[i])) memset(gb[i]->grad, 0, (size_t)D * sizeof(float));
    gf_layernorm_backward_rows(ctx, s, n->out->grad, stats, gamma, beta, N, D, o);
}

static void dropout_add_layernorm_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *f = n->in[1];
    gf_ln_dx o = {0};
    if (gf_needs_grad(x)) { o.dx = x->grad; o.dx_fresh = gf_grad_fresh(x); }
    if (gf_needs_grad(f)) { o.df = f->grad; o.df_fresh = gf_grad_fresh(f); }
    gf_dal_backward(ctx, n, &o, n->in[2], n->in[3], gf_tensor_rows(x), gf_tensor_cols(x));
}

void gf_dal_check(const char *op, gf_ctx *ctx, const gf_tensor *x, float p, const gf_tensor *gamma,
                  const gf_tensor *beta) {
    int64_t D = gf_tensor_cols(x);
    GF_ASSERT(gamma->ndim == 1 && gamma->shape[0] == D && beta->ndim == 1 && beta->shape[0] == D,
              "%s %s: gain/shift must be [%lld]", op, gamma->name ? gamma->name : "?", (long long)D);
    int drop = ctx->training && p > 0.0f;
    GF_ASSERT(!drop || p < 1.0f, "dropout p=%g must be < 1", (double)p);
    GF_ASSERT(!drop || ctx->rng, "dropout in training mode needs ctx->rng");
    if (drop) gf_dropout_check_rows(ctx, x, op);
}

gf_node *gf_dal_forward(gf_ctx *ctx, const gf_op_def *def, gf_tensor *x, const float *fd, float p, gf_tensor *gamma,
                        gf_tensor *beta, float eps, int n_in, gf_tensor **in, gf_tensor **out) {
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    int drop = ctx->training && p > 0.0f;
    float scale = 1.0f;
    const uint8_t *keep = drop ? gf_dropout_mask(ctx, x, p, &scale) : NULL; // (N, D)
    gf_tensor *y = gf_tensor_like(ctx, x);
    uint16_t *y16 = gf_gemm_round_into(ctx, y->data, N, D); // (N, D) y's bits for the products reading it, or NULL
    float *s = gf_arena_floats(&ctx->arena, N * D + 2 * N), *stats = s + N * D; // s (N, D), then stats (N, 2)
    const float *xd = x->data;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        float *restrict sr = s + r * D, *restrict yr = y->data + r * D;
        const float *restrict xr = xd + r * D, *restrict fr = fd + r * D;
        if (keep) {
            const uint8_t *kr = keep + r * D;
#pragma omp simd
            for (int64_t c = 0; c < D; c++) sr[c] = xr[c] + gf_dropout_kept(fr[c] * scale, kr[c]);
        } else {
#pragma omp simd
            for (int64_t c = 0; c < D; c++) sr[c] = xr[c] + fr[c];
        }
        gf_layernorm_row(sr, gamma->data, beta->data, D, eps, yr, stats + 2 * r);
        if (y16) gf_bf16_row(y16 + r * D, yr, D);
    }
    *out = y;
    gf_node *n = gf_tape_record(ctx, def, y, n_in, in);
    if (n) {
        n->saved = s;
        n->aux = (void *)keep;
        n->fp[0] = scale;
    }
    return n;
}

gf_tensor *gf_dropout_add_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *f, float p, gf_tensor *gamma,
                                    gf_tensor *beta, float eps) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(gf_tensor_same_shape(x, f), "dropout_add_layernorm: the residual and the branch differ in shape");
    gf_dal_check("dropout_add_layernorm", ctx, x, p, gamma, beta);
    gf_tensor *in[4] = {x, f, gamma, beta};
    const gf_backend_ops *dev = gf_op_backend("dropout_add_layernorm", 4, in);
    if (dev) return dev->dropout_add_layernorm(ctx, x, f, p, gamma, beta, eps);
    gf_tensor *y;
    gf_dal_forward(ctx, &gf_op_dropout_add_layernorm, x, f->data, p, gamma, beta, eps, 4, in, &y);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_dropout_add_layernorm = {"dropout_add_layernorm", GF_FAM_ELEMWISE,
                                               dropout_add_layernorm_backward, 1};
