/* test_fused.c — the fused element-wise ops (sigmoid_lerp, dropout_add_layernorm, linear_gelu, gated_lerp,
 * linear_dropout_add_layernorm, layernorm_dropout): finite
 * differences, and the unfused chain of ops each replaces, bit for bit: the output, every input
 * gradient (starting non-zero, and fresh where an upstream op stores), the rng's state after; in
 * bf16 also the operand bits the ops write for the products (gf_gemm_round_into), plucker_mix's
 * against the products' own rounding. */
#include "gf_test.h"
#include "gradcheck.h"
#include <math.h>
#include <string.h>

/* ---- sigmoid_lerp = lerp(sigmoid(u), a, b, 0) ---- */

static gf_tensor *b_sl(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sigmoid_lerp(c, in[0], in[1], in[2]); }
static gf_tensor *b_sl_chain(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    return gf_lerp(c, gf_sigmoid(c, in[0]), in[1], in[2], 0.0f);
}
/* one tensor as both blends: its two gradient terms land in one buffer */
static gf_tensor *b_sl_xx(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sigmoid_lerp(c, in[0], in[1], in[1]); }
static gf_tensor *b_sl_xx_chain(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    return gf_lerp(c, gf_sigmoid(c, in[0]), in[1], in[1], 0.0f);
}

/* ---- dropout_add_layernorm = layernorm(add(x, dropout(f, p))) ---- */

typedef struct dal_user {
    float p;
    int training, wrap; /* wrap: x and f come out of a gelu, so their gradients start fresh */
    int64_t rows, row0; /* ctx->batch_rows, batch_row0 */
    uint64_t seed;      /* the rng is seeded alike on every call: one mask for finite differences */
    gf_precision precision;
    int next; /* > 0: a linear after the op, its weight in[next] (no bias), whose products read y */
} dal_user;

static gf_rng dal_rng;
static void dal_setup(gf_ctx *c, const dal_user *d) {
    gf_rng_seed(&dal_rng, d->seed);
    c->rng = &dal_rng;
    c->training = d->training;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    c->precision = d->precision;
}
static gf_tensor *dal_next(gf_ctx *c, gf_tensor **in, const dal_user *d, gf_tensor *y) {
    return d->next ? gf_linear(c, y, in[d->next], NULL) : y;
}
static gf_tensor *b_dal(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    dal_setup(c, d);
    gf_tensor *x = d->wrap ? gf_gelu(c, in[0]) : in[0], *f = d->wrap ? gf_gelu(c, in[1]) : in[1];
    return dal_next(c, in, d, gf_dropout_add_layernorm(c, x, f, d->p, in[2], in[3], 1e-5f));
}
static gf_tensor *b_dal_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    dal_setup(c, d);
    gf_tensor *x = d->wrap ? gf_gelu(c, in[0]) : in[0], *f = d->wrap ? gf_gelu(c, in[1]) : in[1];
    return dal_next(c, in, d, gf_layernorm(c, gf_add(c, x, gf_dropout(c, f, d->p)), in[2], in[3], 1e-5f));
}
/* the residual is the branch: LN(x + dropout(x)) */
static gf_tensor *b_dal_xx(gf_ctx *c, gf_tensor **in, void *u) {
    dal_setup(c, u);
    return gf_dropout_add_layernorm(c, in[0], in[0], ((const dal_user *)u)->p, in[2], in[3], 1e-5f);
}
static gf_tensor *b_dal_xx_chain(gf_ctx *c, gf_tensor **in, void *u) {
    dal_setup(c, u);
    return gf_layernorm(c, gf_add(c, in[0], gf_dropout(c, in[0], ((const dal_user *)u)->p)), in[2], in[3], 1e-5f);
}

/* ---- layernorm_dropout = dropout(layernorm(x), p) (dal_user: f unused, wrap: x out of a gelu) ---- */

static gf_tensor *b_ld(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    dal_setup(c, d);
    return dal_next(c, in, d, gf_layernorm_dropout(c, d->wrap ? gf_gelu(c, in[0]) : in[0], in[1], in[2], 1e-5f, d->p));
}
static gf_tensor *b_ld_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    dal_setup(c, d);
    gf_tensor *z = gf_layernorm(c, d->wrap ? gf_gelu(c, in[0]) : in[0], in[1], in[2], 1e-5f);
    return dal_next(c, in, d, gf_dropout(c, z, d->p));
}

