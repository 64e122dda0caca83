/* ablate.c — ablation studies: parse the ablation file (inih), validate every variant's
 * recipe, run the variants that are not finished (resuming interrupted ones), and write the
 * study's summary (tsv + markdown) and validation curves. See gflow/ablate.h for the format. */
#include "gflow/ablate.h"
#include "gflow/checkpoint.h"
#include "gflow/fs.h"
#include "gflow/train.h"
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- parsing ---- */

enum { SEC_NONE, SEC_ABLATION, SEC_VARIANT };

typedef struct parse_ctx {
    const char *path;
    FILE *f;
    gf_ablation *a;
    int lineno;
    char *linebuf;
    size_t linecap;
    int section;          /* SEC_* of the current header */
    int abl_line;         /* line of [ablation] (0: not seen) */
    int key_line[4];      /* name, base, out_dir, seeds: line where set (duplicates) */
    int seeds_line;
    gf_status err_code;
    int err_line;
    char err[1024];
} parse_ctx;

static const char *abl_keys[4] = {"name", "base", "out_dir", "seeds"};

__attribute__((format(printf, 3, 4))) static void perr(parse_ctx *pc, gf_status code, const char *fmt, ...) {
    if (pc->err_line) return; /* keep the first */
    pc->err_line = pc->lineno ? pc->lineno : -1;
    pc->err_code = code;
    int k = snprintf(pc->err, sizeof pc->err, "%s:%d: ", pc->path, pc->lineno);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pc->err + k, sizeof pc->err - (size_t)k, fmt, ap);
    va_end(ap);
}

static int is_ws(char c) { return c == ' ' || c == '\t'; }

static char *trim(char *s) {
    while (is_ws(*s)) s++;
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1])) s[--n] = 0;
    return s;
}

