/* gflow/decoder.h — incremental decoding of a language model (gflow/model.h), no tape.
 *
 * A Grassmann layer looks back only at its fixed offsets, so the decoder keeps per layer a ring
 * of the last W = min(max offset, max_len) reduced vectors z: constant memory and constant work
 * per token, whatever the context. A Transformer layer keeps the keys and values of every
 * position (a KV cache): memory and work per token grow with the context.
 *
 *   prefill(prompt)  one batched forward over the prompt (B rows, or one row copied to all B)
 *   step(tokens)     one token per row -> the next-token logits (B, V)
 *
 * The logits equal a full gf_lm_forward's at the same position (float rounding: the same
 * kernels over fewer rows). Positions are learned and absolute, so a row holds at most max_len
 * positions: a step when all max_len are used first re-prefills the last keep = max_len / 2
 * tokens at positions 0..keep-1 (amortised: one keep-token prefill per keep steps), i.e. the
 * model then sees a context of keep..max_len-1 tokens, never the whole history.
 * All state is allocated at init; steps allocate nothing (the ctx arena is reused).
 */
#ifndef GFLOW_DECODER_H
#define GFLOW_DECODER_H
#include "gflow/model.h"
#include "gflow/rng.h"

typedef struct gf_lm_decoder {
    gf_lm *lm;
    int64_t B;                              /* rows decoded together */
    int64_t pos;                            /* positions consumed per row (<= max_len) */
    int64_t keep;                           /* tokens re-prefilled when a row is full */
    int64_t n_refills;                      /* how often that happened */
    gf_ctx ctx;                             /* no grad, no dropout; its arena is reused per call */
    gf_block_cache cache[GF_MAX_LAYERS];
    float *state;                           /* every layer's cache, one allocation */
    int64_t state_floats;                   /* of all B rows */
    float *logits;                          /* (B, V) after the last consumed position */
    int32_t *window;                        /* (B, max_len) the tokens at positions 0..pos-1 */
    int32_t *scratch_ids;                   /* (B, max_len) */
} gf_lm_decoder;

gf_status gf_lm_decoder_init(gf_lm_decoder *d, gf_lm *lm, int64_t B);
/* Forget the rows and consume a prompt: ids (n_rows, n) with n_rows 1 (every row gets the same
 * prompt, computed once) or B; 1 <= n <= max_len; ids in [0, vocab). */
gf_status gf_lm_decoder_prefill(gf_lm_decoder *d, const int32_t *ids, int64_t n_rows, int64_t n);
/* Consume one token per row, tok (B), re-prefilling first when the rows are full. */
gf_status gf_lm_decoder_step(gf_lm_decoder *d, const int32_t *tok);
/* The next-token logits (B, V) of every row. */
static inline const float *gf_lm_decoder_logits(const gf_lm_decoder *d) { return d->logits; }
/* Bytes of decoding state (caches, logits, token window) for all rows; constant after init. */
int64_t gf_lm_decoder_state_bytes(const gf_lm_decoder *d);
void gf_lm_decoder_free(gf_lm_decoder *d);

/* logits (rows, V) = h (rows, D) Eᵀ, the tied head (gemv for one row). */
void gf_lm_tied_head(const gf_lm *m, const float *h, int64_t rows, float *logits);

/* The next token from logits lg (V): the first largest at temperature 0; else drawn from the
 * softmax at `temperature` over the top_k most likely ids (0 = all), found by selection, not a
 * sort. scratch: gf_sample_scratch_bytes(V) bytes. Ties in the top-k order break by the lower id. */
int32_t gf_sample_token(const float *lg, int64_t V, double temperature, int64_t top_k, gf_rng *rng, void *scratch);
size_t gf_sample_scratch_bytes(int64_t V);
#endif
