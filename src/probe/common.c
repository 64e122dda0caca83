/* common.c — opening a run for probing, output paths, gnuplot, prompt-pair files. */
#include "probe_internal.h"
#include "gflow/data.h"
#include "gflow/ini.h"
#include "gflow/fs.h"
#include "gflow/rundir.h"
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void gf_probe_opts_default(gf_probe_opts *o) {
    memset(o, 0, sizeof *o);
    o->which = "best";
    o->windows = 0; /* per probe default, see cmd_probe.c */
    o->seed = 1;
    o->null_samples = 20000;
    o->lanczos_steps = 16;
    o->top_k = 3;
    o->hutchinson = 8;
    o->rel_step = 1e-3;
    o->points = 400;
    o->plot = 1;
    o->log = 1;
}

void gf_probe_basename(const char *dir, char *out, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)(n - b), dir + b);
}

void gf_probe_path(const char *dir, const char *stem, const char *ext, char *out, size_t cap) {
    snprintf(out, cap, "%s/probe-%s.%s", dir, stem, ext);
}

gf_status gf_probe_plot_run(const char *run_dir, const char *kind, gf_probe_plot_fn fn) {
    const char *dirs[1] = {run_dir};
    char png[1200];
    gf_probe_path(run_dir, kind, "png", png, sizeof png);
    return fn(dirs, 1, png);
}

/* gf_output_check of every probe-<kind>* entry of dir */
static gf_status check_dir_outputs(const char *kind, const char *dir, const char *pairs_file) {
    DIR *d = opendir(dir);
    if (!d) return GF_OK; /* a missing directory is reported where it is used */
    char prefix[64], path[1400];
    snprintf(prefix, sizeof prefix, "probe-%s", kind);
    const char *inputs[1] = {pairs_file};
    gf_status st = GF_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        st = gf_output_check(path, inputs, 1);
    }
    closedir(d);
    return st;
}

gf_status gf_probe_check_outputs(const char *kind, const char *const *dirs, int n, const char *out_dir,
                                 const char *pairs_file) {
    for (int i = 0; i < n; i++) GF_TRY(check_dir_outputs(kind, dirs[i], pairs_file));
    return out_dir ? check_dir_outputs(kind, out_dir, pairs_file) : GF_OK;
}

void gf_probe_title(FILE *g, const char *name, const char *suffix) {
    char t[600];
    snprintf(t, sizeof t, "%s%s", name, suffix);
    gf_gnuplot_string(g, t);
}

gf_status gf_probe_gnuplot(const char *script, const char *what) {
    return gf_gnuplot(script, 0, what, "is gnuplot-nox installed? --no-plot skips it");
}

gf_status gf_plot_begin(gf_plot *p, const char *size, const char *preamble) {
    *p = (gf_plot){.series = -1};
    p->g = open_memstream(&p->buf, &p->len);
    if (!p->g) return gf_error_set(GF_E_NOMEM, "plot script");
    fprintf(p->g, "set terminal pngcairo size %s\nset grid\n%s", size, preamble);
    return GF_OK;
}

void gf_plot_command(gf_plot *p, const char *lines, const char *cmd) {
    fprintf(p->g, "%s%s%s ", p->series >= 0 ? "\n" : "", lines, cmd);
    p->series = 0;
}

void gf_plot_series(gf_plot *p, const char *dir, const char *suffix, const char *fmt, ...) {
    char nm[300];
    gf_probe_basename(dir, nm, sizeof nm);
    if (p->series++ > 0) fputs(", ", p->g);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->g, fmt, ap);
    va_end(ap);
    fputs(" title ", p->g);
    gf_probe_title(p->g, nm, suffix);
}

gf_status gf_plot_draw(gf_plot *p, gf_status st, const char *tail, const char *png) {
    fprintf(p->g, "%s%s", p->series >= 0 ? "\n" : "", tail);
    if (fclose(p->g) != 0 && !st) st = gf_error_set(GF_E_NOMEM, "plot script");
    if (!st) st = gf_probe_gnuplot(p->buf, png);
    free(p->buf);
    *p = (gf_plot){.series = -1};
    return st;
}

