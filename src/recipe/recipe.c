/* recipe.c — INI recipes through inih into gf_recipe, driven by the schema table (the parser;
 * recipe_write.c writes the resolved text, recipe_doc.c docs/recipe-keys.md). */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recipe/recipe_internal.h"
#include "gflow/device.h"
#include "gflow/fs.h"
#include "gflow/ini.h"

#define ORIGIN_MAX (GF_RECIPE_STR + 64)
#define MAX_DEPTH 16
#define MAX_ENTRIES 512

/* Where each key's current value came from ("x.ini:12", "--set model.r=3", "x.ini (default)"). */
typedef struct resolve_ctx {
    gf_recipe *r;
    int set[GF_RECIPE_MAX_KEYS];                 /* key was given by a file or --set */
    char origin[GF_RECIPE_MAX_KEYS][ORIGIN_MAX];
    char top[GF_RECIPE_STR];      /* top-level file name, for missing-key messages */
    char chain[MAX_DEPTH][PATH_MAX]; /* realpaths of files being loaded (cycle check) */
    int depth;
    int from_file;                /* gf_recipe_load (a file), not gf_recipe_parse_text (a recorded recipe) */
} resolve_ctx;

typedef struct entry {
    int key;   /* schema index */
    int line;
    char value[GF_RECIPE_STR + 8];
} entry;

/* One file's pass through inih: the reader preprocesses each physical line,
 * the handler checks structure and collects entries. */
typedef struct file_ctx {
    const char *name;
    gf_ini_lines src;          /* the file or text, line by line */
    gf_first_error err;        /* the first fault met in this file */
    int seen_line[GF_RECIPE_MAX_KEYS];        /* line where each key was set in this file */
    entry *entries;
    int n_entries;
} file_ctx;

static int find_section(const char *s) {
    for (int i = 0; gf_recipe_sections[i]; i++)
        if (strcmp(gf_recipe_sections[i], s) == 0) return i;
    return -1;
}

static int find_key(const char *section, const char *key) {
    for (int i = 0; i < gf_recipe_n_keys; i++)
        if (strcmp(gf_recipe_schema[i].section, section) == 0 && strcmp(gf_recipe_schema[i].key, key) == 0)
            return i;
    return -1;
}

static const char *known_sections(void) {
    return "run, data, tokenizer, model, optim, schedule, train, eval";
}

