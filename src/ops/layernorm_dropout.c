/* layernorm_dropout.c — LayerNorm, then dropout, in one op (the Grassmann block's mixing branch):
 *   z = LayerNorm(x) = (x - mean) * rstd * gamma + beta  (over the last dim D),  y = dropout(z, p)
 * = gf_dropout(gf_layernorm(x, gamma, beta, eps), p) with the same arithmetic in the same order:
 * the row is gf_layernorm_row, the key gf_dropout's (one draw from ctx->rng: gf_dropout_draw) and
 * each row's mask its hash (gf_dropout_mask_span, the bits gf_dropout_mask gives), the product
 * z * scale where kept, the backward gf_layernorm_backward_rows; so the bits are the chain's.
 * The forward is one pass over the rows (the row's mask, its LayerNorm, the drop, while the row
 * is in cache); z is never written as a tensor. Saved: the stats (N, 2) and the mask (uint8, N).
 * Not training or p == 0: dropout is the identity, and the op is gf_layernorm itself.
 */
#include "op_util.h"

/* backward, with dz = keep ? dy / (1 - p) : 0 (dropout's backward, into the op's scratch, as the
 * chain's dropout writes its input gradient), then LayerNorm's (layernorm.c) from dz:
 *   dx += rstd * (dzhat - mean(dzhat) - xhat * mean(dzhat ⊙ xhat)),  dzhat = dz ⊙ gamma
 *   dgamma += Σ_rows dz ⊙ xhat ;  dbeta += Σ_rows dz
 * (Two passes: gf_layernorm_backward_rows reads dz whole; taking the mask row by row inside it
 * would make this one.) */
static void layernorm_dropout_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0];
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x), ND = N * D;
    const uint8_t *keep = n->aux; // (N, D)
    const float *dy = n->out->grad;
    const float scale = (float)n->fp[0];
    float *dz = gf_arena_floats(&ctx->arena, ND); // (N, D)
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < ND; i++) dz[i] = gf_dropout_kept(dy[i] * scale, keep[i]);
    gf_ln_dx o = gf_ln_dx_of(n);
    gf_layernorm_backward_rows(ctx, x->data, dz, n->saved, n->in[1], n->in[2], N, D, &o);
}

gf_tensor *gf_layernorm_dropout(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps, float p) {
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    GF_ASSERT(gamma->ndim == 1 && gamma->shape[0] == D && beta->ndim == 1 && beta->shape[0] == D,
              "layernorm_dropout %s: gain/shift must be [%lld]", gamma->name ? gamma->name : "?", (long long)D);
    if (!ctx->training || p <= 0.0f) return gf_layernorm(ctx, x, gamma, beta, eps); /* dropout is the identity */
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(p < 1.0f, "dropout p=%g must be < 1", (double)p);
    GF_ASSERT(ctx->rng, "dropout in training mode needs ctx->rng");
    gf_dropout_check_rows(ctx, x, "layernorm_dropout");
    gf_tensor *in[3] = {x, gamma, beta};
    const gf_backend_ops *dev = gf_op_backend("layernorm_dropout", 3, in);
    if (dev) return dev->layernorm_dropout(ctx, x, gamma, beta, eps, p);
    const gf_drop_key d = gf_dropout_draw(ctx, x, p);
    const float scale = d.scale;
    uint8_t *keep = gf_arena_alloc(&ctx->arena, (size_t)(N * D)); // (N, D)
    float *stats = gf_arena_floats(&ctx->arena, 2 * N);         // (N, 2): mean, rstd
    gf_tensor *y = gf_tensor_like(ctx, x);
    uint16_t *y16 = gf_gemm_round_into(ctx, y->data, N, D); // (N, D) y's bits for the products reading it, or NULL
    const float *xd = x->data, *gm = gamma->data, *bt = beta->data;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        uint8_t *restrict kr = keep + r * D;
        float *restrict yr = y->data + r * D;
        gf_dropout_mask_span(&d, r * D, D, kr);
        gf_layernorm_row(xd + r * D, gm, bt, D, eps, yr, stats + 2 * r);
#pragma omp simd
        for (int64_t c = 0; c < D; c++) yr[c] = gf_dropout_kept(yr[c] * scale, kr[c]);
        if (y16) gf_bf16_row(y16 + r * D, yr, D);
    }
    gf_node *n = gf_record_op(ctx, &gf_op_layernorm_dropout, y, 3, in, stats, 0, NULL, scale);
    if (n) n->aux = keep;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_layernorm_dropout = {"layernorm_dropout", GF_FAM_ELEMWISE, layernorm_dropout_backward, 1};
