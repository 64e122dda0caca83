/* test_cuda_head.c — suite cuda: the loss ops on the GPU (cross_entropy, the fused tied head
 * head_ce) against the CPU ops, forward and backward (cuda_check.h: the probe loss of a scalar
 * output is r · loss, so every gradient is scaled by r; the same bits on a second GPU run).
 *
 * Shapes: one row, V = 1000 and a 30,522 vocabulary with few rows, D = 100, rows given as 3-d
 * (B, L, ·), V = 1, and for head_ce N = 300 and 560 at V = 30,522, where a GPU chunk holds
 * 274 rows with the chunk bound lowered to 32 MiB of logits (gf_cuda_chunk_bytes; 512 MiB by
 * default, every row of these cases in one chunk): a partial second chunk, and three chunks, so
 * dE accumulates over chunks; and both in one chunk. Targets: none ignored, some, every
 * one of a whole chunk, all of them (the loss is 0 and the gradient too), and an ignore_index
 * that is a valid class. head_ce also runs with h or E frozen (the GPU skips that product) and
 * with gradients off (no node, no gradient written). The host outputs nll_sum and n_counted
 * are compared too.
 *
 * The loss's gradient is O(1 / count) per element, so the starting gradients (which the
 * backward must add to) are scaled to that size: otherwise their N(0, 0.5) noise would set the
 * normwise tolerance and hide an error in the op's own contribution.
 */
#include "cuda_check.h"

#ifdef GF_HAVE_CUDA

typedef struct loss_user {
    const int32_t *tg;
    int32_t ignore;
    int no_grad;
    double nll[2]; /* [0] the CPU run, [1] the (last) GPU run */
    int64_t cnt[2];
} loss_user;

static gf_tensor *b_ce(gf_ctx *c, gf_tensor **in, void *u) {
    loss_user *lu = u;
    int d = in[0]->device == GF_DEV_CUDA;
    return gf_cross_entropy(c, in[0], lu->tg, lu->ignore, &lu->nll[d], &lu->cnt[d]);
}

static gf_tensor *b_head(gf_ctx *c, gf_tensor **in, void *u) {
    loss_user *lu = u;
    int d = in[0]->device == GF_DEV_CUDA;
    int old = lu->no_grad ? gf_ctx_set_grad(c, 0) : 0;
    gf_tensor *y = gf_head_ce(c, in[0], in[1], lu->tg, lu->ignore, &lu->nll[d], &lu->cnt[d]);
    if (lu->no_grad) gf_ctx_set_grad(c, old);
    return y;
}

/* one case: rows shaped s[0..nd) (logits (s, V) for cross_entropy; h (s, D), E (V, D) for
 * head_ce); row i's target is ignore when i % every == 0 (every > 0) or from <= i < to */
typedef struct loss_case {
    int head;
    int32_t nd;
    int64_t s[2], V, D;
    int every;
    int64_t from, to;
    int32_t ignore;
    int no_grad, freeze; /* freeze: 1 h, 2 E needs no gradient */
    gf_precision precision;
} loss_case;

static int run_loss_case(const loss_case *k, uint64_t seed) {
    int64_t N = 1;
    for (int32_t i = 0; i < k->nd; i++) N *= k->s[i];
    int32_t *tg = malloc((size_t)N * sizeof(int32_t));
    int64_t cnt = 0;
    for (int64_t i = 0; i < N; i++) {
        tg[i] = (int32_t)((i * 7919 + 17) % k->V);
        if ((k->every > 0 && i % k->every == 0) || (i >= k->from && i < k->to)) tg[i] = k->ignore;
        cnt += tg[i] != k->ignore;
    }
    loss_user u = {.tg = tg, .ignore = k->ignore, .no_grad = k->no_grad, .cnt = {-1, -2}};
    op_case c = {.what = k->head ? (k->precision ? "head_ce bf16" : "head_ce") : "cross_entropy",
                 .f = k->head ? b_head : b_ce, .user = &u, .precision = k->precision,
                 .tol = k->precision ? BF16_TOL : 0};
    int64_t s[3] = {k->s[0], k->s[1], 0};
    if (k->head) {
        int64_t se[2] = {k->V, k->D};
        s[k->nd] = k->D;
        add_input(&c, k->nd + 1, s, seed, 1.0f);
        add_input(&c, 2, se, seed + 1, 0.3f); /* logits of std ~0.3 √D: 3 at D = 100 */
    } else {
        s[k->nd] = k->V;
        add_input(&c, k->nd + 1, s, seed, 3.0f);
    }
    for (int i = 0; i < c.n_in; i++) { /* starting gradients of the loss gradient's size */
        for (int64_t j = 0; j < gf_tensor_numel(c.cpu[i]); j++) c.cpu[i]->grad[j] /= (float)(cnt > 0 ? cnt : 1);
        if (k->freeze == i + 1) {
            c.cpu[i]->flags &= ~GF_T_REQ_GRAD;
            c.gpu[i]->flags &= ~GF_T_REQ_GRAD;
        }
    }
    int bad = check_case(&c);
    if (u.cnt[0] != cnt || u.cnt[1] != cnt) {
        gf_test_fail(__FILE__, __LINE__, "%s: counted %lld (cpu), %lld (gpu), want %lld", c.what, (long long)u.cnt[0],
                     (long long)u.cnt[1], (long long)cnt);
        bad++;
    }
    if (!(fabs(u.nll[1] - u.nll[0]) <= TOL * fmax(1.0, fabs(u.nll[0])))) {
        gf_test_fail(__FILE__, __LINE__, "%s: nll_sum %.9g (gpu), %.9g (cpu)", c.what, u.nll[1], u.nll[0]);
        bad++;
    }
    if (cnt == 0 && !(u.nll[1] == 0.0)) {
        gf_test_fail(__FILE__, __LINE__, "%s: every target ignored, nll_sum %.9g", c.what, u.nll[1]);
        bad++;
    }
    case_free(&c);
    free(tg);
    return bad;
}

