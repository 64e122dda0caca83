/* gflow/ops.h — differentiable ops. One file per op in src/ops/, listed in gflow/ops.def.
 *
 * Forward functions take the context first, allocate their output in the step
 * arena and record a tape node when a gradient is needed. Shapes are checked with
 * GF_ASSERT (a mismatch is a bug in the model code, not user input).
 * "rows" means all leading dimensions flattened; ops act on the last dimension.
 */
#ifndef GFLOW_OPS_H
#define GFLOW_OPS_H

#include "gflow/tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the tape's record of each op (gf_op_def: name, family, backward), one per line of ops.def */
#define GF_OP(name) extern const gf_op_def gf_op_##name;
#include "gflow/ops.def"
#undef GF_OP

/* y = x W^T + b. x (rows, IN), w (OUT, IN) PyTorch layout, b (OUT) or NULL -> (rows, OUT).
 * The tied LM head is gf_linear(h, tok_emb, NULL). */
gf_tensor *gf_linear(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b);

/* [run] precision = bf16 (src/ops/gemm.c): f rounded to bfloat16 (nearest even, NaN kept) and
 * widened back, what the matrix products multiply; and how they run on this machine ("oneDNN
 * 2.6.3, AMX-BF16", or OpenBLAS on rounded inputs and why), for `gflow --version` and bench. */
float gf_bf16_round(float f);
const char *gf_gemm_bf16_path(void);
/* What runs attention's matrix products on the CPU (src/ops/attention.c): libxsmm's JIT kernels,
 * or OpenBLAS in a build without libxsmm (meson -Dxsmm). */
const char *gf_attention_products(void);
/* whether the bf16 products go to oneDNN on a CPU with (has_bf16) bf16 arithmetic, (has_amx) AMX,
 * made by (amd) AMD, given GF_GEMM_BF16's value force (NULL: unset; "blas", "dnnl"): by default
 * with AMX or on AMD, not on Intel's AVX512-BF16 alone */
int gf_gemm_bf16_uses_dnnl(int has_bf16, int has_amx, int amd, const char *force);
/* the same for a run on `device`: on the GPU, cuBLAS on the tensor cores (src/ops/cuda/gemm.cu) */
const char *gf_gemm_bf16_path_on(gf_device device);
/* a + b; b has a's shape or a's trailing shape (broadcast over leading rows). */
gf_tensor *gf_add(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
/* table (V, D), ids (n) int32 in [0, V) with shape ids_shape -> (ids_shape..., D). */
gf_tensor *gf_embedding(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int32_t ids_ndim,
                        const int64_t *ids_shape);
/* Before a step's capture (gflow/device.h, gf_ctx_feed): ids (cnt, checked against V) and, on
 * the GPU, the backward's index of them copied to device memory now, for this step's
 * gf_embedding(table, ids) to take. A no-op when table is on the CPU. */
void gf_embedding_feed(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int64_t cnt);
/* LayerNorm over the last dim with gain/shift (D); eps inside the sqrt as PyTorch. */
gf_tensor *gf_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps);
/* Fused post-LN residual: gf_layernorm(gf_add(x, gf_dropout(f, p)), gamma, beta, eps), x and f of
 * one shape; the unfused chain's bits (the same dropout key and mask) in one op. */
gf_tensor *gf_dropout_add_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *f, float p, gf_tensor *gamma,
                                    gf_tensor *beta, float eps);
/* Fused gf_dropout_add_layernorm(x, gf_linear(h, w, b), p, gamma, beta, eps) (b may be NULL): x
 * (rows, D), h (rows, IN), w (D, IN); the unfused chain's bits in one op, the branch no tensor. */
gf_tensor *gf_linear_dropout_add_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *h, gf_tensor *w, gf_tensor *b,
                                           float p, gf_tensor *gamma, gf_tensor *beta, float eps);
/* Fused gf_dropout(gf_layernorm(x, gamma, beta, eps), p): the unfused chain's bits (the same
 * dropout key and mask) in one op, LayerNorm's output no tensor; gf_layernorm itself when not
 * training or p == 0. */
gf_tensor *gf_layernorm_dropout(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps, float p);
/* exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) */
gf_tensor *gf_gelu(gf_ctx *ctx, gf_tensor *x);
/* Fused gf_gelu(gf_linear(x, w, b)) (b may be NULL): the unfused chain's bits in one op, the
 * pre-activation no tensor, its gradient and the bias's in one pass. */
gf_tensor *gf_linear_gelu(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b);
/* gf_linear(gf_concat(a, b), w, bias) without the concatenation: a (rows, Da), b (rows, Db),
 * w (OUT, Da + Db) as that chain reads it, bias (OUT) or NULL -> (rows, OUT); a GEMM per input on
 * its column block of w. Not the chain's bits (it sums over Da, then Db, not over Da + Db). */
gf_tensor *gf_concat_linear(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias);
/* Fused gf_sigmoid_lerp(gf_concat_linear(a, b, w, bias), a, b), the Grassmann block's gate
 * y = σ([a ; b] w^T + bias) ⊙ a + (1 - σ) ⊙ b: a and b (rows, D), w (D, 2D), bias (D) or NULL;
 * the unfused chain's bits in one op, the pre-activation no tensor, its gradient and the bias's
 * in one pass. */
gf_tensor *gf_gated_lerp(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias);
gf_tensor *gf_sigmoid(gf_ctx *ctx, gf_tensor *x);
/* Fused softmax + cross-entropy. logits (N, V), targets (N) int32; targets equal to
 * ignore_index are skipped. Returns the mean over the counted rows, shape (1);
 * the sum of NLL (double) and the count are also stored for perplexity. */
