/* nli.c — the SNLI classifiers (Grassmann–Plücker and Transformer heads) built from ops on the
 * tape. The architecture and the reading of the paper it implements: see include/gflow/nli.h. */
#include "gflow/nli.h"
#include "gflow/ops.h"
#include <stdio.h>
#include <string.h>

void gf_nli_cfg_default(gf_nli_cfg *c, gf_family family) {
    memset(c, 0, sizeof *c);
    c->family = family;
    c->vocab = 30522;
    c->d_model = 256;
    c->d_ff = 512;
    c->n_layers = 2;
    c->max_len = 48;
    c->r = 64;
    c->window = 8;
    c->stride = 8;
    c->mix_heads = 4;
    c->heads = 4;
    c->classifier_hidden = 256;
    c->dropout = 0.1f;
    c->eps = 1e-8f;
    c->ln_eps = 1e-5f;
    c->init_std = 0.02f;
    c->normalize = 1;
}

gf_status gf_nli_cfg_validate(const gf_nli_cfg *c) {
#define NEED(cond, ...) do { if (!(cond)) return gf_error_set(GF_E_INVALID, "nli config: " __VA_ARGS__); } while (0)
    NEED(c->family == GF_FAMILY_GRASSMANN || c->family == GF_FAMILY_TRANSFORMER, "unknown family %d", (int)c->family);
    NEED(c->vocab > 0, "vocab must be > 0 (got %lld)", (long long)c->vocab);
    NEED(c->d_model > 0 && c->d_ff > 0, "d_model and d_ff must be > 0");
    NEED(c->n_layers >= 1 && c->n_layers <= GF_NLI_MAX_LAYERS, "n_layers must be in [1, %d] (got %lld)",
         GF_NLI_MAX_LAYERS, (long long)c->n_layers);
    NEED(c->max_len > 0, "max_len must be > 0");
    NEED(c->classifier_hidden > 0, "classifier_hidden must be > 0");
    NEED(c->dropout >= 0 && c->dropout < 1, "dropout must be in [0, 1) (got %g)", (double)c->dropout);
    NEED(c->ln_eps > 0, "ln_eps must be > 0");
    if (c->family == GF_FAMILY_GRASSMANN) {
        NEED(c->r >= 2 && c->r <= c->d_model, "r must be in [2, d_model=%lld] (got %lld)", (long long)c->d_model,
             (long long)c->r);
        NEED(c->window >= 2, "window must be >= 2 (got %lld)", (long long)c->window);
        NEED(c->stride >= 1, "stride must be >= 1 (got %lld)", (long long)c->stride);
        int64_t P = c->r * (c->r - 1) / 2;
        NEED(c->mix_heads >= 1 && P % c->mix_heads == 0 && c->d_model % c->mix_heads == 0,
             "mix_heads (%lld) must divide both C(r,2) = %lld and d_model = %lld", (long long)c->mix_heads,
             (long long)P, (long long)c->d_model);
        NEED(c->eps > 0, "eps must be > 0");
    } else {
        NEED(c->heads >= 1 && c->d_model % c->heads == 0, "d_model (%lld) must be divisible by heads (%lld)",
             (long long)c->d_model, (long long)c->heads);
    }
#undef NEED
    return GF_OK;
}

static gf_tensor *add_p(gf_nli *m, gf_param_kind k, int32_t nd, int64_t d0, int64_t d1, const char *fmt, int64_t l) {
    char name[96];
    snprintf(name, sizeof name, fmt, (long long)l);
    int64_t s[2] = {d0, d1};
    return gf_params_add(&m->params, name, k, nd, s);
}
#define P2(fmt, a, b) add_p(m, GF_PK_WEIGHT, 2, a, b, fmt, l)
#define P1(fmt, a) add_p(m, GF_PK_BIAS, 1, a, 0, fmt, l)
#define PN(fmt, a) add_p(m, GF_PK_NORM, 1, a, 0, fmt, l)

