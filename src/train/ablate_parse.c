/* ablate_parse.c — the ablation file (format in gflow/ablate.h) through inih, with the recipe's
 * line rules (gflow/ini.h): [ablation] keys, [variant NAME] overrides, errors as file:line. */
#include "train/ablate_internal.h"
#include "gflow/fs.h"
#include "gflow/ini.h"
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SEC_NONE, SEC_ABLATION, SEC_VARIANT };

typedef struct parse_ctx {
    const char *path;
    gf_ablation *a;
    gf_ini_lines src;     /* the file, line by line */
    int section;          /* SEC_* of the current header */
    int abl_line;         /* line of [ablation] (0: not seen) */
    int key_line[4];      /* name, base, out_dir, seeds: line where set (duplicates) */
    int seeds_line;
    gf_first_error err;   /* the first fault met */
} parse_ctx;

static const char *abl_keys[4] = {"name", "base", "out_dir", "seeds"};

__attribute__((format(printf, 3, 4))) static void perr(parse_ctx *pc, gf_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gf_first_error_vset(&pc->err, pc->path, pc->src.lineno, code, fmt, ap);
    va_end(ap);
}

static int is_ws(char c) { return c == ' ' || c == '\t'; }

/* a name becomes a directory under out_dir: "." and ".." would not be one of its own */
static int valid_name(const char *s) {
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static gf_ablate_variant *add_variant(gf_ablation *a, const char *name, int line) {
    gf_ablate_variant *v = realloc(a->variants, (size_t)(a->n_variants + 1) * sizeof *v);
    if (!v) return NULL;
    a->variants = v;
    v = &a->variants[a->n_variants++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->line = line;
    return v;
}

/* A section header: [ablation] or [variant NAME]. */
static void header(parse_ctx *pc, char *s) {
    char *close = strchr(s, ']');
    if (!close) return; /* inih reports the syntax error */
    *close = 0;
    char *name = gf_ini_trim(s + 1);
    gf_ablation *a = pc->a;
    if (!strcmp(name, "ablation")) {
        if (pc->abl_line) {
            perr(pc, GF_E_PARSE, "duplicate [ablation] section (first on line %d)", pc->abl_line);
            return;
        }
        pc->abl_line = pc->src.lineno;
        pc->section = SEC_ABLATION;
        return;
    }
    if (!strncmp(name, "variant", 7) && is_ws(name[7])) {
        char *vn = gf_ini_trim(name + 7);
        if (!valid_name(vn) || strlen(vn) >= GF_ABLATE_NAME) {
            perr(pc, GF_E_PARSE, "[variant %s]: bad variant name (use [A-Za-z0-9._-], not . or .., at most %d characters)", vn,
                 GF_ABLATE_NAME - 1);
            return;
        }
        if (!strcmp(vn, "base")) {
            perr(pc, GF_E_PARSE, "[variant base]: \"base\" is the implicit variant without overrides; pick another name");
            return;
        }
        for (int64_t i = 1; i < a->n_variants; i++)
            if (!strcmp(a->variants[i].name, vn)) {
                perr(pc, GF_E_PARSE, "[variant %s]: duplicate variant name (first on line %d)", vn, a->variants[i].line);
                return;
            }
        if (!add_variant(a, vn, pc->src.lineno)) { perr(pc, GF_E_NOMEM, "out of memory"); return; }
        pc->section = SEC_VARIANT;
        return;
    }
    perr(pc, GF_E_PARSE, "unknown section [%s] (expected [ablation] or [variant NAME])", name);
}

/* inih reader: lines cleaned by gf_ini_next_line (the recipe's rules); section headers are
 * handled here (inih reports nothing for an empty section, and an empty [variant] is legal). */
static char *reader(char *str, int num, void *stream) {
    parse_ctx *pc = stream;
    char *s = gf_ini_reader_line(&pc->src, &pc->err, pc->path, num);
    if (!s) return NULL;
    if (s[0] == '[' && strchr(s, ']')) {
        header(pc, s);
        snprintf(str, (size_t)num, "\n"); /* consumed here */
        return str;
    }
    snprintf(str, (size_t)num, "%s\n", s);
    return str;
}

static gf_status parse_seeds(parse_ctx *pc, const char *value) {
    gf_ablation *a = pc->a;
    const char *p = value;
    a->n_seeds = 0;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        while (is_ws(*end)) end++;
        if (end == p || errno || v < 0 || (*end && *end != ',')) {
            perr(pc, GF_E_PARSE, "[ablation] seeds: expected a comma-separated list of integers >= 0, got '%s'", value);
            return GF_E_PARSE;
        }
        if (a->n_seeds == GF_RECIPE_LIST_MAX) {
            perr(pc, GF_E_PARSE, "[ablation] seeds: more than %d seeds", GF_RECIPE_LIST_MAX);
            return GF_E_PARSE;
        }
        for (int64_t i = 0; i < a->n_seeds; i++)
            if (a->seeds[i] == v) {
                perr(pc, GF_E_PARSE, "[ablation] seeds: seed %lld listed twice", v);
                return GF_E_PARSE;
            }
        a->seeds[a->n_seeds++] = v;
        p = *end ? end + 1 : end;
        while (is_ws(*p)) p++;
    }
    if (a->n_seeds == 0) perr(pc, GF_E_PARSE, "[ablation] seeds: empty list (leave the key out for one run per variant)");
    return GF_OK;
}

/* A key of [ablation]. */
static void ablation_key(parse_ctx *pc, const char *name, const char *value) {
    gf_ablation *a = pc->a;
    int k = -1;
    for (int i = 0; i < 4; i++) if (!strcmp(name, abl_keys[i])) k = i;
    if (k < 0) {
        perr(pc, GF_E_PARSE, "[ablation] %s: unknown key (known: name, base, out_dir, seeds)", name);
        return;
    }
    if (pc->key_line[k]) {
        perr(pc, GF_E_PARSE, "[ablation] %s: duplicate key (first set on line %d)", name, pc->key_line[k]);
        return;
    }
    pc->key_line[k] = pc->src.lineno;
    if (!*value) { perr(pc, GF_E_PARSE, "[ablation] %s: empty value", name); return; }
    if (k == 0) {
        if (!valid_name(value) || strlen(value) >= sizeof a->name)
            perr(pc, GF_E_PARSE, "[ablation] name: '%s' is not a valid name ([A-Za-z0-9._-]+, not . or .., at most %zu characters)",
                 value, sizeof a->name - 1);
        else snprintf(a->name, sizeof a->name, "%s", value);
    } else if (k == 1) {
        a->base_line = pc->src.lineno;
        char dir[1024];
        gf_path_dir(pc->path, dir, sizeof dir);
        int w = value[0] == '/' ? snprintf(a->base, sizeof a->base, "%s", value)
                                : snprintf(a->base, sizeof a->base, "%s/%s", dir, value);
        if (w >= (int)sizeof a->base) perr(pc, GF_E_PARSE, "[ablation] base: path too long");
    } else if (k == 2) {
        if (strlen(value) >= sizeof a->out_dir - 2 * GF_ABLATE_NAME - 16)
            perr(pc, GF_E_PARSE, "[ablation] out_dir: path too long");
        else snprintf(a->out_dir, sizeof a->out_dir, "%s", value);
    } else {
        pc->seeds_line = pc->src.lineno;
        parse_seeds(pc, value);
    }
}

/* A key of [variant NAME]: section.key = value, an override of the base recipe. */
static void variant_key(parse_ctx *pc, const char *name, const char *value) {
    gf_ablation *a = pc->a;
    gf_ablate_variant *v = &a->variants[a->n_variants - 1];
    const char *dot = strchr(name, '.');
    if (!dot || dot == name || !dot[1]) {
        perr(pc, GF_E_PARSE, "[variant %s] %s: expected section.key = value (e.g. model.r = 16)", v->name, name);
        return;
    }
    if (!strcmp(name, "run.name") || !strcmp(name, "run.out_dir") || !strcmp(name, "run.base")) {
        perr(pc, GF_E_PARSE, "[variant %s] %s: set by gflow ablate (run directories are <out_dir>/<name>/<variant>)",
             v->name, name);
        return;
    }
    size_t nl = strlen(name);
    for (int64_t i = 0; i < v->n_sets; i++)
        if (!strncmp(v->sets[i], name, nl) && v->sets[i][nl] == '=') {
            perr(pc, GF_E_PARSE, "[variant %s] %s: duplicate key (first set on line %d)", v->name, name, v->set_lines[i]);
            return;
        }
    char **s = realloc(v->sets, (size_t)(v->n_sets + 1) * sizeof *s);
    if (s) v->sets = s;
    int *l = realloc(v->set_lines, (size_t)(v->n_sets + 1) * sizeof *l);
    if (l) v->set_lines = l;
    size_t len = nl + strlen(value) + 2;
    char *kv = s && l ? malloc(len) : NULL;
    if (!kv) { perr(pc, GF_E_NOMEM, "out of memory"); return; }
    snprintf(kv, len, "%s=%s", name, value);
    v->sets[v->n_sets] = kv;
    v->set_lines[v->n_sets++] = pc->src.lineno;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    (void)section; /* tracked by the reader */
    parse_ctx *pc = user;
    if (pc->err.line) return 1;
    if (pc->section == SEC_NONE) perr(pc, GF_E_PARSE, "key '%s' before any [section]", name);
    else if (pc->section == SEC_ABLATION) ablation_key(pc, name, value);
    else variant_key(pc, name, value);
    return 1;
}

void gf_ablation_free(gf_ablation *a) {
    for (int64_t i = 0; i < a->n_variants; i++) {
        for (int64_t j = 0; j < a->variants[i].n_sets; j++) free(a->variants[i].sets[j]);
        free(a->variants[i].sets);
        free(a->variants[i].set_lines);
    }
    free(a->variants);
    free(a->runs);
    memset(a, 0, sizeof *a);
}

int64_t gf_ablation_find(const gf_ablation *a, const char *name) {
    for (int64_t i = 0; i < a->n_variants; i++)
        if (!strcmp(a->variants[i].name, name)) return i;
    return -1;
}

gf_status gf_ablate_parse_file(const char *path, gf_ablation *a) {
    parse_ctx pc = {.path = path, .a = a};
    pc.src.f = fopen(path, "rb");
    if (!pc.src.f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: cannot open ablation file: %s", path,
                            strerror(errno));
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->out_dir, sizeof a->out_dir, "checkpoints/ablations");
    if (!add_variant(a, "base", 0)) { fclose(pc.src.f); return gf_error_set(GF_E_NOMEM, "out of memory"); }
    int ret = ini_parse_stream(reader, &pc, handler, &pc);
    int ioerr = ferror(pc.src.f);
    fclose(pc.src.f);
    gf_ini_lines_free(&pc.src);
    if (ret == -2) return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    if (pc.err.line && (ret <= 0 || pc.err.line <= ret)) return gf_error_set(pc.err.code, "%s", pc.err.msg);
    if (ret > 0)
        return gf_error_set(GF_E_PARSE, "%s:%d: syntax error (expected '[section]' or 'key = value')", path, ret);
    if (ioerr) return gf_error_set(GF_E_IO, "%s: read error", path);
    if (!pc.abl_line) return gf_error_set(GF_E_PARSE, "%s: no [ablation] section", path);
    if (!pc.key_line[0]) return gf_error_set(GF_E_PARSE, "%s:%d: [ablation] name: required", path, pc.abl_line);
    if (!pc.key_line[1]) return gf_error_set(GF_E_PARSE, "%s:%d: [ablation] base: required (the recipe every variant starts from)", path, pc.abl_line);
    for (int64_t i = 1; i < a->n_variants && a->n_seeds; i++)
        for (int64_t j = 0; j < a->variants[i].n_sets; j++)
            if (!strncmp(a->variants[i].sets[j], "run.seed=", 9))
                return gf_error_set(GF_E_PARSE, "%s:%d: [variant %s] run.seed: set by the [ablation] seeds list (line %d)",
                                    path, a->variants[i].set_lines[j], a->variants[i].name, pc.seeds_line);
    snprintf(a->study_dir, sizeof a->study_dir, "%s/%s", a->out_dir, a->name);
    return GF_OK;
}
