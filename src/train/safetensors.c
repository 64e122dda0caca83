/* safetensors.c — validated safetensors reader and atomic writer; see gflow/safetensors.h.
 * The header JSON is parsed and printed by cJSON. */
#include "gflow/safetensors.h"
#include "gflow/fs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gflow's safetensors I/O assumes a little-endian host"
#endif

/* The reference implementation's cap; a larger header means a corrupt size field. */
#define ST_MAX_HEADER ((uint64_t)100 << 20)

struct gf_safetensors_file {
    char *path;
    unsigned char *buf;          /* the whole file, placed so the data section is 8-aligned */
    const unsigned char *data;   /* data section */
    size_t data_size;
    gf_safetensors_tensor *t;             /* (n) in header order */
    int64_t n;
    int64_t *by_name;            /* (n) indices sorted by name, for gf_safetensors_find */
    char **mkeys, **mvals;       /* (n_meta) */
    int64_t n_meta;
};

const char *gf_safetensors_dtype_name(gf_safetensors_dtype d) {
    return d == GF_SAFETENSORS_F32 ? "F32" : d == GF_SAFETENSORS_I32 ? "I32" : "?";
}
int64_t gf_safetensors_count(const gf_safetensors_file *f) { return f->n; }
const gf_safetensors_tensor *gf_safetensors_at(const gf_safetensors_file *f, int64_t i) {
    return (i >= 0 && i < f->n) ? &f->t[i] : NULL;
}

const char *gf_safetensors_meta(const gf_safetensors_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->mkeys[i], key) == 0) return f->mvals[i];
    return NULL;
}

void gf_safetensors_free(gf_safetensors_file *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n; i++) free((char *)f->t[i].name);
    for (int64_t i = 0; i < f->n_meta; i++) {
        free(f->mkeys[i]);
        free(f->mvals[i]);
    }
    free(f->t);
    free(f->by_name);
    free(f->mkeys);
    free(f->mvals);
    free(f->buf);
    free(f->path);
    free(f);
}

