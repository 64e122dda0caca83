/* tokenizer.c — gf_tokenizer over SentencePiece (spm_wrap.cc), a whitespace word vocabulary
 * or BERT's WordPiece (wordpiece.c), both of the latter indexed by gf_vocab (vocab.c). See
 * gflow/tokenizer.h for the contract. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "data/spm_wrap.h"
#include "gflow/data.h"
#include "gflow/tokenizer.h"
#include "gflow/fs.h"

struct gf_tokenizer {
    gf_tokenizer_kind kind;
    char key[64];
    int32_t eol_id;
    gf_spm *spm;        /* spm */
    gf_vocab words;     /* word: every type of the corpus */
    int32_t unk_id;     /* word: -1 when the vocabulary has no <unk> */
    gf_wordpiece wp;    /* wordpiece */
};

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static gf_status word_build_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    (void)lineno;
    gf_vocab *v = ctx;
    int32_t id;
    size_t i = 0;
    while (i < len) {
        while (i < len && is_ws(line[i])) i++;
        size_t j = i;
        while (j < len && !is_ws(line[j])) j++;
        if (j > i) GF_TRY(gf_vocab_add(v, line + i, j - i, &id));
        i = j;
    }
    return gf_vocab_add(v, "<eos>", 5, &id);
}

/* ---- open / free ---- */


/* WikiText-2 marks rare words "<unk>": keep it one piece that decodes verbatim
 * (otherwise '<' and '>' fall outside the character coverage and decode as " ⁇ "). */
#define GF_SPM_USER_SYMBOLS "<unk>"

/* Train on train_path and write the model whole (the atomic writer, a private tmp name:
 * concurrent runs never see half a model, and nothing is written through a link). */
static gf_status train_spm(const char *train_path, const char *model, int64_t vocab_size, const char *type) {
    GF_TRY(gf_data_check_text(train_path)); /* SentencePiece would train on binary junk */
    char *buf = NULL;
    size_t n = 0;
    GF_TRY(gf_spm_train(train_path, vocab_size, type, GF_SPM_USER_SYMBOLS, NULL, &buf, &n));
    gf_atomic_file af;
    gf_status s = gf_atomic_open_private(&af, model);
    if (!s && !(s = gf_atomic_write(&af, buf, n))) s = gf_atomic_commit(&af);
    free(buf);
    return s ? gf_error_wrap(s, "cannot write the tokenizer trained on %s: ", train_path) : GF_OK;
}

static gf_status open_spm(gf_tokenizer *t, const gf_tokenizer_opts *o, const char *train_path,
                          const char *sha16) {
    if (!o->cache_dir || !*o->cache_dir)
        return gf_error_set(GF_E_INVALID, "spm tokenizer needs a cache_dir for its trained model");
    if (o->vocab_size < 8)
        return gf_error_set(GF_E_INVALID, "spm vocab_size %lld too small", (long long)o->vocab_size);
    const char *type = o->model_type == GF_SPM_BPE ? "bpe" : "unigram";
    GF_TRY(gf_mkdir_p(o->cache_dir));
    char model[4096];
    snprintf(model, sizeof model, "%s/spm-%s-%lld-%s.model", o->cache_dir, type,
             (long long)o->vocab_size, sha16);
    struct stat sb;
    if (stat(model, &sb) != 0) GF_TRY(train_spm(train_path, model, o->vocab_size, type));
    GF_TRY(gf_spm_load(&t->spm, model));
    /* the key names token caches: it holds the model's own content too, so ids cached under a
     * model file that has since changed (same name) are never read back */
    char msha[65];
    GF_TRY(gf_sha256_file(model, NULL, msha));
    snprintf(t->key, sizeof t->key, "spm:%s:%lld:%s:%.16s", type, (long long)o->vocab_size, sha16, msha);
    int64_t got = gf_spm_vocab_size(t->spm);
    if (got != o->vocab_size)
        return gf_error_set(GF_E_INVALID,
                            "sentencepiece %s model %s has %lld pieces, not the requested "
                            "vocab_size %lld; the largest it can reach is %lld",
                            type, model, (long long)got, (long long)o->vocab_size, (long long)got);
    t->eol_id = gf_spm_eos_id(t->spm);
    if (t->eol_id < 0)
        return gf_error_set(GF_E_INVALID, "sentencepiece model %s has no eos piece", model);
    return GF_OK;
}

