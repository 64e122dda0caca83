/* blocks.c — the Grassmann and Transformer blocks, their FFN, the tensor table and the
 * constraints they share; see gflow/blocks.h. */
#include "gflow/blocks.h"
#include "gflow/ops.h"
#include <stdarg.h>
#include <stdio.h>

const char *gf_family_name(gf_family f) { return f == GF_FAMILY_TRANSFORMER ? "transformer" : "grassmann"; }
const char *gf_block_name(gf_block_kind b) { return b == GF_BLOCK_PRE_LN ? "pre_ln" : "post_ln"; }

#define T(nm, k, f, w, a, b) {nm, GF_PK_##k, offsetof(gf_block, f), GF_BT_##w, GF_BD_##a, GF_BD_##b}
/* The order is the parameter-block layout of every checkpoint: append, never reorder. */
const gf_block_tensor gf_block_tensors[] = {
    T("ln_in.weight", NORM, ln_in_w, GRASS_PRE, D, NONE),
    T("ln_in.bias", NORM, ln_in_b, GRASS_PRE, D, NONE),
    T("mix.w_red.weight", WEIGHT, w_red, GRASS, R, D),
    T("mix.w_red.bias", BIAS, b_red, GRASS, R, NONE),
    T("mix.w_lin.weight", WEIGHT, w_lin, GRASS_LIN, P, R),
    T("mix.w_plu.weight", WEIGHT, w_plu, GRASS, D, P),
    T("mix.w_plu.bias", BIAS, b_plu, GRASS, D, NONE),
    T("mix.w_gate.weight", WEIGHT, w_gate, GRASS_GATE, D, 2D),
    T("mix.w_gate.bias", BIAS, b_gate, GRASS_GATE, D, NONE),
    T("ln_mix.weight", NORM, ln_mix_w, GRASS, D, NONE),
    T("ln_mix.bias", NORM, ln_mix_b, GRASS, D, NONE),
    T("ln_attn.weight", NORM, ln_attn_w, ATTN, D, NONE),
    T("ln_attn.bias", NORM, ln_attn_b, ATTN, D, NONE),
    T("attn.qkv.weight", WEIGHT, qkv_w, ATTN, 3D, D),
    T("attn.qkv.bias", BIAS, qkv_b, ATTN, 3D, NONE),
    T("attn.proj.weight", WEIGHT, proj_w, ATTN, D, D),
    T("attn.proj.bias", BIAS, proj_b, ATTN, D, NONE),
    T("ln_ffn.weight", NORM, ln_ffn_w, ALL, D, NONE),
    T("ln_ffn.bias", NORM, ln_ffn_b, ALL, D, NONE),
    T("ffn.fc1.weight", WEIGHT, fc1_w, ALL, F, D),
    T("ffn.fc1.bias", BIAS, fc1_b, ALL, F, NONE),
    T("ffn.fc2.weight", WEIGHT, fc2_w, ALL, D, F),
    T("ffn.fc2.bias", BIAS, fc2_b, ALL, D, NONE),
};
#undef T
const int gf_block_n_tensors = (int)(sizeof gf_block_tensors / sizeof gf_block_tensors[0]);

static int has_tensor(const gf_block_cfg *c, gf_bt_when w) {
    int g = c->family == GF_FAMILY_GRASSMANN;
    switch (w) {
    case GF_BT_ALL: return 1;
    case GF_BT_GRASS: return g;
    case GF_BT_GRASS_PRE: return g && c->kind == GF_BLOCK_PRE_LN;
    case GF_BT_GRASS_LIN: return g && !c->plucker;
    case GF_BT_GRASS_GATE: return g && c->gate;
    case GF_BT_ATTN: return !g;
    }
    return 0;
}

static int64_t dim(const gf_block_cfg *c, gf_bt_dim d) {
    switch (d) {
    case GF_BD_NONE: return 0;
    case GF_BD_D: return c->d_model;
    case GF_BD_F: return c->d_ff;
    case GF_BD_R: return c->r;
    case GF_BD_P: return c->r * (c->r - 1) / 2 / c->mix_heads;
    case GF_BD_2D: return 2 * c->d_model;
    case GF_BD_3D: return 3 * c->d_model;
    }
    return 0;
}

gf_tensor *gf_nn_param(gf_params *ps, const char *name, gf_param_kind kind, int64_t d0, int64_t d1) {
    int64_t s[2] = {d0, d1};
    return gf_params_add(ps, name, kind, d1 > 0 ? 2 : 1, s);
}

void gf_block_register(gf_params *ps, const gf_block_cfg *c, int64_t layer, gf_block *b) {
    for (int i = 0; i < gf_block_n_tensors; i++) {
        const gf_block_tensor *t = &gf_block_tensors[i];
        gf_tensor **slot = (gf_tensor **)((char *)b + t->field);
        *slot = NULL;
        if (!has_tensor(c, t->when)) continue;
        char name[96];
        snprintf(name, sizeof name, "blocks.%lld.%s", (long long)layer, t->name);
        *slot = gf_nn_param(ps, name, t->kind, dim(c, t->d0), dim(c, t->d1));
    }
}