static int valid_name(const char *s) {
    if (!*s) return 0;
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
    char *name = trim(s + 1);
    gf_ablation *a = pc->a;
    if (!strcmp(name, "ablation")) {
        if (pc->abl_line) {
            perr(pc, GF_E_PARSE, "duplicate [ablation] section (first on line %d)", pc->abl_line);
            return;
        }
        pc->abl_line = pc->lineno;
        pc->section = SEC_ABLATION;
        return;
    }
    if (!strncmp(name, "variant", 7) && is_ws(name[7])) {
        char *vn = trim(name + 7);
        if (!valid_name(vn) || strlen(vn) >= GF_ABLATE_NAME) {
            perr(pc, GF_E_PARSE, "[variant %s]: bad variant name (use [A-Za-z0-9._-], at most %d characters)", vn,
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
        if (!add_variant(a, vn, pc->lineno)) { perr(pc, GF_E_NOMEM, "out of memory"); return; }
        pc->section = SEC_VARIANT;
        return;
    }
    perr(pc, GF_E_PARSE, "unknown section [%s] (expected [ablation] or [variant NAME])", name);
}

/* inih reader: strips CR/LF, a BOM, indentation (no continuation lines) and inline comments
 * ('#' or ';' after whitespace), and handles section headers itself (inih reports nothing for an
 * empty section, and an empty [variant] is legal). */
static char *reader(char *str, int num, void *stream) {
    parse_ctx *pc = stream;
    ssize_t got = getline(&pc->linebuf, &pc->linecap, pc->f);
    if (got < 0) return NULL;
    pc->lineno++;
    char *s = pc->linebuf;
    s[strcspn(s, "\r\n")] = 0;
    if (pc->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
        s += 3;
    while (is_ws(*s)) s++;
    for (char *c = s; *c; c++)
        if ((*c == '#' || *c == ';') && (c == s || is_ws(c[-1]))) {
            *c = 0;
            break;
        }
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1])) s[--n] = 0;
    if (n + 2 > (size_t)num) {
        perr(pc, GF_E_PARSE, "line too long (%zu bytes, max %d)", n, num - 2);
        snprintf(str, (size_t)num, "\n");
        return str;
    }
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

static void dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) { snprintf(out, cap, "."); return; }
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1;
    if (n >= cap) n = cap - 1;
    memcpy(out, path, n);
    out[n] = 0;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    (void)section; /* tracked by the reader */
    parse_ctx *pc = user;
    gf_ablation *a = pc->a;
    if (pc->err_line) return 1;
    if (pc->section == SEC_NONE) {
        perr(pc, GF_E_PARSE, "key '%s' before any [section]", name);
        return 1;
    }
    if (pc->section == SEC_ABLATION) {
        int k = -1;
        for (int i = 0; i < 4; i++) if (!strcmp(name, abl_keys[i])) k = i;
        if (k < 0) {
            perr(pc, GF_E_PARSE, "[ablation] %s: unknown key (known: name, base, out_dir, seeds)", name);
            return 1;
        }
        if (pc->key_line[k]) {
            perr(pc, GF_E_PARSE, "[ablation] %s: duplicate key (first set on line %d)", name, pc->key_line[k]);
            return 1;
        }
        pc->key_line[k] = pc->lineno;
        if (!*value) { perr(pc, GF_E_PARSE, "[ablation] %s: empty value", name); return 1; }
        if (k == 0) {
            if (!valid_name(value) || strlen(value) >= sizeof a->name)
                perr(pc, GF_E_PARSE, "[ablation] name: '%s' is not a valid name ([A-Za-z0-9._-]+, at most %zu characters)",
                     value, sizeof a->name - 1);
            else snprintf(a->name, sizeof a->name, "%s", value);
        } else if (k == 1) {
            a->base_line = pc->lineno;
            char dir[1024];
            dir_of(pc->path, dir, sizeof dir);
            int w = value[0] == '/' ? snprintf(a->base, sizeof a->base, "%s", value)
                                    : snprintf(a->base, sizeof a->base, "%s/%s", dir, value);
            if (w >= (int)sizeof a->base) perr(pc, GF_E_PARSE, "[ablation] base: path too long");
        } else if (k == 2) {
            if (strlen(value) >= sizeof a->out_dir - 2 * GF_ABLATE_NAME - 16)
                perr(pc, GF_E_PARSE, "[ablation] out_dir: path too long");
            else snprintf(a->out_dir, sizeof a->out_dir, "%s", value);
        } else {
            pc->seeds_line = pc->lineno;
            parse_seeds(pc, value);
        }
        return 1;
    }
    /* [variant NAME]: section.key = value */
    gf_ablate_variant *v = &a->variants[a->n_variants - 1];
    const char *dot = strchr(name, '.');
    if (!dot || dot == name || !dot[1]) {
        perr(pc, GF_E_PARSE, "[variant %s] %s: expected section.key = value (e.g. model.r = 16)", v->name, name);
        return 1;
    }
    if (!strcmp(name, "run.name") || !strcmp(name, "run.out_dir") || !strcmp(name, "run.base")) {
        perr(pc, GF_E_PARSE, "[variant %s] %s: set by gflow ablate (run directories are <out_dir>/<name>/<variant>)",
             v->name, name);
        return 1;
    }
    size_t nl = strlen(name);
    for (int64_t i = 0; i < v->n_sets; i++)
        if (!strncmp(v->sets[i], name, nl) && v->sets[i][nl] == '=') {
            perr(pc, GF_E_PARSE, "[variant %s] %s: duplicate key (first set on line %d)", v->name, name, v->set_lines[i]);
            return 1;
        }
    char **s = realloc(v->sets, (size_t)(v->n_sets + 1) * sizeof *s);
    if (s) v->sets = s;
    int *l = realloc(v->set_lines, (size_t)(v->n_sets + 1) * sizeof *l);
    if (l) v->set_lines = l;
    size_t len = nl + strlen(value) + 2;
    char *kv = s && l ? malloc(len) : NULL;
    if (!kv) { perr(pc, GF_E_NOMEM, "out of memory"); return 1; }
    snprintf(kv, len, "%s=%s", name, value);
    v->sets[v->n_sets] = kv;
    v->set_lines[v->n_sets++] = pc->lineno;
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

