/* test_cuda_plucker.c — suite cuda: the fused Plücker mixing ops on the GPU against the CPU ops
 * (cuda_check.h: forward, backward from the probe loss with non-zero starting gradients,
 * normwise relative error <= 1e-4, the same bits on a second GPU run).
 *
 * plucker_mix: r = 7 and r = 32 (P = 21, 496), L = 1, 5, 130, B = 1 and 3, the paper's offsets
 * {1,2,4,8,12,16} (some >= L, all >= L for L = 1), duplicated offsets, offsets all beyond L,
 * normalised and not, the eps branch everywhere, and parallel pairs (p = 0 exactly) mixed with
 * ordinary ones. The op requires its bias (the CPU entry asserts it), so every case has one.
 * plucker_window: disjoint, overlapping and gapped windows, 1 to 7 heads, masks padding the tail
 * or the inside of a row or a whole row, no mask, a lone token, r = 7, 32 and the NLI width 64.
 * Two chains (LayerNorm, linear reduction, the mixing op, GELU, residual add, a tied linear)
 * check the ops among others on the tape: z's gradient comes zeroed from the tape, n and the
 * reduction weight receive gradients from two ops.
 */
#include "cuda_check.h"

#include <stdint.h>

#include <string.h>

#ifdef GF_HAVE_CUDA

/* ---- plucker_mix ---- */

typedef struct pm_user {
    const int64_t *offs;
    int32_t n;
    float eps;
    int normalize;
} pm_user;

static gf_tensor *b_pm(gf_ctx *c, gf_tensor **in, void *u) {
    const pm_user *a = u;
    return gf_plucker_mix(c, in[0], in[1], in[2], a->offs, a->n, a->eps, a->normalize);
}

static const int64_t PAPER[6] = {1, 2, 4, 8, 12, 16}, DUP[4] = {1, 1, 2, 2}, FAR[2] = {3, 200}, BEYOND[2] = {140, 200};

/* the cases in `prec` (bf16: both devices round the GEMM inputs alike), the first n of them */
static void plucker_mix_cases(gf_precision prec, size_t n) {
    static const struct { int64_t B, L, R, D; pm_user u; } k[] = {
        {1, 1, 7, 100, {PAPER, 6, 1e-8f, 1}},   /* one position: no valid offset, g = 0 */
        {3, 5, 7, 100, {PAPER, 6, 1e-8f, 1}},   /* offsets >= L */
        {1, 130, 7, 37, {PAPER, 6, 1e-8f, 1}},  /* rows over a column-sum chunk */
        {3, 130, 32, 100, {PAPER, 6, 1e-8f, 1}}, /* the paper's width */
        {1, 1, 32, 100, {PAPER, 6, 1e-8f, 1}},
        {3, 5, 32, 64, {PAPER, 6, 1e-8f, 1}},
        {3, 5, 7, 33, {DUP, 4, 1e-8f, 0}},      /* unnormalised, duplicated offsets weigh twice */
        {3, 130, 32, 37, {DUP, 4, 1e-8f, 1}},
        {3, 130, 32, 100, {FAR, 2, 1e-8f, 0}},  /* one offset valid from t = 3, the other never */
        {3, 130, 7, 100, {PAPER, 6, 50.0f, 1}}, /* eps above every |p|: p̂ = p / eps */
        {3, 5, 7, 100, {BEYOND, 2, 1e-8f, 1}},  /* every offset >= L: g = 0, nothing reaches z or W */
        {2, 20, 128, 32, {PAPER, 6, 1e-8f, 1}}, /* r = 128: 65 KiB of shared memory, past the 48 KiB default */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0] && i < n; i++) {
        op_case c = {.what = prec ? "plucker_mix bf16" : "plucker_mix", .f = b_pm, .user = (void *)&k[i].u,
                     .precision = prec, .tol = prec ? BF16_TOL : 0};
        int64_t P = k[i].R * (k[i].R - 1) / 2, sz[3] = {k[i].B, k[i].L, k[i].R}, sw[2] = {k[i].D, P}, sb[1] = {k[i].D};
        add_input(&c, 3, sz, 200 + i, 1.0f);
        add_input(&c, 2, sw, 220 + i, 0.3f);
        add_input(&c, 1, sb, 240 + i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "plucker_mix case %zu", i);
        case_free(&c);
    }
}

