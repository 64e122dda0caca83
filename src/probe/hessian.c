/* hessian.c — Hessian spectrum per parameter block (arXiv 2410.10986).
 *
 * The loss is the mean next-token NLL of a fixed batch of validation windows, dropout off.
 * For each block b (a layer's mixer matrices one by one — Grassmann w_red, w_plu, w_gate;
 * Transformer Q, K, V rows of qkv and O = proj — its FFN, and the two embedding tables; each
 * weight with its bias; LayerNorm gains are left out) the diagonal block H_bb is reached only
 * through products H_bb v = [∇_b L(θ + ε v̂) − ∇_b L(θ − ε v̂)] |v| / 2ε (gf_hvp). On it:
 *   - a step check: the same product at ε and 2ε; their relative difference (3× the O(ε²)
 *     truncation error at ε, plus float round-off) is reported per block (fd_check); above 1 %
 *     other steps are tried (ε/2, 2ε, ε/4, 4ε) and the best kept
 *   - Lanczos (full re-orthogonalisation, LAPACK dstev): the top-k eigenvalues and the lowest
 *     Ritz value (negative curvature)
 *   - Hutchinson: tr H_bb ≈ mean of zᵀ H_bb z over Rademacher z, with its standard error
 */
#include "probe_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    gf_probe_run *p;
    int64_t B;
    double loss;
} grad_ctx;

static gf_status loss_grad(void *u) {
    grad_ctx *g = u;
    gf_session *s = &g->p->s;
    gf_params_zero_grad(s->params);
    gf_tensor *loss = gf_lm_forward(gf_session_lm(s), &s->ctx, g->p->win, g->B, g->p->L, NULL);
    g->loss = loss->data[0];
    gf_tape_backward(&s->ctx, loss);
    gf_ctx_reset(&s->ctx);
    if (!isfinite(g->loss)) return gf_error_set(GF_E_NONFINITE, "hessian: loss is %g", g->loss);
    return GF_OK;
}

/* Append rows [r0, r1) of a 2-D parameter (or elements [r0, r1) of a 1-D one) to a block;
 * r1 < 0: to the last row. The parameter's place in the block is where its data points. */
static gf_status add_range(gf_pblock *b, const gf_params *ps, const gf_tensor *t, int64_t r0, int64_t r1) {
    int64_t cols = t->ndim == 2 ? t->shape[1] : 1, rows = t->shape[0];
    if (r1 < 0) r1 = rows;
    if (b->n_ranges >= GF_PBLOCK_MAX_RANGES) return gf_error_set(GF_E_INVALID, "hessian: block %s has too many ranges", b->name);
    b->off[b->n_ranges] = (int64_t)(t->data - ps->data) + r0 * cols;
    b->len[b->n_ranges] = (r1 - r0) * cols;
    b->n += b->len[b->n_ranges];
    b->n_ranges++;
    return GF_OK;
}

static gf_pblock *new_block(gf_pblock *bl, int64_t *n, int64_t layer, const char *group) {
    gf_pblock *b = &bl[(*n)++];
    memset(b, 0, sizeof *b);
    b->layer = layer;
    snprintf(b->group, sizeof b->group, "%s", group);
    if (layer < 0) snprintf(b->name, sizeof b->name, "%s", group);
    else snprintf(b->name, sizeof b->name, "L%lld.%s", (long long)layer, group);
    return b;
}

/* A weight and its bias, whole. */
static gf_status add_pair(gf_pblock *b, const gf_params *ps, const gf_tensor *w, const gf_tensor *bias) {
    GF_TRY(add_range(b, ps, w, 0, -1));
    return add_range(b, ps, bias, 0, -1);
}

