/* test_cuda_elem.c — suite cuda: the small ops' CUDA twins (sigmoid, lerp, concat, dropout,
 * masked_mean, pair_match, the fused sigmoid_lerp, dropout_add_layernorm, linear_gelu,
 * concat_linear, gated_lerp, linear_dropout_add_layernorm and layernorm_dropout) against their CPU
 * ops, forward and backward, through the harness of cuda_check.h (normwise relative error
 * <= 1e-4, the same bits on a second GPU run, input gradients that start non-zero). Shapes are
 * awkward: one row, D = 100, widths that are not multiples of 32, more elements than one block,
 * shared inputs (concat(x, x), lerp(x, x, b)), inputs that need no gradient.
 *
 * Dropout is checked bit for bit besides: the same key from rngs seeded alike, the device
 * hash (gflow/rng.h compiled for the GPU), the row keying by batch_rows/batch_row0, so the
 * mask, the output and the gradients equal the CPU's exactly, and both rngs advance alike.
 *
 * The fused ops go through the same harness; the masks dropout_add_layernorm and
 * layernorm_dropout save are checked bit for bit besides, and linear_gelu, gated_lerp,
 * dropout_add_layernorm, linear_dropout_add_layernorm and layernorm_dropout against their unfused chains on the device, bit for bit, as LayerNorm's
 * gain and shift summed together against each summed alone.
 *
 * Two chains run the tape's device paths: the Grassmann block's gate
 * (gated_lerp(n, g, W, b) then layernorm_dropout, src/nn/blocks.c) and the NLI head
 * (masked mean of premises and hypotheses, dropout over two copies of the batch rows, pair
 * features, linear).
 *
 * The suite's gate (one SKIP line without a GPU) is in test_cuda_ops.c.
 */
#include "cuda_check.h"

#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA

/* a case's input i needs no gradient (on both devices): its gradient must stay as it was */
static void no_grad(op_case *c, int i) {
    c->cpu[i]->flags &= ~GF_T_REQ_GRAD;
    c->gpu[i]->flags &= ~GF_T_REQ_GRAD;
}

/* ---- sigmoid ---- */

static gf_tensor *b_sigmoid(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sigmoid(c, in[0]); }

GF_TEST(cuda, sigmoid) {
    /* scale 30: |x| up to ~100, both branches far into saturation (exp under- and overflow) */
    static const struct { int32_t nd; int64_t s[3]; float scale; } k[] = {
        {2, {1, 100}, 1.0f}, {3, {3, 7, 100}, 4.0f}, {1, {1}, 1.0f}, {2, {3, 33337}, 2.0f}, {2, {5, 33}, 30.0f},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "sigmoid", .f = b_sigmoid};
        add_input(&c, k[i].nd, k[i].s, 200 + i, k[i].scale);
        GF_CHECK(check_case(&c) == 0, "sigmoid case %zu", i);
        case_free(&c);
    }
}

/* ---- lerp ---- */

static gf_tensor *b_lerp(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_lerp(c, in[0], in[1], in[2], 0.0f); }
static gf_tensor *b_lerp_const(gf_ctx *c, gf_tensor **in, void *u) {
    return gf_lerp(c, NULL, in[0], in[1], *(const float *)u);
}
static gf_tensor *b_lerp_xxb(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_lerp(c, in[0], in[0], in[1], 0.0f); }
static gf_tensor *b_lerp_axx(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_lerp(c, in[0], in[1], in[1], 0.0f); }

GF_TEST(cuda, lerp) {
    static const struct { int32_t nd; int64_t s[3]; } k[] = {
        {2, {1, 100}}, {3, {3, 7, 33}}, {1, {1}}, {2, {2, 40000}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "lerp", .f = b_lerp};
        for (int j = 0; j < 3; j++) add_input(&c, k[i].nd, k[i].s, 210 + 3 * i + (size_t)j, 1.0f);
        GF_CHECK(check_case(&c) == 0, "lerp case %zu", i);
        case_free(&c);
    }
    /* the no-gate ablation's constant, and another */
    static const float consts[2] = {0.5f, 0.3f};
    for (int i = 0; i < 2; i++) {
        op_case c = {.what = "lerp(const)", .f = b_lerp_const, .user = (void *)&consts[i]};
        int64_t s[3] = {3, 5, 100};
        add_input(&c, 3, s, 230 + (uint64_t)i, 1.0f);
        add_input(&c, 3, s, 232 + (uint64_t)i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "lerp const %g", (double)consts[i]);
        case_free(&c);
    }
    /* inputs that need no gradient: α (the kernel's dα pointer is NULL), then b */
    for (int skip = 0; skip < 3; skip += 2) {
        op_case c = {.what = skip ? "lerp(b no grad)" : "lerp(alpha no grad)", .f = b_lerp};
        int64_t s[2] = {7, 33};
        for (int j = 0; j < 3; j++) add_input(&c, 2, s, 240 + (uint64_t)(3 * skip + j), 1.0f);
        no_grad(&c, skip);
        GF_CHECK(check_case(&c) == 0, "%s", c.what);
        case_free(&c);
    }
    /* one tensor in two roles: its two gradient terms land in one buffer */
    int64_t s[2] = {4, 100};
    op_case c = {.what = "lerp(x, x, b)", .f = b_lerp_xxb};
    add_input(&c, 2, s, 250, 1.0f);
    add_input(&c, 2, s, 251, 1.0f);
    GF_CHECK(check_case(&c) == 0, "lerp(x, x, b)");
    case_free(&c);
    op_case c2 = {.what = "lerp(alpha, x, x)", .f = b_lerp_axx};
    add_input(&c2, 2, s, 252, 1.0f);
    add_input(&c2, 2, s, 253, 1.0f);
    GF_CHECK(check_case(&c2) == 0, "lerp(alpha, x, x)");
    case_free(&c2);
}

/* ---- concat ---- */

static gf_tensor *b_concat(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_concat(c, in[0], in[1]); }
static gf_tensor *b_concat_self(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_concat(c, in[0], in[0]); }