/* ---- linear_gelu = gelu(linear(x, w, b)) ---- */

typedef struct lg_user {
    int wrap;      /* x, w and b come out of a gelu, so their gradients start fresh */
    int no_bias;   /* b NULL (two inputs) */
    int bias_only; /* x and w need no gradient: the bias's gradient alone */
    int next;      /* a linear after it, weight in[3] (no bias): an FFN, whose products read y and dh */
    gf_precision precision;
} lg_user;

static gf_tensor *lg_in(gf_ctx *c, gf_tensor **in, const lg_user *u, int i) {
    if (i == 2 && u->no_bias) return NULL;
    if (u->bias_only && i < 2) in[i]->flags &= ~GF_T_REQ_GRAD;
    return u->wrap ? gf_gelu(c, in[i]) : in[i];
}
static gf_tensor *b_lg(gf_ctx *c, gf_tensor **in, void *uv) {
    const lg_user *u = uv;
    c->precision = u->precision;
    gf_tensor *y = gf_linear_gelu(c, lg_in(c, in, u, 0), lg_in(c, in, u, 1), lg_in(c, in, u, 2));
    return u->next ? gf_linear(c, y, in[3], NULL) : y;
}
static gf_tensor *b_lg_chain(gf_ctx *c, gf_tensor **in, void *uv) {
    const lg_user *u = uv;
    c->precision = u->precision;
    gf_tensor *y = gf_gelu(c, gf_linear(c, lg_in(c, in, u, 0), lg_in(c, in, u, 1), lg_in(c, in, u, 2)));
    return u->next ? gf_linear(c, y, in[3], NULL) : y;
}

/* inputs (n of shapes sh) made twice alike, gradients starting at N(0, 0.5); the fused build and
 * the chain run on one copy each, backward from the same r; every bit compared */
static int64_t differ(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) return i;
    return -1;
}

static void check_bitwise(const char *what, gc_build_fn fused, gc_build_fn chain, int n, const int32_t *nd,
                          const int64_t (*sh)[3], void *user) {
    gf_tensor *in[2][8];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n; i++) {
            in[k][i] = gc_leaf(nd[i], sh[i], 900 + (uint64_t)i, i >= 2 ? 0.5f : 1.5f);
            if (i == 2)
                for (int64_t j = 0; j < gf_tensor_numel(in[k][i]); j++) in[k][i]->data[j] += 1.0f; /* a gain near 1 */
            gf_rng r;
            gf_rng_seed(&r, 950 + (uint64_t)i);
            for (int64_t j = 0; j < gf_tensor_numel(in[k][i]); j++) in[k][i]->grad[j] = 0.5f * (float)gf_rng_normal(&r);
        }
    gf_ctx c[2];
    gf_tensor *y[2];
    uint64_t rng_after[2][4];
    for (int k = 0; k < 2; k++) {
        gf_ctx_init(&c[k], 0, NULL);
        gc_arena_fill(&c[k], 1 << 20, NAN); /* a fresh gradient added to instead of stored shows */
        y[k] = (k ? chain : fused)(&c[k], in[k], user);
        memcpy(rng_after[k], dal_rng.s, sizeof rng_after[k]);
    }
    int64_t N = gf_tensor_numel(y[0]), at;
    GF_REQUIRE(N == gf_tensor_numel(y[1]), "%s: output sizes differ", what);
    GF_CHECK((at = differ(y[0]->data, y[1]->data, N)) < 0, "%s: output differs at %lld: %.9g vs %.9g", what,
             (long long)at, at < 0 ? 0.0 : y[0]->data[at], at < 0 ? 0.0 : y[1]->data[at]);
    GF_CHECK(!memcmp(rng_after[0], rng_after[1], sizeof rng_after[0]), "%s: the rng advanced differently", what);
    float *r = malloc((size_t)N * sizeof(float));
    gf_rng rr;
    gf_rng_seed(&rr, 990);
    for (int64_t j = 0; j < N; j++) r[j] = (float)gf_rng_normal(&rr);
    for (int k = 0; k < 2; k++) gf_tape_backward_from(&c[k], y[k], r);
    for (int i = 0; i < n; i++) {
        int64_t m = gf_tensor_numel(in[0][i]);
        GF_CHECK((at = differ(in[0][i]->grad, in[1][i]->grad, m)) < 0, "%s: gradient of input %d differs at %lld: %.9g vs %.9g",
                 what, i, (long long)at, at < 0 ? 0.0 : in[0][i]->grad[at], at < 0 ? 0.0 : in[1][i]->grad[at]);
    }
    free(r);
    for (int k = 0; k < 2; k++) {
        gf_ctx_free(&c[k]);
        for (int i = 0; i < n; i++) gc_leaf_free(in[k][i]);
    }
}