static gf_status open_word(gf_tokenizer *t, const char *train_path, const char *sha16) {
    GF_TRY(gf_data_for_each_line(train_path, word_build_line, &t->words));
    /* an empty corpus would give vocabulary 0 and no <eos>: say which file is at fault */
    if (t->words.n == 0)
        return gf_error_set(GF_E_INVALID, "%s: empty tokenizer corpus (no lines): the word vocabulary would be empty",
                            train_path);
    t->eol_id = gf_vocab_find(&t->words, "<eos>", 5);
    t->unk_id = gf_vocab_find(&t->words, "<unk>", 5);
    snprintf(t->key, sizeof t->key, "word:%lld:%s", (long long)t->words.n, sha16);
    return GF_OK;
}

static gf_status open_wordpiece(gf_tokenizer *t, const gf_tokenizer_opts *o, const char *vocab_path,
                                const char *sha16) {
    GF_TRY(gf_wordpiece_load(&t->wp, vocab_path));
    if (t->wp.v.n != o->vocab_size)
        return gf_error_set(GF_E_INVALID, "%s: the WordPiece vocabulary has %lld pieces, but [tokenizer] vocab_size is "
                            "%lld; set vocab_size = %lld", vocab_path, (long long)t->wp.v.n,
                            (long long)o->vocab_size, (long long)t->wp.v.n);
    t->eol_id = t->wp.sep_id; /* BERT ends a segment with [SEP]: one per line */
    snprintf(t->key, sizeof t->key, "wordpiece:%lld:%s", (long long)t->wp.v.n, sha16);
    return GF_OK;
}

gf_status gf_tokenizer_open(gf_tokenizer **out, const gf_tokenizer_opts *opts, const char *train_path) {
    *out = NULL;
    char hex[65];
    GF_TRY(gf_sha256_file(train_path, NULL, hex));
    char sha16[17];
    memcpy(sha16, hex, 16);
    sha16[16] = '\0';
    gf_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gf_error_set(GF_E_NOMEM, "tokenizer: out of memory");
    t->kind = opts->kind;
    t->unk_id = -1;
    gf_status s;
    if (opts->kind == GF_TOK_SPM) s = open_spm(t, opts, train_path, sha16);
    else if (opts->kind == GF_TOK_WORD) s = open_word(t, train_path, sha16);
    else if (opts->kind == GF_TOK_WORDPIECE) s = open_wordpiece(t, opts, train_path, sha16);
    else s = gf_error_set(GF_E_INVALID, "unknown tokenizer kind %d", (int)opts->kind);
    if (s != GF_OK) {
        gf_tokenizer_free(t);
        return s;
    }
    *out = t;
    return GF_OK;
}

void gf_tokenizer_free(gf_tokenizer *t) {
    if (!t) return;
    if (t->spm) gf_spm_free(t->spm);
    gf_vocab_free(&t->words);
    gf_wordpiece_free(&t->wp);
    free(t);
}

/* the pieces of word and wordpiece */
static const gf_vocab *pieces(const gf_tokenizer *t) { return t->kind == GF_TOK_WORDPIECE ? &t->wp.v : &t->words; }

int64_t gf_tokenizer_vocab_size(const gf_tokenizer *t) {
    return t->kind == GF_TOK_SPM ? gf_spm_vocab_size(t->spm) : pieces(t)->n;
}

int32_t gf_tokenizer_eol_id(const gf_tokenizer *t) { return t->eol_id; }

const char *gf_tokenizer_id_to_piece(const gf_tokenizer *t, int32_t id) {
    if (t->kind == GF_TOK_SPM) return gf_spm_id_to_piece(t->spm, id);
    if (id < 0 || id >= pieces(t)->n) return NULL;
    return pieces(t)->words[id];
}