static gf_status parse_file(const char *path, gf_ablation *a) {
    parse_ctx pc = {.path = path, .a = a};
    pc.f = fopen(path, "rb");
    if (!pc.f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: cannot open ablation file: %s", path,
                            strerror(errno));
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->out_dir, sizeof a->out_dir, "checkpoints/ablations");
    if (!add_variant(a, "base", 0)) { fclose(pc.f); return gf_error_set(GF_E_NOMEM, "out of memory"); }
    int ret = ini_parse_stream(reader, &pc, handler, &pc);
    int ioerr = ferror(pc.f);
    fclose(pc.f);
    free(pc.linebuf);
    if (ret == -2) return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    if (pc.err_line && (ret <= 0 || pc.err_line <= ret)) return gf_error_set(pc.err_code, "%s", pc.err);
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

/* ---- validation ---- */

/* Load one variant x seed's recipe; on failure blame the first override that breaks it. */
static gf_status load_run_recipe(const gf_ablation *a, int64_t vi, int64_t seed_i, gf_ablate_run *run) {
    const gf_ablate_variant *v = &a->variants[vi];
    const char **sets = calloc((size_t)v->n_sets + 3, sizeof *sets);
    if (!sets) return gf_error_set(GF_E_NOMEM, "out of memory");
    char runname[GF_ABLATE_NAME + 32], s_dir[1200], s_name[GF_ABLATE_NAME + 48], s_seed[48];
    if (a->n_seeds) snprintf(runname, sizeof runname, "%s-seed%lld", v->name, (long long)a->seeds[seed_i]);
    else snprintf(runname, sizeof runname, "%s", v->name);
    snprintf(s_dir, sizeof s_dir, "run.out_dir=%s", a->study_dir);
    snprintf(s_name, sizeof s_name, "run.name=%s", runname);
    snprintf(s_seed, sizeof s_seed, "run.seed=%lld", a->n_seeds ? (long long)a->seeds[seed_i] : 0LL);
    int64_t n = 0;
    for (int64_t j = 0; j < v->n_sets; j++) sets[n++] = v->sets[j];
    sets[n++] = s_dir;
    sets[n++] = s_name;
    if (a->n_seeds) sets[n++] = s_seed;
    gf_status st = gf_recipe_load(a->base, sets, n, &run->recipe);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", gf_last_error());
        gf_recipe tmp;
        int64_t bad = -1;
        for (int64_t k = 0; k <= v->n_sets && bad < 0; k++)
            if (gf_recipe_load(a->base, sets, k, &tmp) != GF_OK) {
                bad = k;
                /* the recipe's own message, without its "--set section.key=value: " prefix */
                const char *e = gf_last_error();
                size_t pl = k > 0 ? strlen(v->sets[k - 1]) : 0;
                if (k > 0 && !strncmp(e, "--set ", 6) && !strncmp(e + 6, v->sets[k - 1], pl) && e[6 + pl] == ':')
                    e += 6 + pl + 1 + (e[7 + pl] == ' ');
                snprintf(msg, sizeof msg, "%s", e);
            }
        if (bad == 0) /* the base recipe itself */
            st = gf_error_set(st, "%s:%d: [ablation] base: %s", a->path, a->base_line, msg);
        else if (bad > 0)
            st = gf_error_set(st, "%s:%d: [variant %s] %s: %s", a->path, v->set_lines[bad - 1], v->name,
                              v->sets[bad - 1], msg);
        else
            st = gf_error_set(st, "%s:%d: [variant %s]: %s", a->path, v->line, v->name, msg);
    }
    free(sets);
    if (st) return st;
    run->variant = vi;
    run->seed = run->recipe.run.seed;
    int w = snprintf(run->run_dir, sizeof run->run_dir, "%s/%s", a->study_dir, runname);
    if (w >= (int)sizeof run->run_dir) return gf_error_set(GF_E_INVALID, "%s: run directory path too long", a->path);
    return GF_OK;
}

static int exists(const char *dir, const char *file) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return access(p, F_OK) == 0;
}

