/* test_outputs.c — issue 35, output safety: an output that exists and is not a regular file is
 * refused (never replaced by one), the atomic writer's "<out>.tmp" is created anew and never
 * written through a link, a report that cannot be written whole leaves the previous one and names
 * the file, and a plot that cannot be written whole (a file-size limit) is reported, the previous
 * PNG kept. The gnuplot side for odd run names is tests/reliability/test_plots.sh. */
#include "gf_test.h"
#include "rel_util.h"

#include "gflow/checkpoint.h"
#include "gflow/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void out_path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/out-%s", gf_test_tmpdir(), name); }

static int is_fifo(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0 && S_ISFIFO(st.st_mode);
}

static int is_link(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
}

static int has_text(const char *p, const char *text) {
    size_t n = 0;
    char *b = gf_test_slurp(p, &n);
    int ok = b && n == strlen(text) && !memcmp(b, text, n);
    free(b);
    return ok;
}

/* A fifo, a link to /dev/null and a directory at the output path: the writer refuses each, naming
 * it, and leaves it as it was (a fifo would otherwise become a regular file, as /dev/full did). */
GF_TEST(unit, rel_atomic_refuses_non_regular_output) {
    char fifo[600], link[600], dir[600];
    out_path(fifo, sizeof fifo, "fifo");
    out_path(link, sizeof link, "devnull");
    out_path(dir, sizeof dir, "dir");
    unlink(fifo);
    unlink(link);
    rmdir(dir);
    GF_REQUIRE(mkfifo(fifo, 0644) == 0 && symlink("/dev/null", link) == 0 && mkdir(dir, 0755) == 0, "setup");
    const char *paths[] = {fifo, link, dir};
    for (int i = 0; i < 3; i++) {
        gf_atomic_file af;
        const char *p = paths[i];
        GF_CHECK_ERR(gf_atomic_open(&af, p), GF_E_INVALID, p);
        GF_CHECK_ERR(gf_output_check(p, NULL, 0), GF_E_INVALID, "not a regular file");
    }
    gf_params w;
    gf_params_init(&w);
    gf_params_add(&w, "a.weight", GF_PK_WEIGHT, 1, (int64_t[]){4});
    GF_REQUIRE_OK(gf_params_alloc(&w));
    const char *fp = fifo;
    GF_CHECK_ERR(gf_ckpt_save(fifo, &w, NULL), GF_E_INVALID, fp);
    gf_params_free(&w);
    char tmp[620];
    snprintf(tmp, sizeof tmp, "%s.tmp", fifo);
    GF_CHECK(is_fifo(fifo) && access(tmp, F_OK) != 0, "the fifo was replaced or a .tmp left");
    GF_CHECK(is_link(link), "the link to /dev/null was replaced");
    struct stat st;
    GF_CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "the directory was replaced");
}

/* "<out>.tmp" planted as a link to another file (or left as debris): the writer removes the name
 * and creates its own file, so the other file keeps its bytes and out is a regular file. */
GF_TEST(unit, rel_atomic_tmp_link_not_followed) {
    char out[600], tmp[620], victim[600];
    out_path(out, sizeof out, "plain.bin");
    out_path(victim, sizeof victim, "victim.txt");
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    unlink(out);
    unlink(tmp);
    GF_REQUIRE(gf_test_write_text(victim, "victim\n") && symlink(victim, tmp) == 0, "setup");
    gf_atomic_file af;
    FILE *f;
    GF_REQUIRE_OK(gf_atomic_fopen(&af, out, &f));
    fputs("new bytes\n", f);
    GF_REQUIRE_OK(gf_atomic_finish(&af, GF_OK));
    GF_CHECK(has_text(victim, "victim\n"), "the link's target was written");
    GF_CHECK(!is_link(out) && has_text(out, "new bytes\n"), "out is not a regular file with the new bytes");
    GF_CHECK(access(tmp, F_OK) != 0 && !is_link(tmp), "the tmp name is still there");
    /* the private form (token caches): "<out>.tmp<pid>" */
    char ptmp[640];
    snprintf(ptmp, sizeof ptmp, "%s.tmp%ld", out, (long)getpid());
    unlink(ptmp);
    GF_REQUIRE(symlink(victim, ptmp) == 0, "symlink");
    GF_REQUIRE_OK(gf_atomic_open_private(&af, out));
    GF_REQUIRE_OK(gf_atomic_write(&af, "cache\n", 6));
    GF_REQUIRE_OK(gf_atomic_commit(&af));
    GF_CHECK(has_text(victim, "victim\n") && has_text(out, "cache\n") && access(ptmp, F_OK) != 0 && !is_link(ptmp),
             "the private tmp went through the link");
    /* a checkpoint the same way: last.ckpt.tmp pointing at the victim */
    char ck[600], cktmp[620];
    out_path(ck, sizeof ck, "last.ckpt");
    snprintf(cktmp, sizeof cktmp, "%s.tmp", ck);
    unlink(cktmp);
    GF_REQUIRE(symlink(victim, cktmp) == 0, "symlink");
    gf_params w;
    gf_params_init(&w);
    gf_params_add(&w, "a.weight", GF_PK_WEIGHT, 1, (int64_t[]){4});
    GF_REQUIRE_OK(gf_params_alloc(&w));
    GF_REQUIRE_OK(gf_ckpt_save(ck, &w, NULL));
    GF_CHECK_OK(gf_ckpt_load(ck, &w, NULL));
    gf_params_free(&w);
    GF_CHECK(has_text(victim, "victim\n") && !is_link(ck), "the checkpoint went through the link");
}

