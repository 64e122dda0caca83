/* test_cuda_attn.c — suite cuda: the CUDA attention op (src/ops/cuda/attention.cu) against the
 * CPU op (src/ops/attention.c), forward and backward, through the harness of cuda_check.h
 * (probe loss Σ out ⊙ r, non-zero starting gradients, normwise 1e-4, the same bits twice).
 *
 * Shapes: L not a multiple of the kernels' tiles (64 rows per block, 32 per backward step):
 * 1, 7, 65, 130 and one long causal case; one batch row and several; 1 and 4 heads; head dims
 * 32 and 64 (the model's, as template instantiations), 25 (D = 100, 4 heads) and 100 and 128
 * (padded to 128), 8. Masks: causal; bidirectional with NLI-style padding at the end of each
 * row, a row whose keys are all padding except the first, and a row with every key padded
 * (outputs 0, no gradient); causal with left padding (early queries see nothing). A compose
 * case runs linear → attention → linear, so attention's input gradient is an activation's
 * (stored fresh by the CUDA backward) and flows on into a GEMM.
 */
#include "cuda_check.h"

#include <string.h>

#ifdef GF_HAVE_CUDA

typedef struct attn_user {
    int64_t H;
    int causal;
    const uint8_t *mask; // (B, L) host, or NULL
} attn_user;

static gf_tensor *b_attn(gf_ctx *c, gf_tensor **in, void *u) {
    const attn_user *a = u;
    return gf_attention(c, in[0], a->H, a->causal, a->mask);
}

/* mask kinds for (B, L): none, NLI padding at the end (row b keeps its first len_b keys), and
 * causal left padding (row b pads its first pad_b keys) */
enum { M_NONE, M_END, M_LEFT };

/* row b's kept length for M_END: full, down to one key (only the first key visible), none
 * (every key padded), then lengths in between */
static int64_t end_len(int64_t b, int64_t L) {
    switch (b % 4) {
    case 0: return L;
    case 1: return 1;
    case 2: return L > 2 ? 0 : L; /* a fully padded row, where it does not leave the case trivial */
    default: return (L * 2) / 3 + 1;
    }
}

static uint8_t *make_mask(int kind, int64_t B, int64_t L) {
    if (kind == M_NONE) return NULL;
    uint8_t *m = malloc((size_t)(B * L));
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < L; j++) {
            if (kind == M_END) m[b * L + j] = j < end_len(b, L);
            else m[b * L + j] = j >= (b % 3) * (L / 3 + 1) / 2; /* row 0 unpadded */
        }
    return m;
}

static void run_attn(const char *what, int64_t B, int64_t L, int64_t D, int64_t H, int causal, int mask_kind,
                     uint64_t seed, float scale) {
    uint8_t *mask = make_mask(mask_kind, B, L);
    attn_user u = {H, causal, mask};
    op_case c = {.what = what, .f = b_attn, .user = &u};
    int64_t s[3] = {B, L, 3 * D};
    add_input(&c, 3, s, seed, scale);
    GF_CHECK(check_case(&c) == 0, "%s: B %lld L %lld D %lld H %lld causal %d mask %d", what, (long long)B,
             (long long)L, (long long)D, (long long)H, causal, mask_kind);
    case_free(&c);
    free(mask);
}