GF_TEST(cuda, concat) {
    static const struct { int32_t nd; int64_t a[3], b[3]; } k[] = {
        {2, {1, 100}, {1, 37}},   {3, {3, 7, 33}, {3, 7, 100}}, {2, {300, 1}, {300, 64}},
        {3, {2, 5, 1}, {2, 5, 1}}, {2, {1000, 100}, {1000, 100}}, {1, {7}, {1}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "concat", .f = b_concat};
        add_input(&c, k[i].nd, k[i].a, 260 + i, 1.0f);
        add_input(&c, k[i].nd, k[i].b, 270 + i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "concat case %zu", i);
        case_free(&c);
    }
    /* one input without a gradient */
    int64_t sa[2] = {5, 33}, sb[2] = {5, 65};
    op_case c = {.what = "concat(a no grad)", .f = b_concat};
    add_input(&c, 2, sa, 280, 1.0f);
    add_input(&c, 2, sb, 281, 1.0f);
    no_grad(&c, 0);
    GF_CHECK(check_case(&c) == 0, "concat(a no grad)");
    case_free(&c);
    /* concat(x, x): both halves of dy add into x's gradient */
    op_case c2 = {.what = "concat(x, x)", .f = b_concat_self};
    add_input(&c2, 2, sb, 282, 1.0f);
    GF_CHECK(check_case(&c2) == 0, "concat(x, x)");
    case_free(&c2);
}

/* ---- dropout ---- */

typedef struct drop_user {
    float p;
    int64_t rows, row0; /* ctx->batch_rows, batch_row0 */
    int twice;          /* dropout(dropout(x)): the inner output's gradient is stored fresh */
} drop_user;

static gf_tensor *b_dropout(gf_ctx *c, gf_tensor **in, void *u) {
    const drop_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    gf_tensor *y = gf_dropout(c, in[0], d->p);
    return d->twice ? gf_dropout(c, y, d->p) : y;
}

static const struct { int32_t nd; int64_t s[3]; drop_user u; } drop_cases[] = {
    {2, {1, 100}, {0.3f, 0, 0, 0}},      {3, {6, 7, 33}, {0.1f, 3, 5, 0}},   /* two copies of rows 5..7 */
    {2, {4, 1000}, {0.5f, 2, 0, 1}},     {2, {3, 33337}, {0.25f, 0, 0, 0}},  /* beyond one block */
    {1, {1}, {0.5f, 0, 0, 0}},           {3, {2, 130, 100}, {0.9f, 1, 17, 1}},
};

GF_TEST(cuda, dropout) {
    for (size_t i = 0; i < sizeof drop_cases / sizeof drop_cases[0]; i++) {
        op_case c = {.what = "dropout", .f = b_dropout, .user = (void *)&drop_cases[i].u, .training = 1};
        add_input(&c, drop_cases[i].nd, drop_cases[i].s, 290 + i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "dropout case %zu", i);
        case_free(&c);
    }
}

/* The mask (uint8, saved in the node), the output and the gradients equal the CPU's bit for bit;
 * both rngs have advanced alike (one draw per call); the keep rate is 1 - p within 6 sigma. */
GF_TEST(cuda, dropout_bitwise) {
    for (size_t i = 0; i < sizeof drop_cases / sizeof drop_cases[0]; i++) {
        const drop_user *u = &drop_cases[i].u;
        gf_tensor *xc = gc_leaf(drop_cases[i].nd, drop_cases[i].s, 300 + i, 1.0f);
        for (int64_t j = 0; j < gf_tensor_numel(xc); j++) xc->grad[j] = (float)(j % 13) * 0.25f - 1.5f;
        gf_tensor *xg = dev_copy(xc);
        int64_t N = gf_tensor_numel(xc);
        gf_rng rc, rg;
        gf_rng_seed(&rc, 777 + i);
        gf_rng_seed(&rg, 777 + i);
        gf_ctx cc, gc;
        gf_ctx_init(&cc, 0, &rc);
        gf_ctx_init(&gc, 0, &rg);
        cc.training = gc.training = 1;
        GF_REQUIRE_OK(gf_ctx_use_cuda(&gc, 0));
        gf_tensor *yc = b_dropout(&cc, &xc, (void *)u), *yg = b_dropout(&gc, &xg, (void *)u);
        GF_CHECK(!memcmp(rc.s, rg.s, sizeof rc.s), "case %zu: the rngs advanced differently", i);
        GF_REQUIRE(cc.last && gc.last && !strcmp(gc.last->op->name, "dropout"), "case %zu: no dropout node", i);
        uint8_t *mg = malloc((size_t)N);
        GF_CHECK_OK(gf_cuda_sync());
        GF_CHECK_OK(gf_cuda_download(mg, gc.last->saved, (size_t)N));
        const uint8_t *mc = cc.last->saved;
        int64_t kept = 0, diff = -1;
        for (int64_t j = 0; j < N; j++) {
            kept += mc[j];
            if (diff < 0 && mc[j] != mg[j]) diff = j;
        }
        GF_CHECK(diff < 0, "case %zu: masks differ first at %lld (cpu %d, gpu %d)", i, (long long)diff,
                 diff < 0 ? 0 : mc[diff], diff < 0 ? 0 : mg[diff]);
        double q = 1.0 - (double)u->p, want = q * (double)N, sd = sqrt((double)N * q * (1.0 - q));
        GF_CHECK(fabs((double)kept - want) <= 6.0 * sd + 1.0, "case %zu: kept %lld of %lld at p = %g", i,
                 (long long)kept, (long long)N, (double)u->p);
        float *yh = download(yg->data, N);
        GF_CHECK(!memcmp(yh, yc->data, (size_t)N * sizeof(float)), "case %zu: outputs differ", i);
        float *r = malloc((size_t)N * sizeof(float));
        for (int64_t j = 0; j < N; j++) r[j] = (float)gf_rng_normal(&rc);
        gf_tape_backward_from(&cc, yc, r);
        gf_tape_backward_from(&gc, yg, r);
        GF_CHECK_OK(gf_cuda_sync());
        float *gh = download(xg->grad, N);
        GF_CHECK(!memcmp(gh, xc->grad, (size_t)N * sizeof(float)), "case %zu: gradients differ", i);
        /* not training: the identity, on the GPU too */
        gc.training = 0;
        GF_CHECK(gf_dropout(&gc, xg, u->p) == xg, "case %zu: identity in eval mode", i);
        free(mg);
        free(yh);
        free(gh);
        free(r);
        gf_ctx_free(&cc);
        gf_ctx_free(&gc);
        dev_free(xg);
        gc_leaf_free(xc);
    }
}

/* ---- masked_mean ---- */

static gf_tensor *b_mmean(gf_ctx *c, gf_tensor **in, void *u) { return gf_masked_mean(c, in[0], (const float *)u); }