GF_TEST(grad, sigmoid_lerp) {
    int64_t s[2] = {5, 8};
    /* u up to ~±8: the gate near saturation on both sides */
    gf_tensor *in[3] = {gc_leaf(2, s, 601, 3.0f), gc_leaf(2, s, 602, 1.0f), gc_leaf(2, s, 603, 1.0f)};
    GF_CHECK(gc_check("sigmoid_lerp", b_sl, in, 3, NULL, (gc_opts){.h = 1e-3}) == 0, "sigmoid_lerp grads");
    GF_CHECK(gc_check("sigmoid_lerp(u, x, x)", b_sl_xx, in, 2, NULL, (gc_opts){.h = 1e-3}) == 0, "shared input grads");
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

GF_TEST(unit, sigmoid_lerp_is_the_chain) {
    static const int32_t nd[3] = {3, 3, 3};
    static const int64_t sh[3][3] = {{3, 7, 100}, {3, 7, 100}, {3, 7, 100}}, one[3][3] = {{1}, {1}, {1}};
    static const int32_t nd1[3] = {1, 1, 1};
    check_bitwise("sigmoid_lerp", b_sl, b_sl_chain, 3, nd, sh, NULL);
    check_bitwise("sigmoid_lerp(one element)", b_sl, b_sl_chain, 3, nd1, one, NULL);
    check_bitwise("sigmoid_lerp(u, x, x)", b_sl_xx, b_sl_xx_chain, 2, nd, sh, NULL);
}

GF_TEST(grad, dropout_add_layernorm) {
    int64_t sx[3] = {2, 3, 6}, sg[1] = {6};
    gf_tensor *in[4] = {gc_leaf(3, sx, 611, 2.0f), gc_leaf(3, sx, 612, 2.0f), gc_leaf(1, sg, 613, 1.0f),
                        gc_leaf(1, sg, 614, 1.0f)};
    for (int i = 0; i < 6; i++) in[2]->data[i] += 1.0f;
    dal_user drop = {.p = 0.3f, .training = 1, .seed = 77}, plain = {.p = 0.3f, .training = 0, .seed = 77};
    GF_CHECK(gc_check("dropout_add_layernorm", b_dal, in, 4, &drop, (gc_opts){.h = 3e-3}) == 0, "grads, p = 0.3");
    GF_CHECK(gc_check("dropout_add_layernorm(eval)", b_dal, in, 4, &plain, (gc_opts){.h = 3e-3}) == 0, "grads, eval");
    /* the mask drops something and keeps something at p = 0.3 over 36 elements */
    gf_ctx c;
    gf_ctx_init(&c, 0, NULL);
    gf_tensor *y = b_dal(&c, in, &drop);
    GF_REQUIRE(c.last && c.last->aux, "no mask saved");
    int kept = 0;
    for (int i = 0; i < 36; i++) kept += ((const uint8_t *)c.last->aux)[i];
    GF_CHECK(kept > 0 && kept < 36, "kept %d of 36", kept);
    (void)y;
    gf_ctx_free(&c);
    for (int i = 0; i < 4; i++) gc_leaf_free(in[i]);
}

GF_TEST(unit, dropout_add_layernorm_is_the_chain) {
    static const int32_t nd[4] = {3, 3, 1, 1};
    static const int64_t sh[4][3] = {{4, 9, 100}, {4, 9, 100}, {100}, {100}};
    static const int64_t sh2[4][3] = {{6, 5, 33}, {6, 5, 33}, {33}, {33}};
    const dal_user cases[] = {
        {.p = 0.1f, .training = 1, .seed = 5},
        {.p = 0.5f, .training = 1, .wrap = 1, .seed = 6},
        {.p = 0.1f, .training = 0, .seed = 7},                   /* eval: no mask */
        {.p = 0.0f, .training = 1, .wrap = 1, .seed = 8},        /* p = 0: no mask */
        {.p = 0.25f, .training = 1, .rows = 3, .row0 = 2, .seed = 9}, /* two copies of batch rows 2..4 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "dropout_add_layernorm case %zu", i);
        check_bitwise(what, b_dal, b_dal_chain, 4, nd, cases[i].rows ? sh2 : sh, (void *)&cases[i]);
    }
    check_bitwise("dropout_add_layernorm(x, x)", b_dal_xx, b_dal_xx_chain, 4, nd, sh, (void *)&cases[0]);
    /* bf16 with a linear after it: on oneDNN's path its products read the bits of y that the op
     * wrote (gf_gemm_round_into), the chain's rounded by the product; the same bits either way */
    static const int32_t nd5[5] = {3, 3, 1, 1, 2};
    static const int64_t sh5[5][3] = {{4, 9, 100}, {4, 9, 100}, {100}, {100}, {7, 100}};
    const dal_user next = {.p = 0.1f, .training = 1, .wrap = 1, .seed = 10, .precision = GF_PREC_BF16, .next = 4};
    check_bitwise("dropout_add_layernorm then linear, bf16", b_dal, b_dal_chain, 5, nd5, sh5, (void *)&next);
}

GF_TEST(grad, layernorm_dropout) {
    int64_t sx[3] = {2, 3, 6}, sg[1] = {6};
    gf_tensor *in[3] = {gc_leaf(3, sx, 631, 2.0f), gc_leaf(1, sg, 632, 1.0f), gc_leaf(1, sg, 633, 1.0f)};
    for (int i = 0; i < 6; i++) in[1]->data[i] += 1.0f;
    dal_user drop = {.p = 0.3f, .training = 1, .seed = 78};
    GF_CHECK(gc_check("layernorm_dropout", b_ld, in, 3, &drop, (gc_opts){.h = 3e-3}) == 0, "grads, p = 0.3");
    /* one node of its own, its mask dropping something and keeping something over 36 elements */
    gf_ctx c;
    gf_ctx_init(&c, 0, NULL);
    b_ld(&c, in, &drop);
    GF_REQUIRE(c.n_nodes == 1 && c.last->op == &gf_op_layernorm_dropout && c.last->aux, "not one layernorm_dropout node");
    int kept = 0;
    for (int i = 0; i < 36; i++) kept += ((const uint8_t *)c.last->aux)[i];
    GF_CHECK(kept > 0 && kept < 36, "kept %d of 36", kept);
    /* not training: LayerNorm's own node */
    gf_ctx_reset(&c);
    dal_user plain = {.p = 0.3f, .training = 0, .seed = 78};
    b_ld(&c, in, &plain);
    GF_CHECK(c.n_nodes == 1 && c.last->op == &gf_op_layernorm, "eval: not layernorm's node");
    gf_ctx_free(&c);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

/* the output, x's gradient (added to, or stored fresh: wrap), the gain's and the shift's, the rng
 * after: the chain's bits, with the mask's rows keyed as dropout keys them (copies of batch rows;
 * a 1-D x, whose one LayerNorm row spans dropout's 33 rows: three copies of 11 batch rows) */
GF_TEST(unit, layernorm_dropout_is_the_chain) {
    static const int32_t nd[3] = {3, 1, 1}, nd1[3] = {1, 1, 1};
    static const int64_t sh[3][3] = {{4, 9, 100}, {100}, {100}}, sh2[3][3] = {{6, 5, 33}, {33}, {33}};
    static const int64_t sh1[3][3] = {{33}, {33}, {33}};
    const dal_user cases[] = {
        {.p = 0.1f, .training = 1, .seed = 15},
        {.p = 0.5f, .training = 1, .wrap = 1, .seed = 16},
        {.p = 0.1f, .training = 0, .seed = 17},                    /* eval: layernorm alone */
        {.p = 0.0f, .training = 1, .wrap = 1, .seed = 18},         /* p = 0: layernorm alone */
        {.p = 0.25f, .training = 1, .rows = 3, .row0 = 2, .seed = 19}, /* two copies of batch rows 2..4 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "layernorm_dropout case %zu", i);
        check_bitwise(what, b_ld, b_ld_chain, 3, nd, cases[i].rows ? sh2 : sh, (void *)&cases[i]);
    }
    const dal_user one_row = {.p = 0.5f, .training = 1, .wrap = 1, .rows = 11, .row0 = 4, .seed = 20}; /* 3 copies of 11 */
    check_bitwise("layernorm_dropout(1-D x)", b_ld, b_ld_chain, 3, nd1, sh1, (void *)&one_row);
    /* bf16 with a linear after it, which reads the bits of y the op wrote (as linear_gelu's) */
    static const int32_t nd4[4] = {3, 1, 1, 2};
    static const int64_t sh4[4][3] = {{4, 9, 100}, {100}, {100}, {7, 100}};
    const dal_user next = {.p = 0.1f, .training = 1, .wrap = 1, .seed = 21, .precision = GF_PREC_BF16, .next = 3};
    check_bitwise("layernorm_dropout then linear, bf16", b_ld, b_ld_chain, 4, nd4, sh4, (void *)&next);
}

GF_TEST(grad, linear_gelu) {
    int64_t sx[3] = {2, 3, 5}, sw[2] = {6, 5}, sb[1] = {6};
    gf_tensor *in[3] = {gc_leaf(3, sx, 621, 1.5f), gc_leaf(2, sw, 622, 0.7f), gc_leaf(1, sb, 623, 0.5f)};
    lg_user plain = {0}, nob = {.no_bias = 1};
    GF_CHECK(gc_check("linear_gelu", b_lg, in, 3, &plain, (gc_opts){.h = 1e-3}) == 0, "linear_gelu grads");
    GF_CHECK(gc_check("linear_gelu(no bias)", b_lg, in, 2, &nob, (gc_opts){.h = 1e-3}) == 0, "no-bias grads");
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
}

GF_TEST(unit, linear_gelu_is_the_chain) {
    static const int32_t nd[3] = {3, 2, 1};
    /* 21 rows (the column sum's one-thread path), 120 rows (its per-thread partials), one row
     * (the GEMV path) */
    static const int64_t small[3][3] = {{3, 7, 40}, {50, 40}, {50}}, many[3][3] = {{4, 30, 40}, {70, 40}, {70}};
    static const int64_t one[3][3] = {{1, 1, 33}, {20, 33}, {20}};
    const lg_user cases[] = {{0}, {.wrap = 1}, {.bias_only = 1}, {.precision = GF_PREC_BF16, .wrap = 1}};
    const int64_t (*shapes[])[3] = {small, many, one};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "linear_gelu shape %zu case %zu", k, i);
            check_bitwise(what, b_lg, b_lg_chain, 3, nd, shapes[k], (void *)&cases[i]);
        }
    const lg_user nob = {.no_bias = 1, .wrap = 1};
    check_bitwise("linear_gelu(no bias)", b_lg, b_lg_chain, 2, nd, many, (void *)&nob);
    /* bf16 with the next linear: on oneDNN's path its products and linear_gelu's backward ones
     * read the bits of y and dh that linear_gelu wrote (gf_gemm_round_into), the chain's rounded by
     * the products; the same bits either way */
    static const int32_t nd4[4] = {3, 2, 1, 2};
    static const int64_t ffn[4][3] = {{4, 30, 40}, {70, 40}, {70}, {9, 70}};
    const lg_user next = {.precision = GF_PREC_BF16, .wrap = 1, .next = 1};
    check_bitwise("linear_gelu then linear, bf16", b_lg, b_lg_chain, 4, nd4, ffn, (void *)&next);
}

/* ---- gated_lerp = sigmoid_lerp(concat_linear(a, b, w, bias), a, b) ---- */

typedef struct gl_user {
    int wrap;      /* a, b and w come out of a gelu, so their gradients start fresh */
    int no_bias;   /* bias NULL: w is in[2] (three inputs) */
    int bias_only; /* a, b and w need no gradient: the bias's gradient alone */
    int same;      /* gated_lerp(a, a, w, bias): in[1] unused */
    gf_precision precision;
} gl_user;

/* a = in[0], b = in[1], bias = in[2], w = in[3] (bias NULL: w = in[2]) */
static gf_tensor *gl_in(gf_ctx *c, gf_tensor **in, const gl_user *u, int i) {
    if (u->bias_only && i != 2) in[i]->flags &= ~GF_T_REQ_GRAD;
    return u->wrap && i != 2 ? gf_gelu(c, in[i]) : in[i];
}
static void gl_args(gf_ctx *c, gf_tensor **in, const gl_user *u, gf_tensor **args) {
    args[0] = gl_in(c, in, u, 0);
    args[1] = u->same ? args[0] : gl_in(c, in, u, 1);
    args[2] = u->no_bias ? gl_in(c, in, u, 2) : gl_in(c, in, u, 3);
    args[3] = u->no_bias ? NULL : gl_in(c, in, u, 2);
}
static gf_tensor *b_gl(gf_ctx *c, gf_tensor **in, void *uv) {
    gf_tensor *x[4];
    c->precision = ((const gl_user *)uv)->precision;
    gl_args(c, in, uv, x);
    return gf_gated_lerp(c, x[0], x[1], x[2], x[3]);
}
static gf_tensor *b_gl_chain(gf_ctx *c, gf_tensor **in, void *uv) {
    gf_tensor *x[4];
    c->precision = ((const gl_user *)uv)->precision;
    gl_args(c, in, uv, x);
    return gf_sigmoid_lerp(c, gf_concat_linear(c, x[0], x[1], x[2], x[3]), x[0], x[1]);
}

GF_TEST(grad, gated_lerp) {
    int64_t sx[3] = {2, 3, 5}, sb[1] = {5}, sw[2] = {5, 10};
    gf_tensor *in[4] = {gc_leaf(3, sx, 641, 1.5f), gc_leaf(3, sx, 642, 1.5f), gc_leaf(1, sb, 643, 0.5f),
                        gc_leaf(2, sw, 644, 0.5f)};
    gl_user plain = {0}, same = {.same = 1};
    GF_CHECK(gc_check("gated_lerp", b_gl, in, 4, &plain, (gc_opts){.h = 1e-3}) == 0, "gated_lerp grads");
    GF_CHECK(gc_check("gated_lerp(a, a)", b_gl, in, 4, &same, (gc_opts){.h = 1e-3}) == 0, "shared input grads");
    gf_tensor *nob[3] = {in[0], in[1], in[3]};
    gl_user nb = {.no_bias = 1};
    GF_CHECK(gc_check("gated_lerp(no bias)", b_gl, nob, 3, &nb, (gc_opts){.h = 1e-3}) == 0, "no-bias grads");
    for (int i = 0; i < 4; i++) gc_leaf_free(in[i]);
}

/* the output and every gradient: the chain's bits, through the column sum's one-thread path (21
 * rows) and its per-thread partials (120 rows), inputs fresh (wrap) or not, a and b one tensor,
 * the bias's gradient alone, no bias; in bf16, where the backward's products read the bits of du
 * the op wrote (gf_gemm_round_into), the chain's rounded by the products */
GF_TEST(unit, gated_lerp_is_the_chain) {
    static const int32_t nd[4] = {3, 3, 1, 2};
    static const int64_t small[4][3] = {{3, 7, 40}, {3, 7, 40}, {40}, {40, 80}},
                         many[4][3] = {{4, 30, 33}, {4, 30, 33}, {33}, {33, 66}};
    const gl_user cases[] = {{0}, {.wrap = 1}, {.bias_only = 1}, {.same = 1, .wrap = 1}, {.same = 1},
                             {.wrap = 1, .precision = GF_PREC_BF16}, {.same = 1, .precision = GF_PREC_BF16}};
    const int64_t (*shapes[])[3] = {small, many};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "gated_lerp shape %zu case %zu", k, i);
            check_bitwise(what, b_gl, b_gl_chain, 4, nd, shapes[k], (void *)&cases[i]);
        }
    static const int32_t nd3[3] = {3, 3, 2};
    static const int64_t nob[3][3] = {{4, 30, 33}, {4, 30, 33}, {33, 66}};
    const gl_user nb = {.no_bias = 1, .wrap = 1};
    check_bitwise("gated_lerp(no bias)", b_gl, b_gl_chain, 3, nd3, nob, (void *)&nb);
    const gl_user nb16 = {.no_bias = 1, .wrap = 1, .precision = GF_PREC_BF16};
    check_bitwise("gated_lerp(no bias), bf16", b_gl, b_gl_chain, 3, nd3, nob, (void *)&nb16);
}

