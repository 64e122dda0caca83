/* dropout.c — inverted dropout: y = x * keep / (1 - p), keep ~ Bernoulli(1 - p).
 * The mask comes from a counter-based hash of one key drawn from ctx->rng per call, so
 * it is the same for any OpenMP thread count; it is stored (uint8, N) for backward.
 * Identity (and no tape node) when not training or p == 0.
 */
#include "op_util.h"

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
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < N; i++) dx[i] = keep[i] ? g[i] * scale : 0.0f;
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < N; i++) dx[i] += keep[i] ? g[i] * scale : 0.0f;
    }
}

gf_tensor *gf_dropout(gf_ctx *ctx, gf_tensor *x, float p) {
    if (!ctx->training || p <= 0.0f) return x;
    GF_ASSERT(p < 1.0f, "dropout p=%g must be < 1", (double)p);
    GF_ASSERT(ctx->rng, "dropout in training mode needs ctx->rng");
    double t0 = gf_prof_begin(ctx);
    int64_t N = gf_tensor_numel(x);
    uint64_t key = gf_rng_u64(ctx->rng);
    float scale = 1.0f / (1.0f - p);
    uint8_t *keep = gf_arena_alloc(&ctx->arena, (size_t)N); // (N)
    gf_tensor *y = gf_tensor_like(ctx, x);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        keep[i] = gf_rng_hash_uniform(key, (uint64_t)i) >= p;
        y->data[i] = keep[i] ? x->data[i] * scale : 0.0f;
    }
    gf_tensor *in[1] = {x};
    gf_node *n = gf_tape_record(ctx, &gf_op_dropout, y, 1, in);
    if (n) { n->saved = keep; n->fp[0] = scale; }
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_dropout = {"dropout", GF_FAM_ELEMWISE, dropout_backward, 1};