GF_TEST(cuda, masked_mean) {
    static const int64_t k[][3] = {{1, 1, 100}, {3, 7, 100}, {5, 13, 33}, {2, 130, 257}, {4, 1, 1}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        int64_t B = k[i][0], L = k[i][1];
        float *mask = malloc((size_t)(B * L) * sizeof(float));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < L; t++) {
                float m = (float)((b * 7 + t * 3) % 5) * 0.5f; /* zeros (padding) and fractional weights */
                if (i == 1 && b == 1) m = 0.0f;              /* an unused row: y = 0, no gradient */
                if (B * L == 1) m = 1.0f;
                mask[b * L + t] = m;
            }
        op_case c = {.what = "masked_mean", .f = b_mmean, .user = mask};
        add_input(&c, 3, k[i], 310 + i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "masked_mean case %zu", i);
        case_free(&c);
        free(mask);
    }
}

/* ---- pair_match ---- */

static gf_tensor *b_pair(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_pair_match(c, in[0]); }

GF_TEST(cuda, pair_match) {
    static const int64_t k[][2] = {{2, 100}, {6, 33}, {2, 1}, {64, 300}, {2, 40000}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "pair_match", .f = b_pair};
        add_input(&c, 2, k[i], 320 + i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "pair_match case %zu", i);
        case_free(&c);
    }
    /* u == v in places: the |u - v| gradient is 0 there on both devices */
    op_case c = {.what = "pair_match(ties)", .f = b_pair};
    int64_t s[2] = {8, 33};
    add_input(&c, 2, s, 330, 1.0f);
    for (int64_t j = 0; j < 4 * 33; j += 3) c.cpu[0]->data[4 * 33 + j] = c.cpu[0]->data[j];
    dev_free(c.gpu[0]);
    c.gpu[0] = dev_copy(c.cpu[0]);
    GF_CHECK(check_case(&c) == 0, "pair_match(ties)");
    case_free(&c);
}

/* ---- the fused ops: sigmoid_lerp, dropout_add_layernorm ---- */

static gf_tensor *b_slerp(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sigmoid_lerp(c, in[0], in[1], in[2]); }
static gf_tensor *b_slerp_uxx(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_sigmoid_lerp(c, in[0], in[1], in[1]); }

GF_TEST(cuda, sigmoid_lerp) {
    /* scale 30 on u: the gate saturated both ways */
    static const struct { int32_t nd; int64_t s[3]; float scale; } k[] = {
        {2, {1, 100}, 1.0f}, {3, {3, 7, 33}, 4.0f}, {1, {1}, 1.0f}, {2, {2, 40000}, 2.0f}, {2, {5, 33}, 30.0f},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "sigmoid_lerp", .f = b_slerp};
        for (int j = 0; j < 3; j++) add_input(&c, k[i].nd, k[i].s, 400 + 3 * i + (size_t)j, j ? 1.0f : k[i].scale);
        GF_CHECK(check_case(&c) == 0, "sigmoid_lerp case %zu", i);
        case_free(&c);
    }
    int64_t s[2] = {7, 33};
    for (int skip = 0; skip < 3; skip++) { /* each input in turn without a gradient */
        op_case c = {.what = "sigmoid_lerp(one input without grad)", .f = b_slerp};
        for (int j = 0; j < 3; j++) add_input(&c, 2, s, 420 + (uint64_t)(3 * skip + j), 1.0f);
        no_grad(&c, skip);
        GF_CHECK(check_case(&c) == 0, "sigmoid_lerp, input %d without grad", skip);
        case_free(&c);
    }
    op_case c = {.what = "sigmoid_lerp(u, x, x)", .f = b_slerp_uxx};
    add_input(&c, 2, s, 430, 1.0f);
    add_input(&c, 2, s, 431, 1.0f);
    GF_CHECK(check_case(&c) == 0, "sigmoid_lerp(u, x, x)");
    case_free(&c);
}

typedef struct dal_user {
    float p;
    int64_t rows, row0; /* ctx->batch_rows, batch_row0 */
    int wrap;           /* x and f out of a gelu: their gradients start fresh */
    int same;           /* LN(x + dropout(x)) */
} dal_user;

static gf_tensor *b_dal(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    gf_tensor *x = d->wrap ? gf_gelu(c, in[0]) : in[0], *f = d->same ? x : d->wrap ? gf_gelu(c, in[1]) : in[1];
    return gf_dropout_add_layernorm(c, x, f, d->p, in[2], in[3], 1e-5f);
}

static const struct { int32_t nd; int64_t s[3]; int training; dal_user u; } dal_cases[] = {
    {2, {1, 100}, 1, {0.3f, 0, 0, 0, 0}},      {3, {3, 7, 33}, 1, {0.1f, 0, 0, 1, 0}},
    {3, {6, 5, 257}, 1, {0.5f, 3, 2, 0, 0}},   /* two copies of batch rows 2..4 */
    {2, {700, 64}, 1, {0.1f, 0, 0, 1, 0}},     /* many blocks of rows */
    {3, {2, 9, 100}, 0, {0.1f, 0, 0, 0, 0}},   /* eval: no mask */
    {3, {2, 9, 100}, 1, {0.0f, 0, 0, 1, 0}},   /* p = 0: no mask */
    {3, {2, 9, 100}, 1, {0.2f, 0, 0, 0, 1}},   /* the residual is the branch */
};

GF_TEST(cuda, dropout_add_layernorm) {
    for (size_t i = 0; i < sizeof dal_cases / sizeof dal_cases[0]; i++) {
        op_case c = {.what = "dropout_add_layernorm", .f = b_dal, .user = (void *)&dal_cases[i].u,
                     .training = dal_cases[i].training};
        int64_t D = dal_cases[i].s[dal_cases[i].nd - 1];
        add_input(&c, dal_cases[i].nd, dal_cases[i].s, 440 + 4 * i, 2.0f);
        add_input(&c, dal_cases[i].nd, dal_cases[i].s, 441 + 4 * i, 2.0f);
        add_input(&c, 1, &D, 442 + 4 * i, 0.5f);
        add_input(&c, 1, &D, 443 + 4 * i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "dropout_add_layernorm case %zu", i);
        case_free(&c);
    }
}

/* ---- linear_dropout_add_layernorm = dropout_add_layernorm(x, linear(h, W, b)) ----
 * in: x, h, the gain, the shift, W, b (dal_user's same: b NULL, five inputs) */