/* ---- ops whose bf16 operand bits (gf_gemm_round_into) have no unfused chain to be checked by:
 * against the products rounding the operand themselves, the same build with the step's copies
 * full (none made or kept). plucker_mix's pbar (its projection's A), layernorm's and attention's
 * outputs (a linear's A after them) ---- */

static void bits_setup(gf_ctx *c, const void *full) {
    c->precision = GF_PREC_BF16;
    if (full) c->n_bf16_packs = (int)(sizeof c->bf16_packs / sizeof c->bf16_packs[0]);
}
static const int64_t pm_offs[3] = {1, 2, 4};
static gf_tensor *b_pm16(gf_ctx *c, gf_tensor **in, void *full) {
    bits_setup(c, full);
    return gf_plucker_mix(c, in[0], in[1], in[2], pm_offs, 3, 1e-6f, 1);
}
static gf_tensor *b_pm16_full(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return b_pm16(c, in, c); }
static gf_tensor *b_ln16(gf_ctx *c, gf_tensor **in, void *full) {
    bits_setup(c, full);
    return gf_linear(c, gf_layernorm(c, in[0], in[1], in[2], 1e-5f), in[3], NULL);
}
static gf_tensor *b_ln16_full(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return b_ln16(c, in, c); }
static gf_tensor *b_att16(gf_ctx *c, gf_tensor **in, void *full) {
    bits_setup(c, full);
    return gf_linear(c, gf_attention(c, in[0], 2, 1, NULL), in[1], NULL);
}
static gf_tensor *b_att16_full(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return b_att16(c, in, c); }

