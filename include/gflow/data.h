/* gflow/data.h — data sets, checksums, token caches and batch loaders.
 *
 * Layout of a data directory (datasets/fetch.sh makes it; $GFLOW_DATA_MIRROR
 * has the same layout):
 *   wikitext-2/wiki.{train,valid,test}.tokens
 *   snli_1.0/snli_1.0_{train,dev,test}.txt   (+ snli_1.0_train_0.01.txt sample)
 *
 * Dimension letters: B batch rows, L predictions per LM window (a window holds
 * L+1 tokens), Ls tokens per SNLI sentence, N items in a split.
 *
 * LM windows: window w holds tokens [w*L, w*L + L] of the split's stream, so
 * input = row[0..L-1] and target = row[1..L]; consecutive windows share one
 * boundary token and every token after the first is a target exactly once.
 * With keep_tail, a final short window is padded with GF_IGNORE_ID (-1), so an
 * evaluation covers the whole split: the loss must skip -1 targets, and the
 * embedding lookup must accept -1 inputs (e.g. as id 0) — under a causal model
 * they only feed predictions whose targets are -1.
 *
 * Loaders draw items per epoch: in order (validation/test) or in an order
 * shuffled by a gf_rng seeded once. Their position is gf_loader_state, plain
 * data to store in a checkpoint; restoring it reproduces the same batches.
 */
#ifndef GFLOW_DATA_H
#define GFLOW_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"
#include "gflow/rng.h"
#include "gflow/tokenizer.h"

#define GF_IGNORE_ID (-1)

/* ---- text: one UTF-8 policy (src/data/loader.c) ---- */

/* Every text gflow reads (WikiText splits, SNLI files, tokenizer corpora, a sample prompt) is
 * well-formed UTF-8 without NUL bytes: no stray continuation or invalid lead byte, no overlong
 * form, surrogate or code point past U+10FFFF, no sequence cut short. gf_utf8_invalid_at gives
 * the index of the first byte of s[0..n) that breaks this, n when none does. */
size_t gf_utf8_invalid_at(const char *s, size_t n);
/* GF_OK, or GF_E_PARSE naming what:line: (line <= 0: what: alone), the byte and its column
 * (col0 + index + 1, col0 being where s starts in its line). */
gf_status gf_text_check(const char *what, int64_t line, size_t col0, const char *s, size_t n);

/* ---- checksums (OpenSSL libcrypto) ---- */

/* sha256 of a whole file; `hex` gets 64 lowercase hex digits + NUL. */
gf_status gf_sha256_file(const char *path, uint8_t digest[32], char hex[65]);
void gf_sha256_buf(const void *data, size_t n, uint8_t digest[32]);
void gf_sha256_to_hex(const uint8_t digest[32], char hex[65]);
/* GF_E_CORRUPT naming the file and both sums when the file's sha256 differs
 * from `expected_hex`; GF_E_NOTFOUND / GF_E_IO when it cannot be read. */
gf_status gf_sha256_verify(const char *path, const char *expected_hex);

/* ---- known files ---- */

typedef enum gf_dataset { GF_DS_WIKITEXT2 = 0, GF_DS_SNLI = 1 } gf_dataset;
typedef enum gf_split { GF_SPLIT_TRAIN = 0, GF_SPLIT_VALID = 1, GF_SPLIT_TEST = 2 } gf_split;

gf_status gf_split_parse(const char *s, gf_split *out);      /* "train" | "valid"/"dev" | "test" */
const char *gf_split_name(gf_split split);                   /* "train", "valid", "test": recipe keys, checkpoint roles */
/* Recorded sha256 (the same table as datasets/fetch.sh) for a file's base
 * name, e.g. "wiki.valid.tokens"; NULL when none is recorded. */
const char *gf_data_known_sha256(const char *basename);
/* Path of a split under data_dir. GF_E_NOTFOUND with a clear message when
 * the file is absent (naming the fetch command, and for SNLI train the 1 %
 * sample when that is present); other splits are unaffected. */
gf_status gf_data_split_path(const char *data_dir, gf_dataset ds, gf_split split,
                             char *path, size_t cap);
/* Check a file against its recorded sha256 (files with none pass). */
gf_status gf_data_verify(const char *path);

/* ---- WikiText-2 ---- */

/* Words of a split for per-word perplexity: whitespace tokens plus one <eos>
 * per line (217,646 for wiki.valid.tokens, 245,569 for wiki.test.tokens). */
gf_status gf_wikitext_word_count(const char *path, int64_t *n_words);

/* Token stream of a split: the ids of every line followed by the eol id.
 * Caller owns `ids` (free with gf_ids_free). */
gf_status gf_lm_tokenize_file(const gf_tokenizer *tok, const char *path, gf_ids *out);

/* Token cache file: header {magic "GFTOKCA\0", version, tokenizer key,
 * source-file sha256, count, payload sha256} then `count` int32 ids.
 * read: GF_E_CORRUPT for a bad magic/version/size/payload checksum,
 * GF_E_INVALID when built by another tokenizer or from another source file
 * (the message names both keys). expect_src_sha may be NULL (not checked). */
gf_status gf_token_cache_write(const char *path, const char *tok_key,
                               const uint8_t src_sha[32], const gf_ids *ids);
gf_status gf_token_cache_read(const char *path, const char *tok_key,
                              const uint8_t expect_src_sha[32], gf_ids *out);

