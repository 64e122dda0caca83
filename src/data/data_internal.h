/* data_internal.h — helpers shared by the files of src/data (not public). */
#ifndef GF_DATA_INTERNAL_H
#define GF_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/data.h"

/* Call fn for every line of a file (without its '\n'; a last line without
 * '\n' counts too). lineno is 1-based. Stops at the first non-OK status. A line
 * that fails gf_line_check is an error naming path:line (and column). */
typedef gf_status (*gf_line_fn)(void *ctx, const char *line, size_t len, int64_t lineno);
gf_status gf_data_for_each_line(const char *path, gf_line_fn fn, void *ctx);
/* gf_data_for_each_line's text check alone (a corpus read by another program). */
gf_status gf_data_check_text(const char *path);

/* Pieces in id order and an open-addressing index over them (tokenizer.c). Zero-init is empty. */
typedef struct gf_vocab {
    char **words;    /* (n) NUL-terminated pieces, index = id */
    int64_t n, cap;
    int32_t *slots;  /* (n_slots) id + 1, 0 = empty */
    int64_t n_slots;
} gf_vocab;
/* id of the n bytes at w, or -1 */
int32_t gf_vocab_find(const gf_vocab *v, const char *w, size_t n);
/* id of w, adding it as the next id when new */
gf_status gf_vocab_add(gf_vocab *v, const char *w, size_t n, int32_t *id);
void gf_vocab_free(gf_vocab *v);

/* BERT's WordPiece tokenizer, uncased (wordpiece.c; the algorithm is in gflow/tokenizer.h).
 * Zero-init is empty. */
typedef struct gf_wordpiece {
    gf_vocab v;       /* BERT's vocab.txt: a piece a line, "##" marks a continuation */
    int32_t unk_id;   /* [UNK] */
    int32_t sep_id;   /* [SEP] */
    int64_t max_chars; /* code points of the longest piece, "##" not counted */
} gf_wordpiece;
/* Read a vocabulary in BERT's vocab.txt form; an empty, repeated or space-holding piece, or a
 * vocabulary without [UNK] and [SEP], is an error naming the file (and line). */
gf_status gf_wordpiece_load(gf_wordpiece *wp, const char *path);
/* Append the ids of one line (UTF-8, no newline; invalid UTF-8 is an error naming the byte). */
gf_status gf_wordpiece_encode(const gf_wordpiece *wp, const char *text, size_t len, gf_ids *out);
void gf_wordpiece_free(gf_wordpiece *wp);

/* Epoch-wise item order shared by the LM and SNLI loaders. */
typedef struct gf_sampler {
    int64_t n;        /* items per epoch */
    int64_t *order;   /* (n) item ids of the current epoch */
    gf_loader_state st;
    gf_rng next_rng;  /* rng after this epoch's shuffle = next epoch's st.rng */
} gf_sampler;

gf_status gf_sampler_init(gf_sampler *s, int64_t n, int shuffle, uint64_t seed);
void gf_sampler_free(gf_sampler *s);
/* Next item id of the current epoch, or -1 at its end (then the next epoch
 * is started, so the following call returns its first item). */
int64_t gf_sampler_next(gf_sampler *s);
/* Peek whether the epoch has items left. */
int gf_sampler_has_next(const gf_sampler *s);
gf_status gf_sampler_set_state(gf_sampler *s, const gf_loader_state *st);

#endif