gf_status gf_nli_init(gf_nli *m, const gf_nli_cfg *cfg) {
    memset(m, 0, sizeof *m);
    GF_TRY(gf_nli_cfg_validate(cfg));
    m->cfg = *cfg;
    gf_params_init(&m->params);
    const int64_t V = cfg->vocab, D = cfg->d_model, F = cfg->d_ff, R = cfg->r, Hc = cfg->classifier_hidden;
    int64_t l = 0;
    m->tok_emb = add_p(m, GF_PK_EMBED, 2, V, D, "tok_emb.weight", 0);
    m->pos_emb = add_p(m, GF_PK_EMBED, 2, cfg->max_len, D, "pos_emb.weight", 0);
    for (l = 0; l < cfg->n_layers; l++) {
        gf_nli_block *b = &m->blocks[l];
        if (cfg->family == GF_FAMILY_GRASSMANN) {
            b->ln_in_w = PN("blocks.%lld.ln_in.weight", D);
            b->ln_in_b = PN("blocks.%lld.ln_in.bias", D);
            b->w_red = P2("blocks.%lld.mix.w_red.weight", R, D);
            b->b_red = P1("blocks.%lld.mix.w_red.bias", R);
            b->w_plu = P2("blocks.%lld.mix.w_plu.weight", D, R * (R - 1) / 2 / cfg->mix_heads);
            b->b_plu = P1("blocks.%lld.mix.w_plu.bias", D);
            b->w_gate = P2("blocks.%lld.mix.w_gate.weight", D, 2 * D);
            b->b_gate = P1("blocks.%lld.mix.w_gate.bias", D);
            b->ln_mix_w = PN("blocks.%lld.ln_mix.weight", D);
            b->ln_mix_b = PN("blocks.%lld.ln_mix.bias", D);
        } else {
            b->ln_attn_w = PN("blocks.%lld.ln_attn.weight", D);
            b->ln_attn_b = PN("blocks.%lld.ln_attn.bias", D);
            b->qkv_w = P2("blocks.%lld.attn.qkv.weight", 3 * D, D);
            b->qkv_b = P1("blocks.%lld.attn.qkv.bias", 3 * D);
            b->proj_w = P2("blocks.%lld.attn.proj.weight", D, D);
            b->proj_b = P1("blocks.%lld.attn.proj.bias", D);
        }
        b->ln_ffn_w = PN("blocks.%lld.ln_ffn.weight", D);
        b->ln_ffn_b = PN("blocks.%lld.ln_ffn.bias", D);
        b->fc1_w = P2("blocks.%lld.ffn.fc1.weight", F, D);
        b->fc1_b = P1("blocks.%lld.ffn.fc1.bias", F);
        b->fc2_w = P2("blocks.%lld.ffn.fc2.weight", D, F);
        b->fc2_b = P1("blocks.%lld.ffn.fc2.bias", D);
    }
    l = 0;
    m->ln_f_w = PN("ln_f.weight", D);
    m->ln_f_b = PN("ln_f.bias", D);
    m->cls_fc1_w = P2("cls.fc1.weight", Hc, 4 * D);
    m->cls_fc1_b = P1("cls.fc1.bias", Hc);
    m->cls_fc2_w = P2("cls.fc2.weight", GF_NLI_CLASSES, Hc);
    m->cls_fc2_b = P1("cls.fc2.bias", GF_NLI_CLASSES);
    return gf_params_alloc(&m->params);
}

void gf_nli_init_weights(gf_nli *m, gf_rng *rng) { gf_params_init_weights(&m->params, m->cfg.init_std, rng); }

static gf_tensor *ffn(gf_ctx *ctx, const gf_nli_block *b, gf_tensor *y, float p) {
    gf_tensor *h = gf_gelu(ctx, gf_linear(ctx, y, b->fc1_w, b->fc1_b));
    return gf_dropout(ctx, gf_linear(ctx, h, b->fc2_w, b->fc2_b), p);
}

static gf_tensor *grassmann_block(const gf_nli_cfg *c, gf_ctx *ctx, const gf_nli_block *b, gf_tensor *x,
                                  const float *mask) {
    gf_tensor *n = gf_layernorm(ctx, x, b->ln_in_w, b->ln_in_b, c->ln_eps);
    gf_tensor *z = gf_linear(ctx, n, b->w_red, b->b_red); // (2B, Ls, R)
    gf_tensor *g = gf_plucker_window(ctx, z, mask, b->w_plu, b->b_plu, c->window, c->stride, c->mix_heads, c->eps,
                                     c->normalize); // (2B, Ls, D)
    gf_tensor *alpha = gf_sigmoid(ctx, gf_linear(ctx, gf_concat(ctx, n, g), b->w_gate, b->b_gate));
    gf_tensor *mix = gf_lerp(ctx, alpha, n, g, 0.0f);
    gf_tensor *x1 = gf_add(ctx, x, gf_dropout(ctx, gf_layernorm(ctx, mix, b->ln_mix_w, b->ln_mix_b, c->ln_eps),
                                              c->dropout));
    return gf_add(ctx, x1, ffn(ctx, b, gf_layernorm(ctx, x1, b->ln_ffn_w, b->ln_ffn_b, c->ln_eps), c->dropout));
}