/* The first line where two resolved recipes differ (run.threads ignored: it changes no result). */
static gf_status same_recipe(const gf_recipe *want, const gf_recipe *have_in, const char *where, const char *variant_at) {
    gf_recipe have = *have_in;
    have.run.threads = want->run.threads;
    if (gf_recipe_equal(want, &have)) return GF_OK;
    char *ta = NULL, *tb = NULL;
    gf_status st = gf_recipe_resolved_text(want, &ta);
    if (!st) st = gf_recipe_resolved_text(&have, &tb);
    char diff[400] = "?";
    if (!st) {
        const char *p = ta, *q = tb, *sec = "";
        char secbuf[64] = "";
        while (*p && *q) {
            size_t la = strcspn(p, "\n"), lb = strcspn(q, "\n");
            if (*p == '[') { snprintf(secbuf, sizeof secbuf, "%.*s", (int)(la < 60 ? la : 60), p); sec = secbuf; }
            if (la != lb || memcmp(p, q, la)) {
                snprintf(diff, sizeof diff, "%s %.*s (ablation) vs %.*s (run)", sec, (int)(la < 150 ? la : 150), p,
                         (int)(lb < 150 ? lb : 150), q);
                break;
            }
            p += la + (p[la] != 0);
            q += lb + (q[lb] != 0);
        }
    }
    free(ta);
    free(tb);
    if (st) return st;
    return gf_error_set(GF_E_INVALID,
                        "%s: %s was run with a different recipe (%s); remove that run directory to rerun it, or "
                        "restore the override",
                        variant_at, where, diff);
}

static gf_status run_state(const gf_ablation *a, gf_ablate_run *run) {
    const gf_ablate_variant *v = &a->variants[run->variant];
    char at[1200];
    if (v->line) snprintf(at, sizeof at, "%s:%d: [variant %s]", a->path, v->line, v->name);
    else snprintf(at, sizeof at, "%s: variant base", a->path);
    run->step_done = 0;
    if (exists(run->run_dir, "summary.tsv")) {
        run->state = GF_ABLATE_DONE;
        char p[1200];
        snprintf(p, sizeof p, "%s/recipe.ini", run->run_dir);
        gf_recipe have;
        if (access(p, F_OK) == 0) {
            GF_TRY(gf_recipe_load(p, NULL, 0, &have));
            GF_TRY(same_recipe(&run->recipe, &have, run->run_dir, at));
        }
        return GF_OK;
    }
    if (exists(run->run_dir, "last.ckpt")) {
        run->state = GF_ABLATE_RESUME;
        char p[1200];
        snprintf(p, sizeof p, "%s/last.ckpt", run->run_dir);
        gf_ckpt_meta m;
        gf_recipe have;
        GF_TRY(gf_ckpt_peek_recipe(p, &have, &m));
        run->step_done = m.step;
        gf_ckpt_meta_free(&m);
        return same_recipe(&run->recipe, &have, run->run_dir, at);
    }
    run->state = exists(run->run_dir, "metrics.tsv") ? GF_ABLATE_RESTART : GF_ABLATE_START;
    return GF_OK;
}

gf_status gf_ablation_refresh(gf_ablation *a) {
    for (int64_t i = 0; i < a->n_runs; i++) GF_TRY(run_state(a, &a->runs[i]));
    return GF_OK;
}

gf_status gf_ablation_load(const char *path, gf_ablation *a) {
    memset(a, 0, sizeof *a);
    gf_status st = parse_file(path, a);
    int64_t per = a->n_seeds ? a->n_seeds : 1;
    if (!st) {
        a->n_runs = a->n_variants * per;
        a->runs = calloc((size_t)a->n_runs, sizeof *a->runs);
        if (!a->runs) st = gf_error_set(GF_E_NOMEM, "out of memory");
    }
    /* every recipe first, so a typo in the last variant fails before hours of training */
    for (int64_t i = 0; !st && i < a->n_runs; i++) st = load_run_recipe(a, i / per, i % per, &a->runs[i]);
    if (!st) st = gf_ablation_refresh(a);
    if (st) gf_ablation_free(a);
    return st;
}

