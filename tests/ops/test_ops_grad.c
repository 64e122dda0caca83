/* test_ops_grad.c — finite-difference gradient checks for every foundation op,
 * plus naive double-precision references for the fused ones (layernorm, cross-entropy). */
#include "gf_test.h"
#include "gradcheck.h"
#include "ops/op_util.h"
#include "test_only_ops.h"
#include <string.h>

static const int64_t S23[2] = {3, 5}, S5[1] = {5};

static gf_tensor *b_linear(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_linear(c, in[0], in[1], in[2]); }
static gf_tensor *b_linear_nobias(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_linear(c, in[0], in[1], NULL); }
static gf_tensor *b_add(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_add(c, in[0], in[1]); }
static gf_tensor *b_mul(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_mul(c, in[0], in[1]); }
static gf_tensor *b_ln(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_layernorm(c, in[0], in[1], in[2], 1e-5f); }
static gf_tensor *b_gelu(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_gelu(c, in[0]); }
static gf_tensor *b_sigmoid(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sigmoid(c, in[0]); }
static gf_tensor *b_concat(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_concat(c, in[0], in[1]); }
static gf_tensor *b_sum(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sum(c, in[0]); }

GF_TEST(grad, linear) {
    int64_t sx[3] = {2, 3, 4}, sw[2] = {5, 4}, sb[1] = {5};
    gf_tensor *in[3] = {gc_leaf(3, sx, 1, 1.0f), gc_leaf(2, sw, 2, 0.5f), gc_leaf(1, sb, 3, 0.5f)};
    GF_CHECK(gc_check("linear", b_linear, in, 3, NULL, (gc_opts){0}) == 0, "linear grads");
    GF_CHECK(gc_check("linear(no bias)", b_linear_nobias, in, 2, NULL, (gc_opts){0}) == 0, "linear grads");
    /* forward value against a hand loop */
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = gf_linear(&ctx, in[0], in[1], in[2]);
    GF_CHECK(y->ndim == 3 && y->shape[2] == 5, "output shape");
    for (int r = 0; r < 6; r++) for (int o = 0; o < 5; o++) {
        double s = in[2]->data[o];
        for (int k = 0; k < 4; k++) s += (double)in[0]->data[r * 4 + k] * in[1]->data[o * 4 + k];
        GF_CHECK_NEAR(y->data[r * 5 + o], s, 1e-5, 1e-5);
    }
    gf_ctx_free(&ctx);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

GF_TEST(grad, add_and_broadcast) {
    gf_tensor *in[2] = {gc_leaf(2, S23, 4, 1.0f), gc_leaf(2, S23, 5, 1.0f)};
    GF_CHECK(gc_check("add", b_add, in, 2, NULL, (gc_opts){0}) == 0, "add grads");
    gf_tensor *bb = gc_leaf(1, S5, 6, 1.0f), *in2[2] = {in[0], bb};
    GF_CHECK(gc_check("add(broadcast)", b_add, in2, 2, NULL, (gc_opts){0}) == 0, "broadcast add grads");
    gc_leaf_free(in[0]); gc_leaf_free(in[1]); gc_leaf_free(bb);
}

GF_TEST(grad, mul_and_broadcast) {
    gf_tensor *in[2] = {gc_leaf(2, S23, 7, 1.0f), gc_leaf(2, S23, 8, 1.0f)};
    GF_CHECK(gc_check("mul", b_mul, in, 2, NULL, (gc_opts){0}) == 0, "mul grads");
    gf_tensor *bb = gc_leaf(1, S5, 9, 1.0f), *in2[2] = {in[0], bb};
    GF_CHECK(gc_check("mul(broadcast)", b_mul, in2, 2, NULL, (gc_opts){0}) == 0, "broadcast mul grads");
    gc_leaf_free(in[0]); gc_leaf_free(in[1]); gc_leaf_free(bb);
}

static const int32_t emb_ids[6] = {3, 0, 3, 6, 1, 3}; /* repeats: gradients must accumulate */
static gf_tensor *b_emb(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    int64_t s[2] = {2, 3};
    return gf_embedding(c, in[0], emb_ids, 2, s);
}
GF_TEST(grad, embedding) {
    int64_t st[2] = {7, 4};
    gf_tensor *in[1] = {gc_leaf(2, st, 10, 1.0f)};
    GF_CHECK(gc_check("embedding", b_emb, in, 1, NULL, (gc_opts){0}) == 0, "embedding grads");
    gc_leaf_free(in[0]);
}

GF_TEST(grad, layernorm) {
    int64_t sx[2] = {4, 6}, sg[1] = {6};
    gf_tensor *in[3] = {gc_leaf(2, sx, 11, 2.0f), gc_leaf(1, sg, 12, 1.0f), gc_leaf(1, sg, 13, 1.0f)};
    for (int i = 0; i < 6; i++) in[1]->data[i] += 1.0f;
    GF_CHECK(gc_check("layernorm", b_ln, in, 3, NULL, (gc_opts){.h = 3e-3}) == 0, "layernorm grads");
    /* naive double reference for the forward */
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = gf_layernorm(&ctx, in[0], in[1], in[2], 1e-5f);
    for (int r = 0; r < 4; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < 6; c++) m += in[0]->data[r * 6 + c];
        m /= 6;
        for (int c = 0; c < 6; c++) v += (in[0]->data[r * 6 + c] - m) * (in[0]->data[r * 6 + c] - m);
        v /= 6;
        for (int c = 0; c < 6; c++) {
            double ref = (in[0]->data[r * 6 + c] - m) / sqrt(v + 1e-5) * in[1]->data[c] + in[2]->data[c];
            GF_CHECK_NEAR(y->data[r * 6 + c], ref, 1e-5, 1e-5);
        }
    }
    gf_ctx_free(&ctx);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

GF_TEST(grad, gelu) {
    int64_t s[1] = {40};
    gf_tensor *in[1] = {gc_leaf(1, s, 14, 2.0f)};
    GF_CHECK(gc_check("gelu", b_gelu, in, 1, NULL, (gc_opts){.h = 1e-3}) == 0, "gelu grads");
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = gf_gelu(&ctx, in[0]);
    for (int i = 0; i < 40; i++) {
        double x = in[0]->data[i];
        GF_CHECK_NEAR(y->data[i], 0.5 * x * (1 + erf(x / sqrt(2.0))), 1e-6, 1e-5);
    }
    gf_ctx_free(&ctx);
    gc_leaf_free(in[0]);
}

/* GELU's slope (gelu.c: Φ(v) taken from the forward's y = v Φ(v) as y / v, 0.5 for |v| <= 2^-60)
 * against Φ(v) + v φ(v) in double, over [-14, 14] in steps of 2^-9 and at 0, -0, subnormals, the
 * 2^-60 switch and the underflow near -13.2: within 5e-6 of the terms' size Φ(v) + |v| φ(v) (the
 * sum cancels where the slope crosses 0 near -0.75), plus 1e-36 where both underflow. The bound is
 * gf_normal_cdf's tail (3.9e-6 of it at v = -12.4, with Φ computed directly or from y alike); Φ
 * from y without the switch is off by 0.5 at v = 2^-149 (y rounds to 0). */
GF_TEST(unit, gelu_backward_is_its_derivative) {
    static const float special[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 0x1p-149f, -0x3p-149f, 0x1p-61f, -0x1p-61f, 0x1p-59f, -0x1p-59f, 1e-20f,
                                    -1e-20f, -13.1f, -13.2f, -13.3f, 20.0f, -20.0f, 3e-8f};
    const int64_t ns = (int64_t)(sizeof special / sizeof special[0]), ng = 28 * 512 + 1, n = ng + ns;
    gf_tensor *x = gc_leaf(1, &n, 1, 1.0f);
    for (int64_t i = 0; i < ng; i++) x->data[i] = -14.0f + (float)i / 512.0f;
    memcpy(x->data + ng, special, sizeof special);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    memset(x->grad, 0, (size_t)n * sizeof(float));
    gf_tensor *y = gf_gelu(&ctx, x);
    float *dy = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) dy[i] = 1.0f;
    gf_tape_backward_from(&ctx, y, dy);
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double v = x->data[i], cdf = 0.5 * erfc(-v / sqrt(2.0)), vpdf = v * exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
        const double ref = cdf + vpdf, err = fabs(x->grad[i] - ref), tol = 5e-6 * (cdf + fabs(vpdf)) + 1e-36;
        GF_CHECK(err <= tol, "GELU'(%a) = %.9g, its definition %.9g", (float)v, (double)x->grad[i], ref);
        if (err / tol > worst) worst = err / tol;
    }
    printf("    GELU slope: worst error %.2f of the tolerance\n", worst);
    free(dy);
    gf_ctx_free(&ctx);
    gc_leaf_free(x);
}

