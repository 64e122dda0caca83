/* gflow/tokenizer.h — one opaque tokenizer interface over three kinds.
 *
 *   spm   SentencePiece (unigram or bpe) trained on the WikiText-2 train split
 *         through a small C++ shim (src/data/spm_wrap.cc). Trained models are
 *         cached in `cache_dir` under a name derived from the corpus sha256 and
 *         the options, so a second run with the same options loads, not trains.
 *   word  whitespace split with the standard WikiText-2 vocabulary: every type
 *         of the train split in order of first appearance, with `<eos>` after
 *         each line (pytorch/examples word_language_model order; 33,278 types
 *         on the real train split). Words not in the vocabulary map to `<unk>`.
 *   wordpiece  BERT's uncased WordPiece over a fixed vocabulary in BERT's vocab.txt form (a
 *         piece a line, id = line - 1, "##" before a continuation piece; bert-base-uncased's
 *         30,522 from `gflow data fetch bert-base-uncased`), as BERT's BasicTokenizer and
 *         WordpieceTokenizer do it (src/data/wordpiece.c, checked id for id against the
 *         reference tools/wordpiece_ref.py):
 *           - every "<unk>" in the text (WikiText's rare-word mark) is [UNK];
 *           - clean: drop U+0000, U+FFFD and control characters (Cc, Cf but tab, LF, CR);
 *             tab, LF, CR and Zs are spaces; a space each side of a CJK ideograph;
 *           - split on whitespace (space, U+2028, U+2029: what Python's str.split() sees);
 *           - each word lowercased (Unicode's lowercase mapping, a word-final capital sigma to
 *             final sigma), NFD, nonspacing marks (Mn) dropped, and every punctuation
 *             character (ASCII 33-47, 58-64, 91-96, 123-126 or category P*) a word of its own;
 *           - a word of more than 100 code points is [UNK]; else greedy longest-match-first
 *             WordPiece, [UNK] for the whole word when a rest of it starts no piece.
 *         Unicode data (normalisation, categories, case) comes from utf8proc.
 *
 * Lines: encode() takes ONE line of text without its newline and never emits
 * an end-of-line id. Streams (LM data) append gf_tokenizer_eol_id() after each
 * line: `<eos>` for word, SentencePiece's own `</s>` (eos_id) for spm, so every
 * line contributes exactly one end-of-line id under every kind: `[SEP]` for wordpiece.
 * decode() renders the eol id as "\n".
 */
#ifndef GFLOW_TOKENIZER_H
#define GFLOW_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"

typedef struct gf_tokenizer gf_tokenizer; /* opaque */

typedef enum gf_tokenizer_kind {
    GF_TOK_SPM = 0,
    GF_TOK_WORD = 1,
    GF_TOK_WORDPIECE = 2,
} gf_tokenizer_kind;

typedef enum gf_spm_model_type {
    GF_SPM_UNIGRAM = 0,
    GF_SPM_BPE = 1,
} gf_spm_model_type;

typedef struct gf_tokenizer_opts {
    gf_tokenizer_kind kind;
    int64_t vocab_size;           /* spm: requested size incl. <unk> <s> </s>; wordpiece: the
                                     vocabulary file's size (checked); word: ignored */
    gf_spm_model_type model_type; /* spm only */
    const char *cache_dir;        /* spm: where trained models are kept (created if absent);
                                     required for spm, ignored by word */
} gf_tokenizer_opts;

/* Growable int32 id buffer; encode functions APPEND to it. Zero-init is empty. */
typedef struct gf_ids {
    int32_t *data; /* (n) */
    int64_t n, cap;
} gf_ids;
gf_status gf_ids_push(gf_ids *v, int32_t id);
void gf_ids_free(gf_ids *v);

/* Open a tokenizer built from the train corpus `train_path` (WikiText-2 train):
 * word builds its vocabulary (~0.3 s); wordpiece reads `train_path` as its vocabulary
 * file; spm loads the cached model for
 * (corpus sha256, model_type, vocab_size) or trains and caches it. When
 * SentencePiece cannot reach vocab_size the error (GF_E_INVALID) says so and
 * names the largest size it can reach. */
gf_status gf_tokenizer_open(gf_tokenizer **out, const gf_tokenizer_opts *opts,
                            const char *train_path);
void gf_tokenizer_free(gf_tokenizer *tok);

int64_t gf_tokenizer_vocab_size(const gf_tokenizer *tok);
/* Id appended after every line of a stream (see top). */
int32_t gf_tokenizer_eol_id(const gf_tokenizer *tok);
/* Piece text of an id ("▁the", "<eos>", ...); NULL when out of range.
 * The pointer stays valid until gf_tokenizer_free. */
const char *gf_tokenizer_id_to_piece(const gf_tokenizer *tok, int32_t id);
/* Stable identity of the tokenizer, e.g. "spm:bpe:30522:9e9fa1ad55b1c2c9:04c1d7e2a8b3f610",
 * "word:33278:9e9fa1ad55b1c2c9" or "wordpiece:30522:07eced375cec144d" (kind, options, first 16
 * hex digits of the corpus's (wordpiece: the vocabulary's) sha256 and, for spm, of the .model
 * file's: a model file changed in place is another tokenizer). At most
 * 63 chars; stored in token-cache headers and names their files. */
const char *gf_tokenizer_key(const gf_tokenizer *tok);

/* 1 when the piece of `id` begins a word, so that text decoded before it ends with a space
 * (spm: a "▁" piece; wordpiece: a piece without "##"; word: every piece); 0 for a bad id. */
int gf_tokenizer_starts_word(const gf_tokenizer *tok, int32_t id);

/* Encode one line (no newline; `len` bytes of `text`), appending ids to `out`. */
gf_status gf_tokenizer_encode(const gf_tokenizer *tok, const char *text, size_t len, gf_ids *out);
/* Decode ids into a malloc'd NUL-terminated string (caller frees). word joins
 * pieces with single spaces, wordpiece too but a "##" continuation joins its word without
 * one; eol ids become "\n". */
gf_status gf_tokenizer_decode(const gf_tokenizer *tok, const int32_t *ids, int64_t n, char **text);

#endif
