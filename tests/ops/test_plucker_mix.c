/* test_plucker_mix.c — the fused Grassmann mixing op and the gated blend:
 * finite-difference gradients (normal branch, ε branch, no normalisation, offsets >= L,
 * duplicate offsets), a naive double-precision reference that projects every offset
 * separately and averages afterwards (the paper's literal order), and causality. */
#include "gf_test.h"
#include "gradcheck.h"
#include <math.h>
#include <string.h>

typedef struct { const int64_t *offs; int32_t n; float eps; int normalize; } pm_args;

static gf_tensor *b_pm(gf_ctx *c, gf_tensor **in, void *u) {
    pm_args *a = u;
    return gf_plucker_mix(c, in[0], in[1], in[2], a->offs, a->n, a->eps, a->normalize);
}

/* naive: g_t = mean over valid δ of (W p̂(t,δ) + b), 0 if none; all in double */
static void naive_pm(gf_tensor **in, void *u, double *g) {
    const gf_tensor *z = in[0], *w = in[1], *b = in[2];
    const pm_args *a = u;
    int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, D = w->shape[0];
    double *p = malloc((size_t)P * sizeof(double));
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t t = 0; t < L; t++) {
            double *gt = g + (bb * L + t) * D;
            for (int64_t d = 0; d < D; d++) gt[d] = 0;
            int cnt = 0;
            for (int q = 0; q < a->n; q++) {
                int64_t s = t - a->offs[q];
                if (s < 0) continue;
                double sc = gc_plucker_p(z->data + (bb * L + t) * R, z->data + (bb * L + s) * R, R, p, a->eps,
                                         a->normalize);
                for (int64_t d = 0; d < D; d++) {
                    double acc = b->data[d];
                    for (int64_t k = 0; k < P; k++) acc += (double)w->data[d * P + k] * p[k] * sc;
                    gt[d] += acc;
                }
                cnt++;
            }
            if (cnt) for (int64_t d = 0; d < D; d++) gt[d] /= cnt;
        }
    free(p);
}

static int run_case(const char *what, int64_t B, int64_t L, int64_t R, int64_t D, pm_args a, uint64_t seed) {
    const int64_t sz[3] = {B, L, R};
    return gc_plucker_case(what, b_pm, naive_pm, &a, sz, D, R * (R - 1) / 2, seed);
}

GF_TEST(grad, plucker_mix_normalised) {
    static const int64_t offs[4] = {1, 2, 4, 12}; /* 12 >= L: never valid */
    GF_CHECK(run_case("pm norm", 2, 7, 5, 6, (pm_args){offs, 4, 1e-8f, 1}, 100) == 0, "grads");
}

GF_TEST(grad, plucker_mix_eps_branch) {
    /* ε far above every |p|: the max picks ε everywhere, p̂ = p/ε */
    static const int64_t offs[2] = {1, 3};
    GF_CHECK(run_case("pm eps", 2, 6, 4, 5, (pm_args){offs, 2, 50.0f, 1}, 200) == 0, "grads");
}

GF_TEST(grad, plucker_mix_unnormalised_duplicates) {
    static const int64_t offs[4] = {1, 1, 2, 2}; /* duplicates weigh equally in the mean */
    GF_CHECK(run_case("pm nonorm", 1, 6, 4, 3, (pm_args){offs, 4, 1e-8f, 0}, 300) == 0, "grads");
}

