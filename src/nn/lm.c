/* lm.c — GrassmannLM and TransformerLM built from ops on the tape.
 *
 * Grassmann block (x (B, L, D) in, out (B, L, D)):
 *   n = x (post_ln) | LN_in(x) (pre_ln)
 *   z = W_red n + b_red                                   (B, L, R)
 *   g = plucker_mix(z; W_plu, b_plu, offsets)             (B, L, D)   [plucker = false: g = W_plu(W_lin z) + b_plu]
 *   α = σ(W_gate [n; g] + b_gate);  m = α n + (1-α) g     [gate = false: m = (n + g) / 2]
 *   post_ln: y = Drop(LN_mix(m));  out = LN_ffn(y + Drop(FFN(y)))          (paper-literal)
 *   pre_ln:  x' = x + Drop(LN_mix(m));  out = x' + Drop(FFN(LN_ffn(x')))  (AX variant)
 * Transformer block:
 *   post_ln: x' = LN_attn(x + Drop(Proj(Attn(QKV x))));  out = LN_ffn(x' + Drop(FFN(x')))
 *   pre_ln:  x' = x + Drop(Proj(Attn(QKV LN_attn(x))));  out = x' + Drop(FFN(LN_ffn(x')))
 * FFN(y) = fc2(GELU(fc1 y)).
 */
#include "gflow/model.h"
#include "gflow/ops.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *gf_family_name(gf_family f) { return f == GF_FAMILY_TRANSFORMER ? "transformer" : "grassmann"; }
const char *gf_block_name(gf_block_kind b) { return b == GF_BLOCK_PRE_LN ? "pre_ln" : "post_ln"; }

void gf_model_cfg_default(gf_model_cfg *c) {
    memset(c, 0, sizeof *c);
    c->family = GF_FAMILY_GRASSMANN;
    c->block = GF_BLOCK_POST_LN;
    c->vocab = 30522;
    c->d_model = 256;
    c->d_ff = 1024;
    c->n_layers = 6;
    c->max_len = 128;
    c->dropout = 0.1f;
    c->ln_eps = 1e-5f;
    c->init_std = 0.02f;
    c->r = 32;
    static const int64_t offs[6] = {1, 2, 4, 8, 12, 16};
    memcpy(c->offsets, offs, sizeof offs);
    c->n_offsets = 6;
    c->eps = 1e-8f;
    c->normalize = c->gate = c->plucker = 1;
    c->heads = 4;
}

gf_status gf_model_cfg_validate(const gf_model_cfg *c) {
#define NEED(cond, ...) do { if (!(cond)) return gf_error_set(GF_E_INVALID, "model config: " __VA_ARGS__); } while (0)
    NEED(c->vocab > 0, "vocab must be > 0 (got %lld)", (long long)c->vocab);
    NEED(c->d_model > 0 && c->d_ff > 0, "d_model and d_ff must be > 0");
    NEED(c->n_layers >= 1 && c->n_layers <= GF_MAX_LAYERS, "n_layers must be in [1, %d] (got %lld)", GF_MAX_LAYERS,
         (long long)c->n_layers);
    NEED(c->max_len > 0, "max_len must be > 0");
    NEED(c->dropout >= 0 && c->dropout < 1, "dropout must be in [0, 1) (got %g)", (double)c->dropout);
    if (c->family == GF_FAMILY_GRASSMANN) {
        NEED(c->r >= 2 && c->r <= c->d_model, "r must be in [2, d_model=%lld] (got %lld)", (long long)c->d_model,
             (long long)c->r);
        if (c->n_schedule > 0) {
            NEED(c->n_schedule == c->n_layers, "offset_schedule has %d entries, n_layers is %lld", c->n_schedule,
                 (long long)c->n_layers);
            for (int i = 0; i < c->n_schedule; i++) NEED(c->offset_schedule[i] >= 1, "offset_schedule[%d] must be >= 1", i);
        } else {
            NEED(c->n_offsets >= 1 && c->n_offsets <= GF_MAX_OFFSETS, "offsets must list 1..%d values", GF_MAX_OFFSETS);
            for (int i = 0; i < c->n_offsets; i++) NEED(c->offsets[i] >= 1, "offsets[%d] must be >= 1", i);
        }
        NEED(c->eps > 0, "eps must be > 0");
    } else {
        NEED(c->heads >= 1 && c->d_model % c->heads == 0, "d_model (%lld) must be divisible by heads (%lld)",
             (long long)c->d_model, (long long)c->heads);
    }
#undef NEED
    return GF_OK;
}