GF_TEST(unit, bf16_operand_bits_are_the_products_own) {
    static const int32_t nd[4] = {3, 2, 1, 2};
    static const int64_t pm[3][3] = {{3, 20, 8}, {6, 28}, {6}}; /* r = 8: P = 28 */
    check_bitwise("plucker_mix, bf16", b_pm16, b_pm16_full, 3, nd, pm, NULL);
    static const int32_t nd_ln[4] = {3, 1, 1, 2};
    static const int64_t ln[4][3] = {{4, 9, 40}, {40}, {40}, {7, 40}};
    check_bitwise("layernorm then linear, bf16", b_ln16, b_ln16_full, 4, nd_ln, ln, NULL);
    static const int32_t nd_att[2] = {3, 2};
    static const int64_t att[2][3] = {{3, 70, 48}, {5, 16}}; /* D = 16, two heads; 70 rows: two query tiles */
    check_bitwise("attention then linear, bf16", b_att16, b_att16_full, 2, nd_att, att, NULL);
}

/* ---- linear_dropout_add_layernorm = dropout_add_layernorm(x, linear(h, w, b)) ----
 * in: x, h, the gain, the shift, w, b (no_bias: five inputs) */

typedef struct ldal_user {
    dal_user d; /* wrap: x and h out of a gelu */
    int no_bias;
} ldal_user;

