/* ablate_internal.h — between the ablation files: ablate_parse.c reads the file into a
 * gf_ablation, ablate_run.c validates its recipes and trains, ablate_report.c summarises. */
#ifndef GF_ABLATE_INTERNAL_H
#define GF_ABLATE_INTERNAL_H

#include "gflow/ablate.h"

/* Parse the ablation file into *a (zeroed by the caller): variants[0] is "base"; no recipe
 * is loaded yet. GF_E_PARSE errors name file:line. */
gf_status gf_ablate_parse_file(const char *path, gf_ablation *a);

/* The study's own outputs (summary.tsv, summary.md, curves.tsv, curves.png in study_dir) must not
 * land on its inputs or on a run's files (a study directory that is an existing run's, a
 * symlink): gf_output_check of each, before anything runs (ablate_report.c). */
gf_status gf_ablate_check_outputs(const gf_ablation *a);

#endif