/* ---- running ---- */

static int wanted(const gf_ablate_opts *o, const char *name) {
    if (!o->n_only) return 1;
    for (int64_t i = 0; i < o->n_only; i++)
        if (!strcmp(o->only[i], name)) return 1;
    return 0;
}

gf_status gf_ablation_run(gf_ablation *a, const gf_ablate_opts *o, int *interrupted) {
    *interrupted = 0;
    for (int64_t i = 0; i < o->n_only; i++)
        if (gf_ablation_find(a, o->only[i]) < 0)
            return gf_error_set(GF_E_INVALID, "%s: no variant named '%s'", a->path, o->only[i]);
    GF_TRY(gf_ablation_refresh(a));
    for (int64_t i = 0; i < a->n_runs; i++) {
        gf_ablate_run *run = &a->runs[i];
        const char *vname = a->variants[run->variant].name;
        if (!wanted(o, vname)) continue;
        if (run->state == GF_ABLATE_DONE) {
            if (!o->quiet) fprintf(stderr, "ablate: %s: finished, skipped\n", run->run_dir);
            continue;
        }
        if (o->stop_flag && *o->stop_flag) { *interrupted = 1; return GF_OK; }
        gf_train_opts to = {.quiet = o->quiet, .stop_flag = o->stop_flag, .stop_after = o->stop_after};
        if (run->state == GF_ABLATE_RESUME) to.resume_dir = run->run_dir;
        if (run->state == GF_ABLATE_RESTART) to.overwrite = 1;
        if (!o->quiet)
            fprintf(stderr, "ablate: %s: %s\n", run->run_dir,
                    run->state == GF_ABLATE_RESUME ? "resuming" : run->state == GF_ABLATE_RESTART ? "restarting (no checkpoint)" : "starting");
        int intr = 0;
        gf_status st = gf_train_run(&run->recipe, &to, &intr);
        if (st) return gf_error_wrap(st, "%s: ", run->run_dir);
        GF_TRY(run_state(a, run));
        if (intr) { *interrupted = 1; return GF_OK; }
    }
    return GF_OK;
}

/* ---- report ---- */

typedef struct kv { char key[64]; char val[128]; } kv;

static int read_summary(const char *dir, kv *out, int cap) {
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        char *v = tab + 1;
        v[strcspn(v, "\r\n")] = 0;
        snprintf(out[n].key, sizeof out[n].key, "%.63s", line);
        snprintf(out[n].val, sizeof out[n].val, "%.127s", v);
        n++;
    }
    fclose(f);
    return n;
}

static double get_num(const kv *k, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].key, key)) {
            char *end;
            double v = strtod(k[i].val, &end);
            return end == k[i].val ? NAN : v;
        }
    return NAN;
}

/* mean and sample std of the finite values; returns their count */
static int stats(const double *x, int n, double *mean, double *sd) {
    int m = 0;
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) if (isfinite(x[i])) { s += x[i]; m++; }
    *mean = m ? s / m : NAN;
    for (int i = 0; i < n; i++) if (isfinite(x[i])) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = m > 1 ? sqrt(ss / (m - 1)) : NAN;
    return m;
}

typedef struct row {
    int done, n;           /* finished seeds of n */
    int64_t resumable_step;/* an interrupted seed's step (-1: none) */
    double params, val, val_sd, test, test_sd, word, tok, delta;
    char epochs[256], steps[256];
} row;