void gf_trunk_register(gf_params *ps, const gf_block_cfg *c, int64_t vocab, int64_t max_len, int64_t n_layers,
                       const gf_trunk_slots *out) {
    *out->tok_emb = gf_nn_param(ps, "tok_emb.weight", GF_PK_EMBED, vocab, c->d_model);
    *out->pos_emb = gf_nn_param(ps, "pos_emb.weight", GF_PK_EMBED, max_len, c->d_model);
    for (int64_t l = 0; l < n_layers; l++) gf_block_register(ps, c, l, &out->blocks[l]);
    *out->ln_f_w = gf_nn_param(ps, "ln_f.weight", GF_PK_NORM, c->d_model, 0);
    *out->ln_f_b = gf_nn_param(ps, "ln_f.bias", GF_PK_NORM, c->d_model, 0);
}

gf_tensor *gf_ffn(gf_ctx *ctx, const gf_block *b, gf_tensor *y, float p) {
    gf_tensor *h = gf_linear_gelu(ctx, y, b->fc1_w, b->fc1_b); /* gelu(linear(...)) fused */
    return gf_dropout(ctx, gf_linear(ctx, h, b->fc2_w, b->fc2_b), p);
}

/* Record a branch output for the probes; a no-op when not asked. */
static gf_tensor *capture(gf_tensor **slot, gf_tensor *t) {
    if (slot) *slot = t;
    return t;
}

/* The post-LN residual LN(x + dropout(f)) whose branch f = h fw^T + fb is a linear layer, as one
 * fused op (its bias added where the norm reads f); when a probe asks for the branch's output
 * (slot), the unfused chain, where dropout(f) is a tensor (the same values). */
static gf_tensor *post_ln(gf_ctx *ctx, const gf_block_cfg *c, gf_tensor *x, gf_tensor *h, gf_tensor *fw,
                          gf_tensor *fb, gf_tensor *w, gf_tensor *bias, gf_tensor **slot) {
    if (slot) {
        gf_tensor *f = capture(slot, gf_dropout(ctx, gf_linear(ctx, h, fw, fb), c->dropout));
        return gf_layernorm(ctx, gf_add(ctx, x, f), w, bias, c->ln_eps);
    }
    return gf_linear_dropout_add_layernorm(ctx, x, h, fw, fb, c->dropout, w, bias, c->ln_eps);
}

/* The FFN half shared by both blocks: y is the mixing branch's output, x the block input. */
static gf_tensor *ffn_half(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *y,
                           gf_tensor **ffn_out) {
    if (c->kind != GF_BLOCK_PRE_LN) {
        gf_tensor *h = gf_linear_gelu(ctx, y, b->fc1_w, b->fc1_b); /* gf_ffn's fc1, fc2 in the norm's op */
        return post_ln(ctx, c, y, h, b->fc2_w, b->fc2_b, b->ln_ffn_w, b->ln_ffn_b, ffn_out);
    }
    return gf_add(ctx, y,
                  capture(ffn_out, gf_ffn(ctx, b, gf_layernorm(ctx, y, b->ln_ffn_w, b->ln_ffn_b, c->ln_eps), c->dropout)));
}

/* g (B, L, D) from the reduced vectors z (B, L, R) */
static gf_tensor *pair_features(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *z,
                                const gf_block_in *in) {
    if (c->pairing == GF_PAIR_WINDOW)
        return gf_plucker_window(ctx, z, in->mask, b->w_plu, b->b_plu, c->window, c->stride, c->mix_heads, c->eps,
                                 c->normalize);
    if (c->plucker && in->cache)
        return gf_plucker_mix_cached(ctx, z, b->w_plu, b->b_plu, in->offsets, in->n_offsets, c->eps, c->normalize,
                                     in->cache->buf, in->cache->cap, in->cache->pos);
    if (c->plucker)
        return gf_plucker_mix(ctx, z, b->w_plu, b->b_plu, in->offsets, in->n_offsets, c->eps, c->normalize);
    return gf_linear(ctx, gf_linear(ctx, z, b->w_lin, NULL), b->w_plu, b->b_plu);
}

gf_tensor *gf_grassmann_block(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *x,
                              const gf_block_in *in) {
    int pre = c->kind == GF_BLOCK_PRE_LN;
    gf_tensor *n = pre ? gf_layernorm(ctx, x, b->ln_in_w, b->ln_in_b, c->ln_eps) : x;
    gf_tensor *z = gf_linear(ctx, n, b->w_red, b->b_red); // (B, L, R)
    gf_tensor *g = pair_features(ctx, c, b, z, in);       // (B, L, D)
    gf_tensor *mix;
    if (c->gate) {
        /* α = σ(W [n ; g] + b), mix = α n + (1 − α) g in one op: the product over [n ; g] without
         * joining them, the bias, sigmoid and lerp fused */
        mix = gf_gated_lerp(ctx, n, g, b->w_gate, b->b_gate);
    } else {
        mix = gf_lerp(ctx, NULL, n, g, 0.5f);
    }
    /* Drop(LN_mix(mix)) fused: the chain's bits, the probes' mix_out its output */
    gf_tensor *y = gf_layernorm_dropout(ctx, mix, b->ln_mix_w, b->ln_mix_b, c->ln_eps, c->dropout);
    capture(in->mix_out, y);
    /* post_ln: no residual around the mixer (the paper's block) */
    return ffn_half(ctx, c, b, pre ? gf_add(ctx, x, y) : y, in->ffn_out);
}