GF_TEST(grad, sigmoid) {
    int64_t s[1] = {40};
    gf_tensor *in[1] = {gc_leaf(1, s, 15, 3.0f)};
    GF_CHECK(gc_check("sigmoid", b_sigmoid, in, 1, NULL, (gc_opts){.h = 1e-3}) == 0, "sigmoid grads");
    gc_leaf_free(in[0]);
}

static const int32_t ce_tg[5] = {2, -1, 0, 6, 2}; /* one ignored row */
static gf_tensor *b_ce(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    return gf_cross_entropy(c, in[0], ce_tg, -1, NULL, NULL);
}
GF_TEST(grad, cross_entropy) {
    int64_t s[2] = {5, 7};
    gf_tensor *in[1] = {gc_leaf(2, s, 16, 2.0f)};
    GF_CHECK(gc_check("cross_entropy", b_ce, in, 1, NULL, (gc_opts){.h = 1e-3, .atol = 1e-4}) == 0, "ce grads");
    /* naive reference: mean over the 4 counted rows of logsumexp - target logit */
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    double nll; int64_t cnt;
    gf_tensor *y = gf_cross_entropy(&ctx, in[0], ce_tg, -1, &nll, &cnt);
    double ref = 0;
    for (int r = 0; r < 5; r++) {
        if (ce_tg[r] < 0) continue;
        double se = 0;
        for (int j = 0; j < 7; j++) se += exp((double)in[0]->data[r * 7 + j]);
        ref += log(se) - in[0]->data[r * 7 + ce_tg[r]];
    }
    GF_CHECK(cnt == 4, "counted rows %lld", (long long)cnt);
    GF_CHECK_NEAR(nll, ref, 1e-9, 1e-6);
    GF_CHECK_NEAR(y->data[0], ref / 4, 1e-7, 1e-6);
    /* large logits must not overflow */
    for (int i = 0; i < 35; i++) in[0]->data[i] += 1000.0f;
    gf_tensor *y2 = gf_cross_entropy(&ctx, in[0], ce_tg, -1, NULL, NULL);
    GF_CHECK(isfinite(y2->data[0]), "finite for logits near 1000");
    gf_ctx_free(&ctx);
    gc_leaf_free(in[0]);
}

