/* tokcache.c — a language model's token streams: a split tokenized in parallel over chunks of
 * its lines into a token cache on disk (uint16 ids when the vocabulary fits, else int32), read
 * back memory-mapped; RSS stays bounded whatever the corpus size (gflow/data.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "data/data_internal.h"
#include "gflow/data.h"
#include "gflow/fs.h"
#include "gflow/threads.h"

/* ---- streams ---- */

int gf_tokens_width(int64_t vocab) { return vocab <= 65536 ? 2 : 4; }

void gf_tokens_free(gf_tokens *t) {
    if (t->map) munmap(t->map, t->map_len);
    else free((void *)t->data);
    memset(t, 0, sizeof *t);
}

void gf_tokens_copy(const gf_tokens *t, int64_t start, int64_t n, int32_t *out) {
    if (n <= 0) return;
    if (t->width == 4) memcpy(out, (const int32_t *)t->data + start, (size_t)n * sizeof *out);
    else
        for (int64_t i = 0; i < n; i++) out[i] = ((const uint16_t *)t->data)[start + i];
}

void gf_tokens_release(const gf_tokens *t) {
    /* the whole mapping, not the pages read: a fault maps the cached pages around it too
     * (fault-around, large folios), how many is the kernel's choice; unmapping what is not
     * mapped costs next to nothing */
    if (t->map) madvise(t->map, t->map_len, MADV_DONTNEED);
}

/* ---- the cache file ---- */

/* Fixed 160-byte header, native byte order (little-endian on all targets); the ids follow. */
typedef struct tok_cache_hdr {
    char magic[8];           /* "GFTOKCA\0" */
    uint32_t version;        /* GF_TOKCACHE_VERSION */
    uint32_t header_bytes;   /* sizeof(tok_cache_hdr) */
    char tok_key[64];        /* gf_tokenizer_key(), NUL-padded */
    uint8_t src_sha[32];     /* sha256 of the text file the ids came from */
    int64_t count;           /* number of ids that follow */
    uint8_t payload_sha[32]; /* sha256 of the ids as stored */
    uint32_t width;          /* bytes an id: 2 (uint16) or 4 (int32) */
    uint8_t reserved[4];
} tok_cache_hdr;
_Static_assert(sizeof(tok_cache_hdr) == 160, "token cache header layout");

#define GF_TOKCACHE_MAGIC "GFTOKCA"
#define GF_TOKCACHE_VERSION 2u

/* A cache being written: the header goes in last, over its placeholder, once count and sum are known. */
typedef struct cache_out {
    gf_atomic_file af;
    EVP_MD_CTX *md;
    tok_cache_hdr h;
    void *conv; /* (conv_n) ids at the stored width */
    int64_t conv_n;
} cache_out;

