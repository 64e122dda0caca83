/* test_readback.c — through the real `gflow` binary (issue 48, items 3 and 4): what training
 * accepts, every command reads back (one line limit for recipes, checked where a value enters),
 * and an empty output path is a usage error that touches nothing. */
#include "gf_test.h"
#include "rel_util.h"

#include "gflow/fs.h"
#include "gflow/recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* out gets "<runs>/<prefix>" padded with 'x' to n bytes */
static void padded(char *out, size_t n, const char *prefix) {
    int w = snprintf(out, n + 1, "%s/%s", rel_runs_dir(), prefix);
    GF_REQUIRE(w > 0 && (size_t)w < n, "the runs directory is too long for this test");
    memset(out + w, 'x', n - (size_t)w);
    out[n] = 0;
}

static void train_set(rel_result *res, const char *set, const char *steps) {
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", set, "--stop-after", steps, NULL};
    rel_gflow(res, 0, a);
}

/* Item 3: `out_dir = V` or `name = V` longer than a recipe line (198 bytes) is refused where it
 * enters, naming the key and the limit, and nothing is created; at the limit the run trains and
 * info, eval, export and --resume read its stored recipe back. */
GF_TEST(smoke, rel_accepted_recipe_values_read_back) {
    rel_result res;
    char dir[GF_RECIPE_MAX_LINE + 1], set[GF_RECIPE_MAX_LINE + 64], name[200];
    size_t at = GF_RECIPE_MAX_LINE - strlen("out_dir = "); /* the longest out_dir a line holds */
    padded(dir, at + 1, "rb-long-");
    snprintf(set, sizeof set, "run.out_dir=%s", dir);
    train_set(&res, set, "12");
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "out_dir") && strstr(res.err, "198"),
             "an out_dir one byte over the line: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(access(dir, F_OK) != 0, "%s was created", dir);
    memset(name, 'n', sizeof name);
    name[GF_RECIPE_MAX_LINE - strlen("name = ") + 1] = 0;
    snprintf(set, sizeof set, "run.name=%s", name);
    train_set(&res, set, "12");
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "name") && strstr(res.err, "198"),
             "a name one byte over the line: exit %d, stderr: %s", res.exit_code, res.err);
    /* at the limit: trains, and every command reads the run back */
    padded(dir, at, "rb-long-");
    snprintf(set, sizeof set, "run.out_dir=%s", dir);
    train_set(&res, set, "12");
    GF_REQUIRE(res.exit_code == 0, "an out_dir at the line limit: exit %d, stderr: %s", res.exit_code, res.err);
    char run[400], out[500];
    snprintf(run, sizeof run, "%s/base", dir);
    snprintf(out, sizeof out, "%s/../rb.safetensors", rel_runs_dir());
    const char *info[] = {"info", run, NULL}, *eval[] = {"eval", run, "--ckpt", "last", NULL};
    const char *exp[] = {"export", run, out, "--ckpt", "last", NULL};
    const char *res_[] = {"train", "--resume", run, "--quiet", NULL};
    const char *const *cmds[] = {info, eval, exp, res_};
    for (int i = 0; i < 4; i++) {
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 0, "gflow %s on the run: exit %d, stderr: %s", cmds[i][0], res.exit_code, res.err);
    }
    /* a recipe file's line over the limit is refused at file:line */
    char rec[600], text[600];
    snprintf(rec, sizeof rec, "%s/../rb-line.ini", rel_runs_dir());
    snprintf(text, sizeof text, "[run]\nout_dir = %s\n", dir);
    text[strlen("[run]\n") + GF_RECIPE_MAX_LINE] = 'x'; /* the line one byte longer */
    snprintf(text + strlen(text), sizeof text - strlen(text), "\n");
    gf_test_write_text(rec, text);
    const char *tr[] = {"train", rec, NULL};
    rel_gflow(&res, 0, tr);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "rb-line.ini:2") && strstr(res.err, "too long"),
             "a 199-byte recipe line: exit %d, stderr: %s", res.exit_code, res.err);
}

/* the file ./.tmp holds what it held */
static int tmp_intact(void) {
    size_t n = 0;
    char *b = gf_test_slurp(".tmp", &n);
    int ok = b && n == 5 && !memcmp(b, "keep\n", 5);
    free(b);
    return ok;
}

/* Item 4: an empty output path (or any empty argument or option value) is a usage error, exit 2
 * with one line, and ./.tmp (the atomic writer's tmp name for "") stays; the writer itself
 * refuses "" too. */
GF_TEST(smoke, rel_empty_output_path_is_a_usage_error) {
    rel_result res;
    char run[900], scratch[900];
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=empty-out",
                       "--stop-after", "6", NULL};
    rel_gflow(&res, 0, a);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(run, sizeof run, "%s/empty-out", rel_runs_dir());
    snprintf(scratch, sizeof scratch, "%s/../empty-cwd", rel_runs_dir());
    mkdir(scratch, 0755);
    GF_REQUIRE(chdir(scratch) == 0, "chdir %s", scratch); /* this test runs in its own process */
    gf_test_write_text(".tmp", "keep\n");
    const char *exp[] = {"export", run, "", "--ckpt", "last", NULL}, *exp0[] = {"export", "", "x.safetensors", NULL};
    const char *cmp[] = {"compare", run, "--plot", "", NULL}, *cmp2[] = {"compare", run, "--plot=", NULL};
    const char *prb[] = {"probe", "hessian", run, run, "--out", "", NULL};
    const char *const *cmds[] = {exp, exp0, cmp, cmp2, prb};
    for (int i = 0; i < 5; i++) {
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 2 && res.err_lines >= 1 && strstr(res.err, "''") && tmp_intact(),
                 "gflow %s with an empty path (case %d): exit %d, stderr: %s", cmds[i][0], i, res.exit_code, res.err);
    }
    gf_atomic_file af;
    GF_CHECK(gf_atomic_open(&af, "") == GF_E_INVALID && strstr(gf_last_error(), "empty") && tmp_intact(),
             "gf_atomic_open(\"\"): %s", gf_last_error());
    int fd;
    GF_CHECK(gf_open_nofollow("", 'a', &fd) == GF_E_INVALID && fd < 0, "gf_open_nofollow(\"\")");
}