/* The curvature blocks of one layer: the mixer's matrices one by one, then the FFN. */
static gf_status layer_blocks(const gf_model_cfg *c, const gf_params *ps, const gf_block *k, int64_t l, gf_pblock *bl,
                              int64_t *n) {
    const int64_t D = c->d_model;
    gf_pblock *b;
    if (c->family == GF_FAMILY_GRASSMANN) {
        GF_TRY(add_pair(new_block(bl, n, l, "red"), ps, k->w_red, k->b_red));
        GF_TRY(add_pair(b = new_block(bl, n, l, "plu"), ps, k->w_plu, k->b_plu));
        if (k->w_lin) GF_TRY(add_range(b, ps, k->w_lin, 0, -1));
        if (k->w_gate) GF_TRY(add_pair(new_block(bl, n, l, "gate"), ps, k->w_gate, k->b_gate));
    } else {
        static const char *qkv[3] = {"q", "k", "v"};
        for (int j = 0; j < 3; j++) { /* rows [q; k; v] of the fused projection */
            b = new_block(bl, n, l, qkv[j]);
            GF_TRY(add_range(b, ps, k->qkv_w, j * D, (j + 1) * D));
            GF_TRY(add_range(b, ps, k->qkv_b, j * D, (j + 1) * D));
        }
        GF_TRY(add_pair(new_block(bl, n, l, "o"), ps, k->proj_w, k->proj_b));
    }
    GF_TRY(add_pair(b = new_block(bl, n, l, "ffn"), ps, k->fc1_w, k->fc1_b));
    return add_pair(b, ps, k->fc2_w, k->fc2_b);
}

/* The blocks of a model, in layer order; bl must hold 6 per layer + 2. */
static gf_status make_blocks(const gf_lm *m, gf_pblock *bl, int64_t *n) {
    *n = 0;
    GF_TRY(add_range(new_block(bl, n, -1, "tok_emb"), &m->params, m->tok_emb, 0, -1));
    GF_TRY(add_range(new_block(bl, n, -1, "pos_emb"), &m->params, m->pos_emb, 0, -1));
    for (int64_t l = 0; l < m->cfg.n_layers; l++) GF_TRY(layer_blocks(&m->cfg, &m->params, &m->blocks[l], l, bl, n));
    return GF_OK;
}

/* Does a block name match the comma-separated filter (substrings)? NULL matches all. */
static int wanted(const char *filter, const char *name) {
    if (!filter || !*filter) return 1;
    const char *s = filter;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char pat[64];
        snprintf(pat, sizeof pat, "%.*s", (int)(n < 63 ? n : 63), s);
        if (n && strstr(name, pat)) return 1;
        if (!e) break;
        s = e + 1;
    }
    return 0;
}

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Relative difference of H v at ε and 2ε for one random v. */
static gf_status step_check(gf_hvp *h, gf_rng *rng, double *rel) {
    int64_t n = h->blk.n;
    double *v = malloc((size_t)n * sizeof(double)), *a = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
    if (!v || !a || !b) { free(v); free(a); free(b); return gf_error_set(GF_E_NOMEM, "hessian"); }
    for (int64_t i = 0; i < n; i++) v[i] = gf_rng_normal(rng);
    gf_status st = gf_hvp_apply(h, v, a);
    double eps = h->eps;
    h->eps = 2 * eps;
    if (!st) st = gf_hvp_apply(h, v, b);
    h->eps = eps;
    double num = 0;
    for (int64_t i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]);
    *rel = sqrt(num / dot(a, a, n));
    free(v); free(a); free(b);
    return st;
}

static gf_status hutchinson(gf_hvp *h, gf_rng *rng, int64_t S, double *tr, double *se) {
    int64_t n = h->blk.n;
    double *z = malloc((size_t)n * sizeof(double)), *hz = malloc((size_t)n * sizeof(double));
    if (!z || !hz) { free(z); free(hz); return gf_error_set(GF_E_NOMEM, "hessian"); }
    double s1 = 0, s2 = 0;
    gf_status st = GF_OK;
    for (int64_t k = 0; k < S && !st; k++) {
        for (int64_t i = 0; i < n; i++) z[i] = gf_rng_u64(rng) & 1 ? 1.0 : -1.0;
        st = gf_hvp_apply(h, z, hz);
        double q = dot(z, hz, n);
        s1 += q;
        s2 += q * q;
    }
    *tr = s1 / (double)S;
    *se = S > 1 ? sqrt(fmax(s2 / (double)S - *tr * *tr, 0) / (double)(S - 1)) : NAN;
    free(z); free(hz);
    return st;
}