static gf_tensor *b_ldal(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    gf_tensor *x = d->wrap ? gf_gelu(c, in[0]) : in[0], *h = d->wrap ? gf_gelu(c, in[1]) : in[1];
    return gf_linear_dropout_add_layernorm(c, x, h, in[4], d->same ? NULL : in[5], d->p, in[2], in[3], 1e-5f);
}

/* dal_cases[i]'s x, an h of IN = 40 columns; bias: W's bias, else none */
static void ldal_inputs(op_case *c, size_t i, uint64_t seed, int bias) {
    const int32_t nd = dal_cases[i].nd;
    int64_t sh[3], D = dal_cases[i].s[nd - 1], sw[2] = {D, 40};
    memcpy(sh, dal_cases[i].s, sizeof sh);
    sh[nd - 1] = 40;
    add_input(c, nd, dal_cases[i].s, seed, 2.0f);
    add_input(c, nd, sh, seed + 1, 1.0f);
    add_input(c, 1, &D, seed + 2, 0.5f);
    add_input(c, 1, &D, seed + 3, 0.5f);
    add_input(c, 2, sw, seed + 4, 0.3f);
    if (bias) add_input(c, 1, &D, seed + 5, 0.5f);
}

GF_TEST(cuda, linear_dropout_add_layernorm) {
    for (size_t i = 0; i < 6; i++) { /* dal_cases but the residual as the branch: with the bias, and without */
        for (int bias = 1; bias >= 0; bias--) {
            dal_user u = dal_cases[i].u;
            u.same = !bias;
            op_case c = {.what = bias ? "linear_dropout_add_layernorm" : "linear_dropout_add_layernorm(no bias)",
                         .f = b_ldal, .user = &u, .training = dal_cases[i].training};
            ldal_inputs(&c, i, 1100 + 10 * i + 6 * (uint64_t)bias, bias);
            GF_CHECK(check_case(&c) == 0, "%s case %zu", c.what, i);
            case_free(&c);
        }
    }
    for (int skip = 0; skip < 6; skip++) { /* each input in turn without a gradient */
        op_case c = {.what = "linear_dropout_add_layernorm(one input without grad)", .f = b_ldal,
                     .user = (void *)&dal_cases[1].u, .training = 1};
        ldal_inputs(&c, 1, 1200 + 6 * (uint64_t)skip, 1);
        no_grad(&c, skip);
        GF_CHECK(check_case(&c) == 0, "linear_dropout_add_layernorm, input %d without grad", skip);
        case_free(&c);
    }
}

/* ---- linear_gelu = gelu(linear(x, w, b)) ---- */

typedef struct lg_user {
    int bias; /* 0: b NULL */
    int wrap; /* x out of a gelu: its gradient starts fresh */
} lg_user;

static gf_tensor *b_lgelu(gf_ctx *c, gf_tensor **in, void *u) {
    const lg_user *l = u;
    return gf_linear_gelu(c, l->wrap ? gf_gelu(c, in[0]) : in[0], in[1], l->bias ? in[2] : NULL);
}

GF_TEST(cuda, linear_gelu) {
    /* x shape, OUT; one row, widths not multiples of 32, more rows than a column-sum chunk */
    static const struct { int32_t nd; int64_t s[3]; int64_t out; lg_user u; gf_precision prec; } k[] = {
        {2, {1, 100}, 37, {1, 0}, GF_PREC_FP32},   {3, {3, 7, 33}, 65, {1, 1}, GF_PREC_FP32},
        {2, {700, 64}, 96, {1, 1}, GF_PREC_FP32},  {3, {2, 5, 40}, 50, {0, 1}, GF_PREC_FP32},
        {3, {3, 5, 100}, 100, {1, 1}, GF_PREC_BF16},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = k[i].prec ? "linear_gelu bf16" : "linear_gelu", .f = b_lgelu, .user = (void *)&k[i].u,
                     .precision = k[i].prec, .tol = k[i].prec ? BF16_TOL : 0};
        int64_t sw[2] = {k[i].out, k[i].s[k[i].nd - 1]}, sb[1] = {k[i].out};
        add_input(&c, k[i].nd, k[i].s, 460 + 3 * i, 1.0f);
        add_input(&c, 2, sw, 461 + 3 * i, 0.3f);
        if (k[i].u.bias) add_input(&c, 1, sb, 462 + 3 * i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "linear_gelu case %zu", i);
        case_free(&c);
    }
    static const lg_user plain = {1, 0};
    int64_t sx[2] = {9, 33}, sw[2] = {40, 33}, sb[1] = {40};
    for (int skip = 0; skip < 3; skip++) { /* each input in turn without a gradient (no bias gradient: dh alone) */
        op_case c = {.what = "linear_gelu(one input without grad)", .f = b_lgelu, .user = (void *)&plain};
        add_input(&c, 2, sx, 480 + 3 * (uint64_t)skip, 1.0f);
        add_input(&c, 2, sw, 481 + 3 * (uint64_t)skip, 0.3f);
        add_input(&c, 1, sb, 482 + 3 * (uint64_t)skip, 0.5f);
        no_grad(&c, skip);
        GF_CHECK(check_case(&c) == 0, "linear_gelu, input %d without grad", skip);
        case_free(&c);
    }
}

/* ---- concat_linear = linear(concat(a, b), W, bias) ---- */

typedef struct cl_user {
    int bias; /* 0: bias NULL */
    int wrap; /* a, b and W out of a gelu: their gradients start fresh (W's for both column blocks) */
    int same; /* concat_linear(a, a, W): in[1] unused */
} cl_user;

/* a, b, W (in[0..2]) as the case asks: out of a gelu (wrap), b = a (same) */
static void cl_inputs(gf_ctx *c, gf_tensor **in, const cl_user *l, gf_tensor **a, gf_tensor **b, gf_tensor **w) {
    *a = l->wrap ? gf_gelu(c, in[0]) : in[0], *w = l->wrap ? gf_gelu(c, in[2]) : in[2];
    *b = l->same ? *a : l->wrap ? gf_gelu(c, in[1]) : in[1];
}

static gf_tensor *b_clin(gf_ctx *c, gf_tensor **in, void *u) {
    const cl_user *l = u;
    gf_tensor *a, *b, *w;
    cl_inputs(c, in, l, &a, &b, &w);
    return gf_concat_linear(c, a, b, w, l->bias ? in[3] : NULL);
}