static const gf_safetensors_file *sort_ctx; /* qsort has no context argument in C11 */
static int cmp_name(const void *a, const void *b) {
    return strcmp(sort_ctx->t[*(const int64_t *)a].name, sort_ctx->t[*(const int64_t *)b].name);
}
static int cmp_offset(const void *a, const void *b) {
    const gf_safetensors_tensor *x = &sort_ctx->t[*(const int64_t *)a], *y = &sort_ctx->t[*(const int64_t *)b];
    const unsigned char *px = x->data, *py = y->data;
    if (px != py) return px < py ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

const gf_safetensors_tensor *gf_safetensors_find(const gf_safetensors_file *f, const char *name) {
    int64_t lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const gf_safetensors_tensor *t = &f->t[f->by_name[mid]];
        int c = strcmp(t->name, name);
        if (c == 0) return t;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* A JSON number that is an exact non-negative integer below 2^53. */
static int json_u64(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static void shape_str(char *buf, size_t n, int32_t ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int32_t i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Parse one tensor entry of the header into t (name already set). */
static gf_status parse_entry(gf_safetensors_file *f, const cJSON *e, gf_safetensors_tensor *t) {
    const char *path = f->path, *name = t->name;
    if (!cJSON_IsObject(e))
        return gf_error_set(GF_E_CORRUPT, "%s: tensor %s: header entry is not a JSON object", path, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo))
        return gf_error_set(GF_E_CORRUPT, "%s: tensor %s: needs \"dtype\" (string), \"shape\" and "
                            "\"data_offsets\" (arrays)", path, name);
    size_t esize;
    if (strcmp(jd->valuestring, "F32") == 0) {
        t->dtype = GF_SAFETENSORS_F32;
        esize = 4;
    } else if (strcmp(jd->valuestring, "I32") == 0) {
        t->dtype = GF_SAFETENSORS_I32;
        esize = 4;
    } else {
        return gf_error_set(GF_E_INVALID, "%s: tensor %s has dtype %s; gflow reads only F32 and I32 "
                            "(convert with numpy/torch first)", path, name, jd->valuestring);
    }
    int nd = cJSON_GetArraySize(js);
    if (nd > GF_SAFETENSORS_MAX_DIMS)
        return gf_error_set(GF_E_INVALID, "%s: tensor %s has %d dimensions (at most %d supported)",
                            path, name, nd, GF_SAFETENSORS_MAX_DIMS);
    t->ndim = nd;
    uint64_t numel = 1;
    int i = 0, overflow = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, js) {
        uint64_t d;
        if (!json_u64(it, &d))
            return gf_error_set(GF_E_CORRUPT, "%s: tensor %s: shape entries must be non-negative "
                                "integers", path, name);
        t->shape[i++] = (int64_t)d;
        if (d && numel > UINT64_MAX / 8 / d) overflow = 1;
        numel *= d;
    }
    uint64_t b, end;
    if (cJSON_GetArraySize(jo) != 2 || !json_u64(cJSON_GetArrayItem(jo, 0), &b) ||
        !json_u64(cJSON_GetArrayItem(jo, 1), &end) || end < b)
        return gf_error_set(GF_E_CORRUPT, "%s: tensor %s: data_offsets must be [begin, end] with "
                            "0 <= begin <= end", path, name);
    char sh[160];
    shape_str(sh, sizeof sh, t->ndim, t->shape);
    if (overflow || numel * esize != end - b)
        return gf_error_set(GF_E_CORRUPT, "%s: tensor %s: shape %s x %zu bytes does not match "
                            "data_offsets [%llu, %llu] (%llu bytes)", path, name, sh, esize,
                            (unsigned long long)b, (unsigned long long)end,
                            (unsigned long long)(end - b));
    if (end > f->data_size)
        return gf_error_set(GF_E_CORRUPT, "%s: tensor %s: data_offsets [%llu, %llu] run past the "
                            "data section (%zu bytes; truncated file?)", path, name,
                            (unsigned long long)b, (unsigned long long)end, f->data_size);
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)(end - b);
    t->data = f->data + b;
    return GF_OK;
}

static gf_status parse_meta(gf_safetensors_file *f, const cJSON *m) {
    if (cJSON_IsNull(m)) return GF_OK;
    if (!cJSON_IsObject(m))
        return gf_error_set(GF_E_CORRUPT, "%s: __metadata__ must be an object of strings", f->path);
    int n = cJSON_GetArraySize(m);
    f->mkeys = calloc((size_t)(n ? n : 1), sizeof(char *));
    f->mvals = calloc((size_t)(n ? n : 1), sizeof(char *));
    if (!f->mkeys || !f->mvals) return gf_error_set(GF_E_NOMEM, "%s: out of memory", f->path);
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        if (!cJSON_IsString(it))
            return gf_error_set(GF_E_CORRUPT, "%s: __metadata__ value for key %s is not a string",
                                f->path, it->string);
        for (int64_t k = 0; k < f->n_meta; k++)
            if (strcmp(f->mkeys[k], it->string) == 0)
                return gf_error_set(GF_E_CORRUPT, "%s: __metadata__ key %s appears twice", f->path,
                                    it->string);
        f->mkeys[f->n_meta] = strdup(it->string);
        f->mvals[f->n_meta] = strdup(it->valuestring);
        f->n_meta++;
        if (!f->mkeys[f->n_meta - 1] || !f->mvals[f->n_meta - 1])
            return gf_error_set(GF_E_NOMEM, "%s: out of memory", f->path);
    }
    return GF_OK;
}

/* Everything after the JSON: names unique, tensors tile the data section exactly. */
static gf_status check_layout(gf_safetensors_file *f) {
    int64_t *ord = malloc((size_t)(f->n ? f->n : 1) * sizeof *ord);
    f->by_name = malloc((size_t)(f->n ? f->n : 1) * sizeof *f->by_name);
    if (!ord || !f->by_name) {
        free(ord);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", f->path);
    }
    for (int64_t i = 0; i < f->n; i++) ord[i] = f->by_name[i] = i;
    sort_ctx = f;
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    qsort(ord, (size_t)f->n, sizeof *ord, cmp_offset);
    sort_ctx = NULL;
    gf_status s = GF_OK;
    for (int64_t i = 1; i < f->n && s == GF_OK; i++)
        if (strcmp(f->t[f->by_name[i - 1]].name, f->t[f->by_name[i]].name) == 0)
            s = gf_error_set(GF_E_CORRUPT, "%s: tensor %s appears twice in the header", f->path,
                             f->t[f->by_name[i]].name);
    /* the spec forbids overlaps and holes (no polyglot files) */
    size_t pos = 0;
    for (int64_t i = 0; i < f->n && s == GF_OK; i++) {
        const gf_safetensors_tensor *t = &f->t[ord[i]];
        size_t b = (size_t)((const unsigned char *)t->data - f->data);
        if (b < pos) {
            s = gf_error_set(GF_E_CORRUPT, "%s: tensor %s (bytes %zu..%zu) overlaps tensor %s",
                             f->path, t->name, b, b + t->nbytes, f->t[ord[i - 1]].name);
        } else if (b > pos) {
            s = gf_error_set(GF_E_CORRUPT, "%s: %zu unused bytes before tensor %s in the data "
                             "section (holes are not allowed)", f->path, b - pos, t->name);
        }
        pos = b + t->nbytes;
    }
    if (s == GF_OK && pos != f->data_size)
        s = gf_error_set(GF_E_CORRUPT, "%s: %zu bytes after the last tensor in the data section",
                         f->path, f->data_size - pos);
    free(ord);
    return s;
}