static void fill_row(const gf_ablation *a, int64_t vi, row *r) {
    int64_t per = a->n_seeds ? a->n_seeds : 1;
    double val[GF_RECIPE_LIST_MAX], test[GF_RECIPE_LIST_MAX], word[GF_RECIPE_LIST_MAX], tok[GF_RECIPE_LIST_MAX];
    memset(r, 0, sizeof *r);
    r->n = (int)per;
    r->params = NAN;
    r->resumable_step = -1;
    int eo = 0, so = 0;
    for (int64_t s = 0; s < per; s++) {
        const gf_ablate_run *run = &a->runs[vi * per + s];
        kv k[64];
        int n = run->state == GF_ABLATE_DONE ? read_summary(run->run_dir, k, 64) : 0;
        val[s] = test[s] = word[s] = tok[s] = NAN;
        if (!n) {
            if (run->state == GF_ABLATE_RESUME) r->resumable_step = run->step_done;
            continue;
        }
        r->done++;
        val[s] = get_num(k, n, "best_val_ppl");
        test[s] = get_num(k, n, "test_ppl");
        word[s] = get_num(k, n, "test_ppl_word");
        tok[s] = get_num(k, n, "tokens_per_s");
        if (isnan(r->params)) r->params = get_num(k, n, "params");
        double be = get_num(k, n, "best_epoch"), bs = get_num(k, n, "best_step");
        if (eo < 200) eo += snprintf(r->epochs + eo, sizeof r->epochs - (size_t)eo, "%s%.0f", eo ? "," : "", be);
        if (so < 200) so += snprintf(r->steps + so, sizeof r->steps - (size_t)so, "%s%.0f", so ? "," : "", bs);
    }
    double sd;
    stats(val, (int)per, &r->val, &r->val_sd);
    stats(test, (int)per, &r->test, &r->test_sd);
    stats(word, (int)per, &r->word, &sd);
    stats(tok, (int)per, &r->tok, &sd);
    r->delta = NAN;
}

static void status_text(const row *r, char *buf, size_t cap) {
    if (r->done == r->n) snprintf(buf, cap, "done");
    else if (r->done) snprintf(buf, cap, "%d/%d seeds", r->done, r->n);
    else if (r->resumable_step >= 0) snprintf(buf, cap, "interrupted (step %lld)", (long long)r->resumable_step);
    else snprintf(buf, cap, "not run");
}

static void num(char *buf, size_t cap, double v, const char *fmt) {
    if (!isfinite(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, fmt, v);
}

/* validation curve of one run: the last valid ppl at each step */
static int read_curve(const char *dir, int64_t **steps, double **ppl) {
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.tsv", dir);
    FILE *f = fopen(path, "r");
    *steps = NULL;
    *ppl = NULL;
    if (!f) return 0;
    int n = 0, cap = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        long long step, epoch;
        char split[16], loss[32], p[32];
        if (sscanf(line, "%lld\t%lld\t%15s\t%31s\t%31s", &step, &epoch, split, loss, p) != 5) continue;
        if (strcmp(split, "valid")) continue;
        double v = strtod(p, NULL);
        if (n && (*steps)[n - 1] == step) { (*ppl)[n - 1] = v; continue; }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *s2 = realloc(*steps, (size_t)cap * sizeof *s2);
            if (s2) *steps = s2;
            double *p2 = realloc(*ppl, (size_t)cap * sizeof *p2);
            if (p2) *ppl = p2;
            if (!s2 || !p2) break;
        }
        (*steps)[n] = step;
        (*ppl)[n++] = v;
    }
    fclose(f);
    return n;
}

/* curves.tsv: one gnuplot data block per variant that has validation points (mean over seeds
 * at the steps every seed with data reached); returns how many blocks, names in order */
