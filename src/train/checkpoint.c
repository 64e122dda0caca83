/* checkpoint.c — verified, atomic checkpoints of the parameter block; see gflow/checkpoint.h
 * for the on-disk layout. Files are written through gflow/fs.h's atomic writer. */
#include "gflow/checkpoint.h"
#include "gflow/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Floats are written as host memory; the integer fields are encoded explicitly. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gflow checkpoints assume a little-endian host"
#endif

#define CK_HEADER_SIZE 64
#define CK_TRAILER_SIZE 16
#define CK_ALIGN 64
#define CK_END_MAGIC "GFLOWEND"
#define CK_NGROUPS 3

static const char *const ck_group_prefix[CK_NGROUPS] = {"", "m/", "v/"};
static const gf_params_part ck_group_part[CK_NGROUPS] = {GF_PP_DATA, GF_PP_M, GF_PP_V};

/* ---------------------------------------------------------------- metadata */

void gf_ckpt_meta_init(gf_ckpt_meta *m) { memset(m, 0, sizeof *m); }

void gf_ckpt_meta_free(gf_ckpt_meta *m) {
    free(m->recipe);
    free(m->rng.data);
    free(m->loader.data);
    free(m->optim.data);
    for (int64_t i = 0; i < m->n_kv; i++) {
        free(m->keys[i]);
        free(m->vals[i]);
    }
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static char *ck_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        if (n) memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

gf_status gf_ckpt_meta_set_recipe(gf_ckpt_meta *m, const char *text) {
    char *d = NULL;
    if (text && !(d = ck_strndup(text, strlen(text))))
        return gf_error_set(GF_E_NOMEM, "checkpoint metadata: out of memory");
    free(m->recipe);
    m->recipe = d;
    return GF_OK;
}

gf_status gf_ckpt_meta_set_blob(gf_ckpt_blob *b, const void *data, size_t size) {
    void *d = NULL;
    if (size) {
        if (!(d = malloc(size))) return gf_error_set(GF_E_NOMEM, "checkpoint metadata: out of memory");
        memcpy(d, data, size);
    }
    free(b->data);
    b->data = d;
    b->size = size;
    return GF_OK;
}

/* Append or replace a key; key/val of length kn/vn (need not be NUL-terminated). */
static gf_status meta_set_kv_n(gf_ckpt_meta *m, const char *key, size_t kn, const char *val,
                               size_t vn) {
    char *v = ck_strndup(val, vn);
    if (!v) return gf_error_set(GF_E_NOMEM, "checkpoint metadata: out of memory");
    for (int64_t i = 0; i < m->n_kv; i++) {
        if (strlen(m->keys[i]) == kn && memcmp(m->keys[i], key, kn) == 0) {
            free(m->vals[i]);
            m->vals[i] = v;
            return GF_OK;
        }
    }
    char *k = ck_strndup(key, kn);
    char **nk = realloc(m->keys, (size_t)(m->n_kv + 1) * sizeof *nk);
    if (nk) m->keys = nk;
    char **nv = realloc(m->vals, (size_t)(m->n_kv + 1) * sizeof *nv);
    if (nv) m->vals = nv;
    if (!k || !nk || !nv) {
        free(k);
        free(v);
        return gf_error_set(GF_E_NOMEM, "checkpoint metadata: out of memory");
    }
    m->keys[m->n_kv] = k;
    m->vals[m->n_kv] = v;
    m->n_kv++;
    return GF_OK;
}

gf_status gf_ckpt_meta_set_kv(gf_ckpt_meta *m, const char *key, const char *val) {
    return meta_set_kv_n(m, key, strlen(key), val, strlen(val));
}

const char *gf_ckpt_meta_get_kv(const gf_ckpt_meta *m, const char *key) {
    for (int64_t i = 0; i < m->n_kv; i++)
        if (strcmp(m->keys[i], key) == 0) return m->vals[i];
    return NULL;
}

/* ---------------------------------------------------------------- byte encoding */

typedef struct ck_buf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} ck_buf;

