/* eval.c — evaluate a run directory's checkpoint on a split. */
#include "gflow/session.h"
#include "gflow/checkpoint.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

gf_status gf_run_ckpt_path(const char *run_dir_or_ckpt, const char *which, char *path, size_t cap) {
    struct stat sb;
    /* only ENOENT is "not there": a symlink loop (ELOOP) or EACCES is reported as what it is */
    if (stat(run_dir_or_ckpt, &sb) != 0)
        return errno == ENOENT ? gf_error_set(GF_E_NOTFOUND, "%s: no such run directory or checkpoint", run_dir_or_ckpt)
                               : gf_error_set(GF_E_IO, "%s: %s", run_dir_or_ckpt, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        snprintf(path, cap, "%s/%s.ckpt", run_dir_or_ckpt, which ? which : "best");
        if (stat(path, &sb) != 0)
            return errno == ENOENT
                       ? gf_error_set(GF_E_NOTFOUND, "%s: not found (has the run evaluated once? try --ckpt last)", path)
                       : gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    } else {
        snprintf(path, cap, "%s", run_dir_or_ckpt);
    }
    return GF_OK;
}

gf_status gf_eval_run_dir(const char *run_dir, const char *which, const char *split, gf_eval_result *res) {
    char path[1100];
    GF_TRY(gf_run_ckpt_path(run_dir, which, path, sizeof path));
    gf_recipe r;
    GF_TRY(gf_ckpt_peek_recipe(path, &r, NULL));
    gf_split sp = r.eval.split;
    if (split) GF_TRY(gf_split_parse(split, &sp));
    /* on the CPU whatever device trained it (as info, export, probes and sample): a checkpoint
     * made on a GPU evaluates on a machine without one, and reports the same numbers */
    r.run.device = GF_DEV_CPU;
    gf_session s;
    gf_status status = gf_session_open(&s, &r, 0);
    if (!status) status = gf_ckpt_load(path, s.params, NULL);
    if (!status) status = gf_session_eval(&s, sp, 0, res);
    gf_session_close(&s);
    return status;
}