static gf_status write_curves(const gf_ablation *a, int *n_blocks, int64_t *block_variant) {
    char path[1200];
    snprintf(path, sizeof path, "%s/curves.tsv", a->study_dir);
    FILE *f = fopen(path, "w");
    if (!f) return gf_error_set(GF_E_IO, "%s: cannot write: %s", path, strerror(errno));
    int64_t per = a->n_seeds ? a->n_seeds : 1;
    *n_blocks = 0;
    for (int64_t vi = 0; vi < a->n_variants; vi++) {
        int64_t *st[GF_RECIPE_LIST_MAX];
        double *pp[GF_RECIPE_LIST_MAX];
        int cnt[GF_RECIPE_LIST_MAX], with = 0, first = -1;
        for (int64_t s = 0; s < per; s++) {
            cnt[s] = read_curve(a->runs[vi * per + s].run_dir, &st[s], &pp[s]);
            if (cnt[s]) { with++; if (first < 0) first = (int)s; }
        }
        if (with) {
            fprintf(f, "%s# variant %s\n# step\tval_ppl\n", *n_blocks ? "\n\n" : "", a->variants[vi].name);
            for (int i = 0; i < cnt[first]; i++) {
                double sum = 0;
                int m = 0;
                for (int64_t s = 0; s < per; s++)
                    for (int j = 0; j < cnt[s]; j++)
                        if (st[s][j] == st[first][i]) { sum += pp[s][j]; m++; break; }
                if (m == with) fprintf(f, "%lld\t%.4f\n", (long long)st[first][i], sum / m);
            }
            block_variant[(*n_blocks)++] = vi;
        }
        for (int64_t s = 0; s < per; s++) { free(st[s]); free(pp[s]); }
    }
    if (fclose(f) != 0) return gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    return GF_OK;
}


gf_status gf_ablation_report(const gf_ablation *a, const char *command) {
    GF_TRY(gf_mkdir_p(a->study_dir));
    row *rows = calloc((size_t)a->n_variants, sizeof *rows);
    if (!rows) return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int64_t vi = 0; vi < a->n_variants; vi++) fill_row(a, vi, &rows[vi]);
    for (int64_t vi = 0; vi < a->n_variants; vi++)
        if (isfinite(rows[0].val) && isfinite(rows[vi].val)) rows[vi].delta = 100.0 * (rows[vi].val / rows[0].val - 1.0);
    char tpath[1200], mpath[1200];
    snprintf(tpath, sizeof tpath, "%s/summary.tsv", a->study_dir);
    snprintf(mpath, sizeof mpath, "%s/summary.md", a->study_dir);
    FILE *t = fopen(tpath, "w"), *m = fopen(mpath, "w");
    if (!t || !m) {
        if (t) fclose(t);
        if (m) fclose(m);
        free(rows);
        return gf_error_set(GF_E_IO, "%s: cannot write: %s", t ? mpath : tpath, strerror(errno));
    }
    int multi = a->n_seeds > 1;
    fprintf(t, "variant\tstatus\tseeds\tparams\tbest_val_ppl\tbest_val_ppl_std\tbest_epoch\tbest_step\ttest_ppl\t"
               "test_ppl_std\ttest_ppl_word\tdelta_vs_base_pct\ttokens_per_s\n");
    fprintf(m, "# Ablation `%s`\n\nBase recipe `%s`; runs in `%s/`", a->name, a->base, a->study_dir);
    if (a->n_seeds) {
        fprintf(m, "; seeds ");
        for (int64_t i = 0; i < a->n_seeds; i++) fprintf(m, "%s%lld", i ? "," : "", (long long)a->seeds[i]);
    }
    fprintf(m, ".\nBest validation perplexity%s; test perplexities of the best checkpoint; Δ is the change in best "
               "validation perplexity relative to base.\n\n",
            multi ? " is mean ± std over seeds" : "");
    fprintf(m, "| variant | overrides | params | best val PPL | best epoch / step | test PPL | test PPL/word | Δ vs base | tok/s |\n");
    fprintf(m, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int64_t vi = 0; vi < a->n_variants; vi++) {
        const row *r = &rows[vi];
        const gf_ablate_variant *v = &a->variants[vi];
        char status[64], params[32], val[32], vsd[32], test[32], tsd[32], word[32], delta[32], tok[32];
        status_text(r, status, sizeof status);
        num(params, sizeof params, r->params, "%.0f");
        num(val, sizeof val, r->val, "%.4f");
        num(vsd, sizeof vsd, r->val_sd, "%.4f");
        num(test, sizeof test, r->test, "%.4f");
        num(tsd, sizeof tsd, r->test_sd, "%.4f");
        num(word, sizeof word, r->word, "%.4f");
        num(delta, sizeof delta, r->delta, "%+.2f");
        num(tok, sizeof tok, r->tok, "%.0f");
        fprintf(t, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v->name, status, r->done, r->n, params, val,
                vsd, r->done ? r->epochs : "-", r->done ? r->steps : "-", test, tsd, word, delta, tok);
        /* markdown */
        char over[512] = "";
        int off = 0;
        for (int64_t j = 0; j < v->n_sets && off < (int)sizeof over - 80; j++)
            off += snprintf(over + off, sizeof over - (size_t)off, "%s`%s`", j ? ", " : "", v->sets[j]);
        if (!v->n_sets) snprintf(over, sizeof over, "—");
        fprintf(m, "| %s | %s | ", v->name, over);
        if (!r->done) {
            fprintf(m, "%s | %s | - | - | - | - | - |\n", params, status);
            continue;
        }
        char vcell[80], tcell[80], dcell[32];
        if (multi && isfinite(r->val_sd)) snprintf(vcell, sizeof vcell, "%.2f ± %.2f", r->val, r->val_sd);
        else snprintf(vcell, sizeof vcell, "%.2f", r->val);
        if (multi && isfinite(r->test_sd)) snprintf(tcell, sizeof tcell, "%.2f ± %.2f", r->test, r->test_sd);
        else num(tcell, sizeof tcell, r->test, "%.2f");
        if (r->done < r->n) {
            size_t l = strlen(vcell);
            snprintf(vcell + l, sizeof vcell - l, " (%d/%d seeds)", r->done, r->n);
        }
        if (vi == 0) snprintf(dcell, sizeof dcell, "—");
        else num(dcell, sizeof dcell, r->delta, "%+.1f%%");
        num(word, sizeof word, r->word, "%.2f");
        fprintf(m, "%s | %s | %s / %s | %s | %s | %s | %s |\n", params, vcell, r->epochs, r->steps, tcell, word, dcell, tok);
    }
    fprintf(m, "\n![validation perplexity vs step](curves.png)\n\nRegenerate this file with `%s`.\n", command);
    int bad = ferror(t) || ferror(m);
    bad |= fclose(t) != 0;
    bad |= fclose(m) != 0;
    free(rows);
    if (bad) return gf_error_set(GF_E_IO, "%s: write failed", a->study_dir);
    int nb;
    int64_t *bv = calloc((size_t)a->n_variants, sizeof *bv);
    if (!bv) return gf_error_set(GF_E_NOMEM, "out of memory");
    gf_status st = write_curves(a, &nb, bv);
    free(bv);
    return st;
}

