/* latent.c — layer-wise latent geometry (arXiv 2511.21594).
 *
 * Over W validation windows, per layer l: the mixing-branch output (Grassmann Drop(LN_mix(m)),
 * Transformer Drop(Proj(Attn))), the FFN-branch output and the hidden state after the block
 * (gf_lm_out.mix_out / ffn_out / hidden). For each: the PCA spectrum (LAPACK ssyevr on the
 * covariance) as explained-variance ratios of the first components and the participation
 * ratio (Σλ)² / Σλ² (an effective dimension: 1 for a line, D for isotropic). A joint PCA of
 * the two branches of every layer gives common 2-D/3-D axes for the scatter plots. The learned
 * position table (max_len, D) gets its own PCA (GPT-2's traces a helix), and the hidden-state
 * norm is averaged per position (the first-token high-norm effect).
 */
#include "probe_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void spectrum_row(FILE *f, int64_t layer, const char *comp, int64_t n, const double *var, int64_t d) {
    double tot = 0, sq = 0, top10 = 0;
    for (int64_t i = 0; i < d; i++) { tot += var[i]; sq += var[i] * var[i]; if (i < 10) top10 += var[i]; }
    fprintf(f, "%lld\t%s\t%lld\t%.6g\t%.5f\t%.5f\t%.5f\t%.5f\t%.3f\n", (long long)layer, comp, (long long)n, tot,
            var[0] / tot, d > 1 ? var[1] / tot : NAN, d > 2 ? var[2] / tot : NAN, top10 / tot, tot * tot / sq);
}