static gf_tensor *b_ldal(gf_ctx *c, gf_tensor **in, void *uv) {
    const ldal_user *u = uv;
    dal_setup(c, &u->d);
    gf_tensor *x = u->d.wrap ? gf_gelu(c, in[0]) : in[0], *h = u->d.wrap ? gf_gelu(c, in[1]) : in[1];
    gf_tensor *y = gf_linear_dropout_add_layernorm(c, x, h, in[4], u->no_bias ? NULL : in[5], u->d.p, in[2], in[3], 1e-5f);
    return dal_next(c, in, &u->d, y);
}
static gf_tensor *b_ldal_chain(gf_ctx *c, gf_tensor **in, void *uv) {
    const ldal_user *u = uv;
    dal_setup(c, &u->d);
    gf_tensor *x = u->d.wrap ? gf_gelu(c, in[0]) : in[0], *h = u->d.wrap ? gf_gelu(c, in[1]) : in[1];
    gf_tensor *f = gf_linear(c, h, in[4], u->no_bias ? NULL : in[5]);
    return dal_next(c, in, &u->d, gf_dropout_add_layernorm(c, x, f, u->d.p, in[2], in[3], 1e-5f));
}

GF_TEST(grad, linear_dropout_add_layernorm) {
    int64_t sx[3] = {2, 3, 6}, sh[3] = {2, 3, 4}, sg[1] = {6}, sw[2] = {6, 4};
    gf_tensor *in[6] = {gc_leaf(3, sx, 651, 2.0f), gc_leaf(3, sh, 652, 1.0f), gc_leaf(1, sg, 653, 1.0f),
                        gc_leaf(1, sg, 654, 1.0f), gc_leaf(2, sw, 655, 1.0f), gc_leaf(1, sg, 656, 1.0f)};
    for (int i = 0; i < 6; i++) in[2]->data[i] += 1.0f;
    ldal_user drop = {.d = {.p = 0.3f, .training = 1, .seed = 79}}, plain = {.d = {.p = 0.3f, .seed = 79}};
    ldal_user nob = {.d = {.p = 0.3f, .training = 1, .seed = 79}, .no_bias = 1};
    GF_CHECK(gc_check("linear_dropout_add_layernorm", b_ldal, in, 6, &drop, (gc_opts){.h = 3e-3}) == 0, "grads, p = 0.3");
    GF_CHECK(gc_check("linear_dropout_add_layernorm(eval)", b_ldal, in, 6, &plain, (gc_opts){.h = 3e-3}) == 0,
             "grads, eval");
    GF_CHECK(gc_check("linear_dropout_add_layernorm(no bias)", b_ldal, in, 5, &nob, (gc_opts){.h = 3e-3}) == 0,
             "no-bias grads");
    for (int i = 0; i < 6; i++) gc_leaf_free(in[i]);
}

