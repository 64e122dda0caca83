/* eval.c — evaluate a run directory's checkpoint on a split. */
#include "gflow/session.h"
#include "gflow/checkpoint.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The split's file now against the sha256 the checkpoint recorded of it (data.SPLIT.sha256, as
 * the trainer writes it; a checkpoint of an older build records none): a file that changed
 * since is still evaluated, as asked, with a warning that the numbers are of another file than
 * the run's. */
static void warn_if_split_changed(const gf_session *s, const gf_ckpt_meta *m, gf_split sp, const char *ckpt) {
    static const char *const role[] = {"train", "valid", "test"}; /* gf_split's order */
    char key[64], file[1024], now[65];
    snprintf(key, sizeof key, "data.%s.sha256", role[sp]);
    const char *then = gf_ckpt_meta_get_kv(m, key);
    gf_session_split_path(s, sp, file, sizeof file);
    if (!then || gf_sha256_file(file, NULL, now) != GF_OK) { /* a missing file: loading it reported that */
        gf_error_clear();
        return;
    }
    if (strcmp(then, now))
        fprintf(stderr, "warning: %s: the %s split changed since %s was written (sha256 %s then, %s now): these "
                "numbers are of the new file, not comparable with the run's own\n", file, role[sp], ckpt, then, now);
}

gf_status gf_eval_run_dir(const char *run_dir, const char *which, const char *split, gf_eval_result *res) {
    char path[1100];
    GF_TRY(gf_run_ckpt_path(run_dir, which, path, sizeof path));
    gf_recipe r;
    gf_ckpt_meta m;
    GF_TRY(gf_ckpt_peek_recipe(path, &r, &m));
    gf_split sp = r.eval.split;
    gf_status status = split ? gf_split_parse(split, &sp) : GF_OK;
    if (status) {
        gf_ckpt_meta_free(&m);
        return status;
    }
    /* on the CPU whatever device trained it (gf_session_open_ckpt): a checkpoint made on a GPU
     * evaluates on a machine without one, and reports the same numbers */
    gf_session s;
    status = gf_session_open_ckpt(&s, &r, path);
    if (!status) warn_if_split_changed(&s, &m, sp, path);
    if (!status) status = gf_session_eval(&s, sp, 0, res);
    gf_session_close(&s);
    gf_ckpt_meta_free(&m);
    return status;
}