static double rnorm(const float *x, int64_t d) {
    double s = 0;
    for (int64_t i = 0; i < d; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

gf_status gf_probe_pca(const char *run_dir, const gf_probe_opts *o) {
    gf_probe_run p;
    double t0 = gf_time_now();
    gf_status st = gf_probe_open(&p, run_dir, o, o->windows > 0 ? o->windows : 64);
    if (st) { gf_probe_close(&p); return st; }
    gf_lm *m = gf_session_lm(&p.s);
    const int64_t N = m->cfg.n_layers, D = m->cfg.d_model, L = p.L, T = p.W * L, BB = 8;
    /* act[(l * 3 + c)] : (T, D) rows for layer l, component c (0 mix, 1 ffn, 2 hidden after the block) */
    float **act = calloc((size_t)(3 * N + 1), sizeof(float *));
    double *npos = calloc((size_t)((N + 1) * L), sizeof(double)); // (N+1, L) Σ |h_l[t]|
    gf_tensor **hid = calloc((size_t)(N + 1), sizeof(gf_tensor *)), **mix = calloc((size_t)N, sizeof(gf_tensor *)),
              **ffn = calloc((size_t)N, sizeof(gf_tensor *));
    double *var = malloc((size_t)D * sizeof(double));
    if (!act || !npos || !hid || !mix || !ffn || !var) st = gf_error_set(GF_E_NOMEM, "pca");
    for (int64_t i = 0; i < 3 * N + 1 && !st; i++)
        if (!(act[i] = malloc((size_t)(T * D) * sizeof(float)))) st = gf_error_set(GF_E_NOMEM, "pca: %lld tokens", (long long)T);
    float *emb = act ? act[3 * N] : NULL; /* h_0: embeddings + positions */
    gf_ctx_set_grad(&p.s.ctx, 0);
    for (int64_t b0 = 0; b0 < p.W && !st; b0 += BB) {
        int64_t Bb = p.W - b0 < BB ? p.W - b0 : BB, r0 = b0 * L, nr = Bb * L;
        gf_lm_out out = {.hidden = hid, .mix_out = mix, .ffn_out = ffn};
        gf_lm_forward(m, &p.s.ctx, p.win + b0 * (L + 1), Bb, L, &out);
        for (int64_t l = 0; l < N; l++) {
            memcpy(act[l * 3 + 0] + r0 * D, mix[l]->data, (size_t)(nr * D) * sizeof(float));
            memcpy(act[l * 3 + 1] + r0 * D, ffn[l]->data, (size_t)(nr * D) * sizeof(float));
            memcpy(act[l * 3 + 2] + r0 * D, hid[l + 1]->data, (size_t)(nr * D) * sizeof(float));
        }
        memcpy(emb + r0 * D, hid[0]->data, (size_t)(nr * D) * sizeof(float));
        for (int64_t l = 0; l <= N; l++)
            for (int64_t i = 0; i < nr; i++) npos[l * L + i % L] += rnorm(hid[l]->data + i * D, D);
        gf_ctx_reset(&p.s.ctx);
    }
    char path[1200];
    FILE *f = NULL;
    gf_atomic_file f_af;
    static const char *cname[3] = {"mix", "ffn", "hidden"};
    /* explained-variance table */
    gf_probe_path(run_dir, "pca", "tsv", path, sizeof path);
    if (!st) st = gf_atomic_fopen(&f_af, path, &f);
    if (!st) {
        fprintf(f, "layer\tcomponent\tn\ttotal_var\tev1\tev2\tev3\tev_top10\tparticipation_ratio\n");
        if (!(st = gf_pca(emb, T, D, 0, NULL, var, NULL))) spectrum_row(f, 0, "hidden", T, var, D);
        for (int64_t l = 0; l < N && !st; l++)
            for (int c = 0; c < 3 && !st; c++)
                if (!(st = gf_pca(act[l * 3 + c], T, D, 0, NULL, var, NULL))) spectrum_row(f, l + 1, cname[c], T, var, D);
        float *pc = malloc((size_t)(3 * D) * sizeof(float)), *pmu = malloc((size_t)D * sizeof(float));
        if (!st && !(st = gf_pca(m->pos_emb->data, m->cfg.max_len, D, 3, pc, var, pmu)))
            spectrum_row(f, -1, "pos_table", m->cfg.max_len, var, D);
        st = gf_atomic_finish(&f_af, st);
        f = NULL;
        /* the position table in its first three components */
        gf_probe_path(run_dir, "pca-pos", "tsv", path, sizeof path);
        if (!st) st = gf_atomic_fopen(&f_af, path, &f);
        if (!st) {
            fprintf(f, "position\tpc1\tpc2\tpc3\n");
            for (int64_t t = 0; t < m->cfg.max_len; t++) {
                const float *row = m->pos_emb->data + t * D;
                double c[3] = {0, 0, 0};
                for (int k = 0; k < 3; k++)
                    for (int64_t j = 0; j < D; j++) c[k] += ((double)row[j] - pmu[j]) * pc[k * D + j];
                fprintf(f, "%lld\t%.5f\t%.5f\t%.5f\n", (long long)t, c[0], c[1], c[2]);
            }
            st = gf_atomic_finish(&f_af, st);
            f = NULL;
        }
        free(pc);
        free(pmu);
    }
    /* joint PCA of both branches of every layer, on `points` tokens drawn once (seeded) */
    if (!st) {
        int64_t P = o->points < T ? o->points : T, rows = 2 * N * P;
        float *x = malloc((size_t)(rows * D) * sizeof(float)), *pc = malloc((size_t)(3 * D) * sizeof(float)),
              *mu = malloc((size_t)D * sizeof(float));
        int64_t *pick = malloc((size_t)T * sizeof(int64_t));
        gf_rng rng;
        gf_rng_seed(&rng, o->seed ^ 0x9E3779B9ull);
        for (int64_t i = 0; i < T; i++) pick[i] = i;
        gf_rng_shuffle_i64(&rng, pick, T);
        for (int64_t l = 0; l < N; l++)
            for (int c = 0; c < 2; c++)
                for (int64_t i = 0; i < P; i++)
                    memcpy(x + ((l * 2 + c) * P + i) * D, act[l * 3 + c] + pick[i] * D, (size_t)D * sizeof(float));
        st = gf_pca(x, rows, D, 3, pc, var, mu);
        gf_probe_path(run_dir, "pca-points", "tsv", path, sizeof path);
        if (!st) st = gf_atomic_fopen(&f_af, path, &f);
        if (!st) {
            double tot = 0;
            for (int64_t j = 0; j < D; j++) tot += var[j];
            if (o->log)
                fprintf(stderr, "probe: joint PCA of %lld points (2 branches x %lld layers x %lld tokens): PC1-3 explain "
                        "%.1f%%, %.1f%%, %.1f%%\n", (long long)rows, (long long)N, (long long)P, 100 * var[0] / tot,
                        100 * var[1] / tot, 100 * var[2] / tot);
            fprintf(f, "layer\tcomponent\ttoken\tpc1\tpc2\tpc3\n");
            for (int64_t l = 0; l < N; l++)
                for (int c = 0; c < 2; c++)
                    for (int64_t i = 0; i < P; i++) {
                        const float *r = x + ((l * 2 + c) * P + i) * D;
                        double q[3] = {0, 0, 0};
                        for (int k = 0; k < 3; k++)
                            for (int64_t j = 0; j < D; j++) q[k] += ((double)r[j] - mu[j]) * pc[k * D + j];
                        fprintf(f, "%lld\t%s\t%lld\t%.5f\t%.5f\t%.5f\n", (long long)l + 1, cname[c], (long long)pick[i], q[0], q[1], q[2]);
                    }
            st = gf_atomic_finish(&f_af, st);
            f = NULL;
        }
        free(x); free(pc); free(mu); free(pick);
    }
    /* norm by position */
    if (!st) {
        gf_probe_path(run_dir, "pca-norm", "tsv", path, sizeof path);
        if (!(st = gf_atomic_fopen(&f_af, path, &f))) {
            fprintf(f, "position");
            for (int64_t l = 0; l <= N; l++) fprintf(f, "\th%lld", (long long)l);
            fprintf(f, "\n");
            for (int64_t t = 0; t < L; t++) {
                fprintf(f, "%lld", (long long)t);
                for (int64_t l = 0; l <= N; l++) fprintf(f, "\t%.5f", npos[l * L + t] / (double)p.W);
                fprintf(f, "\n");
            }
            st = gf_atomic_finish(&f_af, st);
            if (!st && o->log) {
                double rest = 0;
                for (int64_t t = 1; t < L; t++) rest += npos[N * L + t];
                fprintf(stderr, "probe: |h_%lld| at position 0 is %.2fx its mean over positions 1..%lld\n", (long long)N,
                        npos[N * L] / (rest / (double)(L - 1)), (long long)L - 1);
            }
        }
    }
    for (int64_t i = 0; act && i < 3 * N + 1; i++) free(act[i]);
    free(act); free(npos); free(hid); free(mix); free(ffn); free(var);
    gf_probe_close(&p);
    if (!st && o->log) fprintf(stderr, "probe: wrote %s/probe-pca*.tsv (%.1f s)\n", run_dir, gf_time_now() - t0);
    if (!st && o->plot) {
        st = gf_probe_pca_plots(run_dir);
        if (!st && o->log) fprintf(stderr, "probe: wrote %s/probe-pca.png, -pca-3d.png, -pca-pos.png, -pca-norm.png\n", run_dir);
    }
    return st;
}

/* The PCA plots' preamble (after gf_plot_begin's): a layer palette */
static const char pca_palette[] = "set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', "
                                  "4 '#fde725')\nset cblabel 'layer'\n";

/* draw probe-<stem>.png of dir from p's script */
static gf_status pca_draw(const char *dir, const char *stem, gf_plot *p) {
    char png[1200];
    gf_probe_path(dir, stem, "png", png, sizeof png);
    return gf_plot_draw(p, GF_OK, "", png);
}

/* $mix and $ffn (layer pc1 pc2 pc3) from probe-pca-points.tsv, $pos (position pc1 pc2 pc3) from
 * probe-pca-pos.tsv, $norm (position h0..hN) from probe-pca-norm.tsv; *n_h the hidden states */
static gf_status pca_data(const char *dir, FILE *g, int *n_h) {
    static const char *const pts[5] = {"component", "layer", "pc1", "pc2", "pc3"};
    static const char *const pos[4] = {"position", "pc1", "pc2", "pc3"};
    char path[1200];
    gf_tsv t;
    int32_t c[5];
    GF_TRY(gf_plot_table(dir, "pca-points", &t, 5, pts, c));
    gf_tsv_datablock(g, "mix", &t, c[0], "mix", c + 1, 4);
    gf_tsv_datablock(g, "ffn", &t, c[0], "ffn", c + 1, 4);
    gf_tsv_free(&t);
    GF_TRY(gf_plot_table(dir, "pca-pos", &t, 4, pos, c));
    gf_tsv_datablock(g, "pos", &t, 0, NULL, c, 4);
    gf_tsv_free(&t);
    gf_status st = GF_OK;
    gf_probe_path(dir, "pca-norm", "tsv", path, sizeof path);
    GF_TRY(gf_tsv_read(path, &t));
    int32_t *all = malloc((size_t)t.n_cols * sizeof *all);
    if (!all) st = gf_error_set(GF_E_NOMEM, "plot data");
    for (int32_t i = 0; !st && i < t.n_cols; i++) all[i] = i;
    if (!st) gf_tsv_datablock(g, "norm", &t, 0, NULL, all, (int)t.n_cols);
    *n_h = (int)t.n_cols - 1;
    free(all);
    gf_tsv_free(&t);
    return st;
}

/* A single-run PCA plot: its size, the settings up to its title, the title after the run's name,
 * and what it plots (NULL: the norm of each hidden state by position) */
typedef struct pca_plot {
    const char *stem, *size, *head, *title, *body;
} pca_plot;
static const pca_plot pca_plots[4] = {
    {"pca", "1400,640", "set xlabel 'joint PC1'\nset ylabel 'joint PC2'\nset multiplot layout 1,2 title ",
     ": branch outputs of every layer in one PCA, coloured by layer",
     "\nset title 'mixing branch (Grassmann mix / attention)'\n"
     "plot $mix using 2:3:1 with points pt 7 ps 0.4 lc palette notitle\n"
     "set title 'FFN branch'\nplot $ffn using 2:3:1 with points pt 7 ps 0.4 lc palette notitle\nunset multiplot\n"},
    {"pca-3d", "1000,800",
     "set xlabel 'joint PC1'\nset ylabel 'joint PC2'\nset zlabel 'joint PC3'\nset view 60,30\nset xyplane 0\nset title ",
     ": joint PCA, 3-D",
     "\nsplot $mix using 2:3:4:1 with points pt 6 ps 0.5 lc palette title 'mix', "
     "$ffn using 2:3:4:1 with points pt 8 ps 0.5 lc palette title 'ffn'\n"},
    {"pca-pos", "1000,800",
     "set cblabel 'position'\nset xlabel 'PC1'\nset ylabel 'PC2'\nset zlabel 'PC3'\nset view 60,30\n"
     "set xyplane 0\nset title ",
     ": learned position table, first three principal components",
     "\nsplot $pos using 2:3:4:1 with linespoints pt 7 ps 0.6 lw 1.5 lc palette notitle\n"},
    {"pca-norm", "1000,800",
     "unset colorbox\nset xlabel 'position in the window'\nset ylabel 'mean |h_l| over windows'\n"
     "set logscale y\nset key outside right\nset title ",
     ": hidden-state norm by position", NULL},
};

/* One plot of q, the TSVs (data) inline; n_h hidden states */
static gf_status pca_plot_one(const char *dir, const char *nm, const char *data, const pca_plot *q, int n_h) {
    gf_plot p;
    GF_TRY(gf_plot_begin(&p, q->size, pca_palette));
    FILE *g = p.g;
    fprintf(g, "%s%s", data, q->head);
    gf_probe_title(g, nm, q->title);
    if (q->body) {
        fputs(q->body, g);
    } else {
        fprintf(g, "\nplot ");
        for (int l = 0; l < n_h; l++)
            fprintf(g, "%s$norm using 1:%d with lines lw 2 lc palette frac %.3f title 'h_%d'", l ? ", " : "", l + 2,
                    n_h > 1 ? (double)l / (n_h - 1) : 0.0, l);
        fprintf(g, "\n");
    }
    return pca_draw(dir, q->stem, &p);
}

/* The four single-run PCA plots, one gnuplot each, the TSVs inline (no path in a script). */
gf_status gf_probe_pca_plots(const char *dir) {
    char nm[300], *data = NULL;
    size_t dlen = 0;
    gf_probe_basename(dir, nm, sizeof nm);
    int n_h = 0;
    FILE *d = open_memstream(&data, &dlen);
    if (!d) return gf_error_set(GF_E_NOMEM, "plot data");
    gf_status st = pca_data(dir, d, &n_h);
    if (fclose(d) != 0 && !st) st = gf_error_set(GF_E_NOMEM, "plot data");
    for (int i = 0; i < 4 && !st; i++) st = pca_plot_one(dir, nm, data, &pca_plots[i], n_h);
    free(data);
    return st;
}