GF_TEST(cuda, concat_linear) {
    /* a's shape, Db, OUT: one row, widths not multiples of 32, the gate's shape over more rows
     * than a column-sum chunk, a and b one tensor, bf16 */
    static const struct { int32_t nd; int64_t s[3]; int64_t db, out; cl_user u; gf_precision prec; } k[] = {
        {2, {1, 100}, 37, 29, {1, 0, 0}, GF_PREC_FP32},   {3, {3, 7, 33}, 65, 40, {1, 1, 0}, GF_PREC_FP32},
        {2, {700, 32}, 32, 32, {1, 1, 0}, GF_PREC_FP32},  {3, {2, 5, 40}, 24, 50, {0, 1, 0}, GF_PREC_FP32},
        {2, {9, 33}, 33, 20, {1, 0, 1}, GF_PREC_FP32},    {3, {3, 5, 64}, 64, 64, {1, 1, 0}, GF_PREC_BF16},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = k[i].prec ? "concat_linear bf16" : "concat_linear", .f = b_clin, .user = (void *)&k[i].u,
                     .precision = k[i].prec, .tol = k[i].prec ? BF16_TOL : 0};
        int64_t sb[3], sw[2] = {k[i].out, k[i].s[k[i].nd - 1] + k[i].db}, s1[1] = {k[i].out};
        memcpy(sb, k[i].s, sizeof sb);
        sb[k[i].nd - 1] = k[i].db;
        add_input(&c, k[i].nd, k[i].s, 500 + 4 * i, 1.0f);
        add_input(&c, k[i].nd, sb, 501 + 4 * i, 1.0f);
        add_input(&c, 2, sw, 502 + 4 * i, 0.3f);
        add_input(&c, 1, s1, 503 + 4 * i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "concat_linear case %zu", i);
        case_free(&c);
    }
    static const cl_user plain = {1, 0, 0};
    int64_t sa[2] = {9, 33}, sb[2] = {9, 17}, sw[2] = {40, 50}, s1[1] = {40};
    for (int skip = 0; skip < 4; skip++) { /* each input in turn without a gradient */
        op_case c = {.what = "concat_linear(one input without grad)", .f = b_clin, .user = (void *)&plain};
        add_input(&c, 2, sa, 530 + 4 * (uint64_t)skip, 1.0f);
        add_input(&c, 2, sb, 531 + 4 * (uint64_t)skip, 1.0f);
        add_input(&c, 2, sw, 532 + 4 * (uint64_t)skip, 0.3f);
        add_input(&c, 1, s1, 533 + 4 * (uint64_t)skip, 0.5f);
        no_grad(&c, skip);
        GF_CHECK(check_case(&c) == 0, "concat_linear, input %d without grad", skip);
        case_free(&c);
    }
}

/* ---- gated_lerp = sigmoid_lerp(concat_linear(a, b, W, bias), a, b) (cl_user) ---- */

static gf_tensor *b_glerp(gf_ctx *c, gf_tensor **in, void *u) {
    const cl_user *l = u;
    gf_tensor *a, *b, *w;
    cl_inputs(c, in, l, &a, &b, &w);
    return gf_gated_lerp(c, a, b, w, l->bias ? in[3] : NULL);
}

GF_TEST(cuda, gated_lerp) {
    /* a's shape (b's too): one row, widths not multiples of 32, the gate's shape over more rows
     * than a column-sum chunk, no bias, a and b one tensor, bf16 */
    static const struct { int32_t nd; int64_t s[3]; cl_user u; gf_precision prec; } k[] = {
        {2, {1, 100}, {1, 0, 0}, GF_PREC_FP32},  {3, {3, 7, 33}, {1, 1, 0}, GF_PREC_FP32},
        {2, {700, 32}, {1, 1, 0}, GF_PREC_FP32}, {3, {2, 5, 40}, {0, 1, 0}, GF_PREC_FP32},
        {2, {9, 33}, {1, 0, 1}, GF_PREC_FP32},   {2, {9, 33}, {1, 1, 1}, GF_PREC_FP32},
        {3, {3, 5, 64}, {1, 1, 0}, GF_PREC_BF16},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = k[i].prec ? "gated_lerp bf16" : "gated_lerp", .f = b_glerp, .user = (void *)&k[i].u,
                     .precision = k[i].prec, .tol = k[i].prec ? BF16_TOL : 0};
        const int64_t D = k[i].s[k[i].nd - 1], sw[2] = {D, 2 * D};
        add_input(&c, k[i].nd, k[i].s, 560 + 4 * i, 1.0f);
        add_input(&c, k[i].nd, k[i].s, 561 + 4 * i, 1.0f);
        add_input(&c, 2, sw, 562 + 4 * i, 0.3f);
        add_input(&c, 1, &D, 563 + 4 * i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "gated_lerp case %zu", i);
        case_free(&c);
    }
    static const cl_user plain = {1, 0, 0};
    int64_t sa[2] = {9, 33}, sw[2] = {33, 66}, s1[1] = {33};
    for (int skip = 0; skip < 4; skip++) { /* each input in turn without a gradient (no bias gradient: gate_bwd) */
        op_case c = {.what = "gated_lerp(one input without grad)", .f = b_glerp, .user = (void *)&plain};
        add_input(&c, 2, sa, 600 + 4 * (uint64_t)skip, 1.0f);
        add_input(&c, 2, sa, 601 + 4 * (uint64_t)skip, 1.0f);
        add_input(&c, 2, sw, 602 + 4 * (uint64_t)skip, 0.3f);
        add_input(&c, 1, s1, 603 + 4 * (uint64_t)skip, 0.5f);
        no_grad(&c, skip);
        GF_CHECK(check_case(&c) == 0, "gated_lerp, input %d without grad", skip);
        case_free(&c);
    }
}

/* ---- layernorm_dropout = dropout(layernorm(x), p) (dal_user: same unused) ---- */

static gf_tensor *b_ld(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    return gf_layernorm_dropout(c, d->wrap ? gf_gelu(c, in[0]) : in[0], in[1], in[2], 1e-5f, d->p);
}