static gf_status out_open(cache_out *o, const char *path, const char *tok_key, const uint8_t src_sha[32], int width) {
    memset(o, 0, sizeof *o);
    memcpy(o->h.magic, GF_TOKCACHE_MAGIC, 8);
    o->h.version = GF_TOKCACHE_VERSION;
    o->h.header_bytes = sizeof o->h;
    o->h.width = (uint32_t)width;
    if (strlen(tok_key) >= sizeof o->h.tok_key)
        return gf_error_set(GF_E_INVALID, "tokenizer key too long for a cache header: %s", tok_key);
    strcpy(o->h.tok_key, tok_key);
    memcpy(o->h.src_sha, src_sha, 32);
    o->md = EVP_MD_CTX_new();
    if (!o->md || EVP_DigestInit_ex(o->md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(o->md);
        return gf_error_set(GF_E_EXTERNAL, "%s: cannot start sha256 (libcrypto)", path);
    }
    /* a private tmp file and a rename (gflow/fs.h): a crash never leaves half a cache, and runs
     * filling the same cache at once do not disturb each other */
    gf_status s = gf_atomic_open_private(&o->af, path);
    if (!s) s = gf_atomic_write(&o->af, &o->h, sizeof o->h);
    if (s) EVP_MD_CTX_free(o->md);
    return s;
}

static gf_status out_ids(cache_out *o, const int32_t *ids, int64_t n) {
    const void *p = ids;
    if (o->h.width == 2) {
        if (n > o->conv_n) {
            free(o->conv);
            o->conv_n = 0;
            if (!(o->conv = malloc((size_t)n * sizeof(uint16_t)))) return gf_error_set(GF_E_NOMEM, "token cache: out of memory");
            o->conv_n = n;
        }
        uint16_t *c = o->conv;
        for (int64_t i = 0; i < n; i++) c[i] = (uint16_t)ids[i];
        p = c;
    }
    size_t bytes = (size_t)n * o->h.width;
    EVP_DigestUpdate(o->md, p, bytes);
    o->h.count += n;
    return n ? gf_atomic_write(&o->af, p, bytes) : GF_OK;
}

/* commit when st is GF_OK, else abort; frees o either way */
static gf_status out_close(cache_out *o, gf_status st) {
    unsigned int dn = 0;
    EVP_DigestFinal_ex(o->md, o->h.payload_sha, &dn);
    EVP_MD_CTX_free(o->md);
    free(o->conv);
    if (!st && pwrite(o->af.fd, &o->h, sizeof o->h, 0) != (ssize_t)sizeof o->h)
        st = gf_error_set(GF_E_IO, "%s: cannot write the header: %s", o->af.path, strerror(errno));
    if (st) {
        gf_atomic_abort(&o->af);
        return st;
    }
    return gf_atomic_commit(&o->af);
}

gf_status gf_token_cache_write(const char *path, const char *tok_key, const uint8_t src_sha[32], int width,
                               const gf_ids *ids) {
    cache_out o;
    GF_TRY(out_open(&o, path, tok_key, src_sha, width));
    return out_close(&o, out_ids(&o, ids->data, ids->n));
}

static gf_status check_header(const char *path, const tok_cache_hdr *h, const char *tok_key,
                              const uint8_t expect_src_sha[32], uint64_t size) {
    if (memcmp(h->magic, GF_TOKCACHE_MAGIC, 8) != 0)
        return gf_error_set(GF_E_CORRUPT, "token cache %s: bad magic (not a gflow token cache)", path);
    if (h->version != GF_TOKCACHE_VERSION || h->header_bytes != sizeof *h)
        return gf_error_set(GF_E_CORRUPT, "token cache %s: version %u, this build reads %u", path, h->version,
                            GF_TOKCACHE_VERSION);
    if (strnlen(h->tok_key, sizeof h->tok_key) == sizeof h->tok_key || strcmp(h->tok_key, tok_key) != 0)
        return gf_error_set(GF_E_INVALID, "token cache %s was built by tokenizer '%.63s', not '%s'", path, h->tok_key,
                            tok_key);
    if (expect_src_sha && memcmp(h->src_sha, expect_src_sha, 32) != 0) {
        char a[65], b[65];
        gf_sha256_to_hex(h->src_sha, a);
        gf_sha256_to_hex(expect_src_sha, b);
        return gf_error_set(GF_E_INVALID, "token cache %s was built from a different source file (sha256 %s, now %s)",
                            path, a, b);
    }
    if (h->width != 2 && h->width != 4)
        return gf_error_set(GF_E_CORRUPT, "token cache %s: bad id width %u", path, h->width);
    if (h->count < 0 || h->count > ((int64_t)1 << 40) || size != sizeof *h + (uint64_t)h->count * h->width)
        return gf_error_set(GF_E_CORRUPT, "token cache %s: size does not match its count %lld", path, (long long)h->count);
    return GF_OK;
}

/* sha256 of the payload, read in blocks (not through the mapping: that would make it resident) */
static gf_status payload_sha(int fd, const char *path, uint64_t bytes, uint8_t d[32]) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char *buf = malloc(1 << 20);
    gf_status s = md && buf && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? GF_OK
                  : gf_error_set(GF_E_NOMEM, "token cache %s: cannot start sha256", path);
    for (uint64_t off = 0; !s && off < bytes;) {
        size_t want = bytes - off < (1u << 20) ? (size_t)(bytes - off) : (1u << 20);
        ssize_t got = pread(fd, buf, want, (off_t)(sizeof(tok_cache_hdr) + off));
        if (got <= 0) s = gf_error_set(GF_E_CORRUPT, "token cache %s: read error", path);
        else {
            EVP_DigestUpdate(md, buf, (size_t)got);
            off += (uint64_t)got;
        }
    }
    unsigned int dn = 0;
    if (!s) EVP_DigestFinal_ex(md, d, &dn);
    EVP_MD_CTX_free(md);
    free(buf);
    return s;
}