gf_status gf_probe_hessian(const char *run_dir, const gf_probe_opts *o) {
    gf_probe_run p;
    double t0 = gf_time_now();
    gf_status st = gf_probe_open(&p, run_dir, o, o->windows > 0 ? o->windows : 2);
    if (st) { gf_probe_close(&p); return st; }
    gf_lm *m = gf_session_lm(&p.s);
    gf_pblock *bl = calloc((size_t)(6 * m->cfg.n_layers + 2), sizeof(gf_pblock));
    int64_t nbl = 0;
    st = make_blocks(m, bl, &nbl);
    gf_ctx_set_grad(&p.s.ctx, 1);
    grad_ctx gc = {.p = &p, .B = p.W};
    if (!st) st = loss_grad(&gc);
    const double loss0 = gc.loss; /* gc.loss later holds the last perturbed evaluation */
    int64_t K = o->top_k;
    char path[1200];
    gf_probe_path(run_dir, "hessian", "tsv", path, sizeof path);
    FILE *f = NULL;
    gf_atomic_file f_af;
    if (!st) st = gf_atomic_fopen(&f_af, path, &f);
    if (!st) {
        if (o->log)
            fprintf(stderr, "probe: hessian: loss %.4f on %lld windows x %lld tokens; %lld steps of Lanczos, %lld Hutchinson "
                    "samples, eps = %g x |block|, seed %llu%s%s\n", loss0, (long long)p.W, (long long)p.L,
                    (long long)o->lanczos_steps, (long long)o->hutchinson, o->rel_step, (unsigned long long)o->seed,
                    o->blocks ? ", blocks matching " : "", o->blocks ? o->blocks : "");
        fprintf(f, "block\tgroup\tlayer\tn_params\teps\tfd_check\tlanczos_steps");
        for (int64_t k = 0; k < K; k++) fprintf(f, "\tlambda_%lld", (long long)k + 1);
        fprintf(f, "\tlambda_min\ttrace\ttrace_se\ttrace_per_param\tloss\n");
    }
    int64_t done = 0;
    for (int64_t i = 0; i < nbl && !st; i++) {
        gf_pblock *b = &bl[i];
        if (!wanted(o->blocks, b->name)) continue;
        double tb = gf_time_now();
        gf_hvp h;
        st = gf_hvp_init(&h, p.s.params->data, p.s.params->grad, loss_grad, &gc, b, o->rel_step);
        if (st) break;
        gf_rng rng;
        gf_rng_seed(&rng, o->seed * 1000003ull + (uint64_t)i);
        double rel = NAN, tr = NAN, se = NAN, ev[64];
        int64_t md = 0;
        /* when the ε-vs-2ε products disagree by more than 1 %, try ε/2 (truncation: strong
         * third-order terms, e.g. through the Plücker normalisation), 2ε (round-off: a block with
         * tiny curvature), ε/4, 4ε; keep the first under 1 %, else the best; the table says which */
        static const double scale[5] = {1, 0.5, 2, 0.25, 4};
        double eps0 = h.eps, best = INFINITY, best_eps = eps0;
        for (int k = 0; k < 5 && !st; k++) {
            h.eps = eps0 * scale[k];
            st = step_check(&h, &rng, &rel);
            if (!st && rel < best) { best = rel; best_eps = h.eps; }
            if (best <= 0.01) break;
        }
        h.eps = best_eps;
        rel = best;
        double lo = NAN;
        if (!st) st = gf_lanczos(gf_hvp_matvec, &h, b->n, o->lanczos_steps, K, o->seed + (uint64_t)i, ev, &lo, &md);
        if (!st && o->hutchinson > 0) st = hutchinson(&h, &rng, o->hutchinson, &tr, &se);
        if (!st) {
            fprintf(f, "%s\t%s\t%lld\t%lld\t%.4g\t%.3g\t%lld", b->name, b->group, (long long)b->layer, (long long)b->n, h.eps,
                    rel, (long long)md);
            for (int64_t k = 0; k < K; k++) fprintf(f, "\t%.6g", ev[k]);
            fprintf(f, "\t%.6g\t%.6g\t%.3g\t%.4g\t%.6f\n", lo, tr, se, tr / (double)b->n, loss0);
            fflush(f);
            done++;
            if (o->log)
                fprintf(stderr, "probe: hessian %-14s %9lld params: lambda_1 %10.4g  lambda_min %10.4g  trace %10.4g +- %.2g  "
                        "fd_check %.1e  (%lld grads, %.1f s)\n", b->name, (long long)b->n, ev[0], lo, tr, se, rel, (long long)h.n_grads,
                        gf_time_now() - tb);
        }
        gf_hvp_free(&h);
    }
    if (!st && done == 0) st = gf_error_set(GF_E_INVALID, "--blocks '%s' matches no parameter block (names look like L0.q, L2.ffn, tok_emb)", o->blocks);
    if (f) st = gf_atomic_finish(&f_af, st);
    free(bl);
    gf_probe_close(&p);
    if (!st && o->log) fprintf(stderr, "probe: wrote %s (%.1f s)\n", path, gf_time_now() - t0);
    if (!st && o->plot) {
        st = gf_probe_plot_run(run_dir, "hessian", gf_probe_hessian_plot);
        if (!st && o->log) fprintf(stderr, "probe: wrote %s/probe-hessian.png\n", run_dir);
    }
    return st;
}