static void fc_error(file_ctx *fc, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fc_error(file_ctx *fc, gf_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gf_first_error_vset(&fc->err, fc->name, fc->src.lineno, code, fmt, ap);
    va_end(ap);
}

/* ---- value parsing (shared by files, --set and defaults) ---- */

/* 1 with *out set, 0 when s is not an integer, -1 when it is one beyond 64 bits */
static int parse_i64(const char *s, int64_t *out) {
    if (!*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end) return 0;
    if (errno == ERANGE) return -1;
    if (errno) return 0;
    *out = (int64_t)v;
    return 1;
}

/* the reason an integer did not parse (parse_i64 returned ok <= 0) */
static void int_error(int ok, const char *what, const char *t, char *msg, size_t cap) {
    if (ok < 0) snprintf(msg, cap, "out of range: '%s' does not fit in 64 bits", t);
    else snprintf(msg, cap, "not an integer%s ('%s')", what, t);
}

static int check_bounds(const gf_recipe_key *k, double v, char *msg, size_t cap, const char *got) {
    char b[40];
    if (k->flags & GF_RK_MIN) {
        int excl = (k->flags & GF_RK_MIN_EXCL) != 0;
        if (excl ? !(v > k->lo) : !(v >= k->lo)) {
            snprintf(msg, cap, "must be %s %s, got %s", excl ? ">" : ">=",
                     gf_recipe_fmt_double(k->lo, b, sizeof b), got);
            return 0;
        }
    }
    if (k->flags & GF_RK_MAX) {
        int excl = (k->flags & GF_RK_MAX_EXCL) != 0;
        if (excl ? !(v < k->hi) : !(v <= k->hi)) {
            snprintf(msg, cap, "must be %s %s, got %s", excl ? "<" : "<=",
                     gf_recipe_fmt_double(k->hi, b, sizeof b), got);
            return 0;
        }
    }
    return 1;
}

/* A comma-separated int list (bounds apply to each entry) into field. */
static int set_int_list(void *field, const gf_recipe_key *k, const char *text, char *msg, size_t cap) {
    gf_int_list l;
    memset(&l, 0, sizeof l);
    char buf[GF_RECIPE_STR * 2];
    if (strlen(text) >= sizeof buf) {
        snprintf(msg, cap, "list too long");
        return 0;
    }
    strcpy(buf, text);
    char *s = gf_ini_trim(buf);
    if (*s) {
        for (char *tok = s;;) {
            char *comma = strchr(tok, ',');
            if (comma) *comma = 0;
            char *t = gf_ini_trim(tok);
            int64_t v;
            if (!*t) {
                snprintf(msg, cap, "empty entry in list '%s'", text);
                return 0;
            }
            int ok = parse_i64(t, &v);
            if (ok <= 0) {
                int_error(ok, " list", t, msg, cap);
                return 0;
            }
            if (!check_bounds(k, (double)v, msg, cap, t)) return 0;
            if (l.n == GF_RECIPE_LIST_MAX) {
                snprintf(msg, cap, "more than %d entries", GF_RECIPE_LIST_MAX);
                return 0;
            }
            l.v[l.n++] = v;
            if (!comma) break;
            tok = comma + 1;
        }
    }
    if (l.n == 0 && (k->flags & GF_RK_NONEMPTY)) {
        snprintf(msg, cap, "must not be empty");
        return 0;
    }
    memcpy(field, &l, sizeof l);
    return 1;
}

_Static_assert(GF_RECIPE_MAX_LINE == INI_MAX_LINE - 2, "GF_RECIPE_MAX_LINE is inih's line buffer");
_Static_assert(GF_RECIPE_MAX_LINE < GF_RECIPE_STR, "a string value that fits a line fits its field");

/* Parse `text` for key k into the recipe; on failure write the reason (no location) to msg. */
static int set_value(gf_recipe *r, const gf_recipe_key *k, const char *text, char *msg, size_t cap) {
    void *field = (char *)r + k->offset;
    /* what is stored must read back: the resolved recipe writes "key = value" (a number no longer
     * than its text, or short), and no recipe line can be longer than GF_RECIPE_MAX_LINE */
    size_t line = strlen(k->key) + 3 + strlen(text);
    if (line > GF_RECIPE_MAX_LINE) {
        snprintf(msg, cap, "too long: the recipe line '%s = ...' would be %zu bytes, a recipe line holds at most %d",
                 k->key, line, GF_RECIPE_MAX_LINE);
        return 0;
    }
    switch (k->type) {
    case GF_RK_INT: {
        int64_t v;
        int ok = parse_i64(text, &v);
        if (ok <= 0) {
            int_error(ok, "", text, msg, cap);
            return 0;
        }
        if (!check_bounds(k, (double)v, msg, cap, text)) return 0;
        *(int64_t *)field = v;
        return 1;
    }
    case GF_RK_FLOAT: {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (!*text || *end) {
            snprintf(msg, cap, "not a number ('%s')", text);
            return 0;
        }
        /* strtod's ERANGE: beyond DBL_MAX, or below DBL_MIN (denormal or flushed to 0) */
        if (errno == ERANGE) {
            snprintf(msg, cap, "out of range: '%s' %s", text,
                     fabs(v) > 1 ? "overflows a double (|x| > 1.8e308)"
                                 : "underflows a double (a denormal or 0: nonzero |x| must be >= 2.2e-308)");
            return 0;
        }
        if (!isfinite(v)) {
            snprintf(msg, cap, "must be finite, got '%s'", text);
            return 0;
        }
        if (!check_bounds(k, v, msg, cap, text)) return 0;
        *(double *)field = v;
        return 1;
    }
    case GF_RK_BOOL: {
        static const char *t[] = {"true", "1", "yes", "on"}, *f[] = {"false", "0", "no", "off"};
        for (int i = 0; i < 4; i++) {
            if (strcasecmp(text, t[i]) == 0) { *(bool *)field = true; return 1; }
            if (strcasecmp(text, f[i]) == 0) { *(bool *)field = false; return 1; }
        }
        snprintf(msg, cap, "not a bool (true|false), got '%s'", text);
        return 0;
    }
    case GF_RK_STRING: {
        size_t n = strlen(text); /* < GF_RECIPE_STR: the line is checked above */
        if (n == 0 && (k->flags & GF_RK_NONEMPTY)) {
            snprintf(msg, cap, "must not be empty");
            return 0;
        }
        for (size_t i = 0; i < n; i++)
            if (text[i] == '#' || text[i] == ';' || (unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
                snprintf(msg, cap, "must not contain '#', ';' or control characters ('%s')", text);
                return 0;
            }
        /* a name joined to a directory: "../x" would leave it, "/x" nest under it */
        if ((k->flags & GF_RK_COMPONENT) && (strchr(text, '/') || !strcmp(text, ".") || !strcmp(text, ".."))) {
            snprintf(msg, cap, "must be one path component (no '/', not '.' or '..'), got '%s'", text);
            return 0;
        }
        memset(field, 0, GF_RECIPE_STR);
        memcpy(field, text, n);
        return 1;
    }
    case GF_RK_ENUM: {
        for (const gf_rk_enum_val *e = k->enums; e->name; e++)
            if (strcmp(e->name, text) == 0) {
                *(int *)field = e->value;
                return 1;
            }
        int w = snprintf(msg, cap, "must be one of ");
        for (const gf_rk_enum_val *e = k->enums; e->name && (size_t)w < cap; e++)
            w += snprintf(msg + w, cap - (size_t)w, "%s%s", e == k->enums ? "" : "|", e->name);
        if ((size_t)w < cap) snprintf(msg + w, cap - (size_t)w, ", got '%s'", text);
        return 0;
    }
    case GF_RK_INT_LIST:
        return set_int_list(field, k, text, msg, cap);
    case GF_RK_BASE:
        break;
    }
    GF_ASSERT(0, "set_value: bad key type");
    return 0;
}

/* ---- inih plumbing ---- */

/* inih reader: lines cleaned by gf_ini_next_line; rejects over-long lines and unknown
 * section headers (inih reports no event for an empty section). */
static char *reader(char *str, int num, void *stream) {
    file_ctx *fc = stream;
    char *s = gf_ini_reader_line(&fc->src, &fc->err, fc->name, num);
    if (!s) return NULL;
    if (s[0] == '[') {
        char *close = strchr(s, ']');
        if (close) {
            char name[256];
            size_t len = (size_t)(close - s - 1);
            if (len >= sizeof name) len = sizeof name - 1;
            memcpy(name, s + 1, len);
            name[len] = 0;
            char *t = gf_ini_trim(name);
            if (find_section(t) < 0) {
                fc_error(fc, GF_E_PARSE, "unknown section [%s] (known: %s)", t, known_sections());
                snprintf(str, (size_t)num, "[\n");
                return str;
            }
        }
    }
    snprintf(str, (size_t)num, "%s\n", s);
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    file_ctx *fc = user;
    if (fc->err.line) return 1; /* already failed: ignore the rest */
    if (!section[0]) {
        fc_error(fc, GF_E_PARSE, "key '%s' before any [section]", name);
        return 0;
    }
    if (find_section(section) < 0) { /* caught by the reader; kept for safety */
        fc_error(fc, GF_E_PARSE, "unknown section [%s] (known: %s)", section, known_sections());
        return 0;
    }
    int k = find_key(section, name);
    if (k < 0) {
        fc_error(fc, GF_E_PARSE, "[%s] %s: unknown key", section, name);
        return 0;
    }
    if (fc->seen_line[k]) {
        fc_error(fc, GF_E_PARSE, "[%s] %s: duplicate key (first set on line %d)", section, name,
                 fc->seen_line[k]);
        return 0;
    }
    fc->seen_line[k] = fc->src.lineno;
    if (fc->n_entries == MAX_ENTRIES) {
        fc_error(fc, GF_E_PARSE, "too many keys");
        return 0;
    }
    entry *e = &fc->entries[fc->n_entries++];
    e->key = k;
    e->line = fc->src.lineno;
    size_t vl = strlen(value);
    if (vl >= sizeof e->value) vl = sizeof e->value - 1; /* reader caps lines well below */
    memcpy(e->value, value, vl);
    e->value[vl] = 0;
    return 1;
}

static gf_status apply_file(resolve_ctx *rc, const char *name, FILE *f, const char *text);

static gf_status open_and_apply(resolve_ctx *rc, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: cannot open recipe: %s", path,
                            strerror(errno));
    gf_status s = apply_file(rc, path, f, NULL);
    fclose(f);
    return s;
}

/* [run] base = v (line `line` of file `name`): the named recipe, relative to name's directory,
 * applied first; cycles and too deep nesting are errors. */
static gf_status apply_base(resolve_ctx *rc, const char *name, const char *v, int line) {
    char path[PATH_MAX + GF_RECIPE_STR + 2], dir[PATH_MAX];
    int plen;
    if (v[0] == '/') {
        plen = snprintf(path, sizeof path, "%s", v);
    } else {
        gf_path_dir(name, dir, sizeof dir);
        plen = snprintf(path, sizeof path, "%s/%s", dir, v);
    }
    if (plen < 0 || plen >= (int)sizeof path)
        return gf_error_set(GF_E_INVALID, "%s:%d: [run] base: path too long", name, line);
    char real[PATH_MAX];
    if (!realpath(path, real))
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s:%d: [run] base: cannot open %s: %s",
                            name, line, path, strerror(errno));
    for (int d = 0; d < rc->depth; d++)
        if (strcmp(rc->chain[d], real) == 0)
            return gf_error_set(GF_E_INVALID, "%s:%d: [run] base: cycle (%s is already being loaded)", name, line,
                                path);
    if (rc->depth == MAX_DEPTH)
        return gf_error_set(GF_E_INVALID, "%s:%d: [run] base: more than %d nested bases", name, line, MAX_DEPTH);
    snprintf(rc->chain[rc->depth++], PATH_MAX, "%s", real);
    gf_status st = open_and_apply(rc, path);
    rc->depth--;
    if (st != GF_OK) gf_error_wrap(st, "%s:%d: [run] base: ", name, line);
    return st;
}