GF_TEST(cuda, attention_causal) {
    static const struct { int64_t B, L, D, H; } k[] = {
        {1, 1, 32, 1}, {1, 7, 64, 1},  {3, 65, 128, 4}, {2, 130, 256, 4}, /* Dh 32, 64, 32, 64 */
        {2, 65, 100, 4}, {1, 130, 100, 1}, {2, 7, 128, 1}, {1, 130, 32, 4}, /* Dh 25, 100, 128, 8 */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        run_attn("attention(causal)", k[i].B, k[i].L, k[i].D, k[i].H, 1, M_NONE, 200 + i, 1.0f);
    /* sharper softmax (larger scores) on the model's head dims */
    run_attn("attention(causal, sharp)", 2, 130, 128, 2, 1, M_NONE, 210, 2.5f);
    /* many tiles on both axes */
    run_attn("attention(causal, long)", 1, 1100, 128, 2, 1, M_NONE, 211, 1.0f);
}

GF_TEST(cuda, attention_bidirectional_masked) {
    static const struct { int64_t B, L, D, H; } k[] = {
        {4, 7, 128, 4}, {4, 65, 256, 4}, {5, 130, 100, 4}, {1, 130, 64, 1}, {4, 1, 128, 4}, {4, 130, 128, 1},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        run_attn("attention(bidir, end padding)", k[i].B, k[i].L, k[i].D, k[i].H, 0, M_END, 220 + i, 1.0f);
    /* no mask at all */
    run_attn("attention(bidir)", 3, 65, 128, 4, 0, M_NONE, 230, 1.0f);
    run_attn("attention(bidir)", 1, 130, 100, 4, 0, M_NONE, 231, 1.0f);
}

GF_TEST(cuda, attention_causal_masked) {
    /* left padding under causality: the first queries of a padded row see no key at all */
    run_attn("attention(causal, left padding)", 3, 65, 128, 4, 1, M_LEFT, 240, 1.0f);
    run_attn("attention(causal, left padding)", 3, 130, 100, 4, 1, M_LEFT, 241, 1.0f);
    /* end padding under causality */
    run_attn("attention(causal, end padding)", 4, 130, 256, 4, 1, M_END, 242, 1.0f);
}

/* a fully padded row outputs exactly 0 on the GPU, as on the CPU */
GF_TEST(cuda, attention_padded_row_is_zero) {
    enum { B = 3, L = 65, D = 128, H = 4 };
    uint8_t *mask = make_mask(M_END, B, L); /* row 2: every key padded */
    int64_t s[3] = {B, L, 3 * D};
    gf_tensor *h = gc_leaf(3, s, 250, 1.0f), *d = dev_copy(h);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    gf_ctx_set_grad(&ctx, 0);
    gf_tensor *y = gf_attention(&ctx, d, H, 0, mask);
    GF_REQUIRE_OK(gf_cuda_sync());
    float *yh = download(y->data, B * L * D);
    for (int64_t i = 0; i < L * D; i++) GF_CHECK(yh[2 * L * D + i] == 0.0f, "padded row output %lld", (long long)i);
    free(yh);
    gf_ctx_free(&ctx);
    dev_free(d);
    gc_leaf_free(h);
    free(mask);
}

/* linear → attention → linear: qkv = x W1^T + b1, y = attention(qkv) W2^T */
typedef struct compose_user {
    int64_t H;
    int causal;
    const uint8_t *mask;
} compose_user;

static gf_tensor *b_compose(gf_ctx *c, gf_tensor **in, void *u) {
    const compose_user *a = u;
    gf_tensor *qkv = gf_linear(c, in[0], in[1], in[2]);
    return gf_linear(c, gf_attention(c, qkv, a->H, a->causal, a->mask), in[3], NULL);
}

GF_TEST(cuda, attention_compose) {
    static const struct { int64_t B, L, Din, D, H, Dout; int causal, mask; } k[] = {
        {2, 65, 48, 128, 4, 33, 1, M_NONE}, /* Dh 32, causal */
        {4, 7, 100, 100, 4, 100, 0, M_END}, /* Dh 25, NLI padding */
        {1, 130, 64, 128, 2, 17, 1, M_NONE}, /* Dh 64 */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        uint8_t *mask = make_mask(k[i].mask, k[i].B, k[i].L);
        compose_user u = {k[i].H, k[i].causal, mask};
        op_case c = {.what = "linear -> attention -> linear", .f = b_compose, .user = &u};
        int64_t sx[3] = {k[i].B, k[i].L, k[i].Din}, sw1[2] = {3 * k[i].D, k[i].Din}, sb1[1] = {3 * k[i].D},
                sw2[2] = {k[i].Dout, k[i].D};
        add_input(&c, 3, sx, 260 + i, 1.0f);
        add_input(&c, 2, sw1, 270 + i, 0.25f);
        add_input(&c, 1, sb1, 280 + i, 0.5f);
        add_input(&c, 2, sw2, 290 + i, 0.2f);
        GF_CHECK(check_case(&c) == 0, "compose case %zu", i);
        case_free(&c);
        free(mask);
    }
}

#endif
