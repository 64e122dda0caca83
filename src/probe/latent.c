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
    static const char *cname[3] = {"mix", "ffn", "hidden"};
    /* explained-variance table */
    gf_probe_path(run_dir, "pca", "tsv", path, sizeof path);
    if (!st) st = gf_probe_fopen(path, &f);
    if (!st) {
        fprintf(f, "layer\tcomponent\tn\ttotal_var\tev1\tev2\tev3\tev_top10\tparticipation_ratio\n");
        if (!(st = gf_pca(emb, T, D, 0, NULL, var, NULL))) spectrum_row(f, 0, "hidden", T, var, D);
        for (int64_t l = 0; l < N && !st; l++)
            for (int c = 0; c < 3 && !st; c++)
                if (!(st = gf_pca(act[l * 3 + c], T, D, 0, NULL, var, NULL))) spectrum_row(f, l + 1, cname[c], T, var, D);
        float *pc = malloc((size_t)(3 * D) * sizeof(float)), *pmu = malloc((size_t)D * sizeof(float));
        if (!st && !(st = gf_pca(m->pos_emb->data, m->cfg.max_len, D, 3, pc, var, pmu)))
            spectrum_row(f, -1, "pos_table", m->cfg.max_len, var, D);
        st = gf_probe_fclose(f, path, st);
        f = NULL;
        /* the position table in its first three components */
        gf_probe_path(run_dir, "pca-pos", "tsv", path, sizeof path);
        if (!st) st = gf_probe_fopen(path, &f);
        if (!st) {
            fprintf(f, "position\tpc1\tpc2\tpc3\n");
            for (int64_t t = 0; t < m->cfg.max_len; t++) {
                const float *row = m->pos_emb->data + t * D;
                double c[3] = {0, 0, 0};
                for (int k = 0; k < 3; k++)
                    for (int64_t j = 0; j < D; j++) c[k] += ((double)row[j] - pmu[j]) * pc[k * D + j];
                fprintf(f, "%lld\t%.5f\t%.5f\t%.5f\n", (long long)t, c[0], c[1], c[2]);
            }
            st = gf_probe_fclose(f, path, st);
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
        if (!st) st = gf_probe_fopen(path, &f);
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
            st = gf_probe_fclose(f, path, st);
            f = NULL;
        }
        free(x); free(pc); free(mu); free(pick);
    }
    /* norm by position */
    if (!st) {
        gf_probe_path(run_dir, "pca-norm", "tsv", path, sizeof path);
        if (!(st = gf_probe_fopen(path, &f))) {
            fprintf(f, "position");
            for (int64_t l = 0; l <= N; l++) fprintf(f, "\th%lld", (long long)l);
            fprintf(f, "\n");
            for (int64_t t = 0; t < L; t++) {
                fprintf(f, "%lld", (long long)t);
                for (int64_t l = 0; l <= N; l++) fprintf(f, "\t%.5f", npos[l * L + t] / (double)p.W);
                fprintf(f, "\n");
            }
            st = gf_probe_fclose(f, path, st);
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

/* The single-run PCA plots, straight from the TSVs. */
gf_status gf_probe_pca_plots(const char *dir) {
    char pts[1200], pos[1200], nrm[1200], png[1200], nm[300];
    gf_probe_path(dir, "pca-points", "tsv", pts, sizeof pts);
    gf_probe_path(dir, "pca-pos", "tsv", pos, sizeof pos);
    gf_probe_path(dir, "pca-norm", "tsv", nrm, sizeof nrm);
    gf_probe_basename(dir, nm, sizeof nm);
    gf_tsv t;
    GF_TRY(gf_tsv_read(nrm, &t)); /* for the layer count */
    int n_h = t.n_cols - 1;
    gf_tsv_free(&t);
    char *buf = NULL;
    size_t len = 0;
    FILE *g = open_memstream(&buf, &len);
    if (!g) return gf_error_set(GF_E_NOMEM, "plot script");
    fprintf(g, "set datafile separator '\\t'\nset grid\nset palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 '#fde725')\n"
               "set cblabel 'layer'\n");
    gf_probe_path(dir, "pca", "png", png, sizeof png);
    fprintf(g, "set terminal pngcairo size 1400,640\nset output '%s'\nset xlabel 'joint PC1'\nset ylabel 'joint PC2'\n"
               "set multiplot layout 1,2 title '%s: branch outputs of every layer in one PCA, coloured by layer'\n"
               "set title 'mixing branch (Grassmann mix / attention)'\n"
               "plot '%s' using 4:(strcol(2) eq 'mix' ? $5 : NaN):1 skip 1 with points pt 7 ps 0.4 lc palette notitle\n"
               "set title 'FFN branch'\n"
               "plot '%s' using 4:(strcol(2) eq 'ffn' ? $5 : NaN):1 skip 1 with points pt 7 ps 0.4 lc palette notitle\n"
               "unset multiplot\nunset title\n",
            png, nm, pts, pts);
    gf_probe_path(dir, "pca-3d", "png", png, sizeof png);
    fprintf(g, "set terminal pngcairo size 1000,800\nset output '%s'\nset zlabel 'joint PC3'\nset view 60,30\nset xyplane 0\nset title '%s: joint PCA, 3-D'\n"
               "splot '%s' using 4:5:(strcol(2) eq 'mix' ? $6 : NaN):1 skip 1 with points pt 6 ps 0.5 lc palette title 'mix', "
               "'' using 4:5:(strcol(2) eq 'ffn' ? $6 : NaN):1 skip 1 with points pt 8 ps 0.5 lc palette title 'ffn'\n",
            png, nm, pts);
    gf_probe_path(dir, "pca-pos", "png", png, sizeof png);
    fprintf(g, "set output '%s'\nset cblabel 'position'\nset xlabel 'PC1'\nset ylabel 'PC2'\nset zlabel 'PC3'\n"
               "set title '%s: learned position table, first three principal components'\n"
               "splot '%s' using 2:3:4:1 skip 1 with linespoints pt 7 ps 0.6 lw 1.5 lc palette notitle\n",
            png, nm, pos);
    gf_probe_path(dir, "pca-norm", "png", png, sizeof png);
    fprintf(g, "set output '%s'\nunset colorbox\nset xlabel 'position in the window'\nset ylabel 'mean |h_l| over windows'\nset logscale y\n"
               "set key outside right\nset title '%s: hidden-state norm by position'\nplot ",
            png, nm);
    for (int l = 0; l < n_h; l++)
        fprintf(g, "%s'%s' using 1:%d skip 1 with lines lw 2 lc palette frac %.3f title 'h_%d'", l ? ", " : "", nrm, l + 2,
                n_h > 1 ? (double)l / (n_h - 1) : 0.0, l);
    fprintf(g, "\n");
    fclose(g);
    gf_status st = gf_probe_gnuplot(buf, png);
    free(buf);
    return st;
}