int gf_tokenizer_starts_word(const gf_tokenizer *t, int32_t id) {
    const char *p = gf_tokenizer_id_to_piece(t, id);
    if (!p) return 0;
    if (t->kind == GF_TOK_SPM) return !strncmp(p, "\xe2\x96\x81", 3);
    if (t->kind == GF_TOK_WORDPIECE) return strncmp(p, "##", 2) != 0;
    return 1;
}

const char *gf_tokenizer_key(const gf_tokenizer *t) { return t->key; }

gf_status gf_tokenizer_encode(const gf_tokenizer *t, const char *text, size_t len, gf_ids *out) {
    if (t->kind == GF_TOK_SPM) return gf_spm_encode(t->spm, text, len, &out->data, &out->n, &out->cap);
    if (t->kind == GF_TOK_WORDPIECE) return gf_wordpiece_encode(&t->wp, text, len, out);
    size_t i = 0;
    while (i < len) {
        while (i < len && is_ws(text[i])) i++;
        size_t j = i;
        while (j < len && !is_ws(text[j])) j++;
        if (j > i) {
            int32_t id = gf_vocab_find(&t->words, text + i, j - i);
            if (id < 0) {
                if (t->unk_id < 0)
                    return gf_error_set(GF_E_NOTFOUND, "word '%.*s' is not in the vocabulary (%s), which has no <unk>",
                                        (int)(j - i), text + i, t->key);
                id = t->unk_id;
            }
            GF_TRY(gf_ids_push(out, id));
        }
        i = j;
    }
    return GF_OK;
}

/* append bytes to a growing string */
typedef struct { char *s; size_t n, cap; } strbuf;
static gf_status sb_put(strbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = realloc(b->s, nc);
        if (!p) return gf_error_set(GF_E_NOMEM, "decode: out of memory");
        b->s = p;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
    return GF_OK;
}

/* one line of word or wordpiece ids: pieces joined by a space; a WordPiece continuation ("##x")
 * joins its word without one, as BERT's tokenizers decode */
static gf_status decode_pieces(const gf_tokenizer *t, const int32_t *ids, int64_t n, strbuf *b) {
    const gf_vocab *v = pieces(t);
    for (int64_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= v->n)
            return gf_error_set(GF_E_INVALID, "decode: id %d out of range [0, %lld)", ids[k], (long long)v->n);
        const char *p = v->words[ids[k]];
        int cont = t->kind == GF_TOK_WORDPIECE && !strncmp(p, "##", 2);
        if (cont) p += 2;
        if (k > 0 && !cont) GF_TRY(sb_put(b, " ", 1));
        GF_TRY(sb_put(b, p, strlen(p)));
    }
    return GF_OK;
}

gf_status gf_tokenizer_decode(const gf_tokenizer *t, const int32_t *ids, int64_t n, char **text) {
    *text = NULL;
    strbuf b = {0};
    gf_status s = sb_put(&b, "", 0);
    int64_t seg = 0; /* start of the current line's ids */
    for (int64_t i = 0; s == GF_OK && i <= n; i++) {
        if (i < n && ids[i] != t->eol_id) continue;
        /* ids[seg..i) is one line (no pointer arithmetic on the NULL of an empty id list) */
        const int32_t *line_ids = i > seg ? ids + seg : ids;
        if (t->kind == GF_TOK_SPM) {
            char *line = NULL;
            s = gf_spm_decode(t->spm, line_ids, i - seg, &line);
            if (s == GF_OK) s = sb_put(&b, line, strlen(line));
            free(line);
        } else {
            s = decode_pieces(t, line_ids, i - seg, &b);
        }
        if (s == GF_OK && i < n) s = sb_put(&b, "\n", 1);
        seg = i + 1;
    }
    if (s != GF_OK) {
        free(b.s);
        return s;
    }
    *text = b.s;
    return GF_OK;
}