GF_TEST(cuda, cross_entropy) {
    static const loss_case k[] = {
        {.nd = 1, .s = {1}, .V = 1000, .ignore = -1},
        {.nd = 1, .s = {37}, .V = 1000, .every = 5, .ignore = -1},
        {.nd = 1, .s = {3}, .V = 30522, .every = 3, .ignore = -1},          /* few rows, large V; row 0 ignored */
        {.nd = 2, .s = {2, 5}, .V = 333, .every = 4, .ignore = 7},          /* (B, L, V); ignore is a class */
        {.nd = 1, .s = {4}, .V = 1000, .from = 0, .to = 4, .ignore = -1},   /* all ignored: loss 0 */
        {.nd = 1, .s = {300}, .V = 1000, .from = 100, .to = 200, .ignore = -100},
        {.nd = 1, .s = {5}, .V = 1, .ignore = -1},                           /* V = 1: loss and gradient 0 */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        GF_CHECK(run_loss_case(&k[i], 200 + 2 * i) == 0, "cross_entropy case %zu", i);
}

GF_TEST(cuda, head_ce) {
    static const loss_case k[] = {
        {.head = 1, .nd = 1, .s = {1}, .V = 1000, .D = 100, .ignore = -1},
        {.head = 1, .nd = 1, .s = {37}, .V = 1000, .D = 100, .every = 5, .ignore = -1},
        {.head = 1, .nd = 2, .s = {2, 3}, .V = 30522, .D = 100, .every = 4, .ignore = -1}, /* few rows, large V */
        {.head = 1, .nd = 1, .s = {5}, .V = 1000, .D = 100, .from = 0, .to = 5, .ignore = -1}, /* all ignored */
        {.head = 1, .nd = 1, .s = {37}, .V = 1000, .D = 33, .every = 6, .ignore = -1, .freeze = 1}, /* h frozen */
        {.head = 1, .nd = 1, .s = {37}, .V = 1000, .D = 33, .every = 6, .ignore = -1, .freeze = 2}, /* E frozen */
        {.head = 1, .nd = 2, .s = {3, 11}, .V = 1000, .D = 100, .every = 3, .ignore = 0},  /* ignore is a class */
        {.head = 1, .nd = 1, .s = {7}, .V = 1, .D = 100, .ignore = -1},                   /* V = 1 */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        GF_CHECK(run_loss_case(&k[i], 300 + 2 * i) == 0, "head_ce case %zu", i);
}

#define CHUNK_32MIB ((int64_t)32 << 20) /* 274 rows of 30,522 logits */

/* [run] precision = bf16: logits, dh and dE from bf16-rounded h, E and dlogits on both devices
 * (on the GPU the row kernel writes dlogits rounded: no fp32 dlogits); one chunk, and three (dE
 * accumulated over chunks, each chunk's h rounded once for the logits and dE) */
GF_TEST(cuda, head_ce_bf16) {
    static const loss_case k[] = {
        {.head = 1, .nd = 1, .s = {37}, .V = 1000, .D = 100, .every = 5, .ignore = -1, .precision = GF_PREC_BF16},
        {.head = 1, .nd = 2, .s = {4, 140}, .V = 30522, .D = 64, .every = 9, .ignore = -1, .precision = GF_PREC_BF16},
        {.head = 1, .nd = 1, .s = {300}, .V = 30522, .D = 100, .from = 0, .to = 274, .ignore = -1,
         .precision = GF_PREC_BF16}, /* a whole chunk ignored */
    };
    const int64_t was = gf_cuda_chunk_bytes(CHUNK_32MIB);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        GF_CHECK(run_loss_case(&k[i], 500 + 2 * i) == 0, "head_ce bf16 case %zu", i);
    gf_cuda_chunk_bytes(was);
    GF_CHECK(run_loss_case(&k[1], 520) == 0, "head_ce bf16, one chunk of 560 rows");
}

/* rows over one GPU chunk (274 rows at V = 30,522 with 32 MiB chunks): a partial last chunk, a
 * whole chunk ignored, three chunks (dE accumulated over them), and the chunked forward without
 * gradients; then the default chunk, which holds all 560 rows */
GF_TEST(cuda, head_ce_chunks) {
    static const loss_case k[] = {
        {.head = 1, .nd = 1, .s = {300}, .V = 30522, .D = 100, .every = 7, .from = 0, .to = 274, .ignore = -1},
        {.head = 1, .nd = 1, .s = {300}, .V = 30522, .D = 100, .from = 274, .to = 300, .ignore = -1},
        {.head = 1, .nd = 2, .s = {4, 140}, .V = 30522, .D = 64, .every = 9, .ignore = -1},
        {.head = 1, .nd = 1, .s = {300}, .V = 30522, .D = 100, .every = 5, .ignore = -1, .no_grad = 1},
    };
    const int64_t was = gf_cuda_chunk_bytes(CHUNK_32MIB);
    GF_CHECK(was >= 4096 * 30522 * (int64_t)sizeof(float), "the default chunk (%lld bytes) does not hold the paper's "
             "4,096 rows of 30,522 logits", (long long)was);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        GF_CHECK(run_loss_case(&k[i], 400 + 2 * i) == 0, "head_ce chunk case %zu", i);
    gf_cuda_chunk_bytes(was);
    GF_CHECK(run_loss_case(&k[2], 420) == 0, "head_ce, one chunk of 560 rows");
}
#endif
