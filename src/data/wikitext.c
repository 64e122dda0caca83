/* wikitext.c — WikiText-2 word counts, token streams, the token cache and
 * the LM window loader (see gflow/data.h for the window definition). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "gflow/data.h"
#include "gflow/fs.h"

/* ---- word count ---- */

static gf_status count_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    (void)lineno;
    int64_t *n = ctx;
    int in_word = 0;
    for (size_t i = 0; i < len; i++) {
        char c = line[i];
        int ws = c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
        if (!ws && !in_word) (*n)++;
        in_word = !ws;
    }
    (*n)++; /* the line's <eos> */
    return GF_OK;
}

gf_status gf_wikitext_word_count(const char *path, int64_t *n_words) {
    *n_words = 0;
    return gf_data_for_each_line(path, count_line, n_words);
}

/* ---- token stream ---- */

typedef struct { const gf_tokenizer *tok; gf_ids *out; const char *path; } tok_ctx;

static gf_status tok_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    tok_ctx *c = ctx;
    gf_status s = gf_tokenizer_encode(c->tok, line, len, c->out);
    if (s != GF_OK) return gf_error_wrap(s, "%s:%lld: ", c->path, (long long)lineno);
    return gf_ids_push(c->out, gf_tokenizer_eol_id(c->tok));
}

gf_status gf_lm_tokenize_file(const gf_tokenizer *tok, const char *path, gf_ids *out) {
    tok_ctx c = {tok, out, path};
    return gf_data_for_each_line(path, tok_line, &c);
}

/* ---- token cache ---- */

/* Fixed 160-byte header, native byte order (little-endian on all targets). */
typedef struct tok_cache_hdr {
    char magic[8];          /* "GFTOKCA\0" */
    uint32_t version;       /* GF_TOKCACHE_VERSION */
    uint32_t header_bytes;  /* sizeof(tok_cache_hdr) */
    char tok_key[64];       /* gf_tokenizer_key(), NUL-padded */
    uint8_t src_sha[32];    /* sha256 of the text file the ids came from */
    int64_t count;          /* number of int32 ids that follow */
    uint8_t payload_sha[32];/* sha256 of the ids */
    uint8_t reserved[8];
} tok_cache_hdr;
_Static_assert(sizeof(tok_cache_hdr) == 160, "token cache header layout");

#define GF_TOKCACHE_MAGIC "GFTOKCA"
#define GF_TOKCACHE_VERSION 1u

gf_status gf_token_cache_write(const char *path, const char *tok_key, const uint8_t src_sha[32],
                               const gf_ids *ids) {
    tok_cache_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, GF_TOKCACHE_MAGIC, 8);
    h.version = GF_TOKCACHE_VERSION;
    h.header_bytes = sizeof h;
    if (strlen(tok_key) >= sizeof h.tok_key)
        return gf_error_set(GF_E_INVALID, "tokenizer key too long for a cache header: %s", tok_key);
    strcpy(h.tok_key, tok_key);
    memcpy(h.src_sha, src_sha, 32);
    h.count = ids->n;
    gf_sha256_buf(ids->data, (size_t)ids->n * sizeof(int32_t), h.payload_sha);
    /* a private tmp file and a rename (gflow/fs.h): a crash never leaves half a cache, and runs
     * filling the same cache at once do not disturb each other */
    gf_atomic_file af;
    GF_TRY(gf_atomic_open_private(&af, path));
    GF_TRY(gf_atomic_write(&af, &h, sizeof h));
    if (ids->n > 0) GF_TRY(gf_atomic_write(&af, ids->data, (size_t)ids->n * sizeof(int32_t)));
    return gf_atomic_commit(&af);
}