static gf_status apply_file(resolve_ctx *rc, const char *name, FILE *f, const char *text) {
    file_ctx *fc = calloc(1, sizeof *fc);
    entry *entries = calloc(MAX_ENTRIES, sizeof *entries);
    if (!fc || !entries) {
        free(fc);
        free(entries);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", name);
    }
    fc->name = name;
    fc->src.f = f;
    fc->src.text = text;
    fc->entries = entries;
    gf_status st = GF_OK;
    int ret = ini_parse_stream(reader, fc, handler, fc);
    if (ret == -2) {
        st = gf_error_set(GF_E_NOMEM, "%s: out of memory", name);
    } else if (ret != 0) {
        if (fc->err.line && fc->err.line <= ret)
            st = gf_error_set(fc->err.code, "%s", fc->err.msg);
        else
            st = gf_error_set(GF_E_PARSE, "%s:%d: syntax error (expected '[section]' or 'key = value')",
                              name, ret);
    } else if (fc->err.line) {
        st = gf_error_set(fc->err.code, "%s", fc->err.msg);
    } else if (f && ferror(f)) {
        st = gf_error_set(GF_E_IO, "%s: read error", name);
    }
    gf_ini_lines_free(&fc->src);

    /* the base first, so this file's keys override it */
    for (int i = 0; st == GF_OK && i < fc->n_entries; i++)
        if (gf_recipe_schema[entries[i].key].type == GF_RK_BASE && entries[i].value[0])
            st = apply_base(rc, name, entries[i].value, entries[i].line);
    for (int i = 0; st == GF_OK && i < fc->n_entries; i++) {
        const int ki = entries[i].key;
        const gf_recipe_key *k = &gf_recipe_schema[ki];
        if (k->type == GF_RK_BASE) continue;
        char msg[512];
        if (!set_value(rc->r, k, entries[i].value, msg, sizeof msg)) {
            st = gf_error_set(GF_E_INVALID, "%s:%d: [%s] %s: %s", name, entries[i].line, k->section, k->key, msg);
            break;
        }
        rc->set[ki] = 1;
        snprintf(rc->origin[ki], ORIGIN_MAX, "%s:%d", name, entries[i].line);
    }
    free(entries);
    free(fc);
    return st;
}