/* head_ce: 300 rows span two chunks (GF_HEAD_CHUNK = 256), so dE accumulates across chunks;
 * every 7th row is ignored, in both chunks */
enum { HC_N = 300, HC_D = 6, HC_V = 7 };
static int32_t hc_tg[HC_N];
static gf_tensor *b_head_ce(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    return gf_head_ce(c, in[0], in[1], hc_tg, -1, NULL, NULL);
}
GF_TEST(grad, head_ce) {
    for (int i = 0; i < HC_N; i++) hc_tg[i] = i % 7 == 3 ? -1 : (i * 5 + 1) % HC_V;
    int64_t sh[2] = {HC_N, HC_D}, se[2] = {HC_V, HC_D};
    gf_tensor *in[2] = {gc_leaf(2, sh, 31, 1.0f), gc_leaf(2, se, 32, 1.0f)};
    /* dh is O(1 / counted rows): an atol far below it, and h large enough for float32 noise */
    GF_CHECK(gc_check("head_ce", b_head_ce, in, 2, NULL, (gc_opts){.h = 5e-2, .atol = 1e-5}) == 0, "head_ce grads");
    gc_leaf_free(in[0]);
    gc_leaf_free(in[1]);
}

static gf_tensor *b_dropout(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    gf_rng r; /* the same key every call so finite differences see one mask */
    gf_rng_seed(&r, 77);
    gf_rng *old = c->rng;
    c->rng = &r;
    c->training = 1;
    gf_tensor *y = gf_dropout(c, in[0], 0.3f);
    c->rng = old;
    return y;
}
GF_TEST(grad, dropout) {
    int64_t s[1] = {400};
    gf_tensor *in[1] = {gc_leaf(1, s, 17, 1.0f)};
    GF_CHECK(gc_check("dropout", b_dropout, in, 1, NULL, (gc_opts){0}) == 0, "dropout grads");
    gf_ctx ctx; gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = b_dropout(&ctx, in, NULL);
    int zeros = 0;
    for (int i = 0; i < 400; i++) {
        if (y->data[i] == 0.0f) zeros++;
        else GF_CHECK_NEAR(y->data[i], in[0]->data[i] / 0.7f, 1e-6, 1e-6);
    }
    GF_CHECK(zeros > 80 && zeros < 160, "dropped %d of 400 at p=0.3", zeros);
    ctx.training = 0;
    GF_CHECK(gf_dropout(&ctx, in[0], 0.3f) == in[0], "identity in eval mode");
    gf_ctx_free(&ctx);
    gc_leaf_free(in[0]);
}

