/* gflow/blocks.h — the block library shared by every model head (gflow/model.h, gflow/nli.h).
 *
 * Grassmann mixing block (x (B, L, D) in, out (B, L, D)):
 *   n = x (post_ln) | LN_in(x) (pre_ln)
 *   z = W_red n + b_red                                            (B, L, R)
 *   g = pairs(z; W_plu, b_plu)                                     (B, L, D)
 *       causal: plucker_mix over the layer's offsets [plucker = false: g = W_plu(W_lin z) + b_plu]
 *       window: plucker_window over bidirectional windows, padding masked out, mix_heads groups
 *   α = σ(W_gate [n; g] + b_gate);  m = α n + (1-α) g              [gate = false: m = (n + g) / 2]
 *   post_ln: y = Drop(LN_mix(m));  out = LN_ffn(y + Drop(FFN(y)))            (paper-literal)
 *   pre_ln:  x' = x + Drop(LN_mix(m));  out = x' + Drop(FFN(LN_ffn(x')))    (AX variant)
 * Transformer block (causal, or bidirectional with padding keys masked out):
 *   post_ln: x' = LN_attn(x + Drop(Proj(Attn(QKV x))));  out = LN_ffn(x' + Drop(FFN(x')))
 *   pre_ln:  x' = x + Drop(Proj(Attn(QKV LN_attn(x))));  out = x' + Drop(FFN(LN_ffn(x')))
 * FFN(y) = fc2(GELU(fc1 y)).
 *
 * Parameters: one gf_block of tensor pointers per layer (llm.c's ParameterTensors), named and
 * laid out by the one table gf_block_tensors: "blocks.<l>.<name>" in table order, the tensors a
 * variant lacks skipped. Checkpoints, safetensors export and tools/torch_ref*.py use these names.
 */
#ifndef GFLOW_BLOCKS_H
#define GFLOW_BLOCKS_H

#include "gflow/params.h"
#include "gflow/tape.h"
#include <stddef.h>

typedef enum { GF_FAMILY_GRASSMANN = 0, GF_FAMILY_TRANSFORMER } gf_family;
typedef enum { GF_BLOCK_POST_LN = 0, GF_BLOCK_PRE_LN } gf_block_kind;
/* How a Grassmann block pairs positions: causal offsets (LM) or bidirectional windows (NLI). */
typedef enum { GF_PAIR_CAUSAL = 0, GF_PAIR_WINDOW } gf_pairing;

const char *gf_family_name(gf_family f);
const char *gf_block_name(gf_block_kind b);

/* One block's shape and options (the same for every layer of a model). */
typedef struct gf_block_cfg {
    gf_family family;
    gf_block_kind kind;
    int64_t d_model, d_ff;
    float dropout, ln_eps;
    /* grassmann */
    gf_pairing pairing;
    int64_t r;
    int64_t mix_heads;          /* w_plu reads C(r,2) / mix_heads coordinates (1 when causal) */
    int64_t window, stride;     /* GF_PAIR_WINDOW */
    float eps;
    int normalize, gate, plucker; /* plucker = 0: the linear stand-in w_lin (causal only) */
    /* transformer */
    int64_t heads;
    int causal;
} gf_block_cfg;

/* The tensors of one block; NULL where the variant has none. */
typedef struct gf_block {
    gf_tensor *ln_in_w, *ln_in_b; /* grassmann pre_ln */
    gf_tensor *w_red, *b_red, *w_lin, *w_plu, *b_plu, *w_gate, *b_gate;
    gf_tensor *ln_mix_w, *ln_mix_b;
    gf_tensor *ln_attn_w, *ln_attn_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    gf_tensor *ln_ffn_w, *ln_ffn_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} gf_block;

/* Which variants have a tensor. */
typedef enum { GF_BT_ALL = 0, GF_BT_GRASS, GF_BT_GRASS_PRE, GF_BT_GRASS_LIN, GF_BT_GRASS_GATE, GF_BT_ATTN } gf_bt_when;
/* Symbolic sizes: D, d_ff, r, w_plu's input C(r,2)/mix_heads, 2D, 3D (0: no second dim). */
typedef enum { GF_BD_NONE = 0, GF_BD_D, GF_BD_F, GF_BD_R, GF_BD_P, GF_BD_2D, GF_BD_3D } gf_bt_dim;

/* One row of the tensor table. */
typedef struct gf_block_tensor {
    const char *name;     /* after "blocks.<l>.", e.g. "mix.w_red.weight" */
    gf_param_kind kind;
    size_t field;         /* offsetof(gf_block, ...) */
    gf_bt_when when;
    gf_bt_dim d0, d1;
} gf_block_tensor;