gf_status gf_token_cache_read(const char *path, const char *tok_key, const uint8_t expect_src_sha[32],
                              gf_ids *out) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", path, strerror(errno));
    tok_cache_hdr h;
    gf_status s = GF_OK;
    if (fread(&h, sizeof h, 1, f) != 1) {
        s = gf_error_set(GF_E_CORRUPT, "token cache %s: truncated header", path);
        goto done;
    }
    if (memcmp(h.magic, GF_TOKCACHE_MAGIC, 8) != 0) {
        s = gf_error_set(GF_E_CORRUPT, "token cache %s: bad magic (not a gflow token cache)", path);
        goto done;
    }
    if (h.version != GF_TOKCACHE_VERSION || h.header_bytes != sizeof h) {
        s = gf_error_set(GF_E_CORRUPT, "token cache %s: version %u, this build reads %u", path,
                         h.version, GF_TOKCACHE_VERSION);
        goto done;
    }
    h.tok_key[sizeof h.tok_key - 1] = '\0';
    if (strcmp(h.tok_key, tok_key) != 0) {
        s = gf_error_set(GF_E_INVALID, "token cache %s was built by tokenizer '%s', not '%s'", path,
                         h.tok_key, tok_key);
        goto done;
    }
    if (expect_src_sha && memcmp(h.src_sha, expect_src_sha, 32) != 0) {
        char a[65], b[65];
        gf_sha256_to_hex(h.src_sha, a);
        gf_sha256_to_hex(expect_src_sha, b);
        s = gf_error_set(GF_E_INVALID, "token cache %s was built from a different source file (sha256 %s, now %s)",
                         path, a, b);
        goto done;
    }
    if (h.count < 0 || h.count > ((int64_t)1 << 40)) {
        s = gf_error_set(GF_E_CORRUPT, "token cache %s: bad count %lld", path, (long long)h.count);
        goto done;
    }
    {
        /* check the size before allocating: a corrupt count must not ask for gigabytes */
        struct stat sb;
        if (fstat(fileno(f), &sb) != 0 || (uint64_t)sb.st_size != sizeof h + (uint64_t)h.count * sizeof(int32_t)) {
            s = gf_error_set(GF_E_CORRUPT, "token cache %s: size does not match its count %lld", path,
                             (long long)h.count);
            goto done;
        }
    }
    {
        int32_t *buf = malloc((size_t)(h.count ? h.count : 1) * sizeof *buf);
        if (!buf) {
            s = gf_error_set(GF_E_NOMEM, "token cache %s: out of memory", path);
            goto done;
        }
        int extra;
        if (fread(buf, sizeof *buf, (size_t)h.count, f) != (size_t)h.count || (extra = fgetc(f)) != EOF) {
            free(buf);
            s = gf_error_set(GF_E_CORRUPT, "token cache %s: size does not match its count %lld", path,
                             (long long)h.count);
            goto done;
        }
        uint8_t d[32];
        gf_sha256_buf(buf, (size_t)h.count * sizeof *buf, d);
        if (memcmp(d, h.payload_sha, 32) != 0) {
            free(buf);
            s = gf_error_set(GF_E_CORRUPT, "token cache %s: payload checksum mismatch (corrupt file)", path);
            goto done;
        }
        gf_ids_free(out);
        out->data = buf;
        out->n = out->cap = h.count;
    }
done:
    fclose(f);
    return s;
}

