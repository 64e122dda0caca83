/* sigmoid_lerp.c — the Grassmann block's gated fusion in one pass:
 *   y = σ(u) ⊙ a + (1 − σ(u)) ⊙ b
 * = gf_lerp(gf_sigmoid(u), a, b, 0), with the same arithmetic in the same order (σ is
 * gf_sigmoidf), so the bits are the unfused chain's. α = σ(u) is neither stored nor saved: the
 * backward recomputes it from u, which the tape keeps anyway. Its passes are shared with the
 * gate's gated_lerp.c (gf_sigmoid_lerp_rows and gf_sigmoid_lerp_backward_piece).
 */
#include "op_util.h"

/* elementwise over spans of SLERP_SPAN, so the vector kernels below can be multiversioned
 * (GF_KERNEL_CLONES) while OpenMP splits the spans across threads (as gelu.c) */
#define SLERP_SPAN 1024

GF_KERNEL_CLONES static void sigmoid_lerp_span(float *restrict y, const float *restrict u, const float *restrict a,
                                               const float *restrict b, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        const float w = gf_sigmoidf(u[i]);
        y[i] = w * a[i] + (1.0f - w) * b[i];
    }
}

/* backward, with α = σ(u) and g = dL/dy:
 *   da += g ⊙ α ;  db += g ⊙ (1 − α) ;  du += (g ⊙ (a − b)) ⊙ α ⊙ (1 − α)
 * (the lerp's dα times the sigmoid's slope α (1 − α), in the order the two ops multiply).
 * A span's α first, then one loop per gradient (du, da, db; NULL: not needed), each adding to
 * an element in that order, so inputs that share a buffer add up (no restrict on them). A
 * gradient whose bit is set in `fresh` (GF_SLERP_FRESH_*) is stored as 0 + its term, the bits of
 * adding it to a zeroed buffer, so its buffer need not be zeroed first (nor read). */
GF_KERNEL_CLONES static void sigmoid_lerp_backward_span(float *du, float *da, float *db, const float *restrict g,
                                                        const float *restrict u, const float *restrict a,
                                                        const float *restrict b, int64_t n, unsigned fresh) {
    float w[SLERP_SPAN];
#pragma omp simd
    for (int64_t i = 0; i < n; i++) w[i] = gf_sigmoidf(u[i]);
    if (du && (fresh & GF_SLERP_FRESH_DU)) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) du[i] = 0.0f + g[i] * (a[i] - b[i]) * w[i] * (1.0f - w[i]);
    } else if (du) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) du[i] += g[i] * (a[i] - b[i]) * w[i] * (1.0f - w[i]);
    }
    if (da && (fresh & GF_SLERP_FRESH_DA)) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) da[i] = 0.0f + g[i] * w[i];
    } else if (da) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) da[i] += g[i] * w[i];
    }
    if (db && (fresh & GF_SLERP_FRESH_DB)) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) db[i] = 0.0f + g[i] * (1.0f - w[i]);
    } else if (db) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) db[i] += g[i] * (1.0f - w[i]);
    }
}

void gf_sigmoid_lerp_rows(float *y, const float *u, const float *a, const float *b, int64_t N) {
    int64_t nb = (N + SLERP_SPAN - 1) / SLERP_SPAN;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < nb; s++) {
        int64_t lo = s * SLERP_SPAN, m = N - lo < SLERP_SPAN ? N - lo : SLERP_SPAN;
        sigmoid_lerp_span(y + lo, u + lo, a + lo, b + lo, m);
    }
}

void gf_sigmoid_lerp_backward_piece(float *du, float *da, float *db, const float *g, const float *u, const float *a,
                                    const float *b, int64_t N, unsigned fresh) {
    for (int64_t lo = 0; lo < N; lo += SLERP_SPAN) {
        int64_t m = N - lo < SLERP_SPAN ? N - lo : SLERP_SPAN;
        sigmoid_lerp_backward_span(du ? du + lo : NULL, da ? da + lo : NULL, db ? db + lo : NULL, g + lo, u + lo,
                                   a + lo, b + lo, m, fresh);
    }
}

static void sigmoid_lerp_backward_rows(float *du, float *da, float *db, const float *g, const float *u,
                                       const float *a, const float *b, int64_t N) {
    int64_t nb = (N + SLERP_SPAN - 1) / SLERP_SPAN;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < nb; s++) {
        int64_t lo = s * SLERP_SPAN, m = N - lo < SLERP_SPAN ? N - lo : SLERP_SPAN;
        sigmoid_lerp_backward_span(du ? du + lo : NULL, da ? da + lo : NULL, db ? db + lo : NULL, g + lo, u + lo,
                                   a + lo, b + lo, m, 0);
    }
}

static void sigmoid_lerp_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *u = n->in[0], *a = n->in[1], *b = n->in[2];
    sigmoid_lerp_backward_rows(gf_needs_grad(u) ? u->grad : NULL, gf_needs_grad(a) ? a->grad : NULL,
                               gf_needs_grad(b) ? b->grad : NULL, n->out->grad, u->data, a->data, b->data,
                               gf_tensor_numel(a));
}

gf_tensor *gf_sigmoid_lerp(gf_ctx *ctx, gf_tensor *u, gf_tensor *a, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(gf_tensor_same_shape(a, b) && gf_tensor_same_shape(a, u), "sigmoid_lerp: shape mismatch");
    gf_tensor *in[3] = {u, a, b};
    const gf_backend_ops *dev = gf_op_backend("sigmoid_lerp", 3, in);
    if (dev) return dev->sigmoid_lerp(ctx, u, a, b);
    gf_tensor *y = gf_tensor_like(ctx, a);
    gf_sigmoid_lerp_rows(y->data, u->data, a->data, b->data, gf_tensor_numel(a));
    gf_tape_record(ctx, &gf_op_sigmoid_lerp, y, 3, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_sigmoid_lerp = {"sigmoid_lerp", GF_FAM_ELEMWISE, sigmoid_lerp_backward, 0};
