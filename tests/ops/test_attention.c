/* test_attention.c — the fused attention op (src/ops/attention.c):
 * finite-difference gradients at small sizes (causal, padded bidirectional, causal + left padding),
 * a naive double-precision reference (full score matrix, softmax, textbook backward) for a case that
 * crosses the key tile, its gradient added to dqkv and stored into a fresh one, causality and
 * padding invariance bit for bit, and thread-count determinism. */
#include "gf_test.h"
#include "gradcheck.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct att_case {
    int64_t H;
    int causal;
    const uint8_t *mask; // (B, L) or NULL
} att_case;

static gf_tensor *b_att(gf_ctx *c, gf_tensor **in, void *u) {
    const att_case *a = u;
    return gf_attention(c, in[0], a->H, a->causal, a->mask);
}

GF_TEST(grad, attention_gradcheck) {
    int64_t s[3] = {2, 5, 24}; /* B=2, L=5, D=8, H=2 */
    gf_tensor *in[1] = {gc_leaf(3, s, 31, 1.0f)};
    static const uint8_t pad[10] = {1, 1, 0, 1, 0, /* */ 0, 1, 1, 1, 1}; /* (B, L) */
    att_case causal = {2, 1, NULL}, bidir = {2, 0, pad}, both = {2, 1, pad};
    gc_opts o = {.h = 3e-3, .atol = 2e-4};
    GF_CHECK(gc_check("attention(causal)", b_att, in, 1, &causal, o) == 0, "causal grads");
    GF_CHECK(gc_check("attention(bidir, padded)", b_att, in, 1, &bidir, o) == 0, "padded bidirectional grads");
    /* batch 1 row 0 sees only a padded key under causality: output 0, no gradient */
    GF_CHECK(gc_check("attention(causal, left pad)", b_att, in, 1, &both, o) == 0, "causal + padding grads");
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = gf_attention(&ctx, in[0], 2, 1, pad);
    GF_CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 8, "output shape");
    for (int d = 0; d < 8; d++) GF_CHECK(y->data[5 * 8 + d] == 0.0f, "fully padded row outputs 0");
    gf_ctx_free(&ctx);
    gc_leaf_free(in[0]);
}

/* Naive reference in double for one (b, h): materialise S (L, L), softmax, O = P V, and the
 * textbook softmax backward dS = P ⊙ (dP - rowsum(P ⊙ dP)) (not the fused op's dO·O form). */
static void att_ref(const float *qkv, const float *dy, int64_t B, int64_t L, int64_t D, int64_t H, int causal,
                    const uint8_t *mask, double *y, double *dqkv) {
    const int64_t Dh = D / H, ld = 3 * D;
    const double sc = 1.0 / sqrt((double)Dh);
    double *P = malloc((size_t)(L * L) * sizeof(double));  // (L, L)
    double *dP = malloc((size_t)(L * L) * sizeof(double)); // (L, L)
    memset(dqkv, 0, (size_t)(B * L * ld) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *X = qkv + b * L * ld;
#define Qv(i, d) ((double)X[(i) * ld + h * Dh + (d)])
#define Kv(i, d) ((double)X[(i) * ld + D + h * Dh + (d)])
#define Vv(i, d) ((double)X[(i) * ld + 2 * D + h * Dh + (d)])
#define VIS(i, j) ((!causal || (j) <= (i)) && (!mask || mask[b * L + (j)]))
            for (int64_t i = 0; i < L; i++) {
                double mx = -INFINITY, z = 0;
                for (int64_t j = 0; j < L; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < Dh; d++) s += Qv(i, d) * Kv(j, d);
                    P[i * L + j] = VIS(i, j) ? s * sc : -INFINITY;
                    if (P[i * L + j] > mx) mx = P[i * L + j];
                }
                for (int64_t j = 0; j < L; j++) {
                    P[i * L + j] = (mx == -INFINITY) ? 0.0 : exp(P[i * L + j] - mx);
                    z += P[i * L + j];
                }
                for (int64_t j = 0; j < L; j++) P[i * L + j] = z > 0 ? P[i * L + j] / z : 0.0;
                for (int64_t d = 0; d < Dh; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < L; j++) o += P[i * L + j] * Vv(j, d);
                    y[(b * L + i) * D + h * Dh + d] = o;
                }
            }
            const float *G = dy + b * L * D + h * Dh;
            double *dX = dqkv + b * L * ld;
            for (int64_t i = 0; i < L; i++) {
                double rs = 0;
                for (int64_t j = 0; j < L; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < Dh; d++) s += (double)G[i * D + d] * Vv(j, d);
                    dP[i * L + j] = s;
                    rs += P[i * L + j] * s;
                }
                for (int64_t j = 0; j < L; j++) {
                    double p = P[i * L + j], ds = p * (dP[i * L + j] - rs);
                    for (int64_t d = 0; d < Dh; d++) {
                        dX[i * ld + h * Dh + d] += sc * ds * Kv(j, d);
                        dX[j * ld + D + h * Dh + d] += sc * ds * Qv(i, d);
                        dX[j * ld + 2 * D + h * Dh + d] += p * G[i * D + d];
                    }
                }
            }