/* the output, every gradient and the rng after: the chain's bits, over 36 rows (the bias's column
 * sum on one thread) and 120 (its per-thread partials), with and without dropout, fresh or not,
 * copies of batch rows, no bias */
GF_TEST(unit, linear_dropout_add_layernorm_is_the_chain) {
    static const int32_t nd[6] = {3, 3, 1, 1, 2, 1};
    static const int64_t sh[6][3] = {{4, 9, 100}, {4, 9, 40}, {100}, {100}, {100, 40}, {100}};
    static const int64_t sh2[6][3] = {{6, 20, 33}, {6, 20, 17}, {33}, {33}, {33, 17}, {33}};
    const ldal_user cases[] = {
        {.d = {.p = 0.1f, .training = 1, .seed = 25}},
        {.d = {.p = 0.5f, .training = 1, .wrap = 1, .seed = 26}},
        {.d = {.p = 0.1f, .training = 0, .seed = 27}},                   /* eval: no mask */
        {.d = {.p = 0.0f, .training = 1, .wrap = 1, .seed = 28}},        /* p = 0: no mask */
        {.d = {.p = 0.25f, .training = 1, .rows = 3, .row0 = 2, .seed = 29}}, /* two copies of batch rows 2..4 */
        {.d = {.p = 0.1f, .training = 1, .wrap = 1, .seed = 30}, .no_bias = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "linear_dropout_add_layernorm case %zu", i);
        check_bitwise(what, b_ldal, b_ldal_chain, cases[i].no_bias ? 5 : 6, nd, i >= 4 ? sh2 : sh, (void *)&cases[i]);
    }
    /* bf16 with a linear after it: its products read the bits of y, and the op's backward products
     * those of df, that the op wrote (gf_gemm_round_into), the chain's rounded by the products */
    static const int32_t nd7[7] = {3, 3, 1, 1, 2, 1, 2};
    static const int64_t sh7[7][3] = {{4, 9, 100}, {4, 9, 40}, {100}, {100}, {100, 40}, {100}, {7, 100}};
    const ldal_user next[2] = {{.d = {.p = 0.1f, .training = 1, .wrap = 1, .seed = 31, .precision = GF_PREC_BF16, .next = 6}},
                               {.d = {.p = 0.0f, .training = 1, .seed = 32, .precision = GF_PREC_BF16, .next = 6}}};
    for (int i = 0; i < 2; i++) /* with dropout's mask, and p = 0: none */
        check_bitwise(i ? "linear_dropout_add_layernorm (p = 0) then linear, bf16"
                        : "linear_dropout_add_layernorm then linear, bf16",
                      b_ldal, b_ldal_chain, 7, nd7, sh7, (void *)&next[i]);
}
