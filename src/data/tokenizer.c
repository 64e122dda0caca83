/* tokenizer.c — gf_tokenizer over SentencePiece (spm_wrap.cc) or a
 * whitespace word vocabulary. See gflow/tokenizer.h for the contract. */
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
    /* spm */
    gf_spm *spm;
    /* word: pieces in id order and an open-addressing index over them */
    char **words;      /* (V) */
    int64_t n_words, cap_words;
    int32_t *slots;    /* (n_slots) word id + 1, 0 = empty */
    int64_t n_slots;
    int32_t unk_id;    /* -1 when the vocabulary has no <unk> */
};

gf_status gf_ids_push(gf_ids *v, int32_t id) {
    if (v->n == v->cap) {
        int64_t nc = v->cap ? v->cap * 2 : 1024;
        int32_t *p = realloc(v->data, (size_t)nc * sizeof *p);
        if (!p) return gf_error_set(GF_E_NOMEM, "id buffer: out of memory (%lld ids)", (long long)nc);
        v->data = p;
        v->cap = nc;
    }
    v->data[v->n++] = id;
    return GF_OK;
}

void gf_ids_free(gf_ids *v) {
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

/* ---- word vocabulary ---- */

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int32_t word_find(const gf_tokenizer *t, const char *w, size_t n) {
    if (!t->n_slots) return -1;
    uint64_t i = fnv1a(w, n) & (uint64_t)(t->n_slots - 1);
    for (;;) {
        int32_t s = t->slots[i];
        if (!s) return -1;
        const char *c = t->words[s - 1];
        if (strlen(c) == n && memcmp(c, w, n) == 0) return s - 1;
        i = (i + 1) & (uint64_t)(t->n_slots - 1);
    }
}

static gf_status word_rehash(gf_tokenizer *t, int64_t n_slots) {
    int32_t *s = calloc((size_t)n_slots, sizeof *s);
    if (!s) return gf_error_set(GF_E_NOMEM, "word vocabulary: out of memory");
    free(t->slots);
    t->slots = s;
    t->n_slots = n_slots;
    for (int64_t id = 0; id < t->n_words; id++) {
        uint64_t i = fnv1a(t->words[id], strlen(t->words[id])) & (uint64_t)(n_slots - 1);
        while (s[i]) i = (i + 1) & (uint64_t)(n_slots - 1);
        s[i] = (int32_t)(id + 1);
    }
    return GF_OK;
}

/* id of w, adding it when new */
static gf_status word_add(gf_tokenizer *t, const char *w, size_t n, int32_t *id) {
    int32_t f = word_find(t, w, n);
    if (f >= 0) {
        *id = f;
        return GF_OK;
    }
    if ((t->n_words + 1) * 2 > t->n_slots) GF_TRY(word_rehash(t, t->n_slots ? t->n_slots * 2 : 1024));
    if (t->n_words == t->cap_words) {
        int64_t nc = t->cap_words ? t->cap_words * 2 : 1024;
        char **p = realloc(t->words, (size_t)nc * sizeof *p);
        if (!p) return gf_error_set(GF_E_NOMEM, "word vocabulary: out of memory");
        t->words = p;
        t->cap_words = nc;
    }
    char *c = malloc(n + 1);
    if (!c) return gf_error_set(GF_E_NOMEM, "word vocabulary: out of memory");
    memcpy(c, w, n);
    c[n] = '\0';
    int64_t nid = t->n_words++;
    t->words[nid] = c;
    uint64_t i = fnv1a(w, n) & (uint64_t)(t->n_slots - 1);
    while (t->slots[i]) i = (i + 1) & (uint64_t)(t->n_slots - 1);
    t->slots[i] = (int32_t)(nid + 1);
    *id = (int32_t)nid;
    return GF_OK;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

typedef struct { gf_tokenizer *t; } word_build_ctx;

static gf_status word_build_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    (void)lineno;
    gf_tokenizer *t = ((word_build_ctx *)ctx)->t;
    int32_t id;
    size_t i = 0;
    while (i < len) {
        while (i < len && is_ws(line[i])) i++;
        size_t j = i;
        while (j < len && !is_ws(line[j])) j++;
        if (j > i) GF_TRY(word_add(t, line + i, j - i, &id));
        i = j;
    }
    return word_add(t, "<eos>", 5, &id);
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
    if (opts->kind == GF_TOK_SPM) {
        s = open_spm(t, opts, train_path, sha16);
    } else if (opts->kind == GF_TOK_WORD) {
        word_build_ctx c = {t};
        s = gf_data_for_each_line(train_path, word_build_line, &c);
        /* an empty corpus would give vocabulary 0 and no <eos>: say which file is at fault */
        if (s == GF_OK && t->n_words == 0)
            s = gf_error_set(GF_E_INVALID, "%s: empty tokenizer corpus (no lines): the word vocabulary would be empty",
                             train_path);
        if (s == GF_OK) {
            int32_t eos = word_find(t, "<eos>", 5);
            t->eol_id = eos;
            t->unk_id = word_find(t, "<unk>", 5);
            snprintf(t->key, sizeof t->key, "word:%lld:%s", (long long)t->n_words, sha16);
        }
    } else {
        s = gf_error_set(GF_E_INVALID, "unknown tokenizer kind %d", (int)opts->kind);
    }
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
    for (int64_t i = 0; i < t->n_words; i++) free(t->words[i]);
    free(t->words);
    free(t->slots);
    free(t);
}

int64_t gf_tokenizer_vocab_size(const gf_tokenizer *t) {
    return t->kind == GF_TOK_SPM ? gf_spm_vocab_size(t->spm) : t->n_words;
}

int32_t gf_tokenizer_eol_id(const gf_tokenizer *t) { return t->eol_id; }

const char *gf_tokenizer_id_to_piece(const gf_tokenizer *t, int32_t id) {
    if (t->kind == GF_TOK_SPM) return gf_spm_id_to_piece(t->spm, id);
    if (id < 0 || id >= t->n_words) return NULL;
    return t->words[id];
}

const char *gf_tokenizer_key(const gf_tokenizer *t) { return t->key; }

gf_status gf_tokenizer_encode(const gf_tokenizer *t, const char *text, size_t len, gf_ids *out) {
    if (t->kind == GF_TOK_SPM) return gf_spm_encode(t->spm, text, len, &out->data, &out->n, &out->cap);
    size_t i = 0;
    while (i < len) {
        while (i < len && is_ws(text[i])) i++;
        size_t j = i;
        while (j < len && !is_ws(text[j])) j++;
        if (j > i) {
            int32_t id = word_find(t, text + i, j - i);
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

gf_status gf_tokenizer_decode(const gf_tokenizer *t, const int32_t *ids, int64_t n, char **text) {
    *text = NULL;
    strbuf b = {0};
    gf_status s = sb_put(&b, "", 0);
    int64_t seg = 0; /* start of the current line's ids */
    for (int64_t i = 0; s == GF_OK && i <= n; i++) {
        if (i < n && ids[i] != t->eol_id) continue;
        /* ids[seg..i) is one line */
        if (t->kind == GF_TOK_SPM) {
            char *line = NULL;
            s = gf_spm_decode(t->spm, ids + seg, i - seg, &line);
            if (s == GF_OK) s = sb_put(&b, line, strlen(line));
            free(line);
        } else {
            for (int64_t k = seg; s == GF_OK && k < i; k++) {
                if (ids[k] < 0 || ids[k] >= t->n_words) {
                    s = gf_error_set(GF_E_INVALID, "decode: id %d out of range [0, %lld)", ids[k],
                                     (long long)t->n_words);
                    break;
                }
                if (k > seg) s = sb_put(&b, " ", 1);
                if (s == GF_OK) s = sb_put(&b, t->words[ids[k]], strlen(t->words[ids[k]]));
            }
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