static void buf_put(ck_buf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void enc_u64(unsigned char *d, uint64_t v) {
    for (int i = 0; i < 8; i++) d[i] = (unsigned char)(v >> (8 * i));
}
static void enc_u32(unsigned char *d, uint32_t v) {
    for (int i = 0; i < 4; i++) d[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t dec_u64(const unsigned char *s) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | s[i];
    return v;
}
static uint32_t dec_u32(const unsigned char *s) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | s[i];
    return v;
}

static void buf_u8(ck_buf *b, uint8_t v) { buf_put(b, &v, 1); }
static void buf_u16(ck_buf *b, uint16_t v) {
    unsigned char d[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    buf_put(b, d, 2);
}
static void buf_u32(ck_buf *b, uint32_t v) {
    unsigned char d[4];
    enc_u32(d, v);
    buf_put(b, d, 4);
}
static void buf_u64(ck_buf *b, uint64_t v) {
    unsigned char d[8];
    enc_u64(d, v);
    buf_put(b, d, 8);
}

static void buf_record(ck_buf *b, const char *name, size_t nn, const void *val, size_t vn) {
    buf_u32(b, (uint32_t)nn);
    buf_put(b, name, nn);
    buf_u64(b, (uint64_t)vn);
    buf_put(b, val, vn);
}

/* Bounded reader over a mapped section; `bad` is set on any overrun. */
typedef struct ck_cur {
    const unsigned char *p;
    size_t n, pos;
    int bad;
} ck_cur;

static const unsigned char *cur_take(ck_cur *c, size_t n) {
    if (c->bad || n > c->n - c->pos) {
        c->bad = 1;
        return NULL;
    }
    const unsigned char *q = c->p + c->pos;
    c->pos += n;
    return q;
}
static uint64_t cur_u64(ck_cur *c) {
    const unsigned char *q = cur_take(c, 8);
    return q ? dec_u64(q) : 0;
}
static uint32_t cur_u32(ck_cur *c) {
    const unsigned char *q = cur_take(c, 4);
    return q ? dec_u32(q) : 0;
}
static uint16_t cur_u16(ck_cur *c) {
    const unsigned char *q = cur_take(c, 2);
    return q ? (uint16_t)(q[0] | (q[1] << 8)) : 0;
}
static uint8_t cur_u8(ck_cur *c) {
    const unsigned char *q = cur_take(c, 1);
    return q ? q[0] : 0;
}

static uLong crc_update(uLong crc, const void *p, size_t n) {
    const unsigned char *q = p;
    while (n > 0) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, q, k);
        q += k;
        n -= k;
    }
    return crc;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void shape_str(char *buf, size_t n, int32_t ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int32_t i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* ---------------------------------------------------------------- save */

static const unsigned char ck_zeros[CK_ALIGN] = {0};

/* metadata records: recipe, rng, loader, optim, then "kv:KEY" pairs */
static gf_status put_meta(ck_buf *b, const gf_ckpt_meta *meta, const char *path) {
    if (!meta) return GF_OK;
    if (meta->recipe) buf_record(b, "recipe", 6, meta->recipe, strlen(meta->recipe));
    if (meta->rng.size) buf_record(b, "rng", 3, meta->rng.data, meta->rng.size);
    if (meta->loader.size) buf_record(b, "loader", 6, meta->loader.data, meta->loader.size);
    if (meta->optim.size) buf_record(b, "optim", 5, meta->optim.data, meta->optim.size);
    for (int64_t i = 0; i < meta->n_kv; i++) {
        char name[4096];
        int nn = snprintf(name, sizeof name, "kv:%s", meta->keys[i]);
        if (nn < 0 || (size_t)nn >= sizeof name)
            return gf_error_set(GF_E_INVALID, "%s: metadata key too long: %.64s...", path, meta->keys[i]);
        buf_record(b, name, (size_t)nn, meta->vals[i], strlen(meta->vals[i]));
    }
    return GF_OK;
}

/* tensor table: every parameter in each group, in block order */
static void put_table(ck_buf *b, const gf_params *p, uint64_t sec_stride) {
    buf_u64(b, (uint64_t)(CK_NGROUPS * p->n_items));
    for (int g = 0; g < CK_NGROUPS; g++) {
        for (int64_t i = 0; i < p->n_items; i++) {
            const gf_param *it = p->items[i];
            size_t nn = strlen(it->name);
            buf_u32(b, (uint32_t)nn);
            buf_put(b, it->name, nn);
            buf_u8(b, (uint8_t)g);
            buf_u8(b, (uint8_t)it->kind);
            buf_u16(b, (uint16_t)it->t.ndim);
            for (int32_t d = 0; d < it->t.ndim; d++) buf_u64(b, (uint64_t)it->t.shape[d]);
            buf_u64(b, (uint64_t)g * sec_stride + (uint64_t)it->offset * sizeof(float));
            buf_u64(b, (uint64_t)gf_tensor_numel(&it->t) * sizeof(float));
        }
    }
}

/* header bytes b (freed here), the three arrays (sec bytes each, padded to sec_stride between
 * them) and the CRC trailer, written atomically */
static gf_status write_all(const char *path, ck_buf *b, const float *const arrays[CK_NGROUPS], size_t sec,
                           uint64_t sec_stride, uint64_t file_size) {
    gf_atomic_file af;
    gf_status s = gf_atomic_open(&af, path);
    if (s != GF_OK) {
        free(b->p);
        return s;
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t pad = (size_t)(sec_stride - sec);

    crc = crc_update(crc, b->p, b->n);
    s = gf_atomic_write(&af, b->p, b->n);
    free(b->p);
    for (int g = 0; g < CK_NGROUPS && s == GF_OK; g++) {
        crc = crc_update(crc, arrays[g], sec);
        s = gf_atomic_write(&af, arrays[g], sec);
        if (s == GF_OK && g + 1 < CK_NGROUPS && pad) {
            crc = crc_update(crc, ck_zeros, pad);
            s = gf_atomic_write(&af, ck_zeros, pad);
        }
    }
    if (s != GF_OK) return s; /* the writer already removed the tmp file */
    unsigned char trailer[CK_TRAILER_SIZE] = {0};
    memcpy(trailer, CK_END_MAGIC, 8);
    crc = crc_update(crc, trailer, 8);
    enc_u32(trailer + 8, (uint32_t)crc);
    GF_TRY(gf_atomic_write(&af, trailer, sizeof trailer));
    GF_ASSERT(af.written == file_size, "checkpoint size %llu != planned %llu",
              (unsigned long long)af.written, (unsigned long long)file_size);
    return gf_atomic_commit(&af);
}

gf_status gf_ckpt_save(const char *path, const gf_params *p, const gf_ckpt_meta *meta) {
    GF_ASSERT(p->allocated, "gf_ckpt_save(%s): parameter block not allocated", path);
    const size_t sec = (size_t)p->n * sizeof(float);     /* bytes of one array */
    const uint64_t sec_stride = align_up(sec, CK_ALIGN); /* m and v start aligned */

    ck_buf b = {0};
    unsigned char zero_hdr[CK_HEADER_SIZE] = {0};
    buf_put(&b, zero_hdr, sizeof zero_hdr); /* patched below */
    size_t meta_begin = b.n;
    gf_status ms = put_meta(&b, meta, path);
    if (ms != GF_OK) {
        free(b.p);
        return ms;
    }
    size_t meta_size = b.n - meta_begin;
    size_t table_begin = b.n;
    put_table(&b, p, sec_stride);
    size_t table_size = b.n - table_begin;
    uint64_t blob_offset = align_up(b.n, CK_ALIGN);
    buf_put(&b, ck_zeros, (size_t)(blob_offset - b.n));
    if (b.oom) {
        free(b.p);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory building the checkpoint header", path);
    }
    uint64_t blob_size = 2 * sec_stride + sec;
    uint64_t file_size = blob_offset + blob_size + CK_TRAILER_SIZE;

    memcpy(b.p, GF_CKPT_MAGIC, 8);
    enc_u32(b.p + 8, GF_CKPT_VERSION);
    enc_u32(b.p + 12, 0);
    enc_u64(b.p + 16, file_size);
    enc_u64(b.p + 24, (uint64_t)(meta ? meta->step : 0));
    enc_u64(b.p + 32, (uint64_t)(meta ? meta->epoch : 0));
    enc_u64(b.p + 40, meta_size);
    enc_u64(b.p + 48, table_size);
    enc_u64(b.p + 56, blob_offset);
    /* weights, m and v: a device block's are downloaded first (one format for both devices) */
    const float *arrays[CK_NGROUPS] = {p->data, p->m, p->v};
    float *host = NULL;
    if (p->device != GF_DEV_CPU) {
        host = malloc((size_t)(CK_NGROUPS * (p->n ? p->n : 1)) * sizeof(float)); // (3, n)
        gf_status st = host ? GF_OK : gf_error_set(GF_E_NOMEM, "%s: no host memory for the weights", path);
        for (int g = 0; g < CK_NGROUPS && !st; g++) {
            st = gf_params_get(p, ck_group_part[g], host + g * p->n);
            arrays[g] = host + g * p->n;
        }
        if (st) {
            free(host);
            free(b.p);
            return st;
        }
    }
    gf_status st = write_all(path, &b, arrays, sec, sec_stride, file_size);
    free(host);
    return st;
}

/* ---------------------------------------------------------------- load */

typedef struct ck_entry {
    const char *name; /* not NUL-terminated: points into the mapping */
    size_t name_len;
    int group;
    int kind;
    int32_t ndim;
    int64_t shape[GF_MAX_DIMS];
    uint64_t offset, nbytes;
} ck_entry;

typedef struct ck_file {
    const char *path;
    const unsigned char *base;
    size_t size;
    uint64_t meta_size, table_size, blob_offset;
    int64_t step, epoch;
    ck_entry *ents;
    int64_t n_ents;
} ck_file;

static void ck_close(ck_file *f) {
    if (f->base) munmap((void *)f->base, f->size);
    free(f->ents);
    f->base = NULL;
    f->ents = NULL;
}

/* Map the file read-only into f->base / f->size. */
static gf_status ck_map(const char *path, ck_file *f) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return gf_error_set(e == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: cannot open checkpoint: %s",
                            path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return gf_error_set(GF_E_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size < 8) {
        close(fd);
        return gf_error_set(GF_E_CORRUPT, "%s: not a gflow checkpoint: only %zu bytes (truncated?)",
                            path, size);
    }
    void *base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (base == MAP_FAILED) return gf_error_set(GF_E_IO, "%s: cannot map: %s", path, strerror(e));
    f->base = base;
    f->size = size;
    return GF_OK;
}

/* The frame of the mapped file: magic, size, version, length, end marker and CRC. */
static gf_status ck_check_frame(const ck_file *f) {
    const char *path = f->path;
    const unsigned char *h = f->base;
    size_t size = f->size;
    if (memcmp(h, GF_CKPT_MAGIC, 8) != 0)
        return gf_error_set(GF_E_CORRUPT, "%s: not a gflow checkpoint (bad magic; expected %s)", path,
                            GF_CKPT_MAGIC);
    if (size < CK_HEADER_SIZE + CK_TRAILER_SIZE)
        return gf_error_set(GF_E_CORRUPT, "%s: truncated checkpoint: %zu bytes, smaller than the "
                            "header and trailer", path, size);
    uint32_t version = dec_u32(h + 8);
    if (version != GF_CKPT_VERSION)
        return gf_error_set(GF_E_CORRUPT, "%s: unsupported checkpoint version %u (this build reads "
                            "version %u)", path, version, GF_CKPT_VERSION);
    uint64_t file_size = dec_u64(h + 16);
    if (file_size != size)
        return gf_error_set(GF_E_CORRUPT, "%s: %s checkpoint: header says %llu bytes, file has %zu",
                            path, file_size > size ? "truncated" : "corrupt or oversized",
                            (unsigned long long)file_size, size);
    const unsigned char *tr = h + size - CK_TRAILER_SIZE;
    if (memcmp(tr, CK_END_MAGIC, 8) != 0)
        return gf_error_set(GF_E_CORRUPT, "%s: checkpoint end marker missing (torn or corrupt file)",
                            path);
    uint32_t stored = dec_u32(tr + 8);
    uint32_t crc = (uint32_t)crc_update(crc32(0L, Z_NULL, 0), h, size - 8);
    if (stored != crc)
        return gf_error_set(GF_E_CORRUPT, "%s: checksum mismatch (stored %08x, computed %08x): the "
                            "file is corrupt", path, stored, crc);
    /* the sum does not cover its own 8 bytes: a damaged reserved word gets its own message */
    if (dec_u32(tr + 12) != 0)
        return gf_error_set(GF_E_CORRUPT, "%s: corrupt trailer: its last 4 bytes (reserved) are %08x, not 0 "
                            "(the checksum itself matches)", path, dec_u32(tr + 12));
    return GF_OK;
}

/* The section sizes and the tensor table into f->ents. Past the CRC only a buggy writer
 * produces a bad structure; check anyway. */
static gf_status ck_read_table(ck_file *f) {
    const char *path = f->path;
    const unsigned char *h = f->base;
    size_t size = f->size;
    f->step = (int64_t)dec_u64(h + 24);
    f->epoch = (int64_t)dec_u64(h + 32);
    f->meta_size = dec_u64(h + 40);
    f->table_size = dec_u64(h + 48);
    f->blob_offset = dec_u64(h + 56);
    uint64_t room = size - CK_HEADER_SIZE - CK_TRAILER_SIZE;
    if (f->meta_size > room || f->table_size > room - f->meta_size ||
        f->blob_offset < CK_HEADER_SIZE + f->meta_size + f->table_size ||
        f->blob_offset > size - CK_TRAILER_SIZE || f->blob_offset % CK_ALIGN) {
        return gf_error_set(GF_E_CORRUPT, "%s: bad section sizes in the checkpoint header", path);
    }
    uint64_t blob_size = size - CK_TRAILER_SIZE - f->blob_offset;
    ck_cur c = {h + CK_HEADER_SIZE + f->meta_size, (size_t)f->table_size, 0, 0};
    uint64_t count = cur_u64(&c);
    if (c.bad || count > f->table_size / 16) {
        return gf_error_set(GF_E_CORRUPT, "%s: bad tensor table", path);
    }
    f->ents = calloc(count ? count : 1, sizeof *f->ents);
    if (!f->ents) {
        return gf_error_set(GF_E_NOMEM, "%s: out of memory reading the tensor table", path);
    }
    for (uint64_t i = 0; i < count; i++) {
        ck_entry *en = &f->ents[i];
        en->name_len = cur_u32(&c);
        en->name = (const char *)cur_take(&c, en->name_len);
        en->group = cur_u8(&c);
        en->kind = cur_u8(&c);
        en->ndim = cur_u16(&c);
        if (c.bad || en->ndim < 1 || en->ndim > GF_MAX_DIMS || en->group >= CK_NGROUPS) {
            return gf_error_set(GF_E_CORRUPT, "%s: bad tensor table entry %llu", path,
                                (unsigned long long)i);
        }
        uint64_t numel = 1;
        for (int32_t d = 0; d < en->ndim; d++) {
            uint64_t dim = cur_u64(&c);
            if (dim == 0 || dim > ((uint64_t)1 << 40) || numel > (((uint64_t)1 << 62) / dim)) c.bad = 1;
            else numel *= dim;
            en->shape[d] = (int64_t)dim;
        }
        en->offset = cur_u64(&c);
        en->nbytes = cur_u64(&c);
        if (c.bad || en->nbytes != numel * sizeof(float) || en->offset % sizeof(float) ||
            en->offset > blob_size || en->nbytes > blob_size - en->offset) {
            return gf_error_set(GF_E_CORRUPT, "%s: tensor table entry %llu (%.*s) is out of range", path,
                                (unsigned long long)i, (int)(c.bad ? 0 : en->name_len),
                                c.bad ? "" : en->name);
        }
        f->n_ents++;
    }
    if (c.pos != c.n) {
        return gf_error_set(GF_E_CORRUPT, "%s: tensor table has %zu trailing bytes", path, c.n - c.pos);
    }
    return GF_OK;
}

/* Map the file and verify everything that does not need the model: magic, version,
 * length, end marker, CRC, and the structure of the metadata and the table. */
static gf_status ck_open(const char *path, ck_file *f) {
    memset(f, 0, sizeof *f);
    f->path = path;
    GF_TRY(ck_map(path, f));
    gf_status s = ck_check_frame(f);
    if (s == GF_OK) s = ck_read_table(f);
    if (s != GF_OK) ck_close(f);
    return s;
}

/* Parse the metadata records into a fresh meta (owned by the caller on success). */
static gf_status ck_read_meta(const ck_file *f, gf_ckpt_meta *m) {
    gf_ckpt_meta_init(m);
    m->step = f->step;
    m->epoch = f->epoch;
    ck_cur c = {f->base + CK_HEADER_SIZE, (size_t)f->meta_size, 0, 0};
    gf_status s = GF_OK;
    while (c.pos < c.n && s == GF_OK) {
        uint32_t nn = cur_u32(&c);
        const char *name = (const char *)cur_take(&c, nn);
        uint64_t vn = cur_u64(&c);
        const unsigned char *val = (c.bad || vn > c.n) ? NULL : cur_take(&c, (size_t)vn);
        if (c.bad || !val) {
            gf_ckpt_meta_free(m);
            return gf_error_set(GF_E_CORRUPT, "%s: bad metadata record", f->path);
        }
#define IS(lit) (nn == sizeof(lit) - 1 && memcmp(name, lit, nn) == 0)
        if (IS("recipe")) {
            free(m->recipe);
            if (!(m->recipe = ck_strndup((const char *)val, (size_t)vn)))
                s = gf_error_set(GF_E_NOMEM, "%s: out of memory", f->path);
        } else if (IS("rng")) {
            s = gf_ckpt_meta_set_blob(&m->rng, val, (size_t)vn);
        } else if (IS("loader")) {
            s = gf_ckpt_meta_set_blob(&m->loader, val, (size_t)vn);
        } else if (IS("optim")) {
            s = gf_ckpt_meta_set_blob(&m->optim, val, (size_t)vn);
        } else if (nn >= 3 && memcmp(name, "kv:", 3) == 0) {
            s = meta_set_kv_n(m, name + 3, nn - 3, (const char *)val, (size_t)vn);
        } /* unknown records: written by a later version; skip */
#undef IS
    }
    if (s != GF_OK) gf_ckpt_meta_free(m);
    return s;
}

gf_status gf_ckpt_peek(const char *path, gf_ckpt_meta *out) {
    ck_file f;
    GF_TRY(ck_open(path, &f));
    gf_status s = ck_read_meta(&f, out);
    ck_close(&f);
    return s;
}

static int ent_is(const ck_entry *e, int g, const char *name, size_t nn) {
    return e->group == g && e->name_len == nn && memcmp(e->name, name, nn) == 0;
}

/* The verified file's weights, m and v into the block (entry match[g * n_items + i] for tensor i
 * of group g). A device block: through host copies, uploaded whole (the tensors cover the block,
 * so every float is written). */
static gf_status copy_in(const ck_file *f, const int64_t *match, gf_params *p, const char *path) {
    float *arrays[CK_NGROUPS] = {p->data, p->m, p->v};
    float *host = NULL;
    if (p->device != GF_DEV_CPU) {
        host = malloc((size_t)(CK_NGROUPS * (p->n ? p->n : 1)) * sizeof(float)); // (3, n)
        if (!host) return gf_error_set(GF_E_NOMEM, "%s: no host memory for the weights", path);
        for (int g = 0; g < CK_NGROUPS; g++) arrays[g] = host + g * p->n;
    }
    const unsigned char *blob = f->base + f->blob_offset;
    for (int g = 0; g < CK_NGROUPS; g++)
        for (int64_t i = 0; i < p->n_items; i++) {
            const ck_entry *en = &f->ents[match[g * p->n_items + i]];
            memcpy(arrays[g] + p->items[i]->offset, blob + en->offset, (size_t)en->nbytes);
        }
    gf_status s = GF_OK;
    for (int g = 0; host && g < CK_NGROUPS && !s; g++) s = gf_params_set(p, ck_group_part[g], arrays[g]);
    free(host);
    return s;
}

gf_status gf_ckpt_load(const char *path, gf_params *p, gf_ckpt_meta *out) {
    GF_ASSERT(p->allocated, "gf_ckpt_load(%s): parameter block not allocated", path);
    ck_file f;
    GF_TRY(ck_open(path, &f));
    gf_status s = GF_OK;
    const int64_t n_need = CK_NGROUPS * p->n_items;
    /* match[g * n_items + i]: entry index for parameter i in group g */
    int64_t *match = malloc((size_t)(n_need ? n_need : 1) * sizeof *match);
    char *used = calloc((size_t)(f.n_ents ? f.n_ents : 1), 1);
    if (!match || !used) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    /* every model tensor present once with the same shape; the hint makes the usual
     * (same declaration order) case linear */
    int64_t hint = 0;
    for (int g = 0; g < CK_NGROUPS; g++) {
        for (int64_t i = 0; i < p->n_items; i++) {
            const gf_param *it = p->items[i];
            size_t nn = strlen(it->name);
            int64_t found = -1;
            for (int64_t k = 0; k < f.n_ents && found < 0; k++) {
                int64_t j = (hint + k) % f.n_ents;
                if (!used[j] && ent_is(&f.ents[j], g, it->name, nn)) found = j;
            }
            char want[128];
            shape_str(want, sizeof want, it->t.ndim, it->t.shape);
            if (found < 0) {
                s = gf_error_set(GF_E_NOTFOUND, "%s: checkpoint lacks tensor %s%s (model expects "
                                 "%s); was it saved from a different model or recipe?", path,
                                 ck_group_prefix[g], it->name, want);
                goto done;
            }
            const ck_entry *en = &f.ents[found];
            int same = en->ndim == it->t.ndim;
            for (int32_t d = 0; same && d < en->ndim; d++) same = en->shape[d] == it->t.shape[d];
            if (!same) {
                char have[128];
                shape_str(have, sizeof have, en->ndim, en->shape);
                s = gf_error_set(GF_E_INVALID, "%s: tensor %s%s has shape %s in the checkpoint, "
                                 "model expects %s", path, ck_group_prefix[g], it->name, have, want);
                goto done;
            }
            used[found] = 1;
            match[g * p->n_items + i] = found;
            hint = found + 1;
        }
    }
    for (int64_t j = 0; j < f.n_ents; j++) {
        if (!used[j]) {
            const ck_entry *en = &f.ents[j];
            s = gf_error_set(GF_E_INVALID, "%s: checkpoint holds tensor %s%.*s, which the model does "
                             "not declare (or holds it twice)", path, ck_group_prefix[en->group],
                             (int)en->name_len, en->name);
            goto done;
        }
    }
    gf_ckpt_meta meta;
    if (out) {
        s = ck_read_meta(&f, &meta);
        if (s != GF_OK) goto done;
    }
    /* all verified: only now touch the caller's state */
    s = copy_in(&f, match, p, path);
    if (s && out) gf_ckpt_meta_free(&meta);
    if (!s && out) *out = meta;
done:
    free(match);
    free(used);
    ck_close(&f);
    return s;
}

gf_status gf_ckpt_peek_recipe(const char *path, gf_recipe *r, gf_ckpt_meta *keep) {
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    GF_TRY(gf_ckpt_peek(path, &m));
    gf_status st = m.recipe ? gf_recipe_parse_text(m.recipe, path, NULL, 0, r)
                            : gf_error_set(GF_E_CORRUPT, "%s: checkpoint carries no recipe", path);
    if (keep && !st) *keep = m;
    else gf_ckpt_meta_free(&m);
    return st;
}