#undef Qv
#undef Kv
#undef Vv
#undef VIS
        }
    free(P);
    free(dP);
}

/* max |a - ref| / max |ref| over n elements */
static double rel_err(const float *a, const double *ref, int64_t n) {
    double md = 0, mr = 0;
    for (int64_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)a[i] - ref[i]));
        mr = fmax(mr, fabs(ref[i]));
    }
    return md / (mr > 0 ? mr : 1.0);
}

static void check_vs_reference(int64_t B, int64_t L, int64_t D, int64_t H, uint64_t seed) {
    int64_t s[3] = {B, L, 3 * D};
    gf_tensor *qkv = gc_leaf(3, s, seed, 1.0f);
    uint8_t *mask = malloc((size_t)(B * L)); // (B, L)
    for (int64_t i = 0; i < B * L; i++) mask[i] = 1;
    for (int64_t i = 60; i < L; i++) mask[i] = 0;                  /* batch 0: tail padding, key tile 2 empty */
    if (B > 1) {
        for (int64_t i = 0; i < 3; i++) mask[L + i] = 0;           /* batch 1: left padding ... */
        for (int64_t i = 20; i < L; i += 7) mask[L + i] = 0;       /* ... and holes */
    }
    float *dy = malloc(sizeof(float) * (size_t)(B * L * D));       // (B, L, D)
    gf_rng r; gf_rng_seed(&r, seed + 1);
    for (int64_t i = 0; i < B * L * D; i++) dy[i] = (float)gf_rng_normal(&r);
    double *yref = malloc(sizeof(double) * (size_t)(B * L * D));     // (B, L, D)
    double *gref = malloc(sizeof(double) * (size_t)(B * L * 3 * D)); // (B, L, 3D)
    const att_case cases[3] = {{H, 1, NULL}, {H, 0, mask}, {H, 1, mask}};
    const char *names[3] = {"causal", "bidirectional padded", "causal padded"};
    for (int c = 0; c < 6; c++) {
        /* c >= 3: dqkv fresh (attention the first to write it), NaN until the op stores it */
        const int k = c % 3, fresh = c >= 3;
        att_ref(qkv->data, dy, B, L, D, H, cases[k].causal, cases[k].mask, yref, gref);
        gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
        for (int64_t i = 0; i < B * L * 3 * D; i++) qkv->grad[i] = fresh ? NAN : 0.0f;
        gf_tensor *y = gf_attention(&ctx, qkv, H, cases[k].causal, cases[k].mask);
        if (fresh) qkv->flags |= GF_T_GRAD_FRESH;
        gf_tape_backward_from(&ctx, y, dy);
        GF_CHECK(!(qkv->flags & GF_T_GRAD_FRESH), "%s: dqkv left flagged fresh", names[k]);
        double ey = rel_err(y->data, yref, B * L * D), eg = rel_err(qkv->grad, gref, B * L * 3 * D);
        if (getenv("GC_VERBOSE"))
            printf("    attention Dh=%lld %s%s: rel err y %.3g, dqkv %.3g\n", (long long)(D / H), names[k],
                   fresh ? " (dqkv fresh)" : "", ey, eg);
        GF_CHECK(ey < 1e-5, "Dh=%lld %s: forward rel err %.3g", (long long)(D / H), names[k], ey);
        GF_CHECK(eg < 1e-5, "Dh=%lld %s%s: gradient rel err %.3g", (long long)(D / H), names[k],
                 fresh ? " (dqkv fresh)" : "", eg);
        for (int64_t i = 0; i < B * L * D; i++) GF_CHECK_NEAR(y->data[i], yref[i], 1e-6, 1e-5);
        gf_ctx_free(&ctx);
    }
    if (B > 1) { /* fully padded query rows (batch 1, rows 0..2, causal) output exactly 0 */
        gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
        gf_tensor *y = gf_attention(&ctx, qkv, H, 1, mask);
        for (int64_t i = 0; i < 3 * D; i++) GF_CHECK(y->data[L * D + i] == 0.0f, "padded row output");
        gf_ctx_free(&ctx);
    }
    free(mask); free(dy); free(yref); free(gref);
    gc_leaf_free(qkv);
}