gf_status gf_lm_split_tokens(const gf_tokenizer *tok, const char *split_path, const char *cache_dir,
                             gf_ids *out, gf_cache_event *ev, char *why, size_t why_cap) {
    gf_cache_event e = GF_CACHE_BUILT;
    if (why && why_cap) why[0] = '\0';
    uint8_t src_sha[32];
    GF_TRY(gf_sha256_file(split_path, src_sha, NULL));
    char cpath[4096] = "";
    if (cache_dir) {
        GF_TRY(gf_mkdir_p(cache_dir));
        const char *base = strrchr(split_path, '/');
        base = base ? base + 1 : split_path;
        char key[64];
        snprintf(key, sizeof key, "%s", gf_tokenizer_key(tok));
        for (char *p = key; *p; p++)
            if (*p == ':' || *p == '/') *p = '-';
        snprintf(cpath, sizeof cpath, "%s/%s.%s.tok", cache_dir, base, key);
        gf_status s = gf_token_cache_read(cpath, gf_tokenizer_key(tok), src_sha, out);
        if (s == GF_OK) {
            e = GF_CACHE_HIT;
            goto done;
        }
        if (s == GF_E_INVALID || s == GF_E_CORRUPT) {
            e = GF_CACHE_REBUILT;
            if (why && why_cap) snprintf(why, why_cap, "%s", gf_last_error());
        } else if (s != GF_E_NOTFOUND) {
            return s;
        }
        gf_error_clear();
    }
    out->n = 0;
    GF_TRY(gf_lm_tokenize_file(tok, split_path, out));
    if (cache_dir) GF_TRY(gf_token_cache_write(cpath, gf_tokenizer_key(tok), src_sha, out));
done:
    if (ev) *ev = e;
    return GF_OK;
}

/* ---- LM loader ---- */

struct gf_lm_loader {
    const int32_t *tokens; /* (n_tokens) */
    int64_t n_tokens, L, n_windows;
    gf_sampler smp;
};

gf_status gf_lm_loader_new(gf_lm_loader **out, const int32_t *tokens, int64_t n_tokens, int64_t L,
                           int shuffle, int keep_tail, uint64_t seed) {
    *out = NULL;
    if (L < 1) return gf_error_set(GF_E_INVALID, "LM window length L=%lld must be >= 1", (long long)L);
    int64_t full = n_tokens > 1 ? (n_tokens - 1) / L : 0;
    int64_t nw = full + ((keep_tail && n_tokens > 1 && (n_tokens - 1) % L) ? 1 : 0);
    if (nw == 0)
        return gf_error_set(GF_E_INVALID, "LM stream of %lld tokens has no window of L+1=%lld tokens",
                            (long long)n_tokens, (long long)(L + 1));
    gf_lm_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return gf_error_set(GF_E_NOMEM, "LM loader: out of memory");
    ld->tokens = tokens;
    ld->n_tokens = n_tokens;
    ld->L = L;
    ld->n_windows = nw;
    gf_status s = gf_sampler_init(&ld->smp, nw, shuffle, seed);
    if (s != GF_OK) {
        free(ld);
        return s;
    }
    *out = ld;
    return GF_OK;
}

void gf_lm_loader_free(gf_lm_loader *ld) {
    if (!ld) return;
    gf_sampler_free(&ld->smp);
    free(ld);
}

int64_t gf_lm_loader_n_windows(const gf_lm_loader *ld) { return ld->n_windows; }

gf_status gf_lm_loader_next(gf_lm_loader *ld, int32_t *batch, int64_t B, int64_t *n_rows) {
    const int64_t W = ld->L + 1;
    int64_t r = 0;
    if (!gf_sampler_has_next(&ld->smp)) {
        (void)gf_sampler_next(&ld->smp); /* end of epoch: start the next one */
    } else {
        for (; r < B && gf_sampler_has_next(&ld->smp); r++) {
            int64_t w = gf_sampler_next(&ld->smp);
            int64_t start = w * ld->L;
            int64_t avail = ld->n_tokens - start;
            int64_t take = avail < W ? avail : W;
            memcpy(batch + r * W, ld->tokens + start, (size_t)take * sizeof(int32_t));
            for (int64_t k = take; k < W; k++) batch[r * W + k] = GF_IGNORE_ID;
        }
    }
    for (int64_t k = r * W; k < B * W; k++) batch[k] = GF_IGNORE_ID;
    *n_rows = r;
    return GF_OK;
}

void gf_lm_loader_get_state(const gf_lm_loader *ld, gf_loader_state *st) { *st = ld->smp.st; }

gf_status gf_lm_loader_set_state(gf_lm_loader *ld, const gf_loader_state *st) {
    return gf_sampler_set_state(&ld->smp, st);
}
