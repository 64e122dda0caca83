/* overlay.c — two runs probed with the same kind, in one table and one plot. */
#include "probe_internal.h"
#include <stdlib.h>
#include <string.h>

/* out: the rows of both runs' main tables behind a first column `run` (headers must match). */
static gf_status join_tables(const char *kind, const char *const *dirs, const char *out) {
    gf_tsv t[2];
    char path[1200];
    for (int r = 0; r < 2; r++) {
        gf_probe_path(dirs[r], kind, "tsv", path, sizeof path);
        gf_status st = gf_tsv_read(path, &t[r]);
        if (st) { if (r) gf_tsv_free(&t[0]); return st; }
    }
    gf_status st = GF_OK;
    if (t[0].n_cols != t[1].n_cols)
        st = gf_error_set(GF_E_PARSE, "%s and %s have different columns (re-run the probe on both with the same options)",
                          t[0].path, t[1].path);
    FILE *f = NULL;
    gf_atomic_file f_af;
    if (!st) st = gf_atomic_fopen(&f_af, out, &f);
    if (!st) {
        fprintf(f, "run");
        for (int32_t c = 0; c < t[0].n_cols; c++) fprintf(f, "\t%s", t[0].head[c]);
        fprintf(f, "\n");
        for (int r = 0; r < 2; r++) {
            char nm[300];
            gf_probe_basename(dirs[r], nm, sizeof nm);
            for (int64_t i = 0; i < t[r].n_rows; i++) {
                fprintf(f, "%s", nm);
                for (int32_t c = 0; c < t[r].n_cols; c++) fprintf(f, "\t%s", t[r].rows[i][c]);
                fprintf(f, "\n");
            }
        }
        st = gf_atomic_finish(&f_af, st);
    }
    gf_tsv_free(&t[0]);
    gf_tsv_free(&t[1]);
    return st;
}

gf_status gf_probe_overlay(const char *kind, const char *run_a, const char *run_b, const char *out_dir,
                           const gf_probe_opts *o) {
    const char *dirs[2] = {run_a, run_b};
    char na[300], nb[300], stem[700], tsv[1500], png[1500];
    gf_probe_basename(run_a, na, sizeof na);
    gf_probe_basename(run_b, nb, sizeof nb);
    snprintf(stem, sizeof stem, "%s-%s-vs-%s", kind, na, nb);
    gf_probe_path(out_dir, stem, "tsv", tsv, sizeof tsv);
    gf_probe_path(out_dir, stem, "png", png, sizeof png);
    GF_TRY(join_tables(kind, dirs, tsv));
    if (o->log) fprintf(stderr, "probe: wrote %s\n", tsv);
    if (!o->plot) return GF_OK;
    gf_status st = !strcmp(kind, "curvature") ? gf_probe_curvature_plot(dirs, 2, png)
                 : !strcmp(kind, "hessian")   ? gf_probe_hessian_plot(dirs, 2, png)
                                              : gf_probe_pca_overlay_plot(dirs, 2, png);
    if (!st && o->log) fprintf(stderr, "probe: wrote %s\n", png);
    return st;
}

gf_status gf_probe_replot(const char *kind, const char *run_dir) {
    if (!strcmp(kind, "curvature")) return gf_probe_plot_run(run_dir, kind, gf_probe_curvature_plot);
    if (!strcmp(kind, "hessian")) return gf_probe_plot_run(run_dir, kind, gf_probe_hessian_plot);
    if (!strcmp(kind, "pca")) return gf_probe_pca_plots(run_dir);
    return gf_error_set(GF_E_INVALID, "unknown probe kind '%s'", kind);
}

/* Left: participation ratio of each branch per layer; middle: share of the first component;
 * right: |h_N| by position relative to its mean (the first-token effect, scale-free). */
gf_status gf_probe_pca_overlay_plot(const char *const *dirs, int n_dirs, const char *png) {
    static const char *col[2] = {"#1f77b4", "#d62728"};
    static const char *const names[4] = {"layer", "component", "participation_ratio", "ev1"};
    static const char *comp[3] = {"mix", "ffn", "hidden"}, *style[3] = {"lw 2 pt 6", "lw 2 pt 8 dt 2", "lw 1 pt 1 dt 3"},
                      *suffix[3] = {" mix", " ffn", " h_l"};
    gf_plot p;
    GF_TRY(gf_plot_begin(&p, "1500,480", ""));
    gf_status st = GF_OK;
    for (int r = 0; r < n_dirs && !st; r++) {
        gf_tsv t;
        int32_t c[4];
        if ((st = gf_plot_table(dirs[r], "pca", &t, 4, names, c))) break;
        const int32_t cols[3] = {c[0], c[2], c[3]}; /* layer, participation ratio, ev1 */
        for (int k = 0; k < 3; k++) {
            char name[32];
            snprintf(name, sizeof name, "%s%d", comp[k], r);
            gf_tsv_datablock(p.g, name, &t, c[1], comp[k], cols, 3);
        }
        gf_tsv_free(&t);
        char path[1200];
        gf_probe_path(dirs[r], "pca-norm", "tsv", path, sizeof path);
        if ((st = gf_tsv_read(path, &t))) break;
        double mean = 0;
        for (int64_t i = 0; i < t.n_rows; i++) mean += gf_tsv_num(&t, i, t.n_cols - 1) / (double)t.n_rows;
        fprintf(p.g, "$norm%d << EOD\n", r);
        for (int64_t i = 0; i < t.n_rows; i++)
            fprintf(p.g, "%.9g %.6f\n", gf_tsv_num(&t, i, 0), gf_tsv_num(&t, i, t.n_cols - 1) / mean);
        fprintf(p.g, "EOD\n");
        gf_tsv_free(&t);
    }
    if (!st) {
        gf_plot_command(&p, "set multiplot layout 1,3\nset xlabel 'layer'\nset xtics 1\nset key top left font ',9'\n"
                            "set ylabel 'participation ratio (effective dimension)'\n"
                            "set title 'PCA spectrum per layer'\n", "plot");
        for (int r = 0; r < n_dirs; r++)
            for (int k = 0; k < 3; k++)
                gf_plot_series(&p, dirs[r], suffix[k], "$%s%d using 1:2 with linespoints %s lc rgb '%s'", comp[k], r,
                               style[k], col[r]);
        gf_plot_command(&p, "set ylabel 'variance share of PC1'\nset title 'first principal component'\n", "plot");
        for (int r = 0; r < n_dirs; r++)
            for (int k = 0; k < 3; k++)
                gf_plot_series(&p, dirs[r], suffix[k], "$%s%d using 1:3 with linespoints %s lc rgb '%s'", comp[k], r,
                               style[k], col[r]);
        gf_plot_command(&p, "set xlabel 'position in the window'\nunset xtics\nset xtics auto\n"
                            "set ylabel '|h_N| at the position / its mean over positions'\n"
                            "set title 'last hidden state: norm by position'\n", "plot");
        for (int r = 0; r < n_dirs; r++)
            gf_plot_series(&p, dirs[r], "", "$norm%d using 1:2 with lines lw 2 lc rgb '%s'", r, col[r]);
    }
    return gf_plot_draw(&p, st, "unset multiplot\n", png);
}
