/* gflow/model.h — the two language-model families: GrassmannLM and TransformerLM.
 *
 * Shared: token embedding E (V, D) + learned positions P (Lmax, D), dropout, N blocks,
 * final LayerNorm, tied head (logits = h Eᵀ, no bias), next-token cross-entropy over
 * windows of L+1 tokens (inputs w[:, :L], targets w[:, 1:]). The definition follows
 * docs in grassmann-spec.md §1, §2, §6, §7; parameter names match tools/torch_ref.py.
 * A variant is a config field, not a copy of the model.
 */
#ifndef GFLOW_MODEL_H
#define GFLOW_MODEL_H

#include "gflow/blocks.h"
#include "gflow/params.h"
#include "gflow/tape.h"
#include <stdbool.h>

#define GF_MAX_OFFSETS 32
#define GF_MAX_LAYERS 64
#define GF_INT_LIST_MAX 64 /* entries per gf_int_list */

typedef struct gf_int_list {
    int64_t n;
    int64_t v[GF_INT_LIST_MAX]; /* (n) used, rest zero */
} gf_int_list;

/* The model config: the recipe's [model] section itself (gf_recipe.model, one field per key of
 * src/recipe/schema.c, which holds the defaults, bounds and docs), plus the tokenizer's vocab.
 * Both tasks read it: the language model (this file) the shared keys and the grassmann and
 * transformer ones; the NLI classifier (gflow/nli.h) the shared keys and the snli head's, its
 * blocks always pre-LN, gated, with Pluecker features. Plain data, so a copy is a config. */
typedef struct gf_model_cfg {
    gf_family family;
    gf_block_kind block;                       /* LM only */
    int64_t vocab;                             /* from the tokenizer (gf_recipe_model_cfg); 0 in a recipe */
    int64_t n_layers, d_model, d_ff;
    int64_t max_len;                           /* Lmax: rows of the position table */
    /* doubles as the recipe reads them; the model computes with them rounded to float */
    double dropout, init_std, ln_eps;
    /* grassmann */
    int64_t r;
    gf_int_list offsets;                       /* mode A: every layer averages over these (at most GF_MAX_OFFSETS) */
    gf_int_list offset_schedule;               /* mode B when n > 0: layer l uses v[l] */
    double eps;
    bool normalize, gate, plucker;             /* gate, plucker: LM only */
    /* transformer */
    int64_t heads;
    /* snli head */
    int64_t window, stride, mix_heads;
    int64_t classifier_hidden;
} gf_model_cfg;

/* Every constraint on the config (gf_block_cfg_check, then the offsets): 0 when all hold, else 1
 * with the recipe key at fault and why. The one check: gf_recipe_load reports it at the key's
 * file:line, gf_lm_init through gf_model_cfg_validate. */
int gf_model_cfg_check(const gf_model_cfg *c, gf_cfg_issue *is);
/* gf_model_cfg_check as a status: "model config: <key>: <why>". */
gf_status gf_model_cfg_validate(const gf_model_cfg *c);

/* The block every layer uses, and layer l's offsets (mode B: the one offset_schedule[l]). */
gf_block_cfg gf_lm_block_cfg(const gf_model_cfg *c);
void gf_lm_layer_offsets(const gf_model_cfg *c, int64_t l, const int64_t **offs, int32_t *n);
typedef struct gf_lm {
    gf_model_cfg cfg;
    gf_params params;
    gf_tensor *tok_emb, *pos_emb, *ln_f_w, *ln_f_b;
    gf_block blocks[GF_MAX_LAYERS];
} gf_lm;

/* Optional outputs of a forward pass. */
typedef struct gf_lm_out {
    int want_logits;          /* in: keep the (B, L, V) logits (else the fused chunked head is used) */
    gf_tensor *logits;        /* out: (B, L, V) when want_logits */
    double nll_sum;           /* Σ NLL over predicted tokens (double) */
    int64_t n_tokens;         /* predicted tokens */
    gf_tensor **hidden;       /* if non-NULL: n_layers + 1 slots, h after embeddings and each block */
    /* if non-NULL: n_layers slots each, the two branch outputs of every block (B, L, D), for the
     * geometry probes. mix: the mixing branch (Grassmann Drop(LN_mix(m)); Transformer
     * Drop(Proj(Attn))), before any residual add or LN that follows it; ffn: Drop(FFN(.)). */
    gf_tensor **mix_out, **ffn_out;
} gf_lm_out;

gf_status gf_lm_init(gf_lm *m, const gf_model_cfg *cfg);
/* Training init: N(0, init_std) for linear and embedding weights, zero biases, LN (1, 0). */
void gf_lm_init_weights(gf_lm *m, gf_rng *rng);
/* windows (B, L+1) int32; returns the scalar mean loss. ctx->training turns dropout on. */
gf_tensor *gf_lm_forward(gf_lm *m, gf_ctx *ctx, const int32_t *windows, int64_t B, int64_t L, gf_lm_out *out);
/* A training step's windows split into ids and targets in ctx's host arena and, on the GPU, fed to
 * device memory before the step's capture (gf_embedding_feed, gf_ctx_feed: a captured step reads
 * them there, so its graph can be replayed on the next windows); valid until ctx's reset. */
typedef struct gf_lm_fed {
    const int32_t *windows;
    int32_t *inp, *tgt; // (B, L) each
    int64_t B, L, counted; /* counted: targets that are not padding (the loss's divisor) */
    uint64_t epoch;        /* ctx->pack_epoch when fed */
} gf_lm_fed;
/* returns f->counted */
int64_t gf_lm_feed(gf_lm *m, gf_ctx *ctx, const int32_t *windows, int64_t B, int64_t L, gf_lm_fed *f);
/* gf_lm_forward(f->windows) of the same context step, from the fed ids (out NULL) */
gf_tensor *gf_lm_forward_fed(gf_lm *m, gf_ctx *ctx, const gf_lm_fed *f);
/* Forward FLOPs per predicted token (multiply-add = 2), counting GEMMs and attention/Plücker math. */
double gf_lm_flops_per_token(const gf_model_cfg *c, int64_t L);
void gf_lm_free(gf_lm *m);

#endif
