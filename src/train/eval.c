/* eval.c — evaluate a run directory's checkpoint on a split. */
#include "gflow/session.h"
#include "gflow/checkpoint.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

gf_status gf_eval_run_dir(const char *run_dir, const char *which, const char *split, gf_eval_result *res) {
    char path[1100];
    GF_TRY(gf_run_ckpt_path(run_dir, which, path, sizeof path));
    gf_recipe r;
    GF_TRY(gf_ckpt_peek_recipe(path, &r, NULL));
    gf_split sp = r.eval.split;
    if (split) GF_TRY(gf_split_parse(split, &sp));
    /* on the CPU whatever device trained it (gf_session_open_ckpt): a checkpoint made on a GPU
     * evaluates on a machine without one, and reports the same numbers */
    gf_session s;
    gf_status status = gf_session_open_ckpt(&s, &r, path);
    if (!status) gf_session_warn_split_changed(&s, path, sp);
    if (!status) status = gf_session_eval_memory_check(&s, 0);
    if (!status) status = gf_session_eval(&s, sp, 0, res);
    gf_session_close(&s);
    return status;
}
