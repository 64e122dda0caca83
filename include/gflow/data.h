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

/* A line of a text file (without its '\n'): gf_text_check, and no CR at its end: a CRLF line end
 * is GF_E_PARSE naming path:line and how to convert the file (the one policy of every line
 * reader: WikiText-format splits, text corpora, tokenizer corpora; SNLI's TSV rows take CRLF). */
gf_status gf_line_check(const char *path, int64_t line, const char *s, size_t n);

/* ---- checksums (OpenSSL libcrypto) ---- */

/* sha256 of a whole file; `hex` gets 64 lowercase hex digits + NUL. */
gf_status gf_sha256_file(const char *path, uint8_t digest[32], char hex[65]);
void gf_sha256_buf(const void *data, size_t n, uint8_t digest[32]);
void gf_sha256_to_hex(const uint8_t digest[32], char hex[65]);
/* GF_E_CORRUPT naming the file and both sums when the file's sha256 differs
 * from `expected_hex`; GF_E_NOTFOUND / GF_E_IO when it cannot be read. */
gf_status gf_sha256_verify(const char *path, const char *expected_hex);

/* ---- known files ---- */

/* ---- the data sets: one table (gflow/datasets.def, src/data/datasets.c) ---- */

typedef enum gf_dataset {
#define GF_DATASET(id, ...) GF_DS_##id,
#include "gflow/datasets.def"
#undef GF_DATASET
    GF_DS_COUNT
} gf_dataset;
typedef enum gf_split { GF_SPLIT_TRAIN = 0, GF_SPLIT_VALID = 1, GF_SPLIT_TEST = 2 } gf_split;
/* What a data set trains: a language model on a token stream, or sentence pairs classified. */
typedef enum gf_dataset_kind { GF_DSK_LM = 0, GF_DSK_PAIRS = 1 } gf_dataset_kind;

typedef struct gf_dataset_file {
    const char *name;   /* under the data set's dir; NULL: the recipe names it */
    const char *sha256; /* recorded sum, NULL: none */
} gf_dataset_file;

typedef struct gf_dataset_info {
    const char *name;        /* [data] dataset */
    const char *fetch;       /* `gflow data fetch` name; NULL: the user's own files */
    const char *dir;         /* sub-directory of the data directory */
    gf_dataset_kind kind;
    const char *tokenizer;   /* default [tokenizer] train_file; NULL: the train split */
    gf_dataset_file split[3]; /* by gf_split */
    gf_dataset_file extra;   /* an optional file fetch installs too (SNLI's 1 % train sample) */
} gf_dataset_info;

/* The row of a data set (NULL out of range), by name (NULL when none has it). */
const gf_dataset_info *gf_dataset_get(gf_dataset ds);
const gf_dataset_info *gf_dataset_by_name(const char *name);
/* A split's default path relative to the data directory ("wikitext-2/wiki.train.tokens");
 * 0 when the data set has none (text: the recipe names its files). */
int gf_dataset_default_file(gf_dataset ds, gf_split split, char *out, size_t cap);

gf_status gf_split_parse(const char *s, gf_split *out);      /* "train" | "valid"/"dev" | "test" */
const char *gf_split_name(gf_split split);                   /* "train", "valid", "test": recipe keys, checkpoint roles */
/* Recorded sha256 (the data set table, the same as datasets/fetch.sh) for a file's base
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

/* ---- token streams and their cache (src/data/tokcache.c) ---- */

/* A split's token stream: n ids of `width` bytes each, uint16 (2) when the vocabulary has at
 * most 65,536 ids (gf_tokens_width), else int32 (4); mapped read-only from its token cache
 * (map != NULL), or malloc'd (map NULL). Zero-init is empty. */
typedef struct gf_tokens {
    const void *data; /* (n) ids */
    int64_t n;
    int width;
    void *map;        /* the mapping, NULL when data is malloc'd */
    size_t map_len;
} gf_tokens;