typedef enum gf_cache_event {
    GF_CACHE_HIT = 0,       /* valid cache used */
    GF_CACHE_BUILT = 1,     /* no cache: tokenized and written */
    GF_CACHE_REBUILT = 2,   /* stale or corrupt cache replaced; reason in `why` */
} gf_cache_event;

/* Token stream of `split_path`, through a cache in `cache_dir` named
 * <split basename>.<sanitised tokenizer key>.tok. A stale (other tokenizer or
 * changed source) or corrupt cache is rebuilt; `ev` and `why` (may be NULL,
 * `why` holds >= 256 bytes) say what happened so the caller can log it.
 * cache_dir NULL: no cache. */
gf_status gf_lm_split_tokens(const gf_tokenizer *tok, const char *split_path,
                             const char *cache_dir, gf_ids *out,
                             gf_cache_event *ev, char *why, size_t why_cap);

/* ---- loaders (shared position type) ---- */

/* Checkpointable loader position (POD; save with memcpy). `rng` is the
 * state that produced the current epoch's order. */
typedef struct gf_loader_state {
    int64_t epoch;    /* 0-based */
    int64_t index;    /* next item within the epoch */
    int64_t n_items;  /* checked on restore */
    int32_t shuffle;
    int32_t pad_;
    gf_rng rng;
} gf_loader_state;

typedef struct gf_lm_loader gf_lm_loader; /* opaque */

/* Windows over `tokens[0..n_tokens)` (not copied: keep it alive).
 * shuffle=1 for training (order from `seed`), 0 for sequential evaluation.
 * keep_tail=1 adds the padded short last window (evaluation). */
gf_status gf_lm_loader_new(gf_lm_loader **out, const int32_t *tokens, int64_t n_tokens,
                           int64_t L, int shuffle, int keep_tail, uint64_t seed);
void gf_lm_loader_free(gf_lm_loader *ld);
int64_t gf_lm_loader_n_windows(const gf_lm_loader *ld);
/* Fill up to B rows of the current epoch into batch (B, L+1); *n_rows gets
 * the count. A call at the end of an epoch returns 0 rows and starts the
 * next epoch (new order when shuffling). Unused rows are set to GF_IGNORE_ID. */
gf_status gf_lm_loader_next(gf_lm_loader *ld, int32_t *batch /* (B, L+1) */, int64_t B,
                            int64_t *n_rows);
void gf_lm_loader_get_state(const gf_lm_loader *ld, gf_loader_state *st);
gf_status gf_lm_loader_set_state(gf_lm_loader *ld, const gf_loader_state *st);

/* ---- SNLI ---- */

typedef enum gf_snli_label {
    GF_SNLI_ENTAILMENT = 0,
    GF_SNLI_NEUTRAL = 1,
    GF_SNLI_CONTRADICTION = 2,
} gf_snli_label;

typedef struct gf_snli_opts {
    int64_t max_len;       /* Ls: tokens kept per sentence (paper: 48) */
    int32_t pad_id;        /* id written to padded positions (mask 0 there) */
    int32_t skip_bad_rows; /* 1: count and skip malformed rows instead of failing */
} gf_snli_opts;

/* A tokenized split. Rows with gold label "-" are skipped and counted. */
typedef struct gf_snli_data {
    int64_t n, Ls;
    int32_t pad_id;
    int32_t *premise;     /* (n, Ls) ids, pad_id after prem_len */
    int32_t *hypothesis;  /* (n, Ls) */
    int32_t *prem_len;    /* (n) kept tokens, <= Ls */
    int32_t *hyp_len;     /* (n) */
    int32_t *label;       /* (n) gf_snli_label */
    int64_t rows_read;        /* data rows in the file (header excluded) */
    int64_t skipped_no_label; /* gold_label "-" */
    int64_t skipped_bad;      /* malformed rows skipped (skip_bad_rows) */
    int64_t truncated;        /* sentences longer than Ls */
    int64_t label_count[3];
} gf_snli_data;

/* Read a tab-separated SNLI file with a header; columns gold_label,
 * sentence1, sentence2 (and pairID) are found by header name, so the
 * 4-column staged files and the official 14-column snli_1.0_*.txt both load.
 * No quote handling: fields are taken verbatim. Bad rows (wrong column count,
 * unknown label) are GF_E_PARSE errors naming file:line unless skip_bad_rows. */
gf_status gf_snli_load(gf_snli_data *out, const char *path, const gf_tokenizer *tok,
                       const gf_snli_opts *opts);
void gf_snli_free(gf_snli_data *d);

typedef struct gf_snli_loader gf_snli_loader; /* opaque */

gf_status gf_snli_loader_new(gf_snli_loader **out, const gf_snli_data *data, int shuffle,
                             uint64_t seed);
void gf_snli_loader_free(gf_snli_loader *ld);
/* Up to B examples of the current epoch (0 at epoch end, next epoch begins,
 * as gf_lm_loader_next). Masks are 1.0 on real tokens, 0.0 on padding; unused
 * rows get pad ids, zero masks and label GF_IGNORE_ID. */
gf_status gf_snli_loader_next(gf_snli_loader *ld, int64_t B,
                              int32_t *prem,      /* (B, Ls) */
                              float *prem_mask,   /* (B, Ls) */
                              int32_t *hyp,       /* (B, Ls) */
                              float *hyp_mask,    /* (B, Ls) */
                              int32_t *labels,    /* (B) */
                              int64_t *n_rows);
void gf_snli_loader_get_state(const gf_snli_loader *ld, gf_loader_state *st);
gf_status gf_snli_loader_set_state(gf_snli_loader *ld, const gf_loader_state *st);

#endif
