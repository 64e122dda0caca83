/* test_links.c — through the real `gflow` binary (issue 48, items 1, 2, 5 and 6): no file a run
 * writes is written through a link planted at its path, and --overwrite leaves nothing of the run
 * before.
 *
 * The policy the link tests check (docs/reliability.md): a file written whole (checkpoints,
 * recipe.ini, summary.tsv, probe tables and plots, reports, exports, token caches) replaces a
 * link at its path by a new file; a file written from the start of a new run (metrics.tsv,
 * speed.tsv) replaces it too; a file written in place (the .lock, metrics.tsv and speed.tsv on
 * --resume) refuses it, naming the path. Either way the link's target keeps its bytes. */
#include "gf_test.h"
#include "rel_util.h"

#include "gflow/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_victim[900];

/* the file every planted link points at, with known bytes */
static const char *victim(void) {
    snprintf(g_victim, sizeof g_victim, "%s/../link-victim.txt", rel_runs_dir());
    gf_test_write_text(g_victim, "victim: gflow must not write here\n");
    return g_victim;
}

static int victim_intact(void) {
    size_t n = 0;
    char *b = gf_test_slurp(g_victim, &n);
    int ok = b && !strcmp(b, "victim: gflow must not write here\n");
    free(b);
    return ok;
}

static void path_of(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    GF_CHECK(n > 0 && (size_t)n < cap, "path too long: %s/%s", dir, name);
}

/* dir/name becomes a symbolic link to the victim */
static void plant(const char *dir, const char *name) {
    char p[1000];
    path_of(p, sizeof p, dir, name);
    unlink(p);
    GF_CHECK(symlink(g_victim, p) == 0, "cannot plant a link at %s", p);
}

static int is_regular(const char *dir, const char *name) {
    char p[1000];
    struct stat st;
    path_of(p, sizeof p, dir, name);
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char *dir, const char *name) {
    char p[1000];
    struct stat st;
    path_of(p, sizeof p, dir, name);
    return lstat(p, &st) == 0;
}

