/* ablate_internal.h — between the ablation files: ablate_parse.c reads the file into a
 * gf_ablation, ablate_run.c validates its recipes and trains, ablate_report.c summarises. */
#ifndef GF_ABLATE_INTERNAL_H
#define GF_ABLATE_INTERNAL_H

#include "gflow/ablate.h"

/* Parse the ablation file into *a (zeroed by the caller): variants[0] is "base"; no recipe
 * is loaded yet. GF_E_PARSE errors name file:line. */
gf_status gf_ablate_parse_file(const char *path, gf_ablation *a);

#endif
