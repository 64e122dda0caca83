/* lm.c — GrassmannLM and TransformerLM: embeddings, n_layers blocks of gflow/blocks.h, final
 * LayerNorm and the tied head, on the tape. */
#include "gflow/model.h"
#include "gflow/ops.h"
#include "gflow/device.h"
#include <string.h>

gf_block_cfg gf_lm_block_cfg(const gf_model_cfg *c) {
    return (gf_block_cfg){.family = c->family, .kind = c->block, .d_model = c->d_model, .d_ff = c->d_ff,
                          .dropout = (float)c->dropout, .ln_eps = (float)c->ln_eps, .pairing = GF_PAIR_CAUSAL, .r = c->r,
                          .mix_heads = 1, .eps = (float)c->eps, .normalize = c->normalize, .gate = c->gate,
                          .plucker = c->plucker, .heads = c->heads, .causal = 1};
}

int gf_model_cfg_check(const gf_model_cfg *c, gf_cfg_issue *is) {
    gf_block_cfg b = gf_lm_block_cfg(c);
    if (gf_block_cfg_check(&b, c->vocab, c->n_layers, GF_MAX_LAYERS, c->max_len, is)) return 1;
    if (c->family != GF_FAMILY_GRASSMANN) return 0;
    const gf_int_list *sch = &c->offset_schedule, *all = &c->offsets;
    if (sch->n > 0) {
        GF_CFG_NEED(sch->n == c->n_layers, "offset_schedule", "must have n_layers (%lld) entries, got %lld",
             (long long)c->n_layers, (long long)sch->n);
        for (int i = 0; i < sch->n; i++)
            GF_CFG_NEED(sch->v[i] >= 1, "offset_schedule", "entry %d must be >= 1, got %lld", i, (long long)sch->v[i]);
    } else {
        GF_CFG_NEED(all->n >= 1 && all->n <= GF_MAX_OFFSETS, "offsets", "must list 1..%d values, got %d",
             GF_MAX_OFFSETS, (int)all->n);
        for (int i = 0; i < all->n; i++)
            GF_CFG_NEED(all->v[i] >= 1, "offsets", "entry %d must be >= 1, got %lld", i, (long long)all->v[i]);
    }
    return 0;
}

gf_status gf_model_cfg_validate(const gf_model_cfg *c) {
    gf_cfg_issue is;
    return gf_cfg_status(gf_model_cfg_check(c, &is), &is, "model config");
}

void gf_lm_layer_offsets(const gf_model_cfg *c, int64_t l, const int64_t **offs, int32_t *n) {
    /* mode B (offset_schedule): layer l pairs at the one offset [l] */
    *offs = c->offset_schedule.n > 0 ? &c->offset_schedule.v[l] : c->offsets.v;
    *n = c->offset_schedule.n > 0 ? 1 : (int32_t)c->offsets.n;
}

gf_status gf_lm_init(gf_lm *m, const gf_model_cfg *cfg) {
    memset(m, 0, sizeof *m);
    GF_TRY(gf_model_cfg_validate(cfg));
    m->cfg = *cfg;
    gf_params_init(&m->params);
    const gf_block_cfg bc = gf_lm_block_cfg(cfg);
    gf_trunk_register(&m->params, &bc, cfg->vocab, cfg->max_len, cfg->n_layers,
                      &(gf_trunk_slots){&m->tok_emb, &m->pos_emb, &m->ln_f_w, &m->ln_f_b, m->blocks});
    return gf_params_alloc(&m->params);
}

/* init_std rounded to float, as the blocks' dropout and eps are */
void gf_lm_init_weights(gf_lm *m, gf_rng *rng) { gf_params_init_weights(&m->params, (float)m->cfg.init_std, rng); }

/* windows (B, L+1) -> ids inp (B, L) and targets tgt (B, L), in ctx's host arena */
static void split_windows(gf_ctx *ctx, const int32_t *windows, int64_t B, int64_t L, int32_t **inp_out,
                          int32_t **tgt_out) {
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
    *inp_out = inp;
    *tgt_out = tgt;
}

static gf_tensor *forward_ids(gf_lm *m, gf_ctx *ctx, const int32_t *inp, const int32_t *tgt, int64_t B, int64_t L,
                              gf_lm_out *out);

gf_tensor *gf_lm_forward(gf_lm *m, gf_ctx *ctx, const int32_t *windows, int64_t B, int64_t L, gf_lm_out *out) {
    int32_t *inp, *tgt;
    split_windows(ctx, windows, B, L, &inp, &tgt);
    return forward_ids(m, ctx, inp, tgt, B, L, out);
}

