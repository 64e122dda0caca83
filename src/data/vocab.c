/* vocab.c — the id buffer (gf_ids) and the vocabulary index (gf_vocab: pieces in id order and an
 * open-addressing index over them) that the word and WordPiece tokenizers share; their own
 * file, so tokenizer.c and wordpiece.c each call into it and not into each other. */
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#include "gflow/tokenizer.h"

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

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int32_t gf_vocab_find(const gf_vocab *v, const char *w, size_t n) {
    if (!v->n_slots) return -1;
    uint64_t i = fnv1a(w, n) & (uint64_t)(v->n_slots - 1);
    for (;;) {
        int32_t s = v->slots[i];
        if (!s) return -1;
        const char *c = v->words[s - 1];
        if (strlen(c) == n && memcmp(c, w, n) == 0) return s - 1;
        i = (i + 1) & (uint64_t)(v->n_slots - 1);
    }
}

static gf_status vocab_rehash(gf_vocab *v, int64_t n_slots) {
    int32_t *s = calloc((size_t)n_slots, sizeof *s);
    if (!s) return gf_error_set(GF_E_NOMEM, "vocabulary: out of memory");
    free(v->slots);
    v->slots = s;
    v->n_slots = n_slots;
    for (int64_t id = 0; id < v->n; id++) {
        uint64_t i = fnv1a(v->words[id], strlen(v->words[id])) & (uint64_t)(n_slots - 1);
        while (s[i]) i = (i + 1) & (uint64_t)(n_slots - 1);
        s[i] = (int32_t)(id + 1);
    }
    return GF_OK;
}

gf_status gf_vocab_add(gf_vocab *v, const char *w, size_t n, int32_t *id) {
    int32_t f = gf_vocab_find(v, w, n);
    if (f >= 0) {
        *id = f;
        return GF_OK;
    }
    if ((v->n + 1) * 2 > v->n_slots) GF_TRY(vocab_rehash(v, v->n_slots ? v->n_slots * 2 : 1024));
    if (v->n == v->cap) {
        int64_t nc = v->cap ? v->cap * 2 : 1024;
        char **p = realloc(v->words, (size_t)nc * sizeof *p);
        if (!p) return gf_error_set(GF_E_NOMEM, "vocabulary: out of memory");
        v->words = p;
        v->cap = nc;
    }
    char *c = malloc(n + 1);
    if (!c) return gf_error_set(GF_E_NOMEM, "vocabulary: out of memory");
    memcpy(c, w, n);
    c[n] = '\0';
    int64_t nid = v->n++;
    v->words[nid] = c;
    uint64_t i = fnv1a(w, n) & (uint64_t)(v->n_slots - 1);
    while (v->slots[i]) i = (i + 1) & (uint64_t)(v->n_slots - 1);
    v->slots[i] = (int32_t)(nid + 1);
    *id = (int32_t)nid;
    return GF_OK;
}

void gf_vocab_free(gf_vocab *v) {
    for (int64_t i = 0; i < v->n; i++) free(v->words[i]);
    free(v->words);
    free(v->slots);
    memset(v, 0, sizeof *v);
}
