/* probe_internal.h — what the probes share: a run opened for probing (recipe, tokenizer, model
 * loaded from its checkpoint, validation windows), output paths, and the gnuplot pipe. */
#ifndef GF_PROBE_INTERNAL_H
#define GF_PROBE_INTERNAL_H

#include "gflow/probe.h"
#include "gflow/checkpoint.h"
#include "gflow/fs.h"
#include "gflow/session.h"
#include "gflow/threads.h"
#include <stdio.h>

typedef struct gf_probe_run {
    char dir[1024];        /* the run directory (outputs go here) */
    char ckpt[1100];
    char name[256];        /* basename of dir, for titles */
    gf_session s;          /* tokenizer, model (weights from ckpt), validation split */
    int open;
    int32_t *win;          /* (W, L+1) the chosen validation windows */
    int64_t W, L;
} gf_probe_run;

/* Open RUN (a run directory) with its `which` checkpoint, load the validation split and draw
 * `windows` windows of seq_len+1 tokens (shuffled with seed; all of them if fewer exist).
 * windows = 0 loads no data. */
gf_status gf_probe_open(gf_probe_run *p, const char *run_dir, const gf_probe_opts *o, int64_t windows);
void gf_probe_close(gf_probe_run *p);
/* RUN/probe-<stem>.<ext> */
void gf_probe_path(const char *dir, const char *stem, const char *ext, char *out, size_t cap);
/* A plot title "<name><suffix>" as a quoted gnuplot string (gf_gnuplot_string): a run's name
 * never reaches gnuplot otherwise. */
void gf_probe_title(FILE *g, const char *name, const char *suffix);
/* Draw png with a gnuplot script that does not `set output` (gf_gnuplot). */
gf_status gf_probe_gnuplot(const char *script, const char *what);
/* Basename of a directory path (trailing slashes ignored). */
void gf_probe_basename(const char *dir, char *out, size_t cap);

/* A TSV table read back for plotting (header row + rows of fields). */
typedef struct gf_tsv {
    char path[1100];
    int32_t n_cols;
    char **head;           /* (n_cols) */
    int64_t n_rows;
    char ***rows;          /* (n_rows, n_cols) */
} gf_tsv;
gf_status gf_tsv_read(const char *path, gf_tsv *t);
/* Column index by header name; a missing column is an error naming the file. */
gf_status gf_tsv_col(const gf_tsv *t, const char *name, int32_t *col);
double gf_tsv_num(const gf_tsv *t, int64_t row, int32_t col);
void gf_tsv_free(gf_tsv *t);
/* Append to a gnuplot script an inline datablock $NAME holding the columns `cols` (gnuplot
 * `using` numbering 1..) of the rows whose column `key_col` equals `key` (key NULL: all rows). */
void gf_tsv_datablock(FILE *g, const char *name, const gf_tsv *t, int32_t key_col, const char *key, const int32_t *cols,
                      int n_cols);
/* A run's table <dir>/probe-<stem>.tsv read, with the columns `names` (n, looked up in order)
 * into cols; on failure nothing is left to free. */
gf_status gf_plot_table(const char *dir, const char *stem, gf_tsv *t, int n, const char *const *names, int32_t *cols);

/* A gnuplot script built in memory and drawn once: every probe plot.
 *   gf_plot_begin   the terminal (pngcairo of `size`, "W,H"), a grid, and `preamble` (lines)
 *   p->g            the caller's datablocks (gf_tsv_datablock) and settings
 *   gf_plot_command `lines` (settings), then "plot " or "splot " (cmd): a command of series; it
 *                   ends the one before
 *   gf_plot_series  one series: ", " after the command's first, the text of fmt, then " title "
 *                   and the run's name (dir's basename) with suffix, quoted (gf_probe_title)
 *   gf_plot_draw    ends the open command, appends `tail`, draws png unless st, frees the script */
typedef struct gf_plot {
    FILE *g;
    char *buf;
    size_t len;
    int series; /* series of the open command; -1: none open */
} gf_plot;
gf_status gf_plot_begin(gf_plot *p, const char *size, const char *preamble);
void gf_plot_command(gf_plot *p, const char *lines, const char *cmd);
void gf_plot_series(gf_plot *p, const char *dir, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
gf_status gf_plot_draw(gf_plot *p, gf_status st, const char *tail, const char *png);

/* The plots, from the probes' TSVs, of one run or two overlaid (dirs[0], dirs[1]). */
gf_status gf_probe_curvature_plot(const char *const *dirs, int n_dirs, const char *png);
gf_status gf_probe_hessian_plot(const char *const *dirs, int n_dirs, const char *png);
gf_status gf_probe_pca_plots(const char *dir); /* the four single-run PNGs */
gf_status gf_probe_pca_overlay_plot(const char *const *dirs, int n_dirs, const char *png);
typedef gf_status (*gf_probe_plot_fn)(const char *const *dirs, int n_dirs, const char *png);
/* One run's plot of `kind`, drawn by fn into <run_dir>/probe-<kind>.png. */
gf_status gf_probe_plot_run(const char *run_dir, const char *kind, gf_probe_plot_fn fn);

#endif
