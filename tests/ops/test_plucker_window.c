/* test_plucker_window.c — the windowed, bidirectional Grassmann mixing op of the NLI encoder:
 * finite-difference gradients (disjoint windows with padding, overlapping windows, gapped
 * windows, the ε branch, no normalisation), a naive double-precision reference that builds the
 * partner sets window by window and projects every pair per head before averaging, and locality:
 * padding and tokens outside t's windows never change g_t. */
#include "gf_test.h"
#include "gradcheck.h"
#include "gflow/nli.h"
#include <string.h>

typedef struct { const float *mask; int64_t window, stride, heads; float eps; int normalize; } pw_args;

static gf_tensor *b_pw(gf_ctx *c, gf_tensor **in, void *u) {
    pw_args *a = u;
    return gf_plucker_window(c, in[0], a->mask, in[1], in[2], a->window, a->stride, a->heads, a->eps, a->normalize);
}

/* naive: partners from an explicit (L, L) "shares a window" table; per pair, per head,
 * W_h p̂_h + b_h, then the mean over partners; g = 0 for padding or no partner. Double. */
static void naive_pw(gf_tensor **in, void *u, double *g) {
    const gf_tensor *z = in[0], *w = in[1], *b = in[2];
    const pw_args *a = u;
    int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, D = w->shape[0];
    int64_t H = a->heads, Ph = P / H, Dh = D / H;
    double *p = malloc((size_t)P * sizeof(double));
    uint8_t *share = calloc((size_t)(L * L), 1);
    for (int64_t k = 0; k * a->stride < L; k++)
        for (int64_t t = k * a->stride; t < k * a->stride + a->window && t < L; t++)
            for (int64_t s = k * a->stride; s < k * a->stride + a->window && s < L; s++) share[t * L + s] = 1;
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t t = 0; t < L; t++) {
            double *gt = g + (bb * L + t) * D;
            for (int64_t d = 0; d < D; d++) gt[d] = 0;
            const float *m = a->mask ? a->mask + bb * L : NULL;
            if (m && m[t] == 0.0f) continue;
            int cnt = 0;
            for (int64_t s = 0; s < L; s++) {
                if (s == t || !share[t * L + s] || (m && m[s] == 0.0f)) continue;
                double sc = gc_plucker_p(z->data + (bb * L + t) * R, z->data + (bb * L + s) * R, R, p, a->eps,
                                         a->normalize);
                for (int64_t d = 0; d < D; d++) {
                    int64_t h = d / Dh;
                    double acc = b->data[d];
                    for (int64_t k = 0; k < Ph; k++) acc += (double)w->data[d * Ph + k] * p[h * Ph + k] * sc;
                    gt[d] += acc;
                }
                cnt++;
            }
            if (cnt) for (int64_t d = 0; d < D; d++) gt[d] /= cnt;
        }
    free(share);
    free(p);
}

static int run_case(const char *what, int64_t B, int64_t L, int64_t R, int64_t D, pw_args a, uint64_t seed) {
    const int64_t sz[3] = {B, L, R};
    return gc_plucker_case(what, b_pw, naive_pw, &a, sz, D, R * (R - 1) / 2 / a.heads, seed);
}

/* (2, 9): row 0 has 7 tokens, row 1 has 3 then padding then one token alone in its window */
static const float MASK29[18] = {1, 1, 1, 1, 1, 1, 1, 0, 0, /**/ 1, 1, 1, 0, 0, 0, 0, 0, 1};

GF_TEST(grad, plucker_window_disjoint_padded) {
    /* window = stride = 4: windows [0,4) [4,8) [8,9); R = 5 (P = 10) in 2 heads, D = 6 */
    GF_CHECK(run_case("pw disjoint", 2, 9, 5, 6, (pw_args){MASK29, 4, 4, 2, 1e-8f, 1}, 100) == 0, "grads");
}

GF_TEST(grad, plucker_window_overlapping) {
    /* window 4, stride 2: a token's partners span two windows (deduplicated) */
    GF_CHECK(run_case("pw overlap", 2, 9, 4, 4, (pw_args){MASK29, 4, 2, 2, 1e-8f, 1}, 200) == 0, "grads");
}

GF_TEST(grad, plucker_window_gapped_and_eps) {
    /* window 2, stride 3: positions 2, 5, 8 lie in no window (g = 0) */
    GF_CHECK(run_case("pw gapped", 2, 9, 4, 3, (pw_args){NULL, 2, 3, 1, 1e-8f, 1}, 300) == 0, "grads");
    /* ε far above every |p|: p̂ = p/ε everywhere */
    GF_CHECK(run_case("pw eps", 1, 6, 4, 6, (pw_args){NULL, 3, 3, 3, 50.0f, 1}, 400) == 0, "grads");
    GF_CHECK(run_case("pw nonorm", 2, 9, 4, 4, (pw_args){MASK29, 4, 4, 2, 1e-8f, 0}, 500) == 0, "grads");
}

GF_TEST(grad, plucker_window_locality) {
    /* recipe widths: r = 64 (P = 2016), 4 heads, window = stride = 8, Ls = 24 */
    int64_t B = 1, L = 24, R = 64, D = 16;
    float mask[24];
    for (int i = 0; i < 24; i++) mask[i] = i < 20;
    int64_t sz[3] = {B, L, R}, sw[2] = {D, 504}, sb[1] = {D};
    gf_tensor *in[3] = {gc_leaf(3, sz, 7, 1.0f), gc_leaf(2, sw, 8, 0.1f), gc_leaf(1, sb, 9, 0.1f)};
    pw_args a = {mask, 8, 8, 4, 1e-8f, 1};
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *g = gc_forward_vs_ref(&ctx, b_pw, in, &a, naive_pw);
    for (int64_t i = 20 * D; i < 24 * D; i++) GF_CHECK(g->data[i] == 0.0f, "padding must get g = 0");
    /* perturb token 10 (window [8, 16)): only positions 8..15 change, all of them */
    for (int i = 0; i < R; i++) in[0]->data[10 * R + i] += 1.0f;
    gf_tensor *g2 = b_pw(&ctx, in, &a);
    for (int64_t t = 0; t < L; t++) {
        int same = memcmp(g->data + t * D, g2->data + t * D, (size_t)D * sizeof(float)) == 0;
        if (t >= 8 && t < 16) GF_CHECK(!same, "position %lld shares a window with 10 and must change", (long long)t);
        else GF_CHECK(same, "position %lld is outside 10's window and changed", (long long)t);
    }
    /* perturb a padding position: nothing changes */
    for (int i = 0; i < R; i++) in[0]->data[21 * R + i] += 1.0f;
    gf_tensor *g3 = b_pw(&ctx, in, &a);
    GF_CHECK(memcmp(g2->data, g3->data, (size_t)(L * D) * sizeof(float)) == 0, "padding changed g");
    gf_ctx_free(&ctx);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}