/* Read the whole file into a fresh *out (data section 8-byte aligned); *hn gets the header size. */
static gf_status load_bytes(const char *path, gf_safetensors_file **out, uint64_t *hn_out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return gf_error_set(e == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: cannot open: %s", path,
                            strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return gf_error_set(GF_E_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    unsigned char hs[8];
    if (size < 8 || pread(fd, hs, 8, 0) != 8) {
        close(fd);
        return gf_error_set(GF_E_CORRUPT, "%s: too short for a safetensors file (%zu bytes)", path, size);
    }
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = (hn << 8) | hs[i];
    if (hn > size - 8 || hn > ST_MAX_HEADER || hn < 2) {
        close(fd);
        return gf_error_set(GF_E_CORRUPT, "%s: header size %llu does not fit the file (%zu bytes); "
                            "not a safetensors file or truncated", path, (unsigned long long)hn, size);
    }
    gf_safetensors_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        close(fd);
        free(f);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    }
    /* shift the read so the data section (at 8 + hn) lands 8-byte aligned */
    size_t shift = (size_t)((8 - (8 + hn) % 8) % 8);
    f->buf = malloc(size + shift + 1);
    if (!f->buf) {
        close(fd);
        gf_safetensors_free(f);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory (%zu bytes)", path, size);
    }
    unsigned char *file = f->buf + shift;
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, file + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            gf_safetensors_free(f);
            return gf_error_set(GF_E_IO, "%s: read failed: %s", path, strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    f->data = file + 8 + hn;
    f->data_size = size - 8 - (size_t)hn;
    *out = f;
    *hn_out = hn;
    return GF_OK;
}

/* The JSON header (hn bytes before the data section) into f's tensors and metadata. */
static gf_status parse_header(gf_safetensors_file *f, uint64_t hn) {
    const char *path = f->path;
    const char *hdr = (const char *)f->data - hn, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hn, &end, 0);
    gf_status s = GF_OK;
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        long at = (ep && ep >= hdr && ep <= hdr + hn) ? (long)(ep - hdr) : -1;
        return gf_error_set(GF_E_PARSE, "%s: header is not valid JSON (near byte %ld of %llu)", path,
                            at, (unsigned long long)hn);
    }
    for (const char *q = end; q && q < hdr + hn; q++)
        if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') {
            s = gf_error_set(GF_E_PARSE, "%s: unexpected bytes after the JSON header (at byte %ld)",
                             path, (long)(q - hdr));
            break;
        }
    if (s == GF_OK && !cJSON_IsObject(root))
        s = gf_error_set(GF_E_CORRUPT, "%s: header is not a JSON object", path);
    if (s == GF_OK) {
        int n = cJSON_GetArraySize(root);
        f->t = calloc((size_t)(n ? n : 1), sizeof *f->t);
        if (!f->t) s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        int n_meta_seen = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, root) {
            if (s != GF_OK) break;
            if (strcmp(e->string, "__metadata__") == 0) {
                if (n_meta_seen++) s = gf_error_set(GF_E_CORRUPT, "%s: __metadata__ appears twice", path);
                else s = parse_meta(f, e);
                continue;
            }
            gf_safetensors_tensor *t = &f->t[f->n];
            if (!(t->name = strdup(e->string))) {
                s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
                break;
            }
            f->n++;
            s = parse_entry(f, e, t);
        }
    }
    cJSON_Delete(root);
    return s;
}

