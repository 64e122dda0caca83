/* gflow/rundir.h — reading what a training run leaves in its directory (summary.tsv,
 * metrics.tsv), and gnuplot for the plots drawn next to it. Shared by `gflow compare`, the
 * ablation report and the probes. */
#ifndef GFLOW_RUNDIR_H
#define GFLOW_RUNDIR_H

#include "gflow/error.h"
#include <stdio.h>

#define GF_RUN_SUMMARY_MAX 64 /* key/value pairs kept; summary.tsv holds about 25 */

/* <run_dir>/summary.tsv (written when a run finishes): key<TAB>value lines, in file order. */
typedef struct gf_run_summary {
    int n;
    struct { char key[64]; char val[512]; } kv[GF_RUN_SUMMARY_MAX];
} gf_run_summary;

/* Read <dir>/summary.tsv; returns the number of pairs (0 when there is none: run unfinished). */
int gf_run_summary_read(const char *dir, gf_run_summary *s);
/* The value of key (the first when repeated), NULL when absent. */
const char *gf_run_summary_get(const gf_run_summary *s, const char *key);
/* The value of key as a number; NAN when absent or not a number. */
double gf_run_summary_num(const gf_run_summary *s, const char *key);

/* One row of <run_dir>/metrics.tsv: step, epoch, split, loss, ppl, ppl_word, acc ("-" where
 * not measured), as text where the callers compare text. */
typedef struct gf_metrics_row {
    long long step, epoch;
    char split[16], loss[32], ppl[32], ppl_word[32], acc[32];
    int n_fields; /* leading fields parsed: 5 or more for an evaluation row */
} gf_metrics_row;

/* Call fn for every row of <dir>/metrics.tsv, checked as it is read: the header, then rows of
 * step and epoch (counts), split (train, valid or test) and up to six numbers or "-" (5 to 9
 * fields); a last line without its newline (a run killed while writing it) is skipped.
 * GF_E_NOTFOUND when there is no metrics.tsv; GF_E_PARSE naming metrics.tsv:line and what is
 * wrong at the first bad line (fn has seen the rows before it). */
gf_status gf_run_metrics_scan(const char *dir, void (*fn)(const gf_metrics_row *row, void *user), void *user);

/* Before a new run in dir (fresh, --overwrite, or started again from step 0): when dir is a run
 * directory (it holds recipe.ini, last.ckpt, best.ckpt or metrics.tsv), remove every file a run
 * and its probes wrote there (last.ckpt, best.ckpt, metrics.tsv, speed.tsv, summary.tsv,
 * recipe.ini, probe-*.tsv, probe-*.png, and their atomic-writer tmp files), so that what the
 * directory holds is the new run's or gone. Links are removed, never followed; other files
 * (.lock, the user's) stay. Nothing is removed when one of them is not a regular file after
 * links (a directory, a link to /dev/full: gf_output_regular's error, naming it); GF_E_IO naming
 * a file that cannot be removed. */
gf_status gf_run_dir_clear(const char *dir);

/* Draw `png` with gnuplot: the script (which must not `set output`: gnuplot's stdout is the
 * atomic writer's tmp file, gflow/fs.h) goes to gnuplot's stdin, without a shell; its messages
 * go to stderr (discarded when quiet). png is renamed into place only when gnuplot exits 0 and
 * the PNG is complete (signature and IEND); otherwise an error names png, which keeps what it
 * held: GF_E_EXTERNAL when gnuplot cannot start or fails (with HINT), GF_E_IO when the PNG is cut.
 * A path or a name never goes into the script: data goes in as inline datablocks, titles
 * through gf_gnuplot_string. */
gf_status gf_gnuplot(const char *script, int quiet, const char *png, const char *hint);

/* Write s to g as a gnuplot single-quoted string that substitutes nothing (quotes doubled,
 * control characters as spaces). */
void gf_gnuplot_string(FILE *g, const char *s);

#endif