gf_status gf_token_cache_open(const char *path, const char *tok_key, const uint8_t expect_src_sha[32], gf_tokens *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", path, strerror(errno));
    tok_cache_hdr h;
    struct stat sb;
    gf_status s = GF_OK;
    if (fstat(fd, &sb) != 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        s = gf_error_set(GF_E_CORRUPT, "token cache %s: truncated header", path);
    if (!s) s = check_header(path, &h, tok_key, expect_src_sha, (uint64_t)sb.st_size);
    uint8_t d[32];
    if (!s) s = payload_sha(fd, path, (uint64_t)h.count * h.width, d);
    if (!s && memcmp(d, h.payload_sha, 32) != 0)
        s = gf_error_set(GF_E_CORRUPT, "token cache %s: payload checksum mismatch (corrupt file)", path);
    void *map = s ? MAP_FAILED : mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (!s && map == MAP_FAILED) s = gf_error_set(GF_E_IO, "token cache %s: cannot map it: %s", path, strerror(errno));
    close(fd);
    if (s) return s;
    madvise(map, (size_t)sb.st_size, MADV_RANDOM); /* windows are read in shuffled order: no read-ahead */
    gf_tokens_free(out);
    out->map = map;
    out->map_len = (size_t)sb.st_size;
    out->data = (const char *)map + sizeof h;
    out->n = h.count;
    out->width = (int)h.width;
    return GF_OK;
}

/* ---- tokenizing in parallel ---- */

/* One thread's share of a block: whole lines in, ids (with the eol id after each line) out. */
typedef struct part {
    const char *p;
    size_t n;
    gf_ids ids;
    int64_t lines;
    int64_t bad_line; /* 1-based line within the part that failed, 0: none */
    size_t bad_off;
} part;

static void tokenize_part(const gf_tokenizer *tok, part *pt) {
    const int32_t eol = gf_tokenizer_eol_id(tok);
    pt->ids.n = pt->lines = pt->bad_line = 0;
    for (size_t i = 0; i < pt->n;) {
        const char *l = pt->p + i, *nl = memchr(l, '\n', pt->n - i);
        size_t len = nl ? (size_t)(nl - l) : pt->n - i;
        pt->lines++;
        /* a message set here would be this thread's: the caller checks the line again for it */
        if ((len && l[len - 1] == '\r') || gf_utf8_invalid_at(l, len) != len || gf_tokenizer_encode(tok, l, len, &pt->ids) ||
            gf_ids_push(&pt->ids, eol)) {
            pt->bad_line = pt->lines;
            pt->bad_off = i;
            return;
        }
        i += len + (nl != NULL);
    }
}

/* The message of a part's failed line (line0: lines before the part), found again on this thread. */
static gf_status part_error(const gf_tokenizer *tok, const char *path, const part *pt, int64_t line0) {
    const char *l = pt->p + pt->bad_off, *nl = memchr(l, '\n', pt->n - pt->bad_off);
    size_t len = nl ? (size_t)(nl - l) : pt->n - pt->bad_off;
    const int64_t line = line0 + pt->bad_line;
    GF_TRY(gf_line_check(path, line, l, len));
    gf_ids tmp = {0};
    gf_status s = gf_tokenizer_encode(tok, l, len, &tmp);
    gf_ids_free(&tmp);
    if (s) return gf_error_wrap(s, "%s:%lld: ", path, (long long)line);
    return gf_error_set(GF_E_NOMEM, "%s:%lld: out of memory for its token ids", path, (long long)line);
}

/* Tokenize blk[0..n) (whole lines) over np parts, the parts' ids to o in order; *lines counts. */
static gf_status tokenize_block(const gf_tokenizer *tok, const char *path, const char *blk, size_t n, part *pts, int np,
                                cache_out *o, int64_t *lines) {
    size_t at = 0;
    for (int k = 0; k < np; k++) { /* part k: up to the first line start at or after (k+1) n / np */
        size_t end = k == np - 1 ? n : (size_t)((double)n * (k + 1) / np);
        if (end < at) end = at;
        if (end > at && end < n) {
            const char *nl = memchr(blk + end - 1, '\n', n - end + 1);
            end = nl ? (size_t)(nl - blk) + 1 : n;
        }
        pts[k].p = blk + at;
        pts[k].n = end - at;
        at = end;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(np)
    for (int k = 0; k < np; k++) tokenize_part(tok, &pts[k]);
    for (int k = 0; k < np; k++) {
        if (pts[k].bad_line) return part_error(tok, path, &pts[k], *lines);
        GF_TRY(out_ids(o, pts[k].ids.data, pts[k].ids.n));
        *lines += pts[k].lines;
    }
    return GF_OK;
}

/* Progress on stderr for a long tokenization: every 2 s, with the rate and an ETA. */
typedef struct progress {
    const char *path;
    double t0, last, total;
    int on;
} progress;

static void progress_show(progress *pr, double done) {
    double now = gf_time_now();
    if (!pr->on || now - pr->last < 2.0) return;
    pr->last = now;
    double rate = done / (now - pr->t0);
    char eta[32];
    gf_fmt_eta(eta, sizeof eta, rate > 0 ? (pr->total - done) / rate : -1);
    fprintf(stderr, "data: tokenizing %s: %.0f%% (%.0f of %.0f MB, %.1f MB/s, ETA %s)\n", pr->path,
            100.0 * done / pr->total, done / 1e6, pr->total / 1e6, rate / 1e6, eta);
}

/* Read src in blocks of whole lines (a block grows to hold a longer line), np parts each. */
static gf_status stream_file(const gf_tokenizer *tok, const char *src, FILE *f, int np, cache_out *o, progress *pr) {
    size_t cap = (size_t)np << 22, have = 0; /* 4 MB of text a part */
    char *blk = malloc(cap);
    part *pts = calloc((size_t)np, sizeof *pts);
    gf_status s = blk && pts ? GF_OK : gf_error_set(GF_E_NOMEM, "%s: out of memory for its text blocks", src);
    int64_t lines = 0;
    double done = 0;
    for (int eof = 0; !s && (!eof || have);) {
        if (!eof) {
            have += fread(blk + have, 1, cap - have, f);
            if (ferror(f)) s = gf_error_set(GF_E_IO, "%s: read error after line %lld", src, (long long)lines);
            eof = feof(f);
        }
        size_t end = have;
        const char *nl = NULL;
        for (size_t i = have; !eof && i > 0 && !nl; i--) nl = blk[i - 1] == '\n' ? blk + i - 1 : NULL;
        if (!s && !eof && !nl) { /* a line longer than the block: grow it */
            char *b = realloc(blk, cap * 2);
            if (!b) s = gf_error_set(GF_E_NOMEM, "%s: out of memory for a line of over %zu bytes", src, cap);
            else blk = b, cap *= 2;
            continue;
        }
        if (nl) end = (size_t)(nl - blk) + 1;
        if (!s) s = tokenize_block(tok, src, blk, end, pts, np, o, &lines);
        memmove(blk, blk + end, have - end);
        have -= end;
        done += (double)end;
        progress_show(pr, done);
    }
    for (int k = 0; pts && k < np; k++) gf_ids_free(&pts[k].ids);
    free(pts);
    free(blk);
    return s;
}

/* Tokenize src into the cache cpath, np threads. */
static gf_status build_cache(const gf_tokenizer *tok, const char *src, const uint8_t src_sha[32], const char *cpath,
                             int log) {
    FILE *f = fopen(src, "rb");
    if (!f) return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", src, strerror(errno));
    struct stat sb;
    progress pr = {src, gf_time_now(), gf_time_now(), 0, 0};
    if (fstat(fileno(f), &sb) == 0) pr.total = (double)sb.st_size;
    pr.on = log && pr.total >= 64e6;
    int np = gf_threads_get();
    np = np < 1 ? 1 : np;
    cache_out o;
    gf_status s = out_open(&o, cpath, gf_tokenizer_key(tok), src_sha, gf_tokens_width(gf_tokenizer_vocab_size(tok)));
    if (!s) s = out_close(&o, stream_file(tok, src, f, np, &o, &pr));
    fclose(f);
    return s;
}

void gf_token_cache_path(const gf_tokenizer *tok, const char *split_path, const char *cache_dir, char *path,
                         size_t cap) {
    const char *base = strrchr(split_path, '/');
    base = base ? base + 1 : split_path;
    char key[64], hex[65];
    snprintf(key, sizeof key, "%s", gf_tokenizer_key(tok));
    for (char *p = key; *p; p++)
        if (*p == ':' || *p == '/') *p = '-';
    uint8_t d[32];
    gf_sha256_buf(split_path, strlen(split_path), d);
    gf_sha256_to_hex(d, hex);
    snprintf(path, cap, "%s/%s.%.12s.%s.tok", cache_dir, base, hex, key);
}

gf_status gf_lm_split_tokens(const gf_tokenizer *tok, const char *split_path, const char *cache_dir, gf_tokens *out,
                             gf_cache_event *ev, char *why, size_t why_cap, int log) {
    gf_cache_event e = GF_CACHE_BUILT;
    if (why && why_cap) why[0] = '\0';
    uint8_t src_sha[32];
    GF_TRY(gf_sha256_file(split_path, src_sha, NULL));
    GF_TRY(gf_mkdir_p(cache_dir));
    char cpath[2 * PATH_MAX + 128];
    gf_token_cache_path(tok, split_path, cache_dir, cpath, sizeof cpath);
    gf_status s = gf_token_cache_open(cpath, gf_tokenizer_key(tok), src_sha, out);
    if (s == GF_OK) e = GF_CACHE_HIT;
    else if (s == GF_E_INVALID || s == GF_E_CORRUPT) {
        e = GF_CACHE_REBUILT;
        if (why && why_cap) snprintf(why, why_cap, "%s", gf_last_error());
    } else if (s != GF_E_NOTFOUND) {
        return s;
    }
    if (e != GF_CACHE_HIT) {
        gf_error_clear();
        GF_TRY(build_cache(tok, split_path, src_sha, cpath, log));
        GF_TRY(gf_token_cache_open(cpath, gf_tokenizer_key(tok), src_sha, out));
    }
    if (ev) *ev = e;
    return GF_OK;
}