gf_status gf_safetensors_read(const char *path, gf_safetensors_file **out) {
    *out = NULL;
    gf_safetensors_file *f = NULL;
    uint64_t hn = 0;
    GF_TRY(load_bytes(path, &f, &hn));
    gf_status s = parse_header(f, hn);
    if (s == GF_OK) s = check_layout(f);
    if (s != GF_OK) {
        gf_safetensors_free(f);
        return s;
    }
    *out = f;
    return GF_OK;
}

/* ---------------------------------------------------------------- write */

static cJSON *raw_int(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(b); /* exact integers, never %g */
}

/* One tensor's header entry {dtype, shape, data_offsets} at byte offset off; *size its bytes. */
static gf_status add_entry(cJSON *root, const char *path, const char *name, gf_safetensors_dtype dtype, int32_t ndim,
                           const int64_t *shape, uint64_t off, size_t *size) {
    *size = 0;
    if (!name || strcmp(name, "__metadata__") == 0 || cJSON_GetObjectItemCaseSensitive(root, name))
        return gf_error_set(GF_E_INVALID, "%s: tensor name %s is reserved or given twice", path,
                            name ? name : "(null)");
    if (ndim < 0 || ndim > GF_SAFETENSORS_MAX_DIMS || (dtype != GF_SAFETENSORS_F32 && dtype != GF_SAFETENSORS_I32))
        return gf_error_set(GF_E_INVALID, "%s: tensor %s: bad ndim %d or dtype", path, name, ndim);
    uint64_t numel = 1;
    cJSON *e = cJSON_AddObjectToObject(root, name);
    cJSON *sh = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
    int ok = e && sh && cJSON_AddStringToObject(e, "dtype", gf_safetensors_dtype_name(dtype));
    for (int32_t d = 0; ok && d < ndim; d++) {
        if (shape[d] < 0) return gf_error_set(GF_E_INVALID, "%s: tensor %s: negative dimension", path, name);
        numel *= (uint64_t)shape[d];
        cJSON *v = raw_int((uint64_t)shape[d]);
        ok = v && cJSON_AddItemToArray(sh, v);
    }
    *size = (size_t)(numel * 4);
    cJSON *os = ok ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
    cJSON *ob = os ? raw_int(off) : NULL, *oe = ob ? raw_int(off + *size) : NULL;
    if (!oe || !cJSON_AddItemToArray(os, ob) || !cJSON_AddItemToArray(os, oe))
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    return GF_OK;
}

gf_status gf_safetensors_write(const char *path, int64_t n, const char *const names[],
                      const gf_safetensors_dtype dtypes[], const int32_t ndims[],
                      const int64_t *const shapes[], const void *const datas[], int64_t n_meta,
                      const char *const meta_keys[], const char *const meta_vals[]) {
    size_t *sizes = calloc((size_t)(n ? n : 1), sizeof *sizes);
    cJSON *root = cJSON_CreateObject();
    gf_status s = GF_OK;
    if (!sizes || !root) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int64_t i = 0; m && i < n_meta; i++) {
            if (cJSON_GetObjectItemCaseSensitive(m, meta_keys[i])) {
                s = gf_error_set(GF_E_INVALID, "%s: metadata key %s given twice", path, meta_keys[i]);
                goto done;
            }
            if (!cJSON_AddStringToObject(m, meta_keys[i], meta_vals[i])) m = NULL;
        }
        if (!m) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
            goto done;
        }
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < n && s == GF_OK; i++) {
        s = add_entry(root, path, names[i], dtypes[i], ndims[i], shapes[i], off, &sizes[i]);
        off += sizes[i];
    }
    if (s) goto done;
    char *json = cJSON_PrintUnformatted(root);
    if (!json) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t jn = strlen(json), hn = (jn + 7) / 8 * 8;
    unsigned char *hdr = malloc(8 + hn);
    if (!hdr) {
        free(json);
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < 8; i++) hdr[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    memcpy(hdr + 8, json, jn);
    memset(hdr + 8 + jn, ' ', hn - jn);
    free(json);
    gf_atomic_file af;
    s = gf_atomic_open(&af, path);
    if (s == GF_OK) s = gf_atomic_write(&af, hdr, 8 + hn);
    for (int64_t i = 0; i < n && s == GF_OK; i++) s = gf_atomic_write(&af, datas[i], sizes[i]);
    if (s == GF_OK) s = gf_atomic_commit(&af); /* on failure the writer removed the tmp file */
    free(hdr);
done:
    cJSON_Delete(root);
    free(sizes);
    return s;
}

/* ---------------------------------------------------------------- parameter blocks */