static gf_status apply_set(resolve_ctx *rc, const char *arg) {
    char buf[GF_RECIPE_STR * 2];
    if (strlen(arg) >= sizeof buf) return gf_error_set(GF_E_INVALID, "--set %.40s...: too long", arg);
    strcpy(buf, arg);
    char *eq = strchr(buf, '=');
    if (!eq) return gf_error_set(GF_E_INVALID, "--set %s: expected section.key=value (no '=')", arg);
    *eq = 0;
    char *lhs = gf_ini_trim(buf), *value = gf_ini_trim(eq + 1);
    char *dot = strchr(lhs, '.');
    if (!dot) return gf_error_set(GF_E_INVALID, "--set %s: expected section.key=value (no section)", arg);
    *dot = 0;
    char *section = gf_ini_trim(lhs), *key = gf_ini_trim(dot + 1);
    if (find_section(section) < 0)
        return gf_error_set(GF_E_INVALID, "--set %s: unknown section [%s] (known: %s)", arg, section,
                            known_sections());
    int ki = find_key(section, key);
    if (ki < 0) return gf_error_set(GF_E_INVALID, "--set %s: [%s] %s: unknown key", arg, section, key);
    const gf_recipe_key *k = &gf_recipe_schema[ki];
    if (k->type == GF_RK_BASE)
        return gf_error_set(GF_E_INVALID, "--set %s: [run] base: only a recipe file can name a base", arg);
    char msg[512];
    if (!set_value(rc->r, k, value, msg, sizeof msg))
        return gf_error_set(GF_E_INVALID, "--set %s: [%s] %s: %s", arg, section, key, msg);
    rc->set[ki] = 1;
    snprintf(rc->origin[ki], ORIGIN_MAX, "--set %s", arg);
    return GF_OK;
}

