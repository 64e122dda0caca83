/* nli.c — the SNLI classifiers (Grassmann–Plücker and Transformer heads) built from ops on the
 * tape. The architecture and the reading of the paper it implements: see include/gflow/nli.h. */
#include "gflow/nli.h"
#include "gflow/device.h"
#include "gflow/ops.h"
#include <string.h>

/* The block every layer of the NLI encoder uses: pre-LN, gated, windowed bidirectional pairs or
 * bidirectional attention over unpadded keys. */
static gf_block_cfg block_cfg(const gf_model_cfg *c) {
    return (gf_block_cfg){.family = c->family, .kind = GF_NLI_BLOCK, .d_model = c->d_model, .d_ff = c->d_ff,
                          .dropout = (float)c->dropout, .ln_eps = (float)c->ln_eps, .pairing = GF_PAIR_WINDOW, .r = c->r,
                          .mix_heads = c->mix_heads, .window = c->window, .stride = c->stride, .eps = (float)c->eps,
                          .normalize = c->normalize, .gate = 1, .plucker = 1, .heads = c->heads, .causal = 0};
}

int gf_nli_cfg_check(const gf_model_cfg *c, gf_cfg_issue *is) {
    gf_block_cfg b = block_cfg(c);
    if (gf_block_cfg_check(&b, c->vocab, c->n_layers, GF_NLI_MAX_LAYERS, c->max_len, is)) return 1;
    GF_CFG_NEED(c->classifier_hidden > 0, "classifier_hidden", "must be > 0, got %lld", (long long)c->classifier_hidden);
    return 0;
}

gf_status gf_nli_cfg_validate(const gf_model_cfg *c) {
    gf_cfg_issue is;
    return gf_cfg_status(gf_nli_cfg_check(c, &is), &is, "nli config");
}

gf_status gf_nli_init(gf_nli *m, const gf_model_cfg *cfg) {
    memset(m, 0, sizeof *m);
    GF_TRY(gf_nli_cfg_validate(cfg));
    m->cfg = *cfg;
    gf_params *ps = &m->params;
    gf_params_init(ps);
    const gf_block_cfg bc = block_cfg(cfg);
    const int64_t D = cfg->d_model, Hc = cfg->classifier_hidden;
    gf_trunk_register(ps, &bc, cfg->vocab, cfg->max_len, cfg->n_layers,
                      &(gf_trunk_slots){&m->tok_emb, &m->pos_emb, &m->ln_f_w, &m->ln_f_b, m->blocks});
    m->cls_fc1_w = gf_nn_param(ps, "cls.fc1.weight", GF_PK_WEIGHT, Hc, 4 * D);
    m->cls_fc1_b = gf_nn_param(ps, "cls.fc1.bias", GF_PK_BIAS, Hc, 0);
    m->cls_fc2_w = gf_nn_param(ps, "cls.fc2.weight", GF_PK_WEIGHT, GF_NLI_CLASSES, Hc);
    m->cls_fc2_b = gf_nn_param(ps, "cls.fc2.bias", GF_PK_BIAS, GF_NLI_CLASSES, 0);
    return gf_params_alloc(ps);
}

/* init_std rounded to float, as the blocks' dropout and eps are */
void gf_nli_init_weights(gf_nli *m, gf_rng *rng) { gf_params_init_weights(&m->params, (float)m->cfg.init_std, rng); }

gf_tensor *gf_nli_forward(gf_nli *m, gf_ctx *ctx, const int32_t *prem, const float *prem_mask, const int32_t *hyp,
                          const float *hyp_mask, const int32_t *labels, int64_t B, int64_t Ls, gf_nli_out *out) {
    const gf_model_cfg *c = &m->cfg;
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
    const gf_block_cfg bc = block_cfg(c);
    const gf_block_in in = {.mask = mask, .key_mask = kmask};
    for (int64_t l = 0; l < c->n_layers; l++) h = gf_block_forward(ctx, &bc, &m->blocks[l], h, &in);
    h = gf_layernorm(ctx, h, m->ln_f_w, m->ln_f_b, c->ln_eps);
    gf_tensor *feat = gf_pair_match(ctx, gf_masked_mean(ctx, h, mask)); // (B, 4D)
    gf_tensor *hid = gf_dropout(ctx, gf_linear_gelu(ctx, feat, m->cls_fc1_w, m->cls_fc1_b), c->dropout);
    gf_tensor *logits = gf_linear(ctx, hid, m->cls_fc2_w, m->cls_fc2_b); // (B, 3)

    for (int64_t b = 0; labels && b < B; b++)
        GF_ASSERT(labels[b] >= -1 && labels[b] < GF_NLI_CLASSES, "nli: label %d outside [-1, 2]", labels[b]);
    int32_t *pred = NULL;
    int64_t n_correct = 0, n_counted = 0;
    if (out) { /* predictions only when asked for (a GPU training step reads back nothing here) */
        pred = out->pred_buf ? out->pred_buf : gf_arena_alloc(&ctx->arena, (size_t)B * sizeof(int32_t)); // (B)
        const float *lgs = logits->data; // (B, 3)
        if (logits->device != GF_DEV_CPU) {
            float *h = gf_arena_floats(&ctx->arena, B * GF_NLI_CLASSES);
            gf_status st = gf_tensor_to_host(logits, h, B * GF_NLI_CLASSES);
            GF_ASSERT(st == GF_OK, "nli: reading the logits back from the GPU: %s", gf_last_error());
            lgs = h;
        }
        for (int64_t b = 0; b < B; b++) {
            const float *lg = lgs + b * GF_NLI_CLASSES;
            int32_t k = 0;
            for (int32_t j = 1; j < GF_NLI_CLASSES; j++)
                if (lg[j] > lg[k]) k = j;
            pred[b] = k;
            if (labels && labels[b] >= 0) {
                n_counted++;
                n_correct += k == labels[b];
            }
        }
    }
    double nll = 0; /* the host-side sum only when asked for: on the GPU it waits for the stream */
    gf_tensor *loss = labels ? gf_cross_entropy(ctx, logits, labels, -1, out ? &nll : NULL, NULL) : NULL;
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