GF_TEST(grad, attention_vs_naive_reference) {
    check_vs_reference(2, 70, 32, 4, 41); /* L crosses the 64-key tile; Dh = 8 */
    check_vs_reference(1, 70, 128, 2, 43); /* Dh = 64, the Transformer baseline's head size */
    check_vs_reference(1, 70, 48, 2, 45);  /* Dh = 24, not a multiple of the 16-wide register block */
    check_vs_reference(1, 128, 256, 8, 47); /* the paper's heads (Dh = 32) and length: two full tiles */
}

GF_TEST(grad, attention_causal_and_padding_invariance) {
    enum { B = 2, L = 70, D = 32, H = 4, T = 40 };
    int64_t s[3] = {B, L, 3 * D};
    gf_tensor *qkv = gc_leaf(3, s, 51, 1.0f);
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    gf_ctx_set_grad(&ctx, 0);
    float *y0 = malloc(sizeof(float) * B * L * D);
    memcpy(y0, gf_attention(&ctx, qkv, H, 1, NULL)->data, sizeof(float) * B * L * D);
    /* perturb all of row T+1 (its q, k and v) in both batch items */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 3 * D; c++) qkv->data[(b * L + T + 1) * 3 * D + c] += 0.5f;
    gf_tensor *y1 = gf_attention(&ctx, qkv, H, 1, NULL);
    for (int b = 0; b < B; b++) {
        GF_CHECK(memcmp(y0 + b * L * D, y1->data + b * L * D, sizeof(float) * (T + 1) * D) == 0,
                 "batch %d: rows <= %d changed when row %d changed", b, T, T + 1);
        GF_CHECK(memcmp(y0 + (b * L + T + 1) * D, y1->data + (b * L + T + 1) * D, sizeof(float) * D) != 0,
                 "row %d itself must change", T + 1);
    }
    /* a padded key's k and v never reach other rows (bidirectional) */
    uint8_t mask[B * L];
    for (int i = 0; i < B * L; i++) mask[i] = (i % 5) != 3;
    memcpy(y0, gf_attention(&ctx, qkv, H, 0, mask)->data, sizeof(float) * B * L * D);
    for (int c = D; c < 3 * D; c++) qkv->data[(L + 8) * 3 * D + c] -= 1.0f; /* batch 1, key 8 (padded) */
    y1 = gf_attention(&ctx, qkv, H, 0, mask);
    GF_CHECK(memcmp(y0, y1->data, sizeof(float) * B * L * D) == 0, "padded key changed the output");
    gf_ctx_free(&ctx);
    free(y0);
    gc_leaf_free(qkv);
}

GF_TEST(grad, attention_thread_determinism) {
    enum { B = 2, L = 70, D = 32, H = 4 };
    int64_t s[3] = {B, L, 3 * D};
    gf_tensor *qkv = gc_leaf(3, s, 61, 1.0f);
    float *dy = malloc(sizeof(float) * B * L * D), *g[2], *y[2];
    gf_rng r; gf_rng_seed(&r, 62);
    for (int i = 0; i < B * L * D; i++) dy[i] = (float)gf_rng_normal(&r);
    int old = gf_threads_get();
    for (int k = 0; k < 2; k++) {
        gf_threads_set(k == 0 ? 1 : 2);
        gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
        memset(qkv->grad, 0, sizeof(float) * B * L * 3 * D);
        gf_tensor *out = gf_attention(&ctx, qkv, H, 1, NULL);
        gf_tape_backward_from(&ctx, out, dy);
        y[k] = malloc(sizeof(float) * B * L * D);
        g[k] = malloc(sizeof(float) * B * L * 3 * D);
        memcpy(y[k], out->data, sizeof(float) * B * L * D);
        memcpy(g[k], qkv->grad, sizeof(float) * B * L * 3 * D);
        gf_ctx_free(&ctx);
    }
    gf_threads_set(old);
    GF_CHECK(memcmp(y[0], y[1], sizeof(float) * B * L * D) == 0, "forward differs between 1 and 2 threads");
    GF_CHECK(memcmp(g[0], g[1], sizeof(float) * B * L * 3 * D) == 0, "gradient differs between 1 and 2 threads");
    for (int k = 0; k < 2; k++) { free(y[k]); free(g[k]); }
    free(dy);
    gc_leaf_free(qkv);
}

/* attention's products run where the build says (gf_attention_products, `gflow --version`): with
 * libxsmm, its JIT kernels for the paper's tile shapes on any x86-64 CPU gflow runs on (a dispatch
 * that fails would leave every product to OpenBLAS, unnoticed but for the speed) */
GF_TEST(unit, attention_products_are_the_builds) {
    const char *p = gf_attention_products();
#ifdef GF_HAVE_LIBXSMM
    GF_CHECK(!strncmp(p, "libxsmm", 7) && strstr(p, "JIT"), "built with libxsmm, yet: %s", p);
#else
    GF_CHECK(!strncmp(p, "OpenBLAS", 8), "built without libxsmm, yet: %s", p);
#endif
}