gf_tensor *gf_transformer_block(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *x,
                                const gf_block_in *in) {
    int pre = c->kind == GF_BLOCK_PRE_LN;
    gf_tensor *h = pre ? gf_layernorm(ctx, x, b->ln_attn_w, b->ln_attn_b, c->ln_eps) : x;
    gf_tensor *qkv = gf_linear(ctx, h, b->qkv_w, b->qkv_b); // (B, L, 3D)
    gf_tensor *a = in->cache ? gf_attention_cached(ctx, qkv, c->heads, in->cache->buf, in->cache->cap, in->cache->pos)
                             : gf_attention(ctx, qkv, c->heads, c->causal, in->key_mask);
    gf_tensor *x1;
    if (pre) {
        a = gf_linear(ctx, a, b->proj_w, b->proj_b);
        x1 = gf_add(ctx, x, capture(in->mix_out, gf_dropout(ctx, a, c->dropout)));
    } else {
        x1 = post_ln(ctx, c, x, a, b->proj_w, b->proj_b, b->ln_attn_w, b->ln_attn_b, in->mix_out);
    }
    return ffn_half(ctx, c, b, x1, in->ffn_out);
}

gf_tensor *gf_block_forward(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *x,
                            const gf_block_in *in) {
    return c->family == GF_FAMILY_GRASSMANN ? gf_grassmann_block(ctx, c, b, x, in) : gf_transformer_block(ctx, c, b, x, in);
}

gf_status gf_cfg_status(int bad, const gf_cfg_issue *is, const char *what) {
    return bad ? gf_error_set(GF_E_INVALID, "%s: %s: %s", what, is->key, is->why) : GF_OK;
}

int gf_cfg_fail(gf_cfg_issue *is, const char *key, const char *fmt, ...) {
    is->key = key;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(is->why, sizeof is->why, fmt, ap);
    va_end(ap);
    return 1;
}


static int grassmann_check(const gf_block_cfg *c, gf_cfg_issue *is) {
    GF_CFG_NEED(c->r >= 2, "r", "must be >= 2, got %lld", (long long)c->r);
    GF_CFG_NEED(c->r <= c->d_model, "r", "must be <= d_model (%lld), got %lld", (long long)c->d_model, (long long)c->r);
    if (c->pairing == GF_PAIR_WINDOW) {
        GF_CFG_NEED(c->window >= 2, "window", "must be >= 2, got %lld", (long long)c->window);
        GF_CFG_NEED(c->stride >= 1, "stride", "must be >= 1, got %lld", (long long)c->stride);
        int64_t P = c->r * (c->r - 1) / 2;
        GF_CFG_NEED(c->mix_heads >= 1 && P % c->mix_heads == 0 && c->d_model % c->mix_heads == 0, "mix_heads",
             "must divide both C(r,2) = %lld and d_model = %lld, got %lld", (long long)P, (long long)c->d_model,
             (long long)c->mix_heads);
    }
    GF_CFG_NEED(c->eps > 0, "eps", "must be > 0, got %g", (double)c->eps);
    return 0;
}

int gf_block_cfg_check(const gf_block_cfg *c, int64_t vocab, int64_t n_layers, int64_t max_layers, int64_t max_len,
                       gf_cfg_issue *is) {
    GF_CFG_NEED(c->family == GF_FAMILY_GRASSMANN || c->family == GF_FAMILY_TRANSFORMER, "family", "unknown family %d",
         (int)c->family);
    GF_CFG_NEED(vocab > 0, "vocab", "must be > 0, got %lld", (long long)vocab);
    GF_CFG_NEED(c->d_model > 0, "d_model", "must be > 0, got %lld", (long long)c->d_model);
    GF_CFG_NEED(c->d_ff > 0, "d_ff", "must be > 0, got %lld", (long long)c->d_ff);
    GF_CFG_NEED(n_layers >= 1 && n_layers <= max_layers, "n_layers", "must be in [1, %lld], got %lld", (long long)max_layers,
         (long long)n_layers);
    GF_CFG_NEED(max_len > 0, "max_len", "must be > 0, got %lld", (long long)max_len);
    GF_CFG_NEED(c->dropout >= 0 && c->dropout < 1, "dropout", "must be in [0, 1), got %g", (double)c->dropout);
    GF_CFG_NEED(c->ln_eps > 0, "ln_eps", "must be > 0, got %g", (double)c->ln_eps);
    if (c->family == GF_FAMILY_GRASSMANN) return grassmann_check(c, is);
    GF_CFG_NEED(c->heads >= 1, "heads", "must be >= 1, got %lld", (long long)c->heads);
    GF_CFG_NEED(c->d_model % c->heads == 0, "heads", "d_model (%lld) must be divisible by heads, got %lld",
         (long long)c->d_model, (long long)c->heads);
    return 0;
}