GF_TEST(grad, plucker_mix_offsets_beyond_length) {
    /* every offset >= L: no position has a valid offset, g = 0 and no gradient flows */
    static const int64_t offs[2] = {5, 9};
    int64_t sz[3] = {1, 5, 4}, sw[2] = {3, 6}, sb[1] = {3};
    gf_tensor *in[3] = {gc_leaf(3, sz, 1, 1.0f), gc_leaf(2, sw, 2, 1.0f), gc_leaf(1, sb, 3, 1.0f)};
    pm_args a = {offs, 2, 1e-8f, 1};
    GF_CHECK(gc_check("pm beyond", b_pm, in, 3, &a, (gc_opts){0}) == 0, "grads");
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *g = b_pm(&ctx, in, &a);
    for (int i = 0; i < 15; i++) GF_CHECK(g->data[i] == 0.0f, "g[%d] = %g", i, g->data[i]);
    gf_ctx_free(&ctx);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

GF_TEST(grad, plucker_mix_reference_larger) {
    /* r = 32 (P = 496, the paper's width), L crosses the largest offset */
    static const int64_t offs[6] = {1, 2, 4, 8, 12, 16};
    int64_t B = 2, L = 20, R = 32, D = 16;
    int64_t sz[3] = {B, L, R}, sw[2] = {D, 496}, sb[1] = {D};
    gf_tensor *in[3] = {gc_leaf(3, sz, 7, 1.0f), gc_leaf(2, sw, 8, 0.1f), gc_leaf(1, sb, 9, 0.1f)};
    pm_args a = {offs, 6, 1e-8f, 1};
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *g = gc_forward_vs_ref(&ctx, b_pm, in, &a, naive_pm);
    /* causality: perturbing z at position t0 changes nothing before t0 */
    float saved[32];
    int64_t t0 = 9;
    memcpy(saved, in[0]->data + t0 * R, sizeof saved);
    for (int i = 0; i < 32; i++) in[0]->data[t0 * R + i] += 1.0f;
    gf_tensor *g2 = b_pm(&ctx, in, &a);
    for (int64_t t = 0; t < L; t++) {
        int same = memcmp(g->data + t * D, g2->data + t * D, (size_t)D * sizeof(float)) == 0;
        if (t < t0) GF_CHECK(same, "position %lld changed by a later token", (long long)t);
        else if (t == t0) GF_CHECK(!same, "position t0 must change");
    }
    memcpy(in[0]->data + t0 * R, saved, sizeof saved);
    gf_ctx_free(&ctx);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

static gf_tensor *b_lerp(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_lerp(c, in[0], in[1], in[2], 0.0f); }
static gf_tensor *b_lerp_c(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_lerp(c, NULL, in[1], in[2], 0.5f); }
GF_TEST(grad, lerp) {
    int64_t s[2] = {3, 4};
    gf_tensor *in[3] = {gc_leaf(2, s, 31, 1.0f), gc_leaf(2, s, 32, 1.0f), gc_leaf(2, s, 33, 1.0f)};
    GF_CHECK(gc_check("lerp", b_lerp, in, 3, NULL, (gc_opts){0}) == 0, "lerp grads");
    GF_CHECK(gc_check("lerp const", b_lerp_c, in, 3, NULL, (gc_opts){0}) == 0, "lerp grads");
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

/* The backward's scratch for the past members' gradients is not zeroed (plucker_mix.c: every
 * slot the gather reads was written): with the step arena's memory NaN before the op, z's
 * gradient is what it is with that memory zero, and finite. Rows with no valid offset and
 * offsets past the sequence end included. */
GF_TEST(unit, plucker_mix_backward_reads_no_unwritten_scratch) {
    static const int64_t offs[4] = {1, 3, 8, 40}; /* 40 >= L: never valid */
    const int64_t B = 2, L = 11, R = 6, D = 5, P = R * (R - 1) / 2;
    int64_t sz[3] = {B, L, R}, sw[2] = {D, P}, sb[1] = {D};
    pm_args a = {offs, 4, 1e-8f, 1};
    float *dz[2];
    for (int k = 0; k < 2; k++) {
        gf_tensor *in[3] = {gc_leaf(3, sz, 51, 1.0f), gc_leaf(2, sw, 52, 0.5f), gc_leaf(1, sb, 53, 0.5f)};
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        gc_arena_fill(&ctx, 1 << 20, k ? NAN : 0.0f);
        memset(in[0]->grad, 0, (size_t)(B * L * R) * sizeof(float));
        gf_tensor *g = b_pm(&ctx, in, &a);
        float *dy = malloc((size_t)(B * L * D) * sizeof(float));
        for (int64_t i = 0; i < B * L * D; i++) dy[i] = (float)((i * 7) % 11) - 5.0f;
        gf_tape_backward_from(&ctx, g, dy);
        dz[k] = malloc((size_t)(B * L * R) * sizeof(float));
        memcpy(dz[k], in[0]->grad, (size_t)(B * L * R) * sizeof(float));
        free(dy);
        gf_ctx_free(&ctx);
        for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
    }
    int finite = 1;
    for (int64_t i = 0; i < B * L * R; i++) finite &= isfinite(dz[1][i]) != 0;
    GF_CHECK(finite, "z's gradient not finite with the arena NaN");
    GF_CHECK(!memcmp(dz[0], dz[1], (size_t)(B * L * R) * sizeof(float)), "z's gradient depends on the arena's old contents");
    free(dz[0]);
    free(dz[1]);
}