/* Left: λ1 per layer for each block kind; right: Hutchinson trace per parameter. */
gf_status gf_probe_hessian_plot(const char *const *dirs, int n_dirs, const char *png) {
    static const char *groups[] = {"red", "plu", "gate", "q", "k", "v", "o", "ffn"};
    static const char *gcol[] = {"#e41a1c", "#ff7f00", "#a65628", "#377eb8", "#4daf4a", "#984ea3", "#17becf", "#333333"};
    static const char *const names[4] = {"group", "layer", "lambda_1", "trace_per_param"};
    const int NG = (int)(sizeof groups / sizeof groups[0]);
    gf_plot p;
    GF_TRY(gf_plot_begin(&p, "1300,640", ""));
    gf_status st = GF_OK;
    int present[2][16] = {{0}};
    for (int r = 0; r < n_dirs && !st; r++) {
        gf_tsv t;
        int32_t c[4];
        if ((st = gf_plot_table(dirs[r], "hessian", &t, 4, names, c))) break;
        for (int k = 0; k < NG; k++) {
            for (int64_t i = 0; i < t.n_rows; i++) if (!strcmp(t.rows[i][c[0]], groups[k])) present[r][k] = 1;
            if (!present[r][k]) continue;
            char name[32];
            snprintf(name, sizeof name, "g%d_%d", r, k);
            gf_tsv_datablock(p.g, name, &t, c[0], groups[k], c + 1, 3);
        }
        gf_tsv_free(&t);
    }
    for (int panel = 0; panel < 2 && !st; panel++) {
        if (panel == 0)
            gf_plot_command(&p, "set multiplot layout 1,2\nset xlabel 'layer'\nset xtics 1\nset logscale y\n"
                                "set key outside bottom center horizontal maxrows 3 font ',9'\n"
                                "set ylabel 'top Hessian eigenvalue {/Symbol l}_1 of the block'\n"
                                "set title 'Lanczos, per block'\n", "plot");
        else
            gf_plot_command(&p, "set ylabel 'Hutchinson trace / parameters'\nunset logscale y\n"
                                "set title 'mean curvature per parameter'\n", "plot");
        for (int r = 0; r < n_dirs; r++)
            for (int k = 0; k < NG; k++) {
                if (!present[r][k]) continue;
                char what[32];
                snprintf(what, sizeof what, " %s", groups[k]);
                gf_plot_series(&p, dirs[r], what, "$g%d_%d using 1:%d with linespoints lw 2 pt %d dt %d lc rgb '%s'", r,
                               k, panel ? 3 : 2, r ? 6 : 7, r ? 2 : 1, gcol[k]);
            }
    }
    return gf_plot_draw(&p, st, "unset multiplot\n", png);
}