/* ---- after all sources: required keys, derived defaults, cross-key checks ---- */

static int key_index(const char *section, const char *key) {
    int k = find_key(section, key);
    GF_ASSERT(k >= 0, "no key %s.%s", section, key);
    return k;
}

static gf_status key_error(const resolve_ctx *rc, const char *section, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static gf_status key_error(const resolve_ctx *rc, const char *section, const char *key, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gf_error_set(GF_E_INVALID, "%s: [%s] %s: %s", rc->origin[key_index(section, key)], section, key, msg);
}

static void derive(resolve_ctx *rc, const char *section, const char *key, const char *why) {
    int k = key_index(section, key);
    if (!rc->set[k]) snprintf(rc->origin[k], ORIGIN_MAX, "%s (default, %s)", rc->top, why);
}

/* An offset δ >= seq_len pairs no position of a window (t - δ < 0 for every t). Beside smaller
 * ones it is a no-op (a position averages over the offsets that pair); a layer left with none
 * does not mix at all. Mode A: every layer has all the offsets; mode B: layer l has entry l. */
static gf_status check_offsets(const resolve_ctx *rc) {
    const gf_recipe *r = rc->r;
    const long long L = (long long)r->data.seq_len;
    const gf_int_list *sch = &r->model.offset_schedule, *all = &r->model.offsets;
    for (int64_t l = 0; l < sch->n; l++)
        if (sch->v[l] >= L)
            return key_error(rc, "model", "offset_schedule", "entry %lld (layer %lld's only offset) is %lld, not below "
                             "[data] seq_len (%lld): it pairs no position, so that layer would not mix",
                             (long long)l, (long long)l, (long long)sch->v[l], L);
    if (sch->n) return GF_OK;
    for (int64_t i = 0; i < all->n; i++)
        if (all->v[i] < L) return GF_OK;
    return key_error(rc, "model", "offsets", "every entry is >= [data] seq_len (%lld): an offset pairs position t "
                     "with t - offset, so none pairs and no layer would mix", L);
}

/* A model constraint failed on key `is->key`. When that key was left at its default, the
 * message goes to the line of the key it is checked against (which was set), so it still has
 * a file:line to go to. */
static gf_status model_issue(const resolve_ctx *rc, const gf_cfg_issue *is) {
    static const char *const against[][2] = {{"r", "d_model"}, {"mix_heads", "r"}, {"mix_heads", "d_model"},
                                             {"heads", "d_model"}};
    int k = key_index("model", is->key);
    for (size_t i = 0; !rc->set[k] && i < sizeof against / sizeof against[0]; i++) {
        int o = key_index("model", against[i][1]);
        if (strcmp(against[i][0], is->key) || !rc->set[o]) continue;
        return gf_error_set(GF_E_INVALID, "%s: [model] %s (left at its default): %s; set it, or change [model] %s "
                            "here", rc->origin[o], is->key, is->why, against[i][1]);
    }
    return key_error(rc, "model", is->key, "%s", is->why);
}

/* [data]'s files from the data set table (gflow/datasets.def): its own split files where the
 * recipe names none, its tokenizer corpus; text names its files: three, or one with fractions. */
static gf_status data_files(resolve_ctx *rc) {
    gf_recipe *r = rc->r;
    const gf_dataset_info *d = gf_dataset_get(r->data.dataset);
    char *slots[3] = {r->data.train_file, r->data.valid_file, r->data.test_file};
    static const char *const keys[3] = {"train_file", "valid_file", "test_file"};
    const int one = r->data.file[0] != 0;
    if (one && d->split[0].name)
        return key_error(rc, "data", "file", "applies to dataset = text only (%s has its own files)", d->name);
    const double fv = r->data.valid_fraction, ft = r->data.test_fraction;
    if (!one && (fv > 0 || ft > 0))
        return key_error(rc, "data", fv > 0 ? "valid_fraction" : "test_fraction",
                         "applies to [data] file only (with three files: 0, its default, or no line)");
    if (one && (fv <= 0 || ft <= 0))
        return key_error(rc, "data", fv <= 0 ? "valid_fraction" : "test_fraction",
                         "must be > 0 with [data] file (the share of its bytes for that split)");
    if (one && fv + ft >= 1)
        return key_error(rc, "data", "test_fraction", "valid_fraction + test_fraction = %g leaves no train split; "
                         "their sum must be < 1", fv + ft);
    for (int i = 0; i < 3; i++) {
        if (one && slots[i][0])
            return key_error(rc, "data", keys[i], "set beside [data] file; name one file to split, or three files");
        if (!one && !slots[i][0] && !gf_dataset_default_file(r->data.dataset, (gf_split)i, slots[i], GF_RECIPE_STR))
            return key_error(rc, "data", keys[i], "required for dataset = %s (or [data] file with valid_fraction and "
                             "test_fraction)", d->name);
    }
    if (!r->tokenizer.train_file[0] && d->tokenizer) {
        snprintf(r->tokenizer.train_file, GF_RECIPE_STR, "%s", d->tokenizer);
        derive(rc, "tokenizer", "train_file", "the data set's");
    }
    return GF_OK;
}

static gf_status finish(resolve_ctx *rc) {
    gf_recipe *r = rc->r;
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        if (!k->def && !rc->set[i])
            return gf_error_set(GF_E_INVALID, "%s: [%s] %s: required key missing", rc->top, k->section, k->key);
    }
    GF_TRY(data_files(rc));
    const int ds = gf_dataset_get(r->data.dataset)->kind == GF_DSK_PAIRS;
    if (r->model.max_len == 0) {
        r->model.max_len = ds ? r->data.max_sentence_len : r->data.seq_len;
        derive(rc, "model", "max_len", ds ? "max_sentence_len" : "seq_len");
    }
    if (r->model.classifier_hidden == 0) {
        r->model.classifier_hidden = r->model.d_model;
        derive(rc, "model", "classifier_hidden", "d_model");
    }
    if (r->eval.batch_size == 0) {
        r->eval.batch_size = r->train.batch_size;
        derive(rc, "eval", "batch_size", "train batch_size");
    }
    if (ds) { /* the NLI encoder's blocks are always pre-LN, gated, with Pluecker features (gf_nli) */
        if (r->model.family == GF_FAMILY_GRASSMANN && (!r->model.gate || !r->model.plucker))
            return key_error(rc, "model", r->model.gate ? "plucker" : "gate",
                             "false is an ablation of the language model only (wikitext2, text); the snli "
                             "encoder is always gated, with Pluecker features");
        if (rc->set[key_index("model", "block")] && r->model.block != GF_NLI_BLOCK)
            return key_error(rc, "model", "block", "post_ln is a layout of the language model only (wikitext2, "
                             "text); the snli encoder's blocks are pre_ln");
        r->model.block = GF_NLI_BLOCK; /* the default post_ln, recorded as what runs */
        derive(rc, "model", "block", "snli encoders are pre_ln");
    }

    if (!ds && r->model.max_len < r->data.seq_len)
        return key_error(rc, "model", "max_len", "must be >= [data] seq_len (%lld), got %lld",
                         (long long)r->data.seq_len, (long long)r->model.max_len);
    if (ds && r->model.max_len < r->data.max_sentence_len)
        return key_error(rc, "model", "max_len", "must be >= [data] max_sentence_len (%lld), got %lld",
                         (long long)r->data.max_sentence_len, (long long)r->model.max_len);
    /* the model's own constraints (nn), reported at the key's file:line */
    gf_cfg_issue is;
    gf_model_cfg c;
    gf_recipe_model_cfg(r, r->tokenizer.vocab_size, &c);
    const int bad = ds ? gf_nli_cfg_check(&c, &is) : gf_model_cfg_check(&c, &is);
    if (bad && find_key("model", is.key) >= 0) return model_issue(rc, &is);
    if (bad) return gf_error_set(GF_E_INVALID, "%s: model %s: %s", rc->top, is.key, is.why);
    if (!ds && r->model.family == GF_FAMILY_GRASSMANN) GF_TRY(check_offsets(rc));
    if (r->train.evals_per_epoch > 0 && r->train.eval_every > 0)
        return key_error(rc, "train", "evals_per_epoch", "set both it and eval_every (%lld); choose one",
                         (long long)r->train.eval_every);
    if (r->schedule.min_lr > r->optim.lr)
        return key_error(rc, "schedule", "min_lr", "must be <= [optim] lr (%g), got %g", r->optim.lr,
                         r->schedule.min_lr);
    /* a recipe file that asks for the GPU in a build that has none; a recorded recipe (a
     * checkpoint's, parsed from text) is checked when a session would run it (gf_session_open) */
    if (rc->from_file && r->run.device == GF_DEV_CUDA && !gf_cuda_built())
        return key_error(rc, "run", "device", "cuda, but gflow was built without CUDA (reconfigure with "
                         "-Dcuda=enabled where nvcc and cuBLAS are installed; docs/cuda.md)");
    return GF_OK;
}

