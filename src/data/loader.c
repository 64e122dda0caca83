/* loader.c — line reader and the epoch sampler behind both loaders. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

size_t gf_utf8_invalid_at(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == 0) return i;
        if (c < 0x80) { i++; continue; }
        size_t k = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
        if (k == 0 || k >= n - i) return i;
        unsigned lo = 0x80, hi = 0xBF; /* the second byte's range rules out overlongs and surrogates */
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t j = 2; j <= k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF) return i;
        i += k + 1;
    }
    return n;
}

gf_status gf_text_check(const char *what, int64_t line, size_t col0, const char *s, size_t n) {
    /* binary junk would otherwise "train" as words (a per-word perplexity of 1e76) */
    size_t bad = gf_utf8_invalid_at(s, n);
    if (bad == n) return GF_OK;
    char where[64] = "";
    if (line > 0) snprintf(where, sizeof where, "%lld:", (long long)line);
    if (s[bad])
        return gf_error_set(GF_E_PARSE, "%s:%s not UTF-8 text: byte 0x%02x at column %zu (a binary file, or another "
                            "encoding?)", what, where, (unsigned char)s[bad], col0 + bad + 1);
    return gf_error_set(GF_E_PARSE, "%s:%s not text: a NUL byte at column %zu (a binary file?)", what, where,
                        col0 + bad + 1);
}

gf_status gf_line_check(const char *path, int64_t line, const char *s, size_t n) {
    if (n > 0 && s[n - 1] == '\r')
        return gf_error_set(GF_E_PARSE, "%s:%lld: a CRLF line end (\"\\r\\n\"): gflow reads text with LF line ends "
                            "only; convert the file first (dos2unix FILE, or sed -i 's/\\r$//' FILE)", path,
                            (long long)line);
    return gf_text_check(path, line, 0, s, n);
}

gf_status gf_data_for_each_line(const char *path, gf_line_fn fn, void *ctx) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int64_t lineno = 0;
    gf_status s = GF_OK;
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        size_t len = (size_t)got;
        if (line[len - 1] == '\n') len--;
        s = gf_line_check(path, lineno, line, len);
        if (s == GF_OK) s = fn(ctx, line, len, lineno);
        if (s != GF_OK) break;
    }
    if (s == GF_OK && ferror(f)) s = gf_error_set(GF_E_IO, "%s: read error after line %lld", path, (long long)lineno);
    free(line);
    fclose(f);
    return s;
}

static gf_status no_op_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    (void)ctx, (void)line, (void)len, (void)lineno;
    return GF_OK;
}

gf_status gf_data_check_text(const char *path) { return gf_data_for_each_line(path, no_op_line, NULL); }

static void sampler_start_epoch(gf_sampler *s) {
    for (int64_t i = 0; i < s->n; i++) s->order[i] = i;
    s->next_rng = s->st.rng;
    if (s->st.shuffle) gf_rng_shuffle_i64(&s->next_rng, s->order, s->n);
}

gf_status gf_sampler_init(gf_sampler *s, int64_t n, int shuffle, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->order = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->order);
    if (!s->order) return gf_error_set(GF_E_NOMEM, "loader: out of memory for %lld items", (long long)n);
    s->st.n_items = n;
    s->st.shuffle = shuffle ? 1 : 0;
    gf_rng_seed(&s->st.rng, seed);
    sampler_start_epoch(s);
    return GF_OK;
}

void gf_sampler_free(gf_sampler *s) {
    free(s->order);
    s->order = NULL;
}

int gf_sampler_has_next(const gf_sampler *s) { return s->st.index < s->n; }

int64_t gf_sampler_next(gf_sampler *s) {
    if (s->st.index < s->n) return s->order[s->st.index++];
    s->st.epoch++;
    s->st.index = 0;
    s->st.rng = s->next_rng;
    sampler_start_epoch(s);
    return -1;
}

gf_status gf_sampler_set_state(gf_sampler *s, const gf_loader_state *st) {
    if (st->n_items != s->n)
        return gf_error_set(GF_E_INVALID, "loader state is for %lld items, this loader has %lld (different data or window length)",
                            (long long)st->n_items, (long long)s->n);
    if (st->shuffle != s->st.shuffle)
        return gf_error_set(GF_E_INVALID, "loader state shuffle=%d does not match loader shuffle=%d",
                            st->shuffle, s->st.shuffle);
    if (st->index < 0 || st->index > s->n || st->epoch < 0)
        return gf_error_set(GF_E_INVALID, "loader state out of range (epoch %lld, index %lld of %lld)",
                            (long long)st->epoch, (long long)st->index, (long long)s->n);
    s->st = *st;
    sampler_start_epoch(s);
    return GF_OK;
}