/* The mask of a batch row depends on its global row, not on which slice computes it: rows
 * [lo, lo+n) of a (2B, L, D) batch (two copies of B rows, as NLI's premises and hypotheses)
 * get the full batch's masks for those rows (data parallel: any number of ranks, one mask). */
GF_TEST(unit, dropout_mask_follows_global_row) {
    enum { B = 6, L = 3, D = 5, LO = 2, N = 3 };
    int64_t full_shape[3] = {2 * B, L, D}, part_shape[3] = {2 * N, L, D};
    gf_rng r;
    gf_ctx ctx; gf_ctx_init(&ctx, 0, &r);
    ctx.training = 1;
    gf_tensor *x = gf_tensor_new(&ctx, 3, full_shape), *xp = gf_tensor_new(&ctx, 3, part_shape);
    for (int64_t i = 0; i < 2 * B * L * D; i++) x->data[i] = 1.0f;
    for (int64_t i = 0; i < 2 * N * L * D; i++) xp->data[i] = 1.0f;
    gf_rng_seed(&r, 5);
    ctx.batch_rows = B; /* what gf_session_forward_rows(s, 0, B) sets */
    gf_tensor *y = gf_dropout(&ctx, x, 0.5f);
    gf_rng_seed(&r, 5);
    ctx.batch_row0 = LO;
    ctx.batch_rows = N;
    gf_tensor *yp = gf_dropout(&ctx, xp, 0.5f);
    int mismatches = 0, dropped = 0;
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < N; j++)
            for (int e = 0; e < L * D; e++) {
                float a = y->data[((int64_t)c * B + LO + j) * L * D + e], b = yp->data[((int64_t)c * N + j) * L * D + e];
                mismatches += a != b;
                dropped += b == 0.0f;
            }
    GF_CHECK(mismatches == 0, "%d of %d mask entries of rows [%d, %d) differ from the full batch's", mismatches,
             2 * N * L * D, LO, LO + N);
    GF_CHECK(dropped > 0 && dropped < 2 * N * L * D, "dropped %d", dropped);
    gf_ctx_free(&ctx);
}

GF_TEST(grad, concat) {
    int64_t sa[2] = {3, 2}, sb[2] = {3, 4};
    gf_tensor *in[2] = {gc_leaf(2, sa, 18, 1.0f), gc_leaf(2, sb, 19, 1.0f)};
    GF_CHECK(gc_check("concat", b_concat, in, 2, NULL, (gc_opts){0}) == 0, "concat grads");
    gc_leaf_free(in[0]); gc_leaf_free(in[1]);
}

GF_TEST(grad, sum) {
    gf_tensor *in[1] = {gc_leaf(2, S23, 20, 1.0f)};
    GF_CHECK(gc_check("sum", b_sum, in, 1, NULL, (gc_opts){0}) == 0, "sum grads");
    gc_leaf_free(in[0]);
}