gf_status gf_probe_open(gf_probe_run *p, const char *run_dir, const gf_probe_opts *o, int64_t windows) {
    memset(p, 0, sizeof *p);
    struct stat st;
    if (stat(run_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return gf_error_set(GF_E_NOTFOUND, "%s: no such run directory", run_dir);
    snprintf(p->dir, sizeof p->dir, "%s", run_dir);
    gf_probe_basename(run_dir, p->name, sizeof p->name);
    GF_TRY(gf_run_ckpt_path(run_dir, o->which, p->ckpt, sizeof p->ckpt));
    gf_recipe r;
    GF_TRY(gf_ckpt_peek_recipe(p->ckpt, &r, NULL));
    const gf_task_ops *task = gf_task_of(&r);
    if (task && !task->language_model)
        return gf_error_set(GF_E_INVALID, "%s: task '%s' is not a language model; the probes apply to language models "
                            "only (they follow each token's hidden state through the blocks over text windows)",
                            p->ckpt, task->name);
    if (o->log) fprintf(stderr, "probe: %s (%s, %s, %lld layers)\n", p->ckpt, gf_family_name(r.model.family),
                        gf_block_name(r.model.block), (long long)r.model.n_layers);
    /* the probes read weights and activations on the host, wherever it trained */
    gf_status os = gf_session_open_ckpt(&p->s, &r, p->ckpt);
    p->open = 1;
    GF_TRY(os);
    p->s.ctx.training = 0; /* no dropout anywhere in the probes */
    p->L = r.data.seq_len;
    if (windows <= 0) return GF_OK;
    gf_session_warn_split_changed(&p->s, p->ckpt, GF_SPLIT_VALID);
    GF_TRY(gf_session_load_split(&p->s, GF_SPLIT_VALID, o->log));
    gf_lm_loader *ld = NULL;
    GF_TRY(gf_lm_loader_new(&ld, gf_session_tokens(&p->s, GF_SPLIT_VALID), p->L, 1, 0, o->seed));
    int64_t have = gf_lm_loader_n_windows(ld);
    p->W = windows < have ? windows : have;
    p->win = malloc((size_t)(p->W * (p->L + 1)) * sizeof(int32_t));
    int64_t rows = 0;
    gf_status ls = p->win ? gf_lm_loader_next(ld, p->win, p->W, &rows) : gf_error_set(GF_E_NOMEM, "probe windows");
    gf_lm_loader_free(ld);
    GF_TRY(ls);
    p->W = rows;
    if (o->log)
        fprintf(stderr, "probe: %lld validation windows of %lld tokens (of %lld; seed %llu)\n", (long long)p->W,
                (long long)p->L, (long long)have, (unsigned long long)o->seed);
    return GF_OK;
}

void gf_probe_close(gf_probe_run *p) {
    if (p->open) gf_session_close(&p->s);
    free(p->win);
    memset(p, 0, sizeof *p);
}

/* ---- prompt pairs ---- */

gf_status gf_prompt_pairs_add(gf_prompt_pairs *p, const char *a, const char *b, const char *where, int64_t line) {
    /* words: maximal runs of non-space; the pair must differ in exactly one, not the last */
    char wa[64][64], wb[64][64];
    int na = 0, nb = 0;
    for (int side = 0; side < 2; side++) {
        const char *s = side ? b : a;
        int *n = side ? &nb : &na;
        char (*w)[64] = side ? wb : wa;
        while (*s) {
            while (*s && isspace((unsigned char)*s)) s++;
            if (!*s) break;
            const char *e = s;
            while (*e && !isspace((unsigned char)*e)) e++;
            if (*n >= 64 || e - s >= 64)
                return gf_error_set(GF_E_PARSE, "%s:%lld: prompt too long (at most 64 words of 63 bytes)", where, (long long)line);
            snprintf(w[*n], 64, "%.*s", (int)(e - s), s);
            (*n)++;
            s = e;
        }
    }
    if (na == 0 || nb == 0) return gf_error_set(GF_E_PARSE, "%s:%lld: empty prompt", where, (long long)line);
    if (na != nb)
        return gf_error_set(GF_E_PARSE, "%s:%lld: the prompts have %d and %d words; they must differ in one word only",
                            where, (long long)line, na, nb);
    int diff = 0, at = -1;
    for (int i = 0; i < na; i++) if (strcmp(wa[i], wb[i])) { diff++; at = i; }
    if (diff != 1)
        return gf_error_set(GF_E_PARSE, "%s:%lld: the prompts differ in %d words; they must differ in exactly one", where,
                            (long long)line, diff);
    if (at == na - 1)
        return gf_error_set(GF_E_PARSE, "%s:%lld: the last word (the target token) differs; edit a context word", where,
                            (long long)line);
    char **na_ = realloc(p->a, (size_t)(p->n + 1) * sizeof(char *)), **nb_;
    if (!na_) return gf_error_set(GF_E_NOMEM, "prompt pairs");
    p->a = na_;
    nb_ = realloc(p->b, (size_t)(p->n + 1) * sizeof(char *));
    if (!nb_) return gf_error_set(GF_E_NOMEM, "prompt pairs");
    p->b = nb_;
    int64_t *nl = realloc(p->line, (size_t)(p->n + 1) * sizeof(int64_t));
    if (!nl) return gf_error_set(GF_E_NOMEM, "prompt pairs");
    p->line = nl;
    p->a[p->n] = strdup(a);
    p->b[p->n] = strdup(b);
    p->line[p->n] = line;
    p->n++;
    return GF_OK;
}

gf_status gf_prompt_pairs_read(const char *path, gf_prompt_pairs *p) {
    gf_ini_lines src = {.f = fopen(path, "rb")};
    if (!src.f) return gf_error_set(GF_E_NOTFOUND, "%s: cannot open prompt-pair file: %s", path, strerror(errno));
    gf_status st = GF_OK;
    char *buf;
    /* bounded lines (gf_ini_raw_line): --pairs /dev/zero is refused at its first line */
    while (!st && (buf = gf_ini_raw_line(&src))) {
        const long long line = src.lineno;
        if (src.bad) { st = gf_error_set(GF_E_PARSE, "%s:%lld: %s", path, line, src.bad); break; }
        if ((st = gf_text_check(path, line, 0, buf, strlen(buf))) != GF_OK) break; /* prompts are text */
        const char *s = buf;
        while (isspace((unsigned char)*s)) s++;
        if (!*s || *s == '#') continue;
        char *tab = strchr(buf, '\t');
        if (!tab) { st = gf_error_set(GF_E_PARSE, "%s:%lld: expected 'prompt A<TAB>prompt B', found no tab", path, line); break; }
        if (strchr(tab + 1, '\t')) { st = gf_error_set(GF_E_PARSE, "%s:%lld: more than one tab; expected two fields", path, line); break; }
        *tab = 0;
        st = gf_prompt_pairs_add(p, buf, tab + 1, path, line);
    }
    if (!st && ferror(src.f)) st = gf_error_set(GF_E_IO, "%s: read error after line %d", path, src.lineno);
    fclose(src.f);
    gf_ini_lines_free(&src);
    if (!st && p->n == 0) st = gf_error_set(GF_E_PARSE, "%s: no prompt pairs in the file", path);
    return st;
}

void gf_prompt_pairs_free(gf_prompt_pairs *p) {
    for (int64_t i = 0; i < p->n; i++) { free(p->a[i]); free(p->b[i]); }
    free(p->a);
    free(p->b);
    free(p->line);
    memset(p, 0, sizeof *p);
}

/* ---- TSV tables read back for plots ---- */

static gf_status split_line(char *line, char ***out, int32_t *n) {
    int32_t cap = 8, k = 0;
    char **f = malloc((size_t)cap * sizeof(char *));
    if (!f) return gf_error_set(GF_E_NOMEM, "tsv");
    char *s = line;
    for (;;) {
        char *tab = strchr(s, '\t');
        if (tab) *tab = 0;
        if (k == cap) { cap *= 2; char **g = realloc(f, (size_t)cap * sizeof(char *)); if (!g) { free(f); return gf_error_set(GF_E_NOMEM, "tsv"); } f = g; }
        f[k++] = strdup(s);
        if (!tab) break;
        s = tab + 1;
    }
    *out = f;
    *n = k;
    return GF_OK;
}

gf_status gf_tsv_read(const char *path, gf_tsv *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return gf_error_set(GF_E_NOTFOUND, "%s: cannot open (has this probe been run on that directory?): %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0, rcap = 0;
    gf_status st = GF_OK;
    while (!st && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        char **fields = NULL;
        int32_t n = 0;
        if ((st = split_line(line, &fields, &n))) break;
        if (!t->head) { t->head = fields; t->n_cols = n; continue; }
        if (n != t->n_cols) {
            for (int32_t i = 0; i < n; i++) free(fields[i]);
            free(fields);
            st = gf_error_set(GF_E_PARSE, "%s:%lld: %d fields, the header has %d", path, (long long)lineno, n, t->n_cols);
            break;
        }
        if (t->n_rows == rcap) {
            rcap = rcap ? 2 * rcap : 64;
            char ***r = realloc(t->rows, (size_t)rcap * sizeof(char **));
            if (!r) { st = gf_error_set(GF_E_NOMEM, "tsv"); break; }
            t->rows = r;
        }
        t->rows[t->n_rows++] = fields;
    }
    free(line);
    fclose(f);
    if (!st && !t->head) st = gf_error_set(GF_E_PARSE, "%s: empty table", path);
    if (st) gf_tsv_free(t);
    return st;
}

gf_status gf_tsv_col(const gf_tsv *t, const char *name, int32_t *col) {
    for (int32_t i = 0; i < t->n_cols; i++)
        if (!strcmp(t->head[i], name)) { *col = i; return GF_OK; }
    return gf_error_set(GF_E_PARSE, "%s: no column '%s' in the header", t->path, name);
}

double gf_tsv_num(const gf_tsv *t, int64_t row, int32_t col) {
    char *end;
    double v = strtod(t->rows[row][col], &end);
    return end == t->rows[row][col] ? NAN : v;
}

void gf_tsv_free(gf_tsv *t) {
    for (int64_t r = 0; r < t->n_rows; r++) {
        for (int32_t i = 0; i < t->n_cols; i++) free(t->rows[r][i]);
        free(t->rows[r]);
    }
    if (t->head)
        for (int32_t i = 0; i < t->n_cols; i++) free(t->head[i]);
    free(t->head);
    free(t->rows);
    memset(t, 0, sizeof *t);
}

gf_status gf_plot_table(const char *dir, const char *stem, gf_tsv *t, int n, const char *const *names, int32_t *cols) {
    char path[1200];
    gf_probe_path(dir, stem, "tsv", path, sizeof path);
    GF_TRY(gf_tsv_read(path, t));
    gf_status st = GF_OK;
    for (int i = 0; i < n && !st; i++) st = gf_tsv_col(t, names[i], &cols[i]);
    if (st) gf_tsv_free(t);
    return st;
}

void gf_tsv_datablock(FILE *g, const char *name, const gf_tsv *t, int32_t key_col, const char *key, const int32_t *cols,
                      int n_cols) {
    fprintf(g, "$%s << EOD\n", name);
    for (int64_t r = 0; r < t->n_rows; r++) {
        if (key && strcmp(t->rows[r][key_col], key)) continue;
        /* numbers only: a field must not reach gnuplot as text (an "EOD" would end the block) */
        for (int i = 0; i < n_cols; i++) fprintf(g, "%s%.9g", i ? " " : "", gf_tsv_num(t, r, cols[i]));
        fputc('\n', g);
    }
    fprintf(g, "EOD\n");
}