static void run_dir(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", rel_runs_dir(), name); }

/* `gflow train base --quiet [--overwrite] --set run.name=NAME --stop-after STEPS [--set EXTRA]` */
static void train(rel_result *res, const char *name, const char *steps, int overwrite, const char *extra) {
    char sn[300];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    const char *a[12] = {"train", rel_base_recipe(), "--quiet", "--set", sn, "--stop-after", steps};
    int n = 7;
    if (overwrite) a[n++] = "--overwrite";
    if (extra) a[n++] = "--set", a[n++] = extra;
    rel_gflow(res, 0, a);
}

static void resume(rel_result *res, const char *dir) {
    const char *a[] = {"train", "--resume", dir, "--quiet", NULL};
    rel_gflow(res, 0, a);
}

/* the run refused the link at dir/name: exit 1, one line naming it as a link */
static void refused(const rel_result *res, const char *dir, const char *name, const char *what) {
    char p[1000];
    path_of(p, sizeof p, dir, name);
    GF_CHECK(res->exit_code == 1 && res->err_lines == 1 && strstr(res->err, p) && strstr(res->err, "symbolic link"),
             "%s with %s a link: exit %d, stderr: %s", what, p, res->exit_code, res->err);
}

/* Items 1 and 2, train: the lock (fresh and --resume), the append tables on --resume are
 * refused; on a fresh run and an --overwrite every planted link is replaced or removed. */
GF_TEST(smoke, rel_train_writes_through_no_link) {
    rel_result res;
    char d[800];
    victim();
    run_dir(d, sizeof d, "lnk-train");
    mkdir(rel_runs_dir(), 0755);
    mkdir(d, 0755);
    plant(d, ".lock");
    train(&res, "lnk-train", "12", 1, NULL);
    refused(&res, d, ".lock", "train");
    GF_CHECK(victim_intact(), "train wrote through the link at .lock");
    char lock[900];
    path_of(lock, sizeof lock, d, ".lock");
    unlink(lock);
    /* a fresh run: links where its tables and the token cache go */
    char cache[900], cache_set[1000];
    snprintf(cache, sizeof cache, "%s/../lnk-cache", rel_runs_dir());
    snprintf(cache_set, sizeof cache_set, "tokenizer.cache_dir=%s", cache);
    plant(d, "speed.tsv");
    plant(d, "recipe.ini.tmp");
    train(&res, "lnk-train", "12", 0, cache_set);
    GF_REQUIRE(res.exit_code == 0, "a fresh run with links planted: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(victim_intact(), "a fresh run wrote through a link");
    GF_CHECK(is_regular(d, "speed.tsv") && is_regular(d, "recipe.ini") && !exists(d, "recipe.ini.tmp"),
             "speed.tsv and recipe.ini are not the run's own files");
    /* the token caches: each replaced by a link, then rebuilt without writing through it */
    int n_cache = rel_count_suffix(cache, "");
    GF_CHECK(n_cache > 2, "no token cache in %s", cache); /* . and .. too */
    char cmd[2100];
    snprintf(cmd, sizeof cmd, "cd '%s' && for f in *; do rm -f \"$f\" && ln -s '%s' \"$f\"; done", cache, g_victim);
    GF_CHECK(system(cmd) == 0, "%s", cmd);
    train(&res, "lnk-train", "12", 1, cache_set);
    GF_CHECK(res.exit_code == 0 && victim_intact(), "the token caches were links: exit %d, stderr: %s", res.exit_code,
             res.err);
    /* --resume: the lock and the tables it appends to are refused; whole files replace links */
    plant(d, ".lock");
    resume(&res, d);
    refused(&res, d, ".lock", "train --resume");
    GF_CHECK(victim_intact(), "train --resume wrote through the link at .lock");
    unlink(lock);
    const char *in_place[] = {"metrics.tsv", "speed.tsv"};
    for (int i = 0; i < 2; i++) { /* the target holds the file's own bytes: only the link is wrong */
        char p[900], keep[1000];
        path_of(p, sizeof p, d, in_place[i]);
        snprintf(keep, sizeof keep, "%s.keep", p);
        size_t n = 0, m = 0;
        char *own = gf_test_slurp(p, &n);
        GF_REQUIRE(own && rename(p, keep) == 0, "rename %s", p);
        gf_test_write_file(g_victim, own, n);
        plant(d, in_place[i]);
        resume(&res, d);
        refused(&res, d, in_place[i], "train --resume");
        char *now = gf_test_slurp(g_victim, &m);
        GF_CHECK(now && m == n && !memcmp(now, own, n), "train --resume wrote through the link at %s", p);
        free(own);
        free(now);
        victim();
        GF_REQUIRE(unlink(p) == 0 && rename(keep, p) == 0, "rename %s back", keep);
    }
    const char *whole[] = {"last.ckpt.tmp", "best.ckpt.tmp", "summary.tsv", "summary.tsv.tmp"};
    for (int i = 0; i < 4; i++) plant(d, whole[i]);
    resume(&res, d);
    GF_CHECK(res.exit_code == 0 && victim_intact(), "--resume with links at the checkpoints' tmp files and "
             "summary.tsv: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(is_regular(d, "summary.tsv") && rel_count_suffix(d, ".tmp") == 0, "summary.tsv is not the run's");
    /* --overwrite: every file of the run before is a link */
    const char *all[] = {"metrics.tsv", "speed.tsv", "summary.tsv", "last.ckpt", "best.ckpt", "recipe.ini",
                         "last.ckpt.tmp", "probe-hessian.tsv"};
    for (int i = 0; i < 8; i++) plant(d, all[i]);
    train(&res, "lnk-train", "12", 1, NULL);
    GF_CHECK(res.exit_code == 0 && victim_intact(), "--overwrite over links: exit %d, stderr: %s", res.exit_code,
             res.err);
    GF_CHECK(is_regular(d, "metrics.tsv") && is_regular(d, "speed.tsv") && is_regular(d, "last.ckpt") &&
                 is_regular(d, "recipe.ini") && !exists(d, "summary.tsv") && !exists(d, "probe-hessian.tsv"),
             "--overwrite left a link or a file of the run before");
}

/* Item 2, probe, export and ablate: links at every file they write are replaced, never followed. */
GF_TEST(smoke, rel_probe_export_ablate_write_through_no_link) {
    rel_result res;
    char d[800];
    victim();
    run_dir(d, sizeof d, "lnk-tools");
    train(&res, "lnk-tools", "12", 1, NULL);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    const char *pt[] = {"probe-hessian.tsv", "probe-hessian.tsv.tmp", "probe-hessian.png",
                        "probe-hessian.png.tmp"};
    for (int i = 0; i < 4; i++) plant(d, pt[i]);
    const char *p[] = {"probe", "hessian", d, "--ckpt", "last", "--lanczos-steps", "4", "--quiet", NULL};
    rel_gflow(&res, 0, p);
    GF_CHECK(res.exit_code == 0 && victim_intact(), "probe with links: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(is_regular(d, "probe-hessian.tsv") && is_regular(d, "probe-hessian.png") &&
                 rel_count_suffix(d, ".tmp") == 0, "the probe's outputs are not its own files");
    char out[900], tmp[1000];
    snprintf(out, sizeof out, "%s/../lnk-export.safetensors", rel_runs_dir());
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    unlink(out);
    unlink(tmp);
    GF_CHECK(symlink(g_victim, out) == 0 && symlink(g_victim, tmp) == 0, "plant %s", out);
    const char *e[] = {"export", d, out, "--ckpt", "last", NULL};
    rel_gflow(&res, 0, e);
    GF_CHECK(res.exit_code == 0 && victim_intact(), "export onto a link: exit %d, stderr: %s", res.exit_code, res.err);
    struct stat st;
    GF_CHECK(lstat(out, &st) == 0 && S_ISREG(st.st_mode) && access(tmp, F_OK) != 0, "%s is not the export", out);
    /* ablate: the report files and a variant's run directory */
    char abl[900], text[1500], study[900], sdir[1000], base[1100];
    snprintf(abl, sizeof abl, "%s/../lnk-study.ini", rel_runs_dir());
    snprintf(study, sizeof study, "%s/../lnk-study", rel_runs_dir());
    snprintf(text, sizeof text, "[ablation]\nname = s\nbase = %s\nout_dir = %s\n[variant short]\ntrain.max_steps = 6\n",
             rel_base_recipe(), study);
    gf_test_write_text(abl, text);
    snprintf(sdir, sizeof sdir, "%s/s", study);
    snprintf(base, sizeof base, "%s/short", sdir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", base);
    GF_REQUIRE(system(cmd) == 0, "%s", cmd);
    const char *rep[] = {"summary.tsv", "summary.md", "curves.tsv", "curves.png", "summary.tsv.tmp"};
    for (int i = 0; i < 5; i++) plant(sdir, rep[i]);
    plant(base, "speed.tsv");
    plant(base, "metrics.tsv");
    const char *ab[] = {"ablate", abl, "--quiet", NULL};
    rel_gflow(&res, 0, ab);
    GF_CHECK(res.exit_code == 0 && victim_intact(), "ablate with links: exit %d, stderr: %s", res.exit_code, res.err);
    for (int i = 0; i < 4; i++) GF_CHECK(is_regular(sdir, rep[i]), "%s/%s is not the report's", sdir, rep[i]);
    GF_CHECK(is_regular(base, "speed.tsv") && is_regular(base, "metrics.tsv"), "the variant's tables are links");
}

/* Items 5 and 6: --overwrite starts a new run. The run before (2 layers, trained to the end,
 * probed) leaves nothing behind: a 1-layer run that then fails (lr 1e30: non-finite) leaves no
 * summary.tsv (compare read the old numbers) and no probe table (`probe --replot` drew the old
 * run's); the directory's other files stay. */
GF_TEST(smoke, rel_overwrite_leaves_nothing_of_the_run_before) {
    rel_result res;
    char d[800], mine[900];
    run_dir(d, sizeof d, "ow-new");
    train(&res, "ow-new", "1000", 1, NULL);
    GF_REQUIRE(res.exit_code == 0 && exists(d, "summary.tsv") && exists(d, "best.ckpt"), "first run: %s", res.err);
    const char *p[] = {"probe", "hessian", d, "--ckpt", "last", "--lanczos-steps", "4", "--quiet", NULL};
    rel_gflow(&res, 0, p);
    GF_REQUIRE(res.exit_code == 0 && exists(d, "probe-hessian.tsv"), "probe: %s", res.err);
    path_of(mine, sizeof mine, d, "notes.txt");
    gf_test_write_text(mine, "the user's\n");
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=ow-new", "--set",
                       "model.n_layers=1", "--set", "optim.lr=1e30", NULL};
    rel_gflow(&res, 0, a);
    GF_CHECK(res.exit_code == 1, "the failing run: exit %d, stderr: %s", res.exit_code, res.err);
    const char *old[] = {"summary.tsv", "best.ckpt", "probe-hessian.tsv", "probe-hessian.png"};
    for (int i = 0; i < 4; i++) GF_CHECK(!exists(d, old[i]), "%s of the run before is still in %s", old[i], d);
    GF_CHECK(exists(d, "notes.txt") && exists(d, "recipe.ini"), "the user's file or the new recipe.ini is gone");
    const char *r[] = {"probe", "hessian", d, "--replot", "--quiet", NULL};
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code != 0, "probe --replot drew a table of the run before: exit %d", res.exit_code);
}