extern const gf_block_tensor gf_block_tensors[];
extern const int gf_block_n_tensors;

/* The tensor a table row names in block b (NULL when the variant lacks it). */
static inline gf_tensor *gf_block_at(const gf_block *b, const gf_block_tensor *t) {
    return *(gf_tensor *const *)((const char *)b + t->field);
}

/* Declare a parameter of shape (d0) (d1 = 0) or (d0, d1): for a head's own tensors. */
gf_tensor *gf_nn_param(gf_params *ps, const char *name, gf_param_kind kind, int64_t d0, int64_t d1);
/* Declare layer `layer`'s tensors in table order and point b's fields at them. */
void gf_block_register(gf_params *ps, const gf_block_cfg *c, int64_t layer, gf_block *b);
/* The trunk every head shares, registered in checkpoint order: tok_emb.weight (vocab, D),
 * pos_emb.weight (max_len, D), the n_layers blocks, ln_f.weight and ln_f.bias (D). */
typedef struct gf_trunk_slots {
    gf_tensor **tok_emb, **pos_emb, **ln_f_w, **ln_f_b;
    gf_block *blocks;           /* n_layers of them */
} gf_trunk_slots;
void gf_trunk_register(gf_params *ps, const gf_block_cfg *c, int64_t vocab, int64_t max_len, int64_t n_layers,
                       const gf_trunk_slots *out);

/* One causal block's decoding state (gflow/decoder.h): what it keeps of earlier positions so
 * that new ones are computed without recomputing the old. */
typedef struct gf_block_cache {
    int64_t pos;    /* positions already consumed (the same for every row) */
    int64_t cap;    /* grassmann: W, the ring length (>= every valid offset; 0 = no mixing over time);
                       transformer: the most positions, max_len */
    float *buf;     /* grassmann (B, 2W, R), see gf_plucker_mix_cached; transformer (B, 2, H, cap, Dh) */
} gf_block_cache;

/* What one call of a block reads besides x, and what it reports. */
typedef struct gf_block_in {
    const int64_t *offsets;   /* GF_PAIR_CAUSAL with plucker: this layer's offsets */
    int32_t n_offsets;
    const float *mask;        /* (B, L) GF_PAIR_WINDOW: 0 = padding, or NULL */
    const uint8_t *key_mask;  /* (B, L) transformer: 0 = padding key, or NULL */
    /* if non-NULL: the block's two branch outputs (B, L, D) for the probes. mix: Grassmann
     * Drop(LN_mix(m)), Transformer Drop(Proj(Attn)), before any residual add or LN; ffn: Drop(FFN(.)) */
    gf_tensor **mix_out, **ffn_out;
    /* if non-NULL (causal blocks, no dropout): x holds positions cache->pos.., and the mixing
     * reads the earlier positions from the cache and appends these; the caller advances pos */
    gf_block_cache *cache;
} gf_block_in;

/* Drop(fc2(GELU(fc1 y))) */
gf_tensor *gf_ffn(gf_ctx *ctx, const gf_block *b, gf_tensor *y, float p);
gf_tensor *gf_grassmann_block(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *x,
                              const gf_block_in *in);
gf_tensor *gf_transformer_block(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *x,
                                const gf_block_in *in);
/* The block of c->family. */
gf_tensor *gf_block_forward(gf_ctx *ctx, const gf_block_cfg *c, const gf_block *b, gf_tensor *x,
                            const gf_block_in *in);

/* A config constraint that failed: the recipe key ([model] <key>) and why, worded to follow
 * "<key>: " (e.g. key "r", why "must be <= d_model (64), got 300"). */
typedef struct gf_cfg_issue {
    const char *key;
    char why[200];
} gf_cfg_issue;

/* Fill is (key, printf-style why) and return 1: `return gf_cfg_fail(is, "r", "must be ...")`. */
int gf_cfg_fail(gf_cfg_issue *is, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A check's result as a status: GF_OK, or GF_E_INVALID "<what>: <key>: <why>". */
gf_status gf_cfg_status(int bad, const gf_cfg_issue *is, const char *what);
#define GF_CFG_NEED(cond, key, ...) do { if (!(cond)) return gf_cfg_fail(is, key, __VA_ARGS__); } while (0)

/* Constraints of the block and of the shell around it (vocab, n_layers <= max_layers, max_len):
 * 0 when all hold, else 1 with the first that fails. gf_model_cfg_check and gf_nli_cfg_check
 * add their heads' own keys; gf_recipe_load reports the issue at the key's file:line. */
int gf_block_cfg_check(const gf_block_cfg *c, int64_t vocab, int64_t n_layers, int64_t max_layers, int64_t max_len,
                       gf_cfg_issue *is);

#endif