/* [model] is a gf_model_cfg (gflow/model.h): the config is the section itself plus the vocab */
void gf_recipe_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c) {
    *c = r->model;
    c->vocab = vocab;
}

void gf_recipe_defaults(gf_recipe *r) {
    memset(r, 0, sizeof *r);
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        if (k->def && k->type != GF_RK_BASE) {
            char msg[256];
            GF_ASSERT(set_value(r, k, k->def, msg, sizeof msg), "schema default of %s.%s: %s", k->section,
                      k->key, msg);
        }
    }
}

static gf_status resolve(const char *path, const char *text, const char *name, const char *const *sets,
                         int64_t n_sets, gf_recipe *out) {
    resolve_ctx *rc = calloc(1, sizeof *rc);
    gf_recipe *r = calloc(1, sizeof *r);
    if (!rc || !r) {
        free(rc);
        free(r);
        return gf_error_set(GF_E_NOMEM, "recipe: out of memory");
    }
    rc->r = r;
    rc->from_file = path != NULL;
    snprintf(rc->top, sizeof rc->top, "%s", path ? path : name);
    gf_recipe_defaults(r);
    for (int i = 0; i < gf_recipe_n_keys; i++) snprintf(rc->origin[i], ORIGIN_MAX, "%s (default)", rc->top);
    gf_status st;
    if (path) {
        char real[PATH_MAX];
        if (realpath(path, real)) snprintf(rc->chain[rc->depth++], PATH_MAX, "%s", real);
        st = open_and_apply(rc, path);
    } else {
        st = apply_file(rc, name, NULL, text);
    }
    for (int64_t i = 0; st == GF_OK && i < n_sets; i++) st = apply_set(rc, sets[i]);
    if (st == GF_OK) st = finish(rc);
    if (st == GF_OK) memcpy(out, r, sizeof *r);
    free(rc);
    free(r);
    return st;
}