static gf_tensor *transformer_block(const gf_nli_cfg *c, gf_ctx *ctx, const gf_nli_block *b, gf_tensor *x,
                                    const uint8_t *key_mask) {
    gf_tensor *in = gf_layernorm(ctx, x, b->ln_attn_w, b->ln_attn_b, c->ln_eps);
    gf_tensor *qkv = gf_linear(ctx, in, b->qkv_w, b->qkv_b); // (2B, Ls, 3D)
    gf_tensor *a = gf_attention(ctx, qkv, c->heads, 0, key_mask);
    gf_tensor *x1 = gf_add(ctx, x, gf_dropout(ctx, gf_linear(ctx, a, b->proj_w, b->proj_b), c->dropout));
    return gf_add(ctx, x1, ffn(ctx, b, gf_layernorm(ctx, x1, b->ln_ffn_w, b->ln_ffn_b, c->ln_eps), c->dropout));
}

gf_tensor *gf_nli_forward(gf_nli *m, gf_ctx *ctx, const int32_t *prem, const float *prem_mask, const int32_t *hyp,
                          const float *hyp_mask, const int32_t *labels, int64_t B, int64_t Ls, gf_nli_out *out) {
    const gf_nli_cfg *c = &m->cfg;
    GF_ASSERT(B >= 1, "nli: empty batch");
    GF_ASSERT(Ls >= 1 && Ls <= c->max_len, "nli: sentence length %lld outside [1, max_len=%lld]", (long long)Ls,
              (long long)c->max_len);
    const int64_t BL = B * Ls;
    /* siamese: premises in rows 0..B-1, hypotheses in rows B..2B-1 of one (2B, Ls) batch */
    int32_t *ids = gf_arena_alloc(&ctx->arena, (size_t)(2 * BL) * sizeof(int32_t)); // (2B, Ls)
    float *mask = gf_arena_floats(&ctx->arena, 2 * BL);                                // (2B, Ls)
    uint8_t *kmask = gf_arena_alloc(&ctx->arena, (size_t)(2 * BL));                   // (2B, Ls)
    for (int64_t i = 0; i < BL; i++) {
        int32_t p = prem[i], h = hyp[i];
        GF_ASSERT(p < c->vocab && h < c->vocab, "nli: token id %d >= vocab %lld", p > h ? p : h, (long long)c->vocab);
        ids[i] = p < 0 ? 0 : p;
        ids[BL + i] = h < 0 ? 0 : h;
        mask[i] = prem_mask[i];
        mask[BL + i] = hyp_mask[i];
    }
    for (int64_t i = 0; i < 2 * BL; i++) kmask[i] = mask[i] != 0.0f;

    int64_t ids_shape[2] = {2 * B, Ls};
    gf_tensor *h = gf_embedding(ctx, m->tok_emb, ids, 2, ids_shape); // (2B, Ls, D)
    h = gf_dropout(ctx, gf_add(ctx, h, gf_param_rows_view(ctx, m->pos_emb, Ls)), c->dropout);
    for (int64_t l = 0; l < c->n_layers; l++)
        h = c->family == GF_FAMILY_GRASSMANN ? grassmann_block(c, ctx, &m->blocks[l], h, mask)
                                             : transformer_block(c, ctx, &m->blocks[l], h, kmask);
    h = gf_layernorm(ctx, h, m->ln_f_w, m->ln_f_b, c->ln_eps);
    gf_tensor *feat = gf_pair_match(ctx, gf_masked_mean(ctx, h, mask)); // (B, 4D)
    gf_tensor *hid = gf_dropout(ctx, gf_gelu(ctx, gf_linear(ctx, feat, m->cls_fc1_w, m->cls_fc1_b)), c->dropout);
    gf_tensor *logits = gf_linear(ctx, hid, m->cls_fc2_w, m->cls_fc2_b); // (B, 3)

    int32_t *pred = out && out->pred_buf ? out->pred_buf
                                         : gf_arena_alloc(&ctx->arena, (size_t)B * sizeof(int32_t)); // (B)
    int64_t n_correct = 0, n_counted = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *lg = logits->data + b * GF_NLI_CLASSES;
        int32_t k = 0;
        for (int32_t j = 1; j < GF_NLI_CLASSES; j++)
            if (lg[j] > lg[k]) k = j;
        pred[b] = k;
        if (labels) GF_ASSERT(labels[b] >= -1 && labels[b] < GF_NLI_CLASSES, "nli: label %d outside [-1, 2]", labels[b]);
        if (labels && labels[b] >= 0) {
            n_counted++;
            n_correct += k == labels[b];
        }
    }
    double nll = 0;
    gf_tensor *loss = labels ? gf_cross_entropy(ctx, logits, labels, -1, &nll, NULL) : NULL;
    if (out) {
        out->predictions = pred;
        out->logits = logits;
        out->nll_sum = nll;
        out->n_counted = n_counted;
        out->n_correct = n_correct;
    }
    return loss;
}

void gf_nli_free(gf_nli *m) { gf_params_free(&m->params); }