gf_status gf_safetensors_load_params_into(const gf_safetensors_file *f, const gf_params *p, const char *prefix,
                                 float *dst) {
    if (!prefix) prefix = "";
    const gf_safetensors_tensor **src = malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *src);
    if (!src) return gf_error_set(GF_E_NOMEM, "%s: out of memory", f->path);
    char name[512];
    /* check all, then copy: a failed load leaves dst untouched */
    for (int64_t i = 0; i < p->n_items; i++) {
        const gf_param *it = p->items[i];
        snprintf(name, sizeof name, "%s%s", prefix, it->name);
        char want[160], have[160];
        shape_str(want, sizeof want, it->t.ndim, it->t.shape);
        const gf_safetensors_tensor *t = gf_safetensors_find(f, name);
        gf_status s = GF_OK;
        if (!t) {
            s = gf_error_set(GF_E_NOTFOUND, "%s: tensor %s not found (model expects %s)", f->path,
                             name, want);
        } else if (t->dtype != GF_SAFETENSORS_F32) {
            s = gf_error_set(GF_E_INVALID, "%s: tensor %s has dtype %s, model expects F32", f->path,
                             name, gf_safetensors_dtype_name(t->dtype));
        } else {
            int same = t->ndim == it->t.ndim;
            for (int32_t d = 0; same && d < t->ndim; d++) same = t->shape[d] == it->t.shape[d];
            if (!same) {
                shape_str(have, sizeof have, t->ndim, t->shape);
                s = gf_error_set(GF_E_INVALID, "%s: tensor %s has shape %s, model expects %s",
                                 f->path, name, have, want);
            }
        }
        if (s != GF_OK) {
            free(src);
            return s;
        }
        src[i] = t;
    }
    for (int64_t i = 0; i < p->n_items; i++)
        memcpy(dst + p->items[i]->offset, src[i]->data, src[i]->nbytes);
    free(src);
    return GF_OK;
}

gf_status gf_safetensors_load_params(const gf_safetensors_file *f, gf_params *p, const char *prefix) {
    GF_ASSERT(p->allocated, "gf_safetensors_load_params: parameter block not allocated");
    if (p->device == GF_DEV_CPU) return gf_safetensors_load_params_into(f, p, prefix, p->data);
    /* a device block: the weights on the host, then uploaded whole */
    float *host = malloc((size_t)(p->n ? p->n : 1) * sizeof(float)); // (n)
    if (!host) return gf_error_set(GF_E_NOMEM, "%s: out of memory", f->path);
    gf_status s = gf_params_get(p, GF_PP_DATA, host);
    if (!s) s = gf_safetensors_load_params_into(f, p, prefix, host);
    if (!s) s = gf_params_set(p, GF_PP_DATA, host);
    free(host);
    return s;
}

gf_status gf_safetensors_save_params(const char *path, const gf_params *p, int64_t n_meta,
                            const char *const meta_keys[], const char *const meta_vals[]) {
    GF_ASSERT(p->allocated, "gf_safetensors_save_params(%s): parameter block not allocated", path);
    size_t k = (size_t)(p->n_items ? p->n_items : 1);
    const char **names = malloc(k * sizeof *names);
    gf_safetensors_dtype *dt = malloc(k * sizeof *dt);
    int32_t *nd = malloc(k * sizeof *nd);
    const int64_t **sh = malloc(k * sizeof *sh);
    const void **da = malloc(k * sizeof *da);
    /* a device block's weights are downloaded first */
    float *host = p->device != GF_DEV_CPU ? malloc((size_t)(p->n ? p->n : 1) * sizeof(float)) : NULL; // (n)
    gf_status s = GF_OK;
    if (!names || !dt || !nd || !sh || !da || (p->device != GF_DEV_CPU && !host))
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    else if (host)
        s = gf_params_get(p, GF_PP_DATA, host);
    if (!s) {
        for (int64_t i = 0; i < p->n_items; i++) {
            const gf_param *it = p->items[i];
            names[i] = it->name;
            dt[i] = GF_SAFETENSORS_F32;
            nd[i] = it->t.ndim;
            sh[i] = it->t.shape;
            da[i] = host ? host + it->offset : it->t.data;
        }
        s = gf_safetensors_write(path, p->n_items, names, dt, nd, sh, da, n_meta, meta_keys, meta_vals);
    }
    free(host);
    free(names);
    free(dt);
    free(nd);
    free(sh);
    free(da);
    return s;
}