static inline int32_t gf_tokens_at(const gf_tokens *t, int64_t i) {
    return t->width == 2 ? (int32_t)((const uint16_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}
int gf_tokens_width(int64_t vocab);
/* ids [start, start+n) as int32 into out. */
void gf_tokens_copy(const gf_tokens *t, int64_t start, int64_t n, int32_t *out);
/* A mapped stream's pages go back to the page cache (madvise DONTNEED; they stay cached, a later
 * read maps them again): the LM loader calls it after each batch, so reading windows in any
 * order keeps the RSS flat. No-op for a malloc'd stream. */
void gf_tokens_release(const gf_tokens *t);
void gf_tokens_free(gf_tokens *t);

/* Token cache file: a 160-byte header {magic "GFTOKCA\0", version 2, tokenizer key, source-file
 * sha256, count, payload sha256, id width} then `count` ids of that width.
 * write: atomically (a private tmp file and a rename). open: maps the ids read-only after
 * checking the header, the size and the payload's sha256 (read in blocks, not through the
 * mapping); GF_E_CORRUPT for a bad magic/version/width/size/payload checksum, GF_E_INVALID when
 * built by another tokenizer or from another source file (the message names both keys).
 * expect_src_sha may be NULL (not checked). */
gf_status gf_token_cache_write(const char *path, const char *tok_key, const uint8_t src_sha[32], int width,
                               const gf_ids *ids);
gf_status gf_token_cache_open(const char *path, const char *tok_key, const uint8_t expect_src_sha[32],
                              gf_tokens *out);

typedef enum gf_cache_event {
    GF_CACHE_HIT = 0,       /* valid cache used */
    GF_CACHE_BUILT = 1,     /* no cache: tokenized and written */
    GF_CACHE_REBUILT = 2,   /* stale or corrupt cache replaced; reason in `why` */
} gf_cache_event;

/* The token cache of `split_path` under `cache_dir`: <split basename>.<12 hex digits of the
 * sha256 of split_path as given>.<tokenizer key, ':' and '/' as '-'>.tok, so two corpora whose
 * splits share a file name (every `[data] file` corpus has a train.txt) keep two caches. */
void gf_token_cache_path(const gf_tokenizer *tok, const char *split_path, const char *cache_dir, char *path,
                         size_t cap);
/* Token stream of `split_path` (its lines' ids, the eol id after each), mapped from its cache
 * (gf_token_cache_path). A missing, stale (other tokenizer or
 * changed source) or corrupt cache is built: the file is read in blocks of whole lines, each
 * tokenized over gf_threads_get() threads in parts, the parts' ids written in order (the same
 * file for any thread count); a line failing gf_line_check or the tokenizer is an error naming
 * file:line. log: progress with an ETA on stderr every 2 s for a file of 64 MB or more. `ev` and
 * `why` (may be NULL, `why` holds >= 256 bytes) say what happened so the caller can log it. */
gf_status gf_lm_split_tokens(const gf_tokenizer *tok, const char *split_path, const char *cache_dir, gf_tokens *out,
                             gf_cache_event *ev, char *why, size_t why_cap, int log);

/* ---- dataset = text ---- */

/* [data] file's train, valid and test parts as dir/{train,valid,test}.txt: a line goes to the
 * part its first byte falls in, [0, (1 - fv - ft) S) train, then valid up to (1 - ft) S, the
 * rest test (S the file's bytes): deterministic, on line boundaries. Every line is checked
 * (gf_line_check, naming the file and line), and a part without a line is an error. dir's
 * source.sha256 records the file's sum, written last: parts of an unchanged file are kept. */
gf_status gf_text_split(const char *src, double fv, double ft, const char *dir, int log);

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

/* Windows over the stream `tokens` (not copied: keep it alive).
 * shuffle=1 for training (order from `seed`), 0 for sequential evaluation.
 * keep_tail=1 adds the padded short last window (evaluation). */
gf_status gf_lm_loader_new(gf_lm_loader **out, const gf_tokens *tokens, int64_t L, int shuffle,
                           int keep_tail, uint64_t seed);
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
