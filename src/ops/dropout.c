/* dropout.c — inverted dropout: y = x * keep / (1 - p), keep ~ Bernoulli(1 - p).
 * The mask comes from a counter-based hash of one key drawn from ctx->rng per call and of the
 * element's place in the global batch: x is (R, ...) with R = k * n rows, k copies (NLI:
 * premises, hypotheses) of the n batch rows [batch_row0, batch_row0 + n) this forward computes
 * (gf_ctx). Element e of row j hashes (key, copy j / n, global row batch_row0 + j % n, e), so
 * the mask is the same for any OpenMP thread count and for any split of the batch among
 * data-parallel ranks. It is stored (uint8, N) for backward. The key and the hash of any span of
 * elements (gf_dropout_draw, gf_dropout_mask_span) are shared with the fused ops that drop, which
 * hash a row's mask where they use it (layernorm_dropout.c).
 * Identity (and no tape node) when not training or p == 0.
 */
#include "op_util.h"
#include <math.h>

/* backward: dx += dy * keep / (1 - p) */
static void dropout_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const uint8_t *keep = n->saved;
    const float *g = n->out->grad;
    float scale = (float)n->fp[0];
    int64_t N = gf_tensor_numel(x);
    float *dx = x->grad;
    if (gf_grad_fresh(x)) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < N; i++) dx[i] = gf_dropout_kept(g[i] * scale, keep[i]);
    } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < N; i++) dx[i] += gf_dropout_kept(g[i] * scale, keep[i]);
    }
}

gf_drop_key gf_dropout_draw(gf_ctx *ctx, const gf_tensor *x, float p) {
    int64_t N = gf_tensor_numel(x), R = x->shape[0];
    gf_drop_key d = {.per = R > 0 ? N / R : 0,
                     .nb = ctx->batch_rows > 0 ? ctx->batch_rows : R,
                     .row0 = ctx->batch_rows > 0 ? ctx->batch_row0 : 0,
                     .key = gf_rng_u64(ctx->rng),
                     /* gf_rng_hash_uniform(..) >= p, in integers: u = (h >> 40) * 2^-24 is exact, so
                      * u >= p iff h >> 40 >= ceil(p * 2^24) (also exact); the integer form vectorises */
                     .thr = (uint64_t)ceilf(p * 16777216.0f),
                     .scale = 1.0f / (1.0f - p)};
    ctx->keys_drawn++;
    return d;
}

void gf_dropout_mask_span(const gf_drop_key *d, int64_t i0, int64_t n, uint8_t *restrict keep) {
    while (n > 0) { /* one piece per x row j that [i0, i0 + n) touches */
        const int64_t j = i0 / d->per, e0 = i0 % d->per, len = n < d->per - e0 ? n : d->per - e0;
        const uint64_t kj = gf_rng_hash(d->key, (uint64_t)(j / d->nb)), g0 = (uint64_t)(d->row0 + j % d->nb) * (uint64_t)d->per;
        const uint64_t thr = d->thr;
#pragma omp simd
        for (int64_t e = 0; e < len; e++) keep[e] = (gf_rng_hash(kj, g0 + (uint64_t)(e0 + e)) >> 40) >= thr;
        i0 += len, n -= len, keep += len;
    }
}

uint8_t *gf_dropout_mask(gf_ctx *ctx, const gf_tensor *x, float p, float *scale) {
    int64_t N = gf_tensor_numel(x), R = x->shape[0];
    const gf_drop_key d = gf_dropout_draw(ctx, x, p);
    *scale = d.scale;
    uint8_t *keep = gf_arena_alloc(&ctx->arena, (size_t)N); // (N)
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < R; j++) gf_dropout_mask_span(&d, j * d.per, d.per, keep + j * d.per);
    return keep;
}

gf_tensor *gf_dropout(gf_ctx *ctx, gf_tensor *x, float p) {
    if (!ctx->training || p <= 0.0f) return x;
    GF_ASSERT(p < 1.0f, "dropout p=%g must be < 1", (double)p);
    GF_ASSERT(ctx->rng, "dropout in training mode needs ctx->rng");
    double t0 = gf_prof_begin(ctx);
    int64_t N = gf_tensor_numel(x);
    gf_dropout_check_rows(ctx, x, "dropout");
    gf_tensor *in[1] = {x};
    const gf_backend_ops *dev = gf_op_backend("dropout", 1, in);
    if (dev) return dev->dropout(ctx, x, p);
    float scale;
    const uint8_t *keep = gf_dropout_mask(ctx, x, p, &scale); // (N)
    gf_tensor *y = gf_tensor_like(ctx, x);
    const float *xd = x->data;
    float *yd = y->data;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < N; i++) yd[i] = gf_dropout_kept(xd[i] * scale, keep[i]);
    gf_node *n = gf_tape_record(ctx, &gf_op_dropout, y, 1, in);
    if (n) { n->saved = (void *)keep; n->fp[0] = scale; }
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_dropout = {"dropout", GF_FAM_ELEMWISE, dropout_backward, 1};
