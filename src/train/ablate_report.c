/* ablate_report.c — an ablation's summary from whatever its run directories hold:
 * summary.tsv and summary.md (mean ± std over seeds), curves.tsv and, with gnuplot, curves.png. */
#include "train/ablate_internal.h"
#include "gflow/fs.h"
#include "gflow/rundir.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int failed;            /* seeds whose last attempt failed */
    char error[512];       /* the first failed seed's error */
    int64_t resumable_step;/* an interrupted seed's step (-1: none) */
    double params, val, val_sd, test, test_sd, word, tok, delta;
    char epochs[256], steps[256];
    char build[128];       /* build id of its finished seeds ("mixed" if they differ; "" none) */
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
        gf_run_summary k;
        int n = run->state == GF_ABLATE_DONE ? gf_run_summary_read(run->run_dir, &k) : 0;
        val[s] = test[s] = word[s] = tok[s] = NAN;
        if (!n) {
            if (run->failed && !r->failed++) snprintf(r->error, sizeof r->error, "%s", run->error);
            else if (run->state == GF_ABLATE_RESUME) r->resumable_step = run->step_done;
            continue;
        }
        r->done++;
        val[s] = gf_run_summary_num(&k, "best_val_ppl");
        test[s] = gf_run_summary_num(&k, "test_ppl");
        word[s] = gf_run_summary_num(&k, "test_ppl_word");
        tok[s] = gf_run_summary_num(&k, "tokens_per_s");
        if (isnan(r->params)) r->params = gf_run_summary_num(&k, "params");
        const char *b = gf_run_summary_get(&k, "build");
        b = b ? b : "unknown (before build ids)";
        if (!r->build[0]) snprintf(r->build, sizeof r->build, "%s", b);
        else if (strcmp(r->build, b)) snprintf(r->build, sizeof r->build, "mixed");
        double be = gf_run_summary_num(&k, "best_epoch"), bs = gf_run_summary_num(&k, "best_step");
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
    if (r->failed && r->n > 1) snprintf(buf, cap, "%d/%d seeds, %d failed", r->done, r->n, r->failed);
    else if (r->failed) snprintf(buf, cap, "failed");
    else if (r->done == r->n) snprintf(buf, cap, "done");
    else if (r->done) snprintf(buf, cap, "%d/%d seeds", r->done, r->n);
    else if (r->resumable_step >= 0) snprintf(buf, cap, "interrupted (step %lld)", (long long)r->resumable_step);
    else snprintf(buf, cap, "not run");
}

static void num(char *buf, size_t cap, double v, const char *fmt) {
    if (!isfinite(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, fmt, v);
}

/* validation curve of one run: the last valid ppl at each step */
typedef struct curve { int64_t *steps; double *ppl; int n, cap, failed; } curve;

static void curve_row(const gf_metrics_row *r, void *user) {
    curve *c = user;
    if (c->failed || r->n_fields < 5 || strcmp(r->split, "valid")) return;
    double v = strtod(r->ppl, NULL);
    if (!(v > 0) || !isfinite(v)) return; /* "-": no perplexity (an NLI run) */
    if (c->n && c->steps[c->n - 1] == r->step) { c->ppl[c->n - 1] = v; return; }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        int64_t *s2 = realloc(c->steps, (size_t)c->cap * sizeof *s2);
        if (s2) c->steps = s2;
        double *p2 = realloc(c->ppl, (size_t)c->cap * sizeof *p2);
        if (p2) c->ppl = p2;
        if (!s2 || !p2) { c->failed = 1; return; } /* keep what was read */
    }
    c->steps[c->n] = r->step;
    c->ppl[c->n++] = v;
}

/* a run's validation points into *steps, *ppl (*n of them; none without a metrics.tsv); a
 * metrics.tsv that is not one is an error naming its line */
static gf_status read_curve(const char *dir, int64_t **steps, double **ppl, int *n) {
    curve c = {0};
    gf_status st = gf_run_metrics_scan(dir, curve_row, &c);
    *steps = c.steps;
    *ppl = c.ppl;
    *n = c.n;
    return st == GF_E_NOTFOUND ? GF_OK : st;
}

/* curves.tsv's text: one gnuplot data block per variant that has validation points (mean over
 * seeds at the steps every seed with data reached), counting the blocks, their variants in order.
 * Every line is a comment, a number pair or empty (a name's control characters become spaces),
 * so the plot can inline it as a datablock. */