static void dir_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", rel_runs_dir(), name); }

static void train_stopped(rel_result *res, const char *name) {
    char sn[128];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", sn, "--stop-after", "10", NULL};
    rel_gflow(res, 0, a);
}

/* Through the CLI: export onto a device node (root: mknod c 1 7, as in the issue) or a link to
 * /dev/null, and onto a fifo; probe with its table a fifo; export with model.safetensors.tmp a
 * link to another file. Refusals exit 1 naming the path before any work. */
GF_TEST(smoke, rel_cli_outputs_not_regular_or_linked_tmp) {
    rel_result res;
    char d[800], dev[900], fifo[900], tsv[900];
    dir_of(d, sizeof d, "out-kinds");
    train_stopped(&res, "out-kinds");
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(dev, sizeof dev, "%s/../out-kinds-full", rel_runs_dir());
    snprintf(fifo, sizeof fifo, "%s/../out-kinds-fifo", rel_runs_dir());
    unlink(dev);
    unlink(fifo);
    int node = mknod(dev, S_IFCHR | 0666, makedev(1, 7)) == 0; /* /dev/full; needs root */
    if (!node) GF_REQUIRE(symlink("/dev/null", dev) == 0, "symlink");
    GF_REQUIRE(mkfifo(fifo, 0644) == 0, "mkfifo");
    const char *outs[] = {dev, fifo};
    for (int i = 0; i < 2; i++) {
        const char *ex[] = {"export", d, outs[i], "--ckpt", "last", NULL};
        rel_gflow(&res, 0, ex);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, outs[i]) && strstr(res.err, "not a regular file"),
                 "export to %s: exit %d, stderr: %s", outs[i], res.exit_code, res.err);
    }
    struct stat st;
    GF_CHECK(lstat(dev, &st) == 0 && (node ? S_ISCHR(st.st_mode) : S_ISLNK(st.st_mode)), "the device was replaced");
    GF_CHECK(is_fifo(fifo), "the fifo was replaced");
    snprintf(tsv, sizeof tsv, "%s/probe-pca.tsv", d);
    unlink(tsv);
    GF_REQUIRE(mkfifo(tsv, 0644) == 0, "mkfifo");
    const char *pc[] = {"probe", "pca", d, "--ckpt", "last", "--windows", "2", "--points", "20", "--no-plot", "--quiet", NULL};
    rel_gflow(&res, 0, pc);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, tsv) && is_fifo(tsv), "probe onto a fifo table: exit %d, stderr: %s",
             res.exit_code, res.err);
    unlink(tsv);
    /* model.safetensors.tmp -> victim */
    char out[900], tmp[920], victim[900];
    snprintf(out, sizeof out, "%s/../out-kinds.safetensors", rel_runs_dir());
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(victim, sizeof victim, "%s/../out-kinds-victim.txt", rel_runs_dir());
    unlink(out);
    unlink(tmp);
    GF_REQUIRE(gf_test_write_text(victim, "victim\n") && symlink(victim, tmp) == 0, "setup");
    const char *ex[] = {"export", d, out, "--ckpt", "last", NULL};
    rel_gflow(&res, 0, ex);
    GF_CHECK(res.exit_code == 0, "export: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(has_text(victim, "victim\n"), "export wrote through the link at %s", tmp);
    GF_CHECK(!is_link(out) && lstat(out, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 100,
             "%s is not the exported file", out);
    GF_CHECK(access(tmp, F_OK) != 0 && !is_link(tmp), "%s left", tmp);
}

/* ablate --report under a file-size limit (ulimit -f): exit 1, the message names the file, and
 * summary.tsv/summary.md keep the previous report's bytes (before: "DIR: write failed" and both
 * cut to 0 bytes). */
GF_TEST(smoke, rel_ablate_report_whole_or_not_at_all) {
    rel_result res;
    char abl[900], text[2000], study[900], tsv[1000], md[1000];
    snprintf(abl, sizeof abl, "%s/../out-report.ini", rel_runs_dir());
    snprintf(study, sizeof study, "%s/../out-report-study", rel_runs_dir());
    /* eight variants: the report outgrows the error message, which the limit also cuts */
    int off = snprintf(text, sizeof text, "[ablation]\nname = rep\nbase = %s\nout_dir = %s\n", rel_base_recipe(), study);
    for (int v = 1; v <= 8; v++)
        off += snprintf(text + off, sizeof text - (size_t)off, "[variant lr%d]\noptim.lr = 0.00%d\n", v, v);
    gf_test_write_file(abl, text, strlen(text));
    const char *ab[] = {"ablate", abl, "--report", "--quiet", NULL};
    rel_gflow(&res, 0, ab);
    GF_REQUIRE(res.exit_code == 0, "report: exit %d, stderr: %s", res.exit_code, res.err);
    snprintf(tsv, sizeof tsv, "%s/rep/summary.tsv", study);
    snprintf(md, sizeof md, "%s/rep/summary.md", study);
    size_t nt = 0, nm = 0;
    char *t0 = gf_test_slurp(tsv, &nt), *m0 = gf_test_slurp(md, &nm);
    GF_REQUIRE(t0 && m0 && nt > 400 && nm > nt + 100, "first report (%zu, %zu bytes)", nt, nm);
    char dir[1000];
    snprintf(dir, sizeof dir, "%s/rep", study);
    int64_t limits[] = {(int64_t)nt - 8, (int64_t)nt + 8}; /* the .tsv fails; the .tsv fits and the .md fails */
    for (int i = 0; i < 2; i++) {
        rel_gflow(&res, limits[i], ab);
        GF_CHECK(res.exit_code == 1 && strstr(res.err, i ? "summary.md" : "summary.tsv") && strstr(res.err, "unchanged"),
                 "report under ulimit -f %lld bytes: exit %d, stderr: %s", (long long)limits[i], res.exit_code, res.err);
        size_t n1 = 0, n2 = 0;
        char *t1 = gf_test_slurp(tsv, &n1), *m1 = gf_test_slurp(md, &n2);
        GF_CHECK(t1 && m1 && n1 == nt && n2 == nm && !memcmp(t1, t0, nt) && !memcmp(m1, m0, nm),
                 "the previous report changed (%zu, %zu bytes)", n1, n2);
        free(t1);
        free(m1);
        GF_CHECK(rel_count_suffix(dir, ".tmp") == 0, "a .tmp was left");
    }
    free(t0);
    free(m0);
}

/* probe pca's four PNGs under ulimit -f 40 (blocks of 1 KiB: 40,960 bytes): exit 1 naming a PNG,
 * and the PNGs of the run before stay byte-identical (before: "wrote" four PNGs cut at 40,960). */
GF_TEST(smoke, rel_probe_plot_cut_is_reported) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        gf_test_skip("gnuplot is not installed");
        return;
    }
    rel_result res;
    char d[800];
    dir_of(d, sizeof d, "out-plot");
    train_stopped(&res, "out-plot");
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    const char *pc[] = {"probe", "pca", d, "--ckpt", "last", "--windows", "2", "--points", "20", "--quiet", NULL};
    rel_gflow(&res, 0, pc);
    GF_REQUIRE(res.exit_code == 0, "probe pca: exit %d, stderr: %s", res.exit_code, res.err);
    static const char *const stems[4] = {"pca", "pca-3d", "pca-pos", "pca-norm"};
    char *before[4];
    size_t nb[4];
    int big = 0;
    for (int i = 0; i < 4; i++) {
        char png[900];
        snprintf(png, sizeof png, "%s/probe-%s.png", d, stems[i]);
        before[i] = gf_test_slurp(png, &nb[i]);
        GF_REQUIRE(before[i] && nb[i] > 8 && !memcmp(before[i], "\x89PNG", 4), "%s", png);
        big |= nb[i] > 40960;
    }
    GF_REQUIRE(big, "no PNG over 40,960 bytes: the limit tests nothing");
    rel_gflow(&res, 40960, pc);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, ".png") && strstr(res.err, "incomplete"),
             "probe pca under ulimit -f 40: exit %d, stderr: %s", res.exit_code, res.err);
    for (int i = 0; i < 4; i++) {
        char png[900];
        snprintf(png, sizeof png, "%s/probe-%s.png", d, stems[i]);
        size_t n = 0;
        char *now = gf_test_slurp(png, &n);
        GF_CHECK(now && n == nb[i] && !memcmp(now, before[i], n), "%s changed (%zu -> %zu bytes)", png, nb[i], n);
        free(now);
        free(before[i]);
    }
    GF_CHECK(rel_count_suffix(d, ".tmp") == 0, "a .tmp was left");
}