static const struct { int32_t nd; int64_t s[3]; int training; dal_user u; } ld_cases[] = {
    {2, {1, 100}, 1, {0.3f, 0, 0, 0, 0}},      {3, {3, 7, 33}, 1, {0.1f, 0, 0, 1, 0}},
    {3, {6, 5, 257}, 1, {0.5f, 3, 2, 0, 0}},   /* two copies of batch rows 2..4 */
    {2, {700, 64}, 1, {0.1f, 0, 0, 1, 0}},     /* many blocks of rows */
    {1, {33}, 1, {0.5f, 11, 4, 1, 0}},         /* one LayerNorm row over dropout's 33: 3 copies of 11 */
    {3, {2, 9, 100}, 0, {0.1f, 0, 0, 0, 0}},   /* eval: layernorm */
    {3, {2, 9, 100}, 1, {0.0f, 0, 0, 1, 0}},   /* p = 0: layernorm */
};

GF_TEST(cuda, layernorm_dropout) {
    for (size_t i = 0; i < sizeof ld_cases / sizeof ld_cases[0]; i++) {
        op_case c = {.what = "layernorm_dropout", .f = b_ld, .user = (void *)&ld_cases[i].u,
                     .training = ld_cases[i].training};
        int64_t D = ld_cases[i].s[ld_cases[i].nd - 1];
        add_input(&c, ld_cases[i].nd, ld_cases[i].s, 540 + 3 * i, 2.0f);
        add_input(&c, 1, &D, 541 + 3 * i, 0.5f);
        add_input(&c, 1, &D, 542 + 3 * i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "layernorm_dropout case %zu", i);
        case_free(&c);
    }
    /* x without a gradient: the kernel writes dz alone, for the gain's and shift's sums */
    op_case c = {.what = "layernorm_dropout(x no grad)", .f = b_ld, .user = (void *)&ld_cases[1].u, .training = 1};
    int64_t s[2] = {7, 33}, D = 33;
    add_input(&c, 2, s, 570, 2.0f);
    add_input(&c, 1, &D, 571, 0.5f);
    add_input(&c, 1, &D, 572, 0.5f);
    no_grad(&c, 0);
    GF_CHECK(check_case(&c) == 0, "layernorm_dropout(x no grad)");
    case_free(&c);
}

/* The mask a fused op saves (n->aux) equals the CPU op's bit for bit (the same key, the same
 * hash), and both rngs have advanced alike: f over the n inputs x (shape nd, s), then gain and
 * shift (D) */
static void check_mask(const char *what, gc_build_fn f, const void *u, int n, int32_t nd, const int64_t *s,
                       uint64_t seed) {
    int64_t D = s[nd - 1];
    gf_tensor *hc[4], *hg[4];
    for (int j = 0; j < n; j++) hc[j] = j < n - 2 ? gc_leaf(nd, s, seed + (uint64_t)j, 1.0f) : gc_leaf(1, &D, seed + (uint64_t)j, 1.0f);
    for (int j = 0; j < n; j++) hg[j] = dev_copy(hc[j]);
    gf_rng rc, rg;
    gf_rng_seed(&rc, seed);
    gf_rng_seed(&rg, seed);
    gf_ctx cc, gc;
    gf_ctx_init(&cc, 0, &rc);
    gf_ctx_init(&gc, 0, &rg);
    cc.training = gc.training = 1;
    GF_REQUIRE_OK(gf_ctx_use_cuda(&gc, 0));
    f(&cc, hc, (void *)u);
    f(&gc, hg, (void *)u);
    GF_CHECK(!memcmp(rc.s, rg.s, sizeof rc.s), "%s: the rngs advanced differently", what);
    GF_REQUIRE(cc.last && gc.last && cc.last->aux && gc.last->aux, "%s: no mask saved", what);
    int64_t N = gf_tensor_numel(hc[0]);
    uint8_t *mg = malloc((size_t)N);
    GF_CHECK_OK(gf_cuda_sync());
    GF_CHECK_OK(gf_cuda_download(mg, gc.last->aux, (size_t)N));
    GF_CHECK(!memcmp(mg, cc.last->aux, (size_t)N), "%s: the masks differ", what);
    free(mg);
    gf_ctx_free(&cc);
    gf_ctx_free(&gc);
    for (int j = 0; j < n; j++) {
        dev_free(hg[j]);
        gc_leaf_free(hc[j]);
    }
}

GF_TEST(cuda, dropout_add_layernorm_mask) {
    for (size_t i = 0; i < 4; i++) {
        char what[64];
        snprintf(what, sizeof what, "dropout_add_layernorm case %zu", i);
        check_mask(what, b_dal, &dal_cases[i].u, 4, dal_cases[i].nd, dal_cases[i].s, 877 + 10 * i);
    }
}

GF_TEST(cuda, layernorm_dropout_mask) {
    for (size_t i = 0; i < 5; i++) {
        char what[64];
        snprintf(what, sizeof what, "layernorm_dropout case %zu", i);
        check_mask(what, b_ld, &ld_cases[i].u, 3, ld_cases[i].nd, ld_cases[i].s, 977 + 10 * i);
    }
}

/* ---- chains ---- */

/* the Grassmann block's gated fusion and its norm (src/nn/blocks.c), fused as the block has them:
 * α = σ([n ; g] Wᵀ + b),  y = dropout(LN(α ⊙ n + (1 − α) ⊙ g))  (or the constant 0.5) */
static gf_tensor *b_gate(gf_ctx *c, gf_tensor **in, void *u) {
    const int nogate = *(const int *)u;
    gf_tensor *n = in[0], *g = in[1];
    gf_tensor *mix = nogate ? gf_lerp(c, NULL, n, g, 0.5f) : gf_gated_lerp(c, n, g, in[2], in[3]);
    return gf_layernorm_dropout(c, mix, in[nogate ? 2 : 4], in[nogate ? 3 : 5], 1e-5f, 0.1f);
}

GF_TEST(cuda, chain_gate) {
    for (int nogate = 0; nogate < 2; nogate++) {
        op_case c = {.what = nogate ? "gate chain (no gate)" : "gate chain", .f = b_gate, .user = &nogate,
                     .training = 1};
        int64_t sx[3] = {3, 7, 100}, sw[2] = {100, 200}, sb[1] = {100};
        add_input(&c, 3, sx, 340, 1.0f);
        add_input(&c, 3, sx, 341, 1.0f);
        if (!nogate) {
            add_input(&c, 2, sw, 342, 0.1f);
            add_input(&c, 1, sb, 343, 0.5f);
        }
        add_input(&c, 1, sb, 344, 0.5f);
        add_input(&c, 1, sb, 345, 0.5f);
        GF_CHECK(check_case(&c) == 0, "%s", c.what);
        case_free(&c);
    }
}

