/* gflow/nli.h — the two SNLI sentence-pair classifiers (the paper's second experiment), trained
 * from scratch: a Grassmann–Plücker head and a size-matched Transformer head on a shared shell.
 *
 * The paper's description (grassmann-spec.md §4, §6 item 14) is self-contradictory: windows of 8
 * tokens "over the token sequence" and self-attention "over the pooled features". This file
 * implements the token-sequence reading (the issue's spec), with no pretrained backbone:
 *
 *  1. Siamese encoding. Premise and hypothesis are encoded separately with the same weights (one
 *     pass over a (2B, Ls) batch: premises in rows 0..B-1, hypotheses in rows B..2B-1):
 *       h = Dropout(E[ids] + P[0..Ls-1])                       E (V, D), P (max_len, D)
 *     then n_layers blocks, all pre-LN (x + Drop(sublayer(LN(x)))). Pre-LN + residual keeps a
 *     from-scratch classifier stable; the paper's post-LN has no residual around the mixer.
 *  2. Grassmann block (the LM's pre_ln Grassmann block with windowed, bidirectional pairs):
 *       n = LN_in(x);  z = W_red n + b_red                     (2B, Ls, r), r = d_proj = 64
 *       g = plucker_window(z, mask; W_plu, b_plu)              (2B, Ls, D)
 *         windows [k*stride, k*stride + window) (8 and 8: six disjoint windows of 8 at Ls = 48);
 *         for a real token t, the partners are every other real token s sharing a window with t;
 *         p̂(z_t, z_s) = (z_t ∧ z_s) / max(|z_t ∧ z_s|, eps) over all C(r,2) = 2,016 coordinates,
 *         averaged over the partners; padding never contributes, and padding or a token with no
 *         partner gets g = 0. Mixing heads: the averaged coordinates are split into mix_heads
 *         contiguous groups of C(r,2)/mix_heads (504), each projected by its own map to D/mix_heads
 *         outputs (64), concatenated (a block-diagonal W_plu stored as (D, C(r,2)/mix_heads)).
 *       α = σ(W_gate [n; g] + b_gate);  m = α n + (1-α) g
 *       x = x + Drop(LN_mix(m));  x = x + Drop(FFN(LN_ffn(x))),  FFN = fc2(GELU(fc1 ·)), D -> d_ff -> D
 *  3. Transformer block: x = x + Drop(Proj(Attn(QKV LN_attn(x))));  x = x + Drop(FFN(LN_ffn(x))),
 *     bidirectional multi-head attention (`heads`) with padding keys masked out.
 *  4. Pooling: h = LN_f(x); u = masked mean of the premise's real tokens, v = the hypothesis's (an
 *     all-padding row pools to 0).
 *  5. Matching and classifier: f = [u; v; |u - v|; u ⊙ v] (4D);
 *       logits = cls.fc2(Drop(GELU(cls.fc1 f)))              4D -> classifier_hidden -> 3
 *     loss = mean cross-entropy over rows with label >= 0 (label -1 rows are ignored).
 *
 * With mix_heads = 4 the Grassmann block (541,504 parameters at D = 256, r = 64, d_ff = 512) is
 * 2.7 % larger than the Transformer block (527,104); whole models differ by < 1 %.
 *
 * Parameter names (checkpoints, tools/torch_ref_nli.py): tok_emb.weight, pos_emb.weight,
 * blocks.i.{ln_in, mix.w_red, mix.w_plu, mix.w_gate, ln_mix, ln_ffn, ffn.fc1, ffn.fc2}.* (grassmann),
 * blocks.i.{ln_attn, attn.qkv, attn.proj, ln_ffn, ffn.fc1, ffn.fc2}.* (transformer),
 * ln_f.*, cls.fc1.*, cls.fc2.*.
 */
#ifndef GFLOW_NLI_H
#define GFLOW_NLI_H

#include "gflow/model.h"
#include "gflow/params.h"
#include "gflow/rng.h"
#include "gflow/tape.h"

#define GF_NLI_CLASSES 3
#define GF_NLI_MAX_LAYERS 16
#define GF_NLI_BLOCK GF_BLOCK_PRE_LN /* every NLI encoder layer (the recipe's [model] block is LM-only) */

/* Every constraint on the config as the NLI classifier reads it (gf_block_cfg_check, then
 * classifier_hidden): 0 when all hold, else 1 with the recipe key at fault and why (see
 * gf_model_cfg_check). */
int gf_nli_cfg_check(const gf_model_cfg *c, gf_cfg_issue *is);
/* gf_nli_cfg_check as a status: "nli config: <key>: <why>". */
gf_status gf_nli_cfg_validate(const gf_model_cfg *c);

typedef struct gf_nli {
    gf_model_cfg cfg;
    gf_params params;
    gf_tensor *tok_emb, *pos_emb, *ln_f_w, *ln_f_b, *cls_fc1_w, *cls_fc1_b, *cls_fc2_w, *cls_fc2_b;
    gf_block blocks[GF_NLI_MAX_LAYERS];
} gf_nli;

/* Outputs of one forward pass (all optional: pass NULL for none). */
typedef struct gf_nli_out {
    int32_t *pred_buf;     /* in: (B) caller buffer for the predictions, or NULL (step arena) */
    int32_t *predictions;  /* out: (B) argmax class per row (pred_buf when given) */
    gf_tensor *logits;     /* out: (B, 3) */
    double nll_sum;        /* Σ NLL over counted rows */
    int64_t n_counted;     /* rows with label >= 0 */
    int64_t n_correct;     /* counted rows whose argmax equals the label */
} gf_nli_out;

gf_status gf_nli_init(gf_nli *m, const gf_model_cfg *cfg);
/* Training init: N(0, init_std) for linear and embedding weights, zero biases, LN (1, 0). */
void gf_nli_init_weights(gf_nli *m, gf_rng *rng);
/* prem/hyp (B, Ls) ids (negative ids read as 0), prem_mask/hyp_mask (B, Ls) 1 = token, 0 = pad,
 * labels (B) in {0, 1, 2} or -1 = ignore, or NULL (no loss). Returns the mean cross-entropy over
 * the counted rows, shape (1) (0 when none is counted), or NULL when labels is NULL.
 * ctx->training turns dropout on. Ls <= cfg.max_len. */
gf_tensor *gf_nli_forward(gf_nli *m, gf_ctx *ctx, const int32_t *prem, const float *prem_mask, const int32_t *hyp,
                          const float *hyp_mask, const int32_t *labels, int64_t B, int64_t Ls, gf_nli_out *out);
void gf_nli_free(gf_nli *m);

#endif