/* A composed graph (two layers, a shared weight used twice, CE at the end): checks that
 * accumulation across uses and the reverse walk order are right. */
static const int32_t g_tg[4] = {1, 0, 3, 2};
static gf_tensor *b_graph(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    gf_tensor *h = gf_linear(c, in[0], in[1], in[2]);
    h = gf_gelu(c, h);
    gf_tensor *h2 = gf_linear(c, h, in[1], in[2]); /* weight reused */
    h2 = gf_add(c, h2, h);
    h2 = gf_layernorm(c, h2, in[3], in[4], 1e-5f);
    return gf_cross_entropy(c, h2, g_tg, -1, NULL, NULL);
}
GF_TEST(grad, composed_graph_shared_weight) {
    int64_t sx[2] = {4, 4}, sw[2] = {4, 4}, sb[1] = {4};
    gf_tensor *in[5] = {gc_leaf(2, sx, 21, 1.0f), gc_leaf(2, sw, 22, 0.7f), gc_leaf(1, sb, 23, 0.3f),
                        gc_leaf(1, sb, 24, 0.3f), gc_leaf(1, sb, 25, 0.3f)};
    for (int i = 0; i < 4; i++) in[3]->data[i] += 1.0f;
    GF_CHECK(gc_check("graph", b_graph, in, 5, NULL, (gc_opts){.h = 3e-3, .atol = 2e-4}) == 0, "graph grads");
    for (int i = 0; i < 5; i++) gc_leaf_free(in[i]);
}

/* gf_colsum_acc sums each column one row after another in row order (eight rows per pass over
 * the partials, op_util.c): on one thread dst[c] += x[0, c], += x[1, c], ...; on two, each
 * thread's rows into a zeroed partial, the partials added to dst in thread order. Bit for bit,
 * with and without the weights, for row counts around the block of eight. */
static void colsum_ref(float *dst, const float *x, const float *w, int64_t lo, int64_t hi, int64_t C) {
    for (int64_t r = lo; r < hi; r++)
        for (int64_t c = 0; c < C; c++) dst[c] += x[r * C + c] * (w ? w[r * C + c] : 1.0f);
}

GF_TEST(unit, colsum_adds_rows_in_order) {
    enum { NMAX = 203, C = 37 };
    static float x[NMAX * C], w[NMAX * C], got[C], ref[C], part[C];
    gf_rng r;
    gf_rng_seed(&r, 91);
    for (int i = 0; i < NMAX * C; i++) x[i] = (float)gf_rng_normal(&r) * 100.0f, w[i] = (float)gf_rng_normal(&r);
    int old = gf_threads_get(), bad = 0;
    const int64_t ns[] = {1, 7, 8, 9, 17, 63, 64, 67, 203};
    for (int th = 1; th <= 2; th++) {
        gf_threads_set(th);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int useW = 0; useW < 2; useW++) {
                int64_t N = ns[k];
                const float *wp = useW ? w : NULL;
                for (int c = 0; c < C; c++) got[c] = ref[c] = 0.25f * (float)c;
                gf_ctx ctx;
                gf_ctx_init(&ctx, 0, NULL);
                gf_colsum_acc(&ctx, got, x, wp, N, C);
                gf_ctx_free(&ctx);
                if (N < 64 || gf_threads_get() == 1) colsum_ref(ref, x, wp, 0, N, C);
                else
                    for (int t = 0; t < 2; t++) {
                        memset(part, 0, sizeof part);
                        colsum_ref(part, x, wp, N * t / 2, N * (t + 1) / 2, C);
                        for (int c = 0; c < C; c++) ref[c] += part[c];
                    }
                if (memcmp(got, ref, sizeof got) && bad++ < 3)
                    GF_CHECK(0, "colsum of %lld rows (%d threads, weights %d) is not the in-order sum",
                             (long long)N, th, useW);
            }
    }
    gf_threads_set(old);
    GF_CHECK(bad == 0, "%d cases differ", bad);
}
