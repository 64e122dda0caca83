/* recipe.c — INI recipes through inih into gf_recipe, driven by the schema table. */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "recipe/recipe_internal.h"
#include "gflow/version.h"

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
    FILE *f;                   /* file source, or */
    const char *text;          /* text source (advanced as read) */
    int lineno;
    int err_line;              /* first error recorded by us (0 = none) */
    gf_status err_code;
    char err[512];
    int seen_line[GF_RECIPE_MAX_KEYS];        /* line where each key was set in this file */
    entry *entries;
    int n_entries;
    char *linebuf;
    size_t linecap;
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
    if (fc->err_line) return; /* keep the first */
    fc->err_line = fc->lineno;
    fc->err_code = code;
    int k = snprintf(fc->err, sizeof fc->err, "%s:%d: ", fc->name, fc->lineno);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fc->err + k, sizeof fc->err - (size_t)k, fmt, ap);
    va_end(ap);
}

/* ---- value parsing (shared by files, --set and defaults) ---- */

static int parse_i64(const char *s, int64_t *out) {
    if (!*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return 0;
    *out = (int64_t)v;
    return 1;
}

static const char *fmt_double(double x, char *buf, size_t cap) {
    /* shortest text that reads back to the same double */
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

static int check_bounds(const gf_recipe_key *k, double v, char *msg, size_t cap, const char *got) {
    char b[40];
    if (k->flags & GF_RK_MIN) {
        int excl = (k->flags & GF_RK_MIN_EXCL) != 0;
        if (excl ? !(v > k->lo) : !(v >= k->lo)) {
            snprintf(msg, cap, "must be %s %s, got %s", excl ? ">" : ">=", fmt_double(k->lo, b, sizeof b), got);
            return 0;
        }
    }
    if (k->flags & GF_RK_MAX) {
        int excl = (k->flags & GF_RK_MAX_EXCL) != 0;
        if (excl ? !(v < k->hi) : !(v <= k->hi)) {
            snprintf(msg, cap, "must be %s %s, got %s", excl ? "<" : "<=", fmt_double(k->hi, b, sizeof b), got);
            return 0;
        }
    }
    return 1;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
    return s;
}

/* Parse `text` for key k into the recipe; on failure write the reason (no location) to msg. */
static int set_value(gf_recipe *r, const gf_recipe_key *k, const char *text, char *msg, size_t cap) {
    void *field = (char *)r + k->offset;
    switch (k->type) {
    case GF_RK_INT: {
        int64_t v;
        if (!parse_i64(text, &v)) {
            snprintf(msg, cap, "not an integer ('%s')", text);
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
        if (!*text || *end || errno == ERANGE) {
            snprintf(msg, cap, "not a number ('%s')", text);
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
        size_t n = strlen(text);
        if (n >= GF_RECIPE_STR) {
            snprintf(msg, cap, "too long (%zu bytes, max %d)", n, GF_RECIPE_STR - 1);
            return 0;
        }
        if (n == 0 && (k->flags & GF_RK_NONEMPTY)) {
            snprintf(msg, cap, "must not be empty");
            return 0;
        }
        for (size_t i = 0; i < n; i++)
            if (text[i] == '#' || text[i] == ';' || (unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
                snprintf(msg, cap, "must not contain '#', ';' or control characters ('%s')", text);
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
    case GF_RK_INT_LIST: {
        gf_int_list l;
        memset(&l, 0, sizeof l);
        char buf[GF_RECIPE_STR * 2];
        if (strlen(text) >= sizeof buf) {
            snprintf(msg, cap, "list too long");
            return 0;
        }
        strcpy(buf, text);
        char *s = trim(buf);
        if (*s) {
            for (char *tok = s;;) {
                char *comma = strchr(tok, ',');
                if (comma) *comma = 0;
                char *t = trim(tok);
                int64_t v;
                if (!*t) {
                    snprintf(msg, cap, "empty entry in list '%s'", text);
                    return 0;
                }
                if (!parse_i64(t, &v)) {
                    snprintf(msg, cap, "not an integer list ('%s' in '%s')", t, text);
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
    case GF_RK_BASE:
        break;
    }
    GF_ASSERT(0, "set_value: bad key type");
    return 0;
}

/* ---- inih plumbing ---- */

static int is_ws(char c) { return c == ' ' || c == '\t'; }

/* Next physical line into fc->linebuf (no newline). 0 at end. */
static int read_line(file_ctx *fc) {
    if (fc->f) {
        ssize_t n = getline(&fc->linebuf, &fc->linecap, fc->f);
        if (n < 0) return 0;
        return 1;
    }
    if (!fc->text || !*fc->text) return 0;
    const char *nl = strchr(fc->text, '\n');
    size_t n = nl ? (size_t)(nl - fc->text) : strlen(fc->text);
    if (n + 1 > fc->linecap) {
        char *b = realloc(fc->linebuf, n + 1);
        if (!b) return 0;
        fc->linebuf = b;
        fc->linecap = n + 1;
    }
    memcpy(fc->linebuf, fc->text, n);
    fc->linebuf[n] = 0;
    fc->text += nl ? n + 1 : n;
    return 1;
}

/* inih reader: strips CR/LF, a BOM, leading indentation (so nothing is a
 * continuation line) and inline comments ('#' or ';' after whitespace; the
 * Debian build of inih strips only ';'), rejects over-long lines and unknown
 * section headers (inih reports no event for an empty section). */
static char *reader(char *str, int num, void *stream) {
    file_ctx *fc = stream;
    if (!read_line(fc)) return NULL;
    fc->lineno++;
    char *s = fc->linebuf;
    size_t n = strcspn(s, "\r\n");
    s[n] = 0;
    if (fc->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    while (is_ws(*s)) s++;
    for (char *c = s; *c; c++)
        if ((*c == '#' || *c == ';') && (c == s || is_ws(c[-1]))) {
            *c = 0;
            break;
        }
    n = strlen(s);
    while (n && is_ws(s[n - 1])) s[--n] = 0;
    if (n + 2 > (size_t)num) {
        fc_error(fc, GF_E_PARSE, "line too long (%zu bytes, max %d)", n, num - 2);
        snprintf(str, (size_t)num, "[\n"); /* make inih flag this line */
        return str;
    }
    if (s[0] == '[') {
        char *close = strchr(s, ']');
        if (close) {
            char name[256];
            size_t len = (size_t)(close - s - 1);
            if (len >= sizeof name) len = sizeof name - 1;
            memcpy(name, s + 1, len);
            name[len] = 0;
            char *t = trim(name);
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
    if (fc->err_line) return 1; /* already failed: ignore the rest */
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
    fc->seen_line[k] = fc->lineno;
    if (fc->n_entries == MAX_ENTRIES) {
        fc_error(fc, GF_E_PARSE, "too many keys");
        return 0;
    }
    entry *e = &fc->entries[fc->n_entries++];
    e->key = k;
    e->line = fc->lineno;
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

static void dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, cap, ".");
        return;
    }
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/x.ini" */
    if (n >= cap) n = cap - 1;
    memcpy(out, path, n);
    out[n] = 0;
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
    fc->f = f;
    fc->text = text;
    fc->entries = entries;
    gf_status st = GF_OK;
    int ret = ini_parse_stream(reader, fc, handler, fc);
    if (ret == -2) {
        st = gf_error_set(GF_E_NOMEM, "%s: out of memory", name);
    } else if (ret != 0) {
        if (fc->err_line && fc->err_line <= ret)
            st = gf_error_set(fc->err_code, "%s", fc->err);
        else
            st = gf_error_set(GF_E_PARSE, "%s:%d: syntax error (expected '[section]' or 'key = value')",
                              name, ret);
    } else if (fc->err_line) {
        st = gf_error_set(fc->err_code, "%s", fc->err);
    } else if (f && ferror(f)) {
        st = gf_error_set(GF_E_IO, "%s: read error", name);
    }
    free(fc->linebuf);

    /* the base first, so this file's keys override it */
    for (int i = 0; st == GF_OK && i < fc->n_entries; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[entries[i].key];
        if (k->type != GF_RK_BASE) continue;
        const char *v = entries[i].value;
        if (!*v) continue;
        char path[PATH_MAX + GF_RECIPE_STR + 2], dir[PATH_MAX];
        int plen;
        if (v[0] == '/') {
            plen = snprintf(path, sizeof path, "%s", v);
        } else {
            dir_of(name, dir, sizeof dir);
            plen = snprintf(path, sizeof path, "%s/%s", dir, v);
        }
        if (plen < 0 || plen >= (int)sizeof path) {
            st = gf_error_set(GF_E_INVALID, "%s:%d: [run] base: path too long", name, entries[i].line);
            break;
        }
        char real[PATH_MAX];
        if (!realpath(path, real)) {
            st = gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s:%d: [run] base: cannot open %s: %s",
                              name, entries[i].line, path, strerror(errno));
            break;
        }
        for (int d = 0; d < rc->depth; d++)
            if (strcmp(rc->chain[d], real) == 0) {
                st = gf_error_set(GF_E_INVALID, "%s:%d: [run] base: cycle (%s is already being loaded)", name,
                                  entries[i].line, path);
                break;
            }
        if (st != GF_OK) break;
        if (rc->depth == MAX_DEPTH) {
            st = gf_error_set(GF_E_INVALID, "%s:%d: [run] base: more than %d nested bases", name,
                              entries[i].line, MAX_DEPTH);
            break;
        }
        snprintf(rc->chain[rc->depth++], PATH_MAX, "%s", real);
        st = open_and_apply(rc, path);
        rc->depth--;
        if (st != GF_OK) gf_error_wrap(st, "%s:%d: [run] base: ", name, entries[i].line);
    }
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
    char *lhs = trim(buf), *value = trim(eq + 1);
    char *dot = strchr(lhs, '.');
    if (!dot) return gf_error_set(GF_E_INVALID, "--set %s: expected section.key=value (no section)", arg);
    *dot = 0;
    char *section = trim(lhs), *key = trim(dot + 1);
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

static gf_status finish(resolve_ctx *rc) {
    gf_recipe *r = rc->r;
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        if (!k->def && !rc->set[i])
            return gf_error_set(GF_E_INVALID, "%s: [%s] %s: required key missing", rc->top, k->section, k->key);
    }
    static const char *const files[2][3] = {
        {"wikitext-2/wiki.train.tokens", "wikitext-2/wiki.valid.tokens", "wikitext-2/wiki.test.tokens"},
        {"snli_1.0/snli_1.0_train.txt", "snli_1.0/snli_1.0_dev.txt", "snli_1.0/snli_1.0_test.txt"},
    };
    const int ds = r->data.dataset == GF_DS_SNLI;
    char *slots[3] = {r->data.train_file, r->data.valid_file, r->data.test_file};
    for (int i = 0; i < 3; i++)
        if (!slots[i][0]) snprintf(slots[i], GF_RECIPE_STR, "%s", files[ds][i]);
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

    if (!ds && r->model.max_len < r->data.seq_len)
        return key_error(rc, "model", "max_len", "must be >= [data] seq_len (%lld), got %lld",
                         (long long)r->data.seq_len, (long long)r->model.max_len);
    if (ds && r->model.max_len < r->data.max_sentence_len)
        return key_error(rc, "model", "max_len", "must be >= [data] max_sentence_len (%lld), got %lld",
                         (long long)r->data.max_sentence_len, (long long)r->model.max_len);
    /* the model's own constraints (nn), reported at the key's file:line */
    gf_cfg_issue is;
    int bad;
    if (ds) {
        gf_nli_cfg c;
        gf_recipe_nli_cfg(r, r->tokenizer.vocab_size, &c);
        bad = gf_nli_cfg_check(&c, &is);
    } else {
        gf_model_cfg c;
        gf_recipe_model_cfg(r, r->tokenizer.vocab_size, &c);
        bad = gf_model_cfg_check(&c, &is);
    }
    if (bad && find_key("model", is.key) >= 0) return key_error(rc, "model", is.key, "%s", is.why);
    if (bad) return gf_error_set(GF_E_INVALID, "%s: model %s: %s", rc->top, is.key, is.why);
    if (r->train.evals_per_epoch > 0 && r->train.eval_every > 0)
        return key_error(rc, "train", "evals_per_epoch", "set both it and eval_every (%lld); choose one",
                         (long long)r->train.eval_every);
    if (r->schedule.min_lr > r->optim.lr)
        return key_error(rc, "schedule", "min_lr", "must be <= [optim] lr (%g), got %g", r->optim.lr,
                         r->schedule.min_lr);
    return GF_OK;
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
    snprintf(rc->top, sizeof rc->top, "%s", path ? path : name);
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        snprintf(rc->origin[i], ORIGIN_MAX, "%s (default)", rc->top);
        if (k->def && k->type != GF_RK_BASE) {
            char msg[256];
            GF_ASSERT(set_value(r, k, k->def, msg, sizeof msg), "schema default of %s.%s: %s", k->section,
                      k->key, msg);
        }
    }
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

/* ---- writing ---- */

static void value_text(const gf_recipe *r, const gf_recipe_key *k, char *buf, size_t cap) {
    const void *field = (const char *)r + k->offset;
    switch (k->type) {
    case GF_RK_INT: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)field); return;
    case GF_RK_FLOAT: fmt_double(*(const double *)field, buf, cap); return;
    case GF_RK_BOOL: snprintf(buf, cap, "%s", *(const bool *)field ? "true" : "false"); return;
    case GF_RK_STRING: snprintf(buf, cap, "%s", (const char *)field); return;
    case GF_RK_ENUM: {
        int v = *(const int *)field;
        for (const gf_rk_enum_val *e = k->enums; e->name; e++)
            if (e->value == v) {
                snprintf(buf, cap, "%s", e->name);
                return;
            }
        GF_ASSERT(0, "%s.%s: enum value %d not in schema", k->section, k->key, v);
        return;
    }
    case GF_RK_INT_LIST: {
        const gf_int_list *l = field;
        size_t w = 0;
        buf[0] = 0;
        for (int64_t i = 0; i < l->n && w < cap; i++)
            w += (size_t)snprintf(buf + w, cap - w, "%s%lld", i ? "," : "", (long long)l->v[i]);
        return;
    }
    case GF_RK_BASE: buf[0] = 0; return;
    }
}

gf_status gf_recipe_resolved_text(const gf_recipe *r, char **out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return gf_error_set(GF_E_NOMEM, "recipe: open_memstream failed");
    fprintf(f, "# resolved gflow recipe: every key, defaults included (gflow %s)\n", gf_build_id());
    const char *cur = "";
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        if (k->type == GF_RK_BASE) continue;
        if (strcmp(cur, k->section) != 0) {
            fprintf(f, "%s[%s]\n", i ? "\n" : "", k->section);
            cur = k->section;
        }
        char v[GF_RECIPE_STR * 2];
        value_text(r, k, v, sizeof v);
        fprintf(f, v[0] ? "%s = %s\n" : "%s =%s\n", k->key, v);
    }
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return gf_error_set(GF_E_NOMEM, "recipe: writing resolved text failed");
    }
    *out = buf;
    return GF_OK;
}

int gf_recipe_equal(const gf_recipe *a, const gf_recipe *b) {
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        const void *x = (const char *)a + k->offset, *y = (const char *)b + k->offset;
        int eq = 1;
        switch (k->type) {
        case GF_RK_INT: eq = *(const int64_t *)x == *(const int64_t *)y; break;
        case GF_RK_FLOAT: eq = *(const double *)x == *(const double *)y; break;
        case GF_RK_BOOL: eq = *(const bool *)x == *(const bool *)y; break;
        case GF_RK_STRING: eq = strcmp(x, y) == 0; break;
        case GF_RK_ENUM: eq = *(const int *)x == *(const int *)y; break;
        case GF_RK_INT_LIST: {
            const gf_int_list *p = x, *q = y;
            eq = p->n == q->n && memcmp(p->v, q->v, (size_t)p->n * sizeof p->v[0]) == 0;
            break;
        }
        case GF_RK_BASE: break;
        }
        if (!eq) return 0;
    }
    return 1;
}

static const char *type_name(gf_rk_type t) {
    switch (t) {
    case GF_RK_INT: return "int";
    case GF_RK_FLOAT: return "float";
    case GF_RK_BOOL: return "bool";
    case GF_RK_STRING: return "string";
    case GF_RK_ENUM: return "enum";
    case GF_RK_INT_LIST: return "int list";
    case GF_RK_BASE: return "path";
    }
    return "?";
}

void gf_recipe_write_keys_md(FILE *f) {
    fputs("# Recipe keys\n\n"
          "<!-- Generated by gf_recipe_write_keys_md() from the schema in src/recipe/schema.c; do not edit.\n"
          "     The unit test recipe_keys_doc_up_to_date fails when this file is stale and writes the\n"
          "     fresh text next to its scratch files. -->\n\n"
          "A recipe is an INI file: `[section]` headers and `key = value` lines. Comments start with `#`\n"
          "or `;` at the beginning of a line, or after whitespace anywhere in a line. CRLF line ends\n"
          "are accepted. Unknown sections or keys, a key given twice in one file, and a value of the\n"
          "wrong type or out of range are errors that name the file, line and key.\n\n"
          "Order of application: schema defaults, then `[run] base` (another recipe, applied\n"
          "recursively; cycles are errors), then the file's own keys, then each\n"
          "`--set section.key=value` on the command line (later ones win). Then required keys are\n"
          "checked, derived defaults are filled in (split files per dataset, `max_len`,\n"
          "`classifier_hidden`, `[eval] batch_size`) and cross-key rules are checked:\n"
          "`r <= d_model` (grassmann), `d_model % heads == 0` (transformer), `offset_schedule` has\n"
          "`n_layers` entries when set, `max_len >= seq_len`, `min_lr <= lr`, not both `eval_every` and `evals_per_epoch`.\n\n"
          "The resolved recipe (every key, `base` omitted) is printed at training start and stored\n"
          "in checkpoints. Bools accept true/false, 1/0, yes/no, on/off. Strings may not contain\n"
          "`#`, `;` or control characters. Int lists are comma-separated (`1,2,4`), empty for none.\n",
          f);
    for (int s = 0; gf_recipe_sections[s]; s++) {
        fprintf(f, "\n## [%s]\n\n%s\n\n", gf_recipe_sections[s], gf_recipe_section_docs[s]);
        fputs("| key | type | default | allowed | description |\n|---|---|---|---|---|\n", f);
        for (int i = 0; i < gf_recipe_n_keys; i++) {
            const gf_recipe_key *k = &gf_recipe_schema[i];
            if (strcmp(k->section, gf_recipe_sections[s]) != 0) continue;
            char def[GF_RECIPE_STR + 8], allowed[256] = "", b[40];
            if (!k->def)
                snprintf(def, sizeof def, "**required**");
            else if (!k->def[0])
                snprintf(def, sizeof def, "(empty)");
            else
                snprintf(def, sizeof def, "`%s`", k->def);
            size_t w = 0;
            if (k->type == GF_RK_ENUM)
                for (const gf_rk_enum_val *e = k->enums; e->name; e++)
                    w += (size_t)snprintf(allowed + w, sizeof allowed - w, "%s`%s`", e == k->enums ? "" : " \\| ",
                                          e->name);
            const char *each = k->type == GF_RK_INT_LIST ? "each " : "";
            if (k->flags & GF_RK_MIN)
                w += (size_t)snprintf(allowed + w, sizeof allowed - w, "%s%s %s", each,
                                      (k->flags & GF_RK_MIN_EXCL) ? ">" : ">=", fmt_double(k->lo, b, sizeof b));
            if (k->flags & GF_RK_MAX)
                w += (size_t)snprintf(allowed + w, sizeof allowed - w, "%s%s %s", (k->flags & GF_RK_MIN) ? ", " : each,
                                      (k->flags & GF_RK_MAX_EXCL) ? "<" : "<=", fmt_double(k->hi, b, sizeof b));
            if (k->flags & GF_RK_NONEMPTY)
                snprintf(allowed + w, sizeof allowed - w, "%snon-empty", w ? ", " : "");
            fprintf(f, "| `%s` | %s | %s | %s | %s |\n", k->key, type_name(k->type), def, allowed, k->doc);
        }
    }
}

const char *gf_recipe_data_dir(const gf_recipe *r) {
    if (r->data.dir[0]) return r->data.dir;
    const char *env = getenv("GFLOW_DATA_MIRROR");
    if (env && *env) return env;
    return "datasets/data";
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