int64_t gf_lm_feed(gf_lm *m, gf_ctx *ctx, const int32_t *windows, int64_t B, int64_t L, gf_lm_fed *f) {
    *f = (gf_lm_fed){.windows = windows, .B = B, .L = L, .epoch = ctx->pack_epoch};
    split_windows(ctx, windows, B, L, &f->inp, &f->tgt);
    gf_embedding_feed(ctx, m->tok_emb, f->inp, B * L);
    gf_ctx_feed(ctx, f->tgt, (size_t)(B * L) * sizeof(int32_t));
    /* the loss's rule (ignore_index -1, else in [0, V)), checked here too: a replayed step runs no
     * forward that would check it */
    const int64_t V = m->tok_emb->shape[0];
    for (int64_t i = 0; i < B * L; i++) {
        if (f->tgt[i] == -1) continue;
        GF_ASSERT(f->tgt[i] >= 0 && f->tgt[i] < V, "head_ce: target %d at row %lld outside [0, %lld)", f->tgt[i],
                  (long long)i, (long long)V);
        f->counted++;
    }
    return f->counted;
}

gf_tensor *gf_lm_forward_fed(gf_lm *m, gf_ctx *ctx, const gf_lm_fed *f) {
    GF_ASSERT(f->epoch == ctx->pack_epoch, "gf_lm_forward_fed: fed before the context's last reset");
    return forward_ids(m, ctx, f->inp, f->tgt, f->B, f->L, NULL);
}

static gf_tensor *forward_ids(gf_lm *m, gf_ctx *ctx, const int32_t *inp, const int32_t *tgt, int64_t B, int64_t L,
                              gf_lm_out *out) {
    const gf_model_cfg *c = &m->cfg;
    GF_ASSERT(L >= 1 && L <= c->max_len, "sequence length %lld outside [1, max_len=%lld]", (long long)L,
              (long long)c->max_len);
    int64_t ids_shape[2] = {B, L};
    gf_tensor *h = gf_embedding(ctx, m->tok_emb, inp, 2, ids_shape); // (B, L, D)
    /* positions 0..L-1 are the first L rows of the table: a (L, D) view broadcast over B */
    h = gf_dropout(ctx, gf_add(ctx, h, gf_param_rows_view(ctx, m->pos_emb, L)), c->dropout);
    if (out && out->hidden) out->hidden[0] = h;
    const gf_block_cfg bc = gf_lm_block_cfg(c);
    for (int64_t l = 0; l < c->n_layers; l++) {
        gf_block_in in = {.mix_out = out && out->mix_out ? &out->mix_out[l] : NULL,
                          .ffn_out = out && out->ffn_out ? &out->ffn_out[l] : NULL};
        gf_lm_layer_offsets(c, l, &in.offsets, &in.n_offsets);
        h = gf_block_forward(ctx, &bc, &m->blocks[l], h, &in);
        if (out && out->hidden) out->hidden[l + 1] = h;
    }
    h = gf_layernorm(ctx, h, m->ln_f_w, m->ln_f_b, c->ln_eps);
    /* the host-side NLL sum only for a caller that takes outputs: on the GPU reading it back
     * waits for the stream, which a training step (out NULL) should not do before its backward */
    double nll = 0, *nllp = out ? &nll : NULL;
    int64_t cnt = 0;
    gf_tensor *loss, *logits = NULL;
    if (out && out->want_logits) {
        logits = gf_linear(ctx, h, m->tok_emb, NULL); // (B, L, V) tied head
        loss = gf_cross_entropy(ctx, logits, tgt, -1, nllp, &cnt);
    } else {
        loss = gf_head_ce(ctx, h, m->tok_emb, tgt, -1, nllp, &cnt); /* no (B, L, V) buffer */
    }
    if (out) { out->logits = logits; out->nll_sum = nll; out->n_tokens = cnt; }
    return loss;
}

double gf_lm_flops_per_token(const gf_model_cfg *c, int64_t L) {
    double D = (double)c->d_model, F = (double)c->d_ff, V = (double)c->vocab, R = (double)c->r;
    double P = R * (R - 1) / 2, layer;
    if (c->family == GF_FAMILY_GRASSMANN) {
        double m = c->offset_schedule.n > 0 ? 1.0 : (double)c->offsets.n;
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