gf_tensor *gf_cross_entropy(gf_ctx *ctx, gf_tensor *logits, const int32_t *targets,
                            int32_t ignore_index, double *nll_sum, int64_t *n_counted);
/* Fused tied head + cross-entropy: loss = mean over counted rows of CE(h Eᵀ, target), h (..., D),
 * E (V, D). Never holds more than one (512, V) chunk of logits; same value as
 * gf_cross_entropy(gf_linear(h, E, NULL), ...). */
gf_tensor *gf_head_ce(gf_ctx *ctx, gf_tensor *h, gf_tensor *E, const int32_t *targets, int32_t ignore_index,
                      double *nll_sum, int64_t *n_counted);
/* Inverted dropout with keep-probability 1-p; identity when !ctx->training or p == 0. */
gf_tensor *gf_dropout(gf_ctx *ctx, gf_tensor *x, float p);
/* concatenate along the last dim: (rows, Da), (rows, Db) -> (rows, Da+Db) */
gf_tensor *gf_concat(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
/* Multi-head scaled dot-product attention on a fused QKV tensor.
 * qkv (B, L, 3D) with columns [q | k | v], head h uses columns h*Dh..(h+1)*Dh-1 of each block, Dh = D/H.
 * causal=1: position t attends to s <= t. key_mask (B, L) uint8 or NULL: 0 = padding, never attended to
 * (for bidirectional NLI encoders); it is copied, the caller may reuse its buffer. Scale 1/sqrt(Dh).
 * No dropout on probabilities. Output (B, L, D) with heads concatenated in the same column order
 * (ready for the output projection). A query row that sees no unpadded key outputs 0 and passes
 * no gradient. */
gf_tensor *gf_attention(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, int causal, const uint8_t *key_mask);
/* y = alpha ⊙ a + (1 - alpha) ⊙ b, all the same shape; alpha NULL -> the constant alpha_const. */
gf_tensor *gf_lerp(gf_ctx *ctx, gf_tensor *alpha, gf_tensor *a, gf_tensor *b, float alpha_const);
/* Fused gf_lerp(gf_sigmoid(u), a, b, 0): y = σ(u) ⊙ a + (1 - σ(u)) ⊙ b, all the same shape; the
 * unfused chain's bits in one pass (the Grassmann block's gate). */
gf_tensor *gf_sigmoid_lerp(gf_ctx *ctx, gf_tensor *u, gf_tensor *a, gf_tensor *b);
/* Fused causal Grassmann mixing (see src/ops/plucker_mix.c for the math):
 *   z (B, L, R) reduced vectors; for every position t and offset δ with t - δ >= 0 the Plücker
 *   coordinates p = z_t ∧ z_{t-δ} over pairs i<j (row-major, P = R(R-1)/2), normalised
 *   p / max(|p|, eps) when `normalize`; averaged over the valid offsets, then projected once:
 *   g_t = W pbar_t + b, with W (D, P), b (D). Positions with no valid offset get g_t = 0. */
gf_tensor *gf_plucker_mix(gf_ctx *ctx, gf_tensor *z, gf_tensor *w, gf_tensor *b, const int64_t *offsets,
                          int32_t n_offsets, float eps, int normalize);
/* Incremental decoding (gflow/decoder.h), forward only, never on the tape: the same values as
 * gf_plucker_mix / causal gf_attention over a whole sequence, for the n new positions
 * pos..pos+n-1 of z (B, n, R) / qkv (B, n, 3D), reading the earlier positions from a cache and
 * appending the new ones to it. ring (B, 2W, R): the last W reduced vectors (W >= every valid
 * offset), each stored twice (slots q % W and q % W + W); kv (B, 2, H, cap, Dh): keys, then
 * values, of positions 0..pos-1. */
gf_tensor *gf_plucker_mix_cached(gf_ctx *ctx, gf_tensor *z, gf_tensor *w, gf_tensor *b, const int64_t *offsets,
                                 int32_t n_offsets, float eps, int normalize, float *ring, int64_t W, int64_t pos);
gf_tensor *gf_attention_cached(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, float *kv, int64_t cap, int64_t pos);

/* ---- ops of the NLI heads ---- */

/* Bidirectional windowed Grassmann mixing (see src/ops/plucker_window.c for the math):
 * z (B, L, R), mask (B, L) float (0 = padding) or NULL (all real), w (D, C(R,2)/heads), b (D)
 * -> g (B, L, D). Head h projects coordinates [h*Ph, (h+1)*Ph) to outputs [h*Dh, (h+1)*Dh). */
gf_tensor *gf_plucker_window(gf_ctx *ctx, gf_tensor *z, const float *mask, gf_tensor *w, gf_tensor *b,
                             int64_t window, int64_t stride, int64_t heads, float eps, int normalize);
/* x (B, L, D), mask (B, L) non-negative weights -> (B, D) = Σ_t m x / Σ_t m (0 if Σ m = 0).
 * The mask is copied. */
gf_tensor *gf_masked_mean(gf_ctx *ctx, gf_tensor *x, const float *mask);
/* x (2B, D) = pooled premises (rows 0..B-1) over pooled hypotheses (rows B..2B-1)
 * -> (B, 4D) = [u; v; |u - v|; u ⊙ v]. */
gf_tensor *gf_pair_match(gf_ctx *ctx, gf_tensor *x);

#ifdef __cplusplus
}
#endif

#endif