gf_status gf_recipe_load(const char *path, const char *const *sets, int64_t n_sets, gf_recipe *out) {
    return resolve(path, NULL, path, sets, n_sets, out);
}

gf_status gf_recipe_parse_text(const char *text, const char *name, const char *const *sets, int64_t n_sets,
                               gf_recipe *out) {
    return resolve(NULL, text, name ? name : "<text>", sets, n_sets, out);
}

static int key_equal(const gf_recipe *a, const gf_recipe *b, const gf_recipe_key *k) {
    const void *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
    switch (k->type) {
    case GF_RK_INT: return *(const int64_t *)x == *(const int64_t *)y;
    case GF_RK_FLOAT: return *(const double *)x == *(const double *)y;
    case GF_RK_BOOL: return *(const bool *)x == *(const bool *)y;
    case GF_RK_STRING: return strcmp(x, y) == 0;
    case GF_RK_ENUM: return *(const int *)x == *(const int *)y;
    case GF_RK_INT_LIST: {
        const gf_int_list *p = x, *q = y;
        return p->n == q->n && memcmp(p->v, q->v, (size_t)p->n * sizeof p->v[0]) == 0;
    }
    case GF_RK_BASE: return 1;
    }
    return 1;
}

/* the first key (of those without the flags `skip`) on which a and b differ, or NULL */
static const gf_recipe_key *first_difference(const gf_recipe *a, const gf_recipe *b, unsigned skip) {
    for (int i = 0; i < gf_recipe_n_keys; i++)
        if (!(gf_recipe_schema[i].flags & skip) && !key_equal(a, b, &gf_recipe_schema[i])) return &gf_recipe_schema[i];
    return NULL;
}

int gf_recipe_equal(const gf_recipe *a, const gf_recipe *b) { return first_difference(a, b, 0) == NULL; }

int gf_recipe_same_run(const gf_recipe *a, const gf_recipe *b) {
    return first_difference(a, b, GF_RK_PLACEMENT) == NULL;
}

gf_status gf_recipe_resume_sets(gf_recipe *r, const char *const *sets, int64_t n_sets) {
    if (n_sets <= 0) return GF_OK;
    char *text = NULL;
    GF_TRY(gf_recipe_resolved_text(r, &text));
    gf_recipe *out = malloc(sizeof *out);
    gf_status st = out ? gf_recipe_parse_text(text, "the run's recipe", sets, n_sets, out)
                       : gf_error_set(GF_E_NOMEM, "recipe: out of memory");
    free(text);
    const gf_recipe_key *k = st ? NULL : first_difference(r, out, GF_RK_PLACEMENT);
    if (k)
        st = gf_error_set(GF_E_INVALID, "--set %s.%s: a run being resumed keeps its recipe; only [run] device, "
                          "threads and cuda_graph (where and how it computes) may change", k->section, k->key);
    if (!st) *r = *out;
    free(out);
    return st;
}