GF_TEST(cuda, plucker_mix) { plucker_mix_cases(GF_PREC_FP32, SIZE_MAX); }
/* [run] precision = bf16: the same as the CPU's bf16 (the paper's width among them) */
GF_TEST(cuda, plucker_mix_bf16) { plucker_mix_cases(GF_PREC_BF16, 6); }

GF_TEST(cuda, plucker_mix_parallel_pairs) {
    /* z_4 = z_2 and z_7 = 2 z_6 in every row: the pairs (4, δ=2) and (7, δ=1) have p = 0
     * exactly on both devices (products rounded, no fused multiply-add), so the eps branch is
     * taken there and the normal branch elsewhere, in the same blocks. Their gradient is G/eps,
     * which dominates z's gradient: the positions that stay ordinary are checked by the cases above. */
    static const int64_t offs[3] = {1, 2, 3};
    pm_user u = {offs, 3, 1e-8f, 1};
    op_case c = {.what = "plucker_mix (parallel pairs)", .f = b_pm, .user = &u};
    int64_t B = 2, L = 9, R = 7, sz[3] = {B, L, R}, sw[2] = {40, 21}, sb[1] = {40};
    add_input(&c, 3, sz, 260, 1.0f);
    add_input(&c, 2, sw, 261, 0.3f);
    add_input(&c, 1, sb, 262, 0.5f);
    float *z = c.cpu[0]->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < R; i++) {
            z[(b * L + 4) * R + i] = z[(b * L + 2) * R + i];
            z[(b * L + 7) * R + i] = 2.0f * z[(b * L + 6) * R + i];
        }
    dev_free(c.gpu[0]);
    c.gpu[0] = dev_copy(c.cpu[0]);
    GF_CHECK(check_case(&c) == 0, "parallel pairs");
    case_free(&c);
}

/* ---- plucker_window ---- */

typedef struct pw_user {
    const float *mask;
    int64_t window, stride, heads;
    float eps;
    int normalize;
} pw_user;

static gf_tensor *b_pw(gf_ctx *c, gf_tensor **in, void *u) {
    const pw_user *a = u;
    return gf_plucker_window(c, in[0], a->mask, in[1], in[2], a->window, a->stride, a->heads, a->eps, a->normalize);
}

/* (B, L) mask: row 0 all real; row 1 its first 2/3 real (tail padding); row 2 padding inside
 * (t % 5 == 3) and its last two tokens, or (kind 2) all padding; row 3 on: all real */
static float *make_mask(int64_t B, int64_t L, int kind) {
    float *m = malloc((size_t)(B * L) * sizeof(float));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < L; t++) {
            float v = 1.0f;
            if (b == 1) v = t < 2 * L / 3;
            if (b == 2) v = kind == 2 ? 0.0f : (t % 5 != 3 && t < L - 2);
            m[b * L + t] = v;
        }
    return m;
}