static gf_tensor *add_p(gf_lm *m, gf_param_kind k, int32_t nd, int64_t d0, int64_t d1, const char *fmt, int64_t l) {
    char name[96];
    snprintf(name, sizeof name, fmt, (long long)l);
    int64_t s[2] = {d0, d1};
    return gf_params_add(&m->params, name, k, nd, s);
}
#define P2(fmt, a, b) add_p(m, GF_PK_WEIGHT, 2, a, b, fmt, l)
#define P1(fmt, a) add_p(m, GF_PK_BIAS, 1, a, 0, fmt, l)
#define PN(fmt, a) add_p(m, GF_PK_NORM, 1, a, 0, fmt, l)

gf_status gf_lm_init(gf_lm *m, const gf_model_cfg *cfg) {
    memset(m, 0, sizeof *m);
    GF_TRY(gf_model_cfg_validate(cfg));
    m->cfg = *cfg;
    gf_params_init(&m->params);
    const int64_t V = cfg->vocab, D = cfg->d_model, F = cfg->d_ff, R = cfg->r, P = R * (R - 1) / 2;
    int64_t l = 0;
    m->tok_emb = add_p(m, GF_PK_EMBED, 2, V, D, "tok_emb.weight", 0);
    m->pos_emb = add_p(m, GF_PK_EMBED, 2, cfg->max_len, D, "pos_emb.weight", 0);
    for (l = 0; l < cfg->n_layers; l++) {
        gf_lm_block *b = &m->blocks[l];
        if (cfg->family == GF_FAMILY_GRASSMANN) {
            if (cfg->block == GF_BLOCK_PRE_LN) {
                b->ln_in_w = PN("blocks.%lld.ln_in.weight", D);
                b->ln_in_b = PN("blocks.%lld.ln_in.bias", D);
            }
            b->w_red = P2("blocks.%lld.mix.w_red.weight", R, D);
            b->b_red = P1("blocks.%lld.mix.w_red.bias", R);
            if (!cfg->plucker) b->w_lin = P2("blocks.%lld.mix.w_lin.weight", P, R);
            b->w_plu = P2("blocks.%lld.mix.w_plu.weight", D, P);
            b->b_plu = P1("blocks.%lld.mix.w_plu.bias", D);
            if (cfg->gate) {
                b->w_gate = P2("blocks.%lld.mix.w_gate.weight", D, 2 * D);
                b->b_gate = P1("blocks.%lld.mix.w_gate.bias", D);
            }
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
    return gf_params_alloc(&m->params);
}

void gf_lm_init_weights(gf_lm *m, gf_rng *rng) { gf_params_init_weights(&m->params, m->cfg.init_std, rng); }

static gf_tensor *ffn(gf_ctx *ctx, const gf_lm_block *b, gf_tensor *y, float p) {
    gf_tensor *h = gf_gelu(ctx, gf_linear(ctx, y, b->fc1_w, b->fc1_b));
    return gf_dropout(ctx, gf_linear(ctx, h, b->fc2_w, b->fc2_b), p);
}

/* Record a branch output for the probes (gf_lm_out.mix_out / ffn_out); a no-op when not asked. */
static gf_tensor *capture(gf_tensor **slots, int64_t layer, gf_tensor *t) {
    if (slots) slots[layer] = t;
    return t;
}

static gf_tensor *grassmann_block(gf_lm *m, gf_ctx *ctx, const gf_lm_block *b, int64_t layer, gf_tensor *x,
                                  gf_lm_out *out) {
    gf_tensor **cm = out ? out->mix_out : NULL, **cf = out ? out->ffn_out : NULL;
    const gf_model_cfg *c = &m->cfg;
    int pre = c->block == GF_BLOCK_PRE_LN;
    gf_tensor *n = pre ? gf_layernorm(ctx, x, b->ln_in_w, b->ln_in_b, c->ln_eps) : x;
    gf_tensor *z = gf_linear(ctx, n, b->w_red, b->b_red); // (B, L, R)
    gf_tensor *g;                                         // (B, L, D)
    if (c->plucker) {
        const int64_t *offs = c->n_schedule > 0 ? &c->offset_schedule[layer] : c->offsets;
        int32_t n_off = c->n_schedule > 0 ? 1 : c->n_offsets;
        g = gf_plucker_mix(ctx, z, b->w_plu, b->b_plu, offs, n_off, c->eps, c->normalize);
    } else {
        g = gf_linear(ctx, gf_linear(ctx, z, b->w_lin, NULL), b->w_plu, b->b_plu);
    }
    gf_tensor *mix;
    if (c->gate) {
        gf_tensor *alpha = gf_sigmoid(ctx, gf_linear(ctx, gf_concat(ctx, n, g), b->w_gate, b->b_gate));
        mix = gf_lerp(ctx, alpha, n, g, 0.0f);
    } else {
        mix = gf_lerp(ctx, NULL, n, g, 0.5f);
    }
    gf_tensor *y = gf_dropout(ctx, gf_layernorm(ctx, mix, b->ln_mix_w, b->ln_mix_b, c->ln_eps), c->dropout);
    capture(cm, layer, y);
    if (!pre)
        return gf_layernorm(ctx, gf_add(ctx, y, capture(cf, layer, ffn(ctx, b, y, c->dropout))), b->ln_ffn_w,
                            b->ln_ffn_b, c->ln_eps);
    gf_tensor *x1 = gf_add(ctx, x, y);
    return gf_add(ctx, x1,
                  capture(cf, layer, ffn(ctx, b, gf_layernorm(ctx, x1, b->ln_ffn_w, b->ln_ffn_b, c->ln_eps), c->dropout)));
}

static gf_tensor *transformer_block(gf_lm *m, gf_ctx *ctx, const gf_lm_block *b, int64_t layer, gf_tensor *x,
                                    gf_lm_out *out) {
    const gf_model_cfg *c = &m->cfg;
    gf_tensor **cm = out ? out->mix_out : NULL, **cf = out ? out->ffn_out : NULL;
    int pre = c->block == GF_BLOCK_PRE_LN;
    gf_tensor *in = pre ? gf_layernorm(ctx, x, b->ln_attn_w, b->ln_attn_b, c->ln_eps) : x;
    gf_tensor *qkv = gf_linear(ctx, in, b->qkv_w, b->qkv_b); // (B, L, 3D)
    gf_tensor *a = gf_attention(ctx, qkv, c->heads, 1, NULL);
    a = capture(cm, layer, gf_dropout(ctx, gf_linear(ctx, a, b->proj_w, b->proj_b), c->dropout));
    if (!pre) {
        gf_tensor *x1 = gf_layernorm(ctx, gf_add(ctx, x, a), b->ln_attn_w, b->ln_attn_b, c->ln_eps);
        return gf_layernorm(ctx, gf_add(ctx, x1, capture(cf, layer, ffn(ctx, b, x1, c->dropout))), b->ln_ffn_w,
                            b->ln_ffn_b, c->ln_eps);
    }
    gf_tensor *x1 = gf_add(ctx, x, a);
    return gf_add(ctx, x1,
                  capture(cf, layer, ffn(ctx, b, gf_layernorm(ctx, x1, b->ln_ffn_w, b->ln_ffn_b, c->ln_eps), c->dropout)));
}

gf_tensor *gf_lm_forward(gf_lm *m, gf_ctx *ctx, const int32_t *windows, int64_t B, int64_t L, gf_lm_out *out) {
    const gf_model_cfg *c = &m->cfg;
    GF_ASSERT(L >= 1 && L <= c->max_len, "sequence length %lld outside [1, max_len=%lld]", (long long)L,
              (long long)c->max_len);
    int32_t *inp = gf_arena_alloc(&ctx->arena, (size_t)(B * L) * sizeof(int32_t)); // (B, L)
    int32_t *tgt = gf_arena_alloc(&ctx->arena, (size_t)(B * L) * sizeof(int32_t)); // (B, L)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < L; t++) {
            /* padding (-1) in a short last window: look up id 0; under causal mixing it only
             * feeds predictions whose targets are -1 too, which the loss skips */
            int32_t x = windows[b * (L + 1) + t];
            inp[b * L + t] = x < 0 ? 0 : x;
            tgt[b * L + t] = windows[b * (L + 1) + t + 1];
        }
    int64_t ids_shape[2] = {B, L};
    gf_tensor *h = gf_embedding(ctx, m->tok_emb, inp, 2, ids_shape); // (B, L, D)
    /* positions 0..L-1 are the first L rows of the table: a (L, D) view broadcast over B */
    h = gf_dropout(ctx, gf_add(ctx, h, gf_param_rows_view(ctx, m->pos_emb, L)), c->dropout);
    if (out && out->hidden) out->hidden[0] = h;
    for (int64_t l = 0; l < c->n_layers; l++) {
        const gf_lm_block *b = &m->blocks[l];
        h = c->family == GF_FAMILY_GRASSMANN ? grassmann_block(m, ctx, b, l, h, out) : transformer_block(m, ctx, b, l, h, out);
        if (out && out->hidden) out->hidden[l + 1] = h;
    }
    h = gf_layernorm(ctx, h, m->ln_f_w, m->ln_f_b, c->ln_eps);
    double nll = 0;
    int64_t cnt = 0;
    gf_tensor *loss, *logits = NULL;
    if (out && out->want_logits) {
        logits = gf_linear(ctx, h, m->tok_emb, NULL); // (B, L, V) tied head
        loss = gf_cross_entropy(ctx, logits, tgt, -1, &nll, &cnt);
    } else {
        loss = gf_head_ce(ctx, h, m->tok_emb, tgt, -1, &nll, &cnt); /* no (B, L, V) buffer */
    }
    if (out) { out->logits = logits; out->nll_sum = nll; out->n_tokens = cnt; }
    return loss;
}

double gf_lm_flops_per_token(const gf_model_cfg *c, int64_t L) {
    double D = (double)c->d_model, F = (double)c->d_ff, V = (double)c->vocab, R = (double)c->r;
    double P = R * (R - 1) / 2, layer;
    if (c->family == GF_FAMILY_GRASSMANN) {
        double m = c->n_schedule > 0 ? 1.0 : (double)c->n_offsets;
        layer = D * R                                     /* reduce */
                + (c->plucker ? m * 2 * P : R * P)        /* pairs + norm per offset, or the linear stand-in */
                + P * D                                   /* one projection after averaging */
                + (c->gate ? 2 * D * D : 0)               /* gate */
                + 2 * D * F;                              /* FFN */
    } else {
        layer = 3 * D * D + D * D + 2 * D * F + (double)L * D; /* QKV, proj, FFN, QKᵀ and PV (causal half ×2) */
    }
    return 2.0 * ((double)c->n_layers * layer + D * V); /* multiply-add = 2 FLOPs; + tied head */
}

void gf_lm_free(gf_lm *m) { gf_params_free(&m->params); }