int gf_recipe_set_is_placement(const char *set) {
    const char *dot = strchr(set, '.'), *eq = strchr(set, '=');
    if (!dot || !eq || eq < dot) return 0;
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        if ((k->flags & GF_RK_PLACEMENT) && strlen(k->section) == (size_t)(dot - set) &&
            !strncmp(set, k->section, (size_t)(dot - set)) && strlen(k->key) == (size_t)(eq - dot - 1) &&
            !strncmp(dot + 1, k->key, (size_t)(eq - dot - 1)))
            return 1;
    }
    return 0;
}

const char *gf_recipe_data_dir(const gf_recipe *r) {
    static _Thread_local char data[PATH_MAX], cache[PATH_MAX];
    if (r->data.dir[0]) return r->data.dir;
    const char *env = getenv("GFLOW_DATA_MIRROR");
    if (env && *env) return env;
    gf_data_dirs(data, sizeof data, cache, sizeof cache);
    return data;
}

/* rel under the data directory; an absolute rel as it is */
static void data_path(const gf_recipe *r, const char *rel, char *path, size_t cap) {
    if (rel[0] == '/') snprintf(path, cap, "%s", rel);
    else snprintf(path, cap, "%s/%s", gf_recipe_data_dir(r), rel);
}

void gf_recipe_text_source(const gf_recipe *r, char *path, size_t cap) { data_path(r, r->data.file, path, cap); }

void gf_recipe_text_split_dir(const gf_recipe *r, char *dir, size_t cap) {
    char src[2 * PATH_MAX], hex[65];
    uint8_t d[32];
    gf_recipe_text_source(r, src, sizeof src);
    gf_sha256_buf(src, strlen(src), d); /* two corpora of one name in two places: two directories */
    gf_sha256_to_hex(d, hex);
    const char *base = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
    snprintf(dir, cap, "%s/text/%s.%.12s.v%g.t%g", gf_recipe_cache_dir(r), base, hex, r->data.valid_fraction,
             r->data.test_fraction);
}

void gf_recipe_split_path(const gf_recipe *r, gf_split split, char *path, size_t cap) {
    if (r->data.file[0]) {
        char dir[2 * PATH_MAX];
        gf_recipe_text_split_dir(r, dir, sizeof dir);
        snprintf(path, cap, "%s/%s.txt", dir, gf_split_name(split));
        return;
    }
    const char *rel = split == GF_SPLIT_TRAIN ? r->data.train_file
                      : split == GF_SPLIT_VALID ? r->data.valid_file : r->data.test_file;
    data_path(r, rel, path, cap);
}

void gf_recipe_tokenizer_path(const gf_recipe *r, char *path, size_t cap) {
    if (!r->tokenizer.train_file[0]) { /* the data set's train split (text) */
        gf_recipe_split_path(r, GF_SPLIT_TRAIN, path, cap);
        return;
    }
    data_path(r, r->tokenizer.train_file, path, cap);
    const char *env = getenv("GFLOW_DATA_MIRROR");
    if (r->data.dir[0] || !env || !*env || access(path, F_OK) == 0) return;
    char data[PATH_MAX], cache[PATH_MAX], alt[2 * PATH_MAX];
    gf_data_dirs(data, sizeof data, cache, sizeof cache);
    snprintf(alt, sizeof alt, "%s/%s", data, r->tokenizer.train_file);
    if (access(alt, F_OK) == 0) snprintf(path, cap, "%s", alt);
}

const char *gf_recipe_cache_dir(const gf_recipe *r) {
    static _Thread_local char data[PATH_MAX], cache[PATH_MAX];
    if (r->tokenizer.cache_dir[0]) return r->tokenizer.cache_dir;
    gf_data_dirs(data, sizeof data, cache, sizeof cache);
    return cache;
}

void gf_recipe_optim_cfg(const gf_recipe *r, gf_adamw_cfg *adamw, gf_schedule_cfg *sched) {
    if (adamw) {
        gf_adamw_cfg_default(adamw);
        adamw->beta1 = r->optim.beta1;
        adamw->beta2 = r->optim.beta2;
        adamw->eps = r->optim.eps;
        adamw->weight_decay = r->optim.weight_decay;
        adamw->decay[GF_PK_WEIGHT] = 1;
        adamw->decay[GF_PK_BIAS] = r->optim.decay_bias;
        adamw->decay[GF_PK_NORM] = r->optim.decay_norm;
        adamw->decay[GF_PK_EMBED] = r->optim.decay_embed;
    }
    if (sched) {
        memset(sched, 0, sizeof *sched);
        sched->kind = r->schedule.kind;
        sched->lr = r->optim.lr;
        sched->min_lr = r->schedule.min_lr;
        sched->warmup_steps = r->schedule.warmup_steps;
    }
}