static void plucker_window_cases(gf_precision prec, size_t n) {
    /* mask kind: 0 none, 1 make_mask, 2 make_mask with row 2 all padding */
    static const struct { int64_t B, L, R, D; int mask; pw_user u; } k[] = {
        {3, 9, 7, 100, 1, {NULL, 4, 4, 1, 1e-8f, 1}},   /* disjoint windows [0,4) [4,8) [8,9) */
        {3, 9, 7, 99, 1, {NULL, 4, 2, 3, 1e-8f, 1}},    /* overlapping: partners from two windows */
        {2, 9, 7, 35, 0, {NULL, 2, 3, 7, 1e-8f, 1}},    /* gapped: t = 2, 5, 8 in no window */
        {1, 1, 7, 100, 0, {NULL, 8, 8, 1, 1e-8f, 1}},   /* a lone token: no partner, g = 0 */
        {3, 130, 32, 100, 1, {NULL, 8, 8, 4, 1e-8f, 1}}, /* NLI-like: 4 heads of 124 */
        {3, 37, 32, 64, 2, {NULL, 6, 4, 2, 1e-8f, 1}},  /* a whole row of padding */
        {3, 130, 7, 100, 1, {NULL, 16, 5, 1, 50.0f, 1}}, /* eps above every |p| */
        {3, 37, 32, 37, 1, {NULL, 8, 8, 1, 1e-8f, 0}},  /* unnormalised */
        {4, 24, 64, 16, 1, {NULL, 8, 8, 4, 1e-8f, 1}},  /* the NLI recipe's r = 64 (P = 2016) */
        {2, 24, 128, 16, 1, {NULL, 8, 8, 4, 1e-8f, 1}}, /* r = 128: 65 KiB of shared memory (opt-in) */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0] && i < n; i++) {
        pw_user u = k[i].u;
        float *mask = k[i].mask ? make_mask(k[i].B, k[i].L, k[i].mask) : NULL;
        u.mask = mask;
        op_case c = {.what = prec ? "plucker_window bf16" : "plucker_window", .f = b_pw, .user = &u,
                     .precision = prec, .tol = prec ? BF16_TOL : 0};
        int64_t P = k[i].R * (k[i].R - 1) / 2, sz[3] = {k[i].B, k[i].L, k[i].R}, sw[2] = {k[i].D, P / u.heads},
                sb[1] = {k[i].D};
        add_input(&c, 3, sz, 300 + i, 1.0f);
        add_input(&c, 2, sw, 320 + i, 0.3f);
        add_input(&c, 1, sb, 340 + i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "plucker_window case %zu", i);
        case_free(&c);
        free(mask);
    }
}

GF_TEST(cuda, plucker_window) { plucker_window_cases(GF_PREC_FP32, SIZE_MAX); }
GF_TEST(cuda, plucker_window_bf16) { plucker_window_cases(GF_PREC_BF16, 5); }

/* ---- chains ---- */

typedef struct chain_user {
    int window; /* 0: plucker_mix with the paper's offsets; else plucker_window, window = stride */
    const float *mask;
} chain_user;

/* n = LN(x); z = n Wr^T; g = mix(z) (bias v); y = (GELU(g) + n) Wr^T — the Grassmann block's
 * reduction, mixing and residual, with a tied output so Wr and n each get two gradients */
static gf_tensor *b_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const chain_user *cu = u;
    gf_tensor *x = in[0], *wr = in[1], *wp = in[2], *v = in[3];
    gf_tensor *n = gf_layernorm(c, x, v, v, 1e-5f);
    gf_tensor *z = gf_linear(c, n, wr, NULL);
    gf_tensor *g = cu->window ? gf_plucker_window(c, z, cu->mask, wp, v, cu->window, cu->window, 4, 1e-8f, 1)
                              : gf_plucker_mix(c, z, wp, v, PAPER, 6, 1e-8f, 1);
    return gf_linear(c, gf_add(c, gf_gelu(c, g), n), wr, NULL);
}

/* x (3, 37, 100), Wr (32, 100), Wp (100, Pw), v (100) */
static int run_chain(const char *what, chain_user *u, int64_t Pw, uint64_t seed) {
    op_case c = {.what = what, .f = b_chain, .user = u};
    int64_t sx[3] = {3, 37, 100}, sr[2] = {32, 100}, sp[2] = {100, Pw}, sv[1] = {100};
    add_input(&c, 3, sx, seed, 1.0f);
    add_input(&c, 2, sr, seed + 1, 0.1f);
    add_input(&c, 2, sp, seed + 2, 0.1f);
    add_input(&c, 1, sv, seed + 3, 1.0f);
    int bad = check_case(&c);
    case_free(&c);
    return bad;
}

GF_TEST(cuda, chain_through_plucker_mix) {
    chain_user u = {0, NULL};
    GF_CHECK(run_chain("chain (plucker_mix)", &u, 496, 400) == 0, "chain through plucker_mix");
}

GF_TEST(cuda, chain_through_plucker_window) {
    float *mask = make_mask(3, 37, 1);
    chain_user u = {8, mask}; /* 4 heads of 124 */
    GF_CHECK(run_chain("chain (plucker_window)", &u, 124, 410) == 0, "chain through plucker_window");
    free(mask);
}
#endif