/* the siamese NLI head: x (2B, L, D) premises then hypotheses, pooled by masked mean, dropout
 * over the two copies of the B batch rows (batch_rows = B, rows [3, 3 + B) of a larger batch),
 * pair features, a linear classifier */
typedef struct nli_user {
    const float *mask;
    int64_t B;
} nli_user;

static gf_tensor *b_nli(gf_ctx *c, gf_tensor **in, void *u) {
    const nli_user *nu = u;
    c->batch_rows = nu->B;
    c->batch_row0 = 3;
    gf_tensor *pooled = gf_dropout(c, gf_masked_mean(c, in[0], nu->mask), 0.2f); // (2B, D)
    return gf_linear(c, gf_pair_match(c, pooled), in[1], in[2]);                 // (B, 3)
}

GF_TEST(cuda, chain_nli_head) {
    enum { B = 5, L = 11, D = 100 };
    float mask[2 * B * L];
    for (int r = 0; r < 2 * B; r++)
        for (int t = 0; t < L; t++) mask[r * L + t] = t < 3 + (r * 5) % (L - 2) ? 1.0f : 0.0f; /* lengths 3..10 */
    nli_user u = {mask, B};
    op_case c = {.what = "nli head chain", .f = b_nli, .user = &u, .training = 1};
    int64_t sx[3] = {2 * B, L, D}, sw[2] = {3, 4 * D}, sb[1] = {3};
    add_input(&c, 3, sx, 350, 1.0f);
    add_input(&c, 2, sw, 351, 0.1f);
    add_input(&c, 1, sb, 352, 0.5f);
    GF_CHECK(check_case(&c) == 0, "nli head chain");
    case_free(&c);
}
/* ---- fused ops against their unfused chains on the device, bit for bit ----
 * check_case compares each fused op with the CPU op to 1e-4; these compare it with the chain it
 * replaces on the same device (the kernels a fusion saves: bias_rows in linear_gelu_fwd, dal_fwd
 * and gate_fwd, sigmoid_lerp_bwd in the gate bias's column sum, the LayerNorm gain's and shift's
 * column sums in one launch), exactly. */

/* f on the device from each input's starting gradient (c->cpu[i]->grad), rng 4242 as
 * check_case's GPU runs; out (nout) and the inputs' gradients downloaded (malloc'd) */
static void dev_run(op_case *c, gc_build_fn f, const float *r, int64_t nout, float **out, float **grads) {
    gf_ctx ctx;
    gf_rng rng;
    gf_rng_seed(&rng, 4242);
    gf_ctx_init(&ctx, 0, &rng);
    ctx.training = c->training;
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    for (int i = 0; i < c->n_in; i++)
        GF_REQUIRE_OK(gf_cuda_upload(c->gpu[i]->grad, c->cpu[i]->grad,
                                     (size_t)gf_tensor_numel(c->gpu[i]) * sizeof(float)));
    gf_tensor *y = f(&ctx, c->gpu, c->user);
    GF_REQUIRE(gf_tensor_numel(y) == nout, "%s: %lld elements out", c->what, (long long)gf_tensor_numel(y));
    gf_tape_backward_from(&ctx, y, r);
    GF_REQUIRE_OK(gf_cuda_sync());
    *out = download(y->data, nout);
    for (int i = 0; i < c->n_in; i++) grads[i] = download(c->gpu[i]->grad, gf_tensor_numel(c->gpu[i]));
    gf_ctx_free(&ctx);
}

/* the case's f (fused) and chain give the same output and input gradients (of the inputs that
 * need one), bit for bit */
static void same_bits(op_case *c, gc_build_fn chain, int64_t nout) {
    float *r = malloc((size_t)nout * sizeof(float)), *o[2], *g[2][MAX_IN];
    gf_rng rr;
    gf_rng_seed(&rr, 99);
    for (int64_t j = 0; j < nout; j++) r[j] = (float)gf_rng_normal(&rr);
    dev_run(c, c->f, r, nout, &o[0], g[0]);
    dev_run(c, chain, r, nout, &o[1], g[1]);
    int64_t first;
    int64_t bad = bits_differ(o[0], o[1], nout, &first);
    GF_CHECK(bad == 0, "%s: %lld outputs differ from the chain's, first %lld", c->what, (long long)bad,
             (long long)first);
    for (int i = 0; i < c->n_in; i++) {
        bad = (c->gpu[i]->flags & GF_T_REQ_GRAD) ? bits_differ(g[0][i], g[1][i], gf_tensor_numel(c->gpu[i]), &first)
                                                  : 0;
        GF_CHECK(bad == 0, "%s: input %d's gradient: %lld elements differ from the chain's, first %lld", c->what, i,
                 (long long)bad, (long long)first);
        free(g[0][i]);
        free(g[1][i]);
    }
    free(o[0]);
    free(o[1]);
    free(r);
}

static gf_tensor *b_lgelu_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const lg_user *l = u;
    return gf_gelu(c, gf_linear(c, l->wrap ? gf_gelu(c, in[0]) : in[0], in[1], l->bias ? in[2] : NULL));
}

/* the chain the GPU's gated_lerp computes: the bias added after both products (concat_linear
 * adds them to it), by the broadcast add */
static gf_tensor *b_glerp_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const cl_user *l = u;
    gf_tensor *a = l->wrap ? gf_gelu(c, in[0]) : in[0], *w = l->wrap ? gf_gelu(c, in[2]) : in[2];
    gf_tensor *b = l->same ? a : l->wrap ? gf_gelu(c, in[1]) : in[1], *u0 = gf_concat_linear(c, a, b, w, NULL);
    return gf_sigmoid_lerp(c, l->bias ? gf_add(c, u0, in[3]) : u0, a, b);
}

static gf_tensor *b_dal_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    gf_tensor *x = d->wrap ? gf_gelu(c, in[0]) : in[0], *f = d->same ? x : d->wrap ? gf_gelu(c, in[1]) : in[1];
    return gf_layernorm(c, gf_add(c, x, gf_dropout(c, f, d->p)), in[2], in[3], 1e-5f);
}

static gf_tensor *b_ldal_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    gf_tensor *x = d->wrap ? gf_gelu(c, in[0]) : in[0], *h = d->wrap ? gf_gelu(c, in[1]) : in[1];
    return gf_dropout_add_layernorm(c, x, gf_linear(c, h, in[4], d->same ? NULL : in[5]), d->p, in[2], in[3], 1e-5f);
}