static gf_status curves_text(const gf_ablation *a, FILE *f, int *n_blocks, int64_t *block_variant) {
    int64_t per = a->n_seeds ? a->n_seeds : 1;
    *n_blocks = 0;
    gf_status bad = GF_OK;
    for (int64_t vi = 0; vi < a->n_variants && !bad; vi++) {
        int64_t *st[GF_RECIPE_LIST_MAX];
        double *pp[GF_RECIPE_LIST_MAX];
        int cnt[GF_RECIPE_LIST_MAX], with = 0, first = -1;
        for (int64_t s = 0; s < per; s++) {
            gf_status rs = read_curve(a->runs[vi * per + s].run_dir, &st[s], &pp[s], &cnt[s]);
            if (rs && !bad) bad = rs;
            if (cnt[s]) { with++; if (first < 0) first = (int)s; }
        }
        if (with) {
            fprintf(f, "%s# variant ", *n_blocks ? "\n\n" : "");
            for (const char *c = a->variants[vi].name; *c; c++) fputc((unsigned char)*c < 0x20 ? ' ' : *c, f);
            fprintf(f, "\n# step\tval_ppl\n");
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
    return bad;
}

/* writes <study>/curves.tsv; *text (freed by the caller) gets its bytes */
static gf_status write_curves(const gf_ablation *a, int *n_blocks, int64_t *block_variant, char **text) {
    size_t len = 0;
    FILE *m = open_memstream(text, &len);
    if (!m) return gf_error_set(GF_E_NOMEM, "out of memory");
    gf_status st = curves_text(a, m, n_blocks, block_variant);
    if (fclose(m) != 0 && !st) st = gf_error_set(GF_E_NOMEM, "out of memory");
    if (st) return st;
    char path[1200];
    snprintf(path, sizeof path, "%s/curves.tsv", a->study_dir);
    gf_atomic_file af;
    GF_TRY(gf_atomic_open(&af, path));
    GF_TRY(gf_atomic_write(&af, *text, len));
    return gf_atomic_commit(&af);
}


static void tsv_row(FILE *t, const gf_ablate_variant *v, const row *r) {
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
    fprintf(t, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v->name, status, r->done, r->n, params,
            val, vsd, r->done ? r->epochs : "-", r->done ? r->steps : "-", test, tsd, word, delta, tok,
            r->failed ? r->error : "-");
}

static void md_head(FILE *m, const gf_ablation *a) {
    fprintf(m, "# Ablation `%s`\n\nBase recipe `%s`; runs in `%s/`", a->name, a->base, a->study_dir);
    if (a->n_seeds) {
        fprintf(m, "; seeds ");
        for (int64_t i = 0; i < a->n_seeds; i++) fprintf(m, "%s%lld", i ? "," : "", (long long)a->seeds[i]);
    }
    fprintf(m, ".\nBest validation perplexity%s; test perplexities of the best checkpoint; Δ is the change in best "
               "validation perplexity relative to base.\n\n",
            a->n_seeds > 1 ? " is mean ± std over seeds" : "");
    fprintf(m, "| variant | overrides | params | best val PPL | best epoch / step | test PPL | test PPL/word | Δ vs base | tok/s |\n");
    fprintf(m, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
}

/* variant vi's row of summary.md (mean ± std over seeds when there are several) */
static void md_row(FILE *m, const gf_ablation *a, int64_t vi, const row *r) {
    const gf_ablate_variant *v = &a->variants[vi];
    int multi = a->n_seeds > 1;
    char status[64], params[32], word[32], tok[32];
    status_text(r, status, sizeof status);
    num(params, sizeof params, r->params, "%.0f");
    num(tok, sizeof tok, r->tok, "%.0f");
    char over[512] = "";
    int off = 0;
    for (int64_t j = 0; j < v->n_sets && off < (int)sizeof over - 80; j++)
        off += snprintf(over + off, sizeof over - (size_t)off, "%s`%s`", j ? ", " : "", v->sets[j]);
    if (!v->n_sets) snprintf(over, sizeof over, "—");
    fprintf(m, "| %s | %s | ", v->name, over);
    if (!r->done) {
        fprintf(m, "%s | %s | - | - | - | - | - |\n", params, status);
        return;
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

/* summary.tsv and summary.md from the rows */
/* Which build produced the rows: one table should come from one build (a build changes the
 * floating-point results); say so when it does not, naming each row's build. */
static void md_builds(FILE *m, const gf_ablation *a, const row *rows) {
    const char *first = NULL;
    int same = 1;
    for (int64_t vi = 0; vi < a->n_variants; vi++) {
        if (!rows[vi].build[0]) continue;
        if (!first) first = rows[vi].build;
        else if (strcmp(first, rows[vi].build)) same = 0;
    }
    if (!first) return;
    if (same && strcmp(first, "mixed")) {
        fprintf(m, "\nEvery finished row was produced by build `%s`.\n", first);
        return;
    }
    fprintf(m, "\n**The rows come from different builds** (compare them with care):");
    for (int64_t vi = 0; vi < a->n_variants; vi++)
        if (rows[vi].build[0]) fprintf(m, " %s `%s`;", a->variants[vi].name, rows[vi].build);
    fprintf(m, "\n");
}

/* Each failed run and its error, under the table. */
static void md_failures(FILE *m, const gf_ablation *a) {
    int any = 0;
    for (int64_t i = 0; i < a->n_runs; i++) {
        const gf_ablate_run *run = &a->runs[i];
        if (!run->failed) continue;
        if (!any++) fprintf(m, "\n**Failed runs** (`gflow ablate` again retries them):\n\n");
        fprintf(m, "- `%s`: %s\n", run->run_dir + strlen(a->study_dir) + 1, run->error);
    }
}

static gf_status write_summaries(const gf_ablation *a, const row *rows, const char *command) {
    char tpath[1200], mpath[1200];
    snprintf(tpath, sizeof tpath, "%s/summary.tsv", a->study_dir);
    snprintf(mpath, sizeof mpath, "%s/summary.md", a->study_dir);
    gf_atomic_file ta, ma;
    FILE *t, *m;
    GF_TRY(gf_atomic_fopen(&ta, tpath, &t));
    gf_status st = gf_atomic_fopen(&ma, mpath, &m);
    if (st) return gf_atomic_finish(&ta, st);
    fprintf(t, "variant\tstatus\tseeds\tparams\tbest_val_ppl\tbest_val_ppl_std\tbest_epoch\tbest_step\ttest_ppl\t"
               "test_ppl_std\ttest_ppl_word\tdelta_vs_base_pct\ttokens_per_s\terror\n");
    md_head(m, a);
    for (int64_t vi = 0; vi < a->n_variants; vi++) {
        tsv_row(t, &a->variants[vi], &rows[vi]);
        md_row(m, a, vi, &rows[vi]);
    }
    md_builds(m, a, rows);
    md_failures(m, a);
    fprintf(m, "\n![validation perplexity vs step](curves.png)\n\nRegenerate this file with `%s`.\n", command);
    /* both or neither: the .md goes in only once the .tsv did */
    st = gf_atomic_finish(&ta, GF_OK);
    return gf_atomic_finish(&ma, st);
}

gf_status gf_ablate_check_outputs(const gf_ablation *a) {
    static const char *const outs[] = {"summary.tsv", "summary.md", "curves.tsv", "curves.png", "failures.tsv"};
    const char *inputs[] = {a->path, a->base};
    char path[1200];
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", a->study_dir, outs[i]);
        GF_TRY(gf_output_check(path, inputs, 2));
    }
    return GF_OK;
}

gf_status gf_ablation_report(const gf_ablation *a, const char *command) {
    GF_TRY(gf_mkdir_p(a->study_dir));
    row *rows = calloc((size_t)a->n_variants, sizeof *rows);
    if (!rows) return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int64_t vi = 0; vi < a->n_variants; vi++) fill_row(a, vi, &rows[vi]);
    for (int64_t vi = 0; vi < a->n_variants; vi++)
        if (isfinite(rows[0].val) && isfinite(rows[vi].val)) rows[vi].delta = 100.0 * (rows[vi].val / rows[0].val - 1.0);
    gf_status st = write_summaries(a, rows, command);
    free(rows);
    if (st) return st;
    int nb;
    int64_t *bv = calloc((size_t)a->n_variants, sizeof *bv);
    if (!bv) return gf_error_set(GF_E_NOMEM, "out of memory");
    char *text = NULL;
    st = write_curves(a, &nb, bv, &text);
    free(text);
    free(bv);
    return st;
}

/* the gnuplot script drawing curves.tsv's blocks (text; nb of them, variants bv): the data inline,
 * names only as quoted titles */
static gf_status plot_script(const gf_ablation *a, const char *text, int nb, const int64_t *bv, char **script) {
    size_t len = 0;
    FILE *g = open_memstream(script, &len);
    if (!g) return gf_error_set(GF_E_NOMEM, "out of memory");
    fprintf(g, "set terminal pngcairo size 960,600\n$curves << EOD\n%sEOD\nset title ", text);
    gf_gnuplot_string(g, a->name);
    fprintf(g, " noenhanced\nset xlabel 'step'\nset ylabel 'validation perplexity'\nset logscale y\n"
               "set key outside right noenhanced\nset datafile separator '\\t'\nplot ");
    for (int i = 0; i < nb; i++) {
        fprintf(g, "%s$curves index %d using 1:2 with linespoints title ", i ? ", " : "", i);
        gf_gnuplot_string(g, a->variants[bv[i]].name);
    }
    fprintf(g, "\n");
    if (fclose(g) != 0) { free(*script); *script = NULL; return gf_error_set(GF_E_NOMEM, "out of memory"); }
    return GF_OK;
}

gf_status gf_ablation_plot(const gf_ablation *a) {
    int nb;
    int64_t *bv = calloc((size_t)a->n_variants, sizeof *bv);
    if (!bv) return gf_error_set(GF_E_NOMEM, "out of memory");
    char *text = NULL, *script = NULL;
    gf_status st = write_curves(a, &nb, bv, &text);
    if (!st && nb > 0) st = plot_script(a, text, nb, bv, &script);
    free(bv);
    free(text);
    if (st || nb == 0) return st;
    char png[1300];
    snprintf(png, sizeof png, "%s/curves.png", a->study_dir);
    st = gf_gnuplot(script, 1, png, "is gnuplot-nox installed?");
    free(script);
    return st;
}