gf_status gf_ablation_plot(const gf_ablation *a) {
    int nb;
    int64_t *bv = calloc((size_t)a->n_variants, sizeof *bv);
    if (!bv) return gf_error_set(GF_E_NOMEM, "out of memory");
    gf_status st = write_curves(a, &nb, bv);
    if (st || nb == 0) { free(bv); return st; }
    if (strchr(a->study_dir, '\'') || strchr(a->study_dir, '"')) {
        free(bv);
        return gf_error_set(GF_E_INVALID, "%s: cannot plot into a path with quotes", a->study_dir);
    }
    FILE *g = popen("gnuplot >/dev/null 2>&1", "w");
    if (!g) { free(bv); return gf_error_set(GF_E_EXTERNAL, "cannot run gnuplot: %s", strerror(errno)); }
    fprintf(g, "set terminal pngcairo size 960,600\nset output '%s/curves.png'\n", a->study_dir);
    fprintf(g, "set title 'ablation %s'\nset xlabel 'step'\nset ylabel 'validation perplexity'\nset logscale y\n"
               "set key outside right\nset datafile separator '\\t'\nplot ", a->name);
    for (int i = 0; i < nb; i++)
        fprintf(g, "%s'%s/curves.tsv' index %d using 1:2 with linespoints title '%s'", i ? ", " : "",
                a->study_dir, i, a->variants[bv[i]].name);
    fprintf(g, "\n");
    free(bv);
    if (pclose(g) != 0)
        return gf_error_set(GF_E_EXTERNAL, "gnuplot failed writing %s/curves.png (is gnuplot-nox installed?)", a->study_dir);
    return GF_OK;
}