static gf_tensor *b_ld_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const dal_user *d = u;
    c->batch_rows = d->rows;
    c->batch_row0 = d->row0;
    return gf_dropout(c, gf_layernorm(c, d->wrap ? gf_gelu(c, in[0]) : in[0], in[1], in[2], 1e-5f), d->p);
}

GF_TEST(cuda, fused_equal_their_chains) {
    /* linear_gelu: one row; more rows than a column-sum chunk; no bias */
    static const struct { int64_t s[2], out; lg_user u; } lg[] = {
        {{1, 100}, 37, {1, 0}}, {{700, 64}, 96, {1, 0}}, {{9, 33}, 40, {0, 0}}};
    for (size_t i = 0; i < sizeof lg / sizeof lg[0]; i++) {
        op_case c = {.what = "linear_gelu against gelu(linear)", .f = b_lgelu, .user = (void *)&lg[i].u};
        int64_t sw[2] = {lg[i].out, lg[i].s[1]}, sb[1] = {lg[i].out};
        add_input(&c, 2, lg[i].s, 600 + 3 * i, 1.0f);
        add_input(&c, 2, sw, 601 + 3 * i, 0.3f);
        if (lg[i].u.bias) add_input(&c, 1, sb, 602 + 3 * i, 0.5f);
        same_bits(&c, b_lgelu_chain, lg[i].s[0] * lg[i].out);
        case_free(&c);
    }
    /* gated_lerp: one row; more rows than a column-sum chunk, inputs fresh; a and b one tensor; no bias */
    static const struct { int64_t s[2]; cl_user u; } gl[] = {
        {{1, 100}, {1, 0, 0}}, {{700, 32}, {1, 1, 0}}, {{9, 33}, {1, 0, 1}}, {{9, 33}, {0, 1, 0}}};
    for (size_t i = 0; i < sizeof gl / sizeof gl[0]; i++) {
        op_case c = {.what = "gated_lerp against sigmoid_lerp(add(concat_linear, bias))", .f = b_glerp,
                     .user = (void *)&gl[i].u};
        const int64_t D = gl[i].s[1], sw[2] = {D, 2 * D};
        add_input(&c, 2, gl[i].s, 700 + 4 * i, 1.0f);
        add_input(&c, 2, gl[i].s, 701 + 4 * i, 1.0f);
        add_input(&c, 2, sw, 702 + 4 * i, 0.3f);
        add_input(&c, 1, &D, 703 + 4 * i, 0.5f);
        same_bits(&c, b_glerp_chain, gl[i].s[0] * D);
        case_free(&c);
    }
    /* the two LayerNorm fusions over dal_cases' training shapes (the gain and shift each the
     * sum it would be alone) */
    for (size_t i = 0; i < 4; i++) {
        const int32_t nd = dal_cases[i].nd;
        int64_t D = dal_cases[i].s[nd - 1], n = 1;
        for (int32_t k = 0; k < nd; k++) n *= dal_cases[i].s[k];
        op_case c = {.what = "dropout_add_layernorm against layernorm(add(x, dropout(f)))", .f = b_dal,
                     .user = (void *)&dal_cases[i].u, .training = 1};
        add_input(&c, nd, dal_cases[i].s, 620 + 4 * i, 2.0f);
        add_input(&c, nd, dal_cases[i].s, 621 + 4 * i, 2.0f);
        add_input(&c, 1, &D, 622 + 4 * i, 0.5f);
        add_input(&c, 1, &D, 623 + 4 * i, 0.5f);
        same_bits(&c, b_dal_chain, n);
        case_free(&c);
        op_case f = {.what = "linear_dropout_add_layernorm against dropout_add_layernorm(x, linear(h))", .f = b_ldal,
                     .user = (void *)&dal_cases[i].u, .training = 1};
        ldal_inputs(&f, i, 1300 + 6 * i, 1);
        same_bits(&f, b_ldal_chain, n);
        case_free(&f);
        op_case l = {.what = "layernorm_dropout against dropout(layernorm(x))", .f = b_ld,
                     .user = (void *)&dal_cases[i].u, .training = 1};
        add_input(&l, nd, dal_cases[i].s, 640 + 3 * i, 2.0f);
        add_input(&l, 1, &D, 641 + 3 * i, 0.5f);
        add_input(&l, 1, &D, 642 + 3 * i, 0.5f);
        same_bits(&l, b_ld_chain, n);
        case_free(&l);
    }
}

/* LayerNorm's gain and shift gradients summed together (one launch) equal each summed
 * alone (the other input without a gradient), bit for bit */
static gf_tensor *b_ln(gf_ctx *c, gf_tensor **in, void *u) {
    (void)u;
    return gf_layernorm(c, in[0], in[1], in[2], 1e-5f);
}

GF_TEST(cuda, layernorm_gain_shift_sums_as_alone) {
    static const int64_t k[][2] = {{1, 100}, {700, 64}, {130, 257}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "layernorm", .f = b_ln};
        int64_t D = k[i][1], n = k[i][0] * k[i][1];
        add_input(&c, 2, k[i], 660 + 3 * i, 2.0f);
        add_input(&c, 1, &D, 661 + 3 * i, 0.5f);
        add_input(&c, 1, &D, 662 + 3 * i, 0.5f);
        float *r = malloc((size_t)n * sizeof(float)), *o, *both[MAX_IN], *alone[MAX_IN];
        gf_rng rr;
        gf_rng_seed(&rr, 98);
        for (int64_t j = 0; j < n; j++) r[j] = (float)gf_rng_normal(&rr);
        dev_run(&c, b_ln, r, n, &o, both);
        free(o);
        for (int p = 1; p <= 2; p++) { /* the gain alone (the shift without a gradient), then the shift alone */
            c.gpu[3 - p]->flags &= ~GF_T_REQ_GRAD;
            dev_run(&c, b_ln, r, n, &o, alone);
            c.gpu[3 - p]->flags |= GF_T_REQ_GRAD;
            int64_t first, bad = bits_differ(both[p], alone[p], D, &first);
            GF_CHECK(bad == 0, "case %zu: %s summed with the %s: %lld elements differ from it alone, first %lld", i,
                     p == 1 ? "gain" : "shift", p == 1 ? "shift" : "gain", (long long)bad, (long long)first);
            free(o);
            for (int j = 0; j < 3; j++) free(alone[j]);
        }
        for (int j = 0; j < 3; j++) free(both[j]);
        free(r);
        case_free(&c);
    }
}

#endif
