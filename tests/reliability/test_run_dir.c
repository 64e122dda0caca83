/* test_run_dir.c — through the real `gflow` binary: a run directory belongs to one process at a
 * time (a second `train` on it fails at once), --resume checks what it resumes (the checkpoint
 * belongs to the run, metrics.tsv is as long as the checkpoint recorded), and no command writes
 * over one of its inputs or a run's own files (issue 20, items 1-5; item 4 for every command that writes). */
#include "gf_test.h"
#include "rel_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void dir_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", rel_runs_dir(), name); }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* 1 when the file exists and holds a NUL byte */
static int has_nul(const char *path) {
    size_t n = 0;
    char *b = gf_test_slurp(path, &n);
    int nul = b && memchr(b, 0, n) != NULL;
    free(b);
    return nul;
}

/* Item 1: while a run trains (its first checkpoint written), `train --resume` and `train
 * --overwrite` on the same directory exit 1 at once with one line naming the directory and the
 * holder's pid; the running run is undisturbed. */
GF_TEST(smoke, rel_run_dir_locked_while_training) {
    char d[800], ck[900], met[900], log[900], sn[] = "run.name=locked";
    dir_of(d, sizeof d, "locked");
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    snprintf(log, sizeof log, "%s/locked.log", rel_runs_dir());
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", sn, "--set",
                       "train.max_steps=100000", NULL};
    pid_t pid = rel_gflow_spawn(log, a);
    GF_REQUIRE(pid > 0, "spawn");
    int status = 0, gone = 0;
    for (int i = 0; i < 1200 && access(ck, F_OK) != 0; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) { gone = 1; break; }
        sleep_ms(50);
    }
    if (gone || access(ck, F_OK) != 0) {
        if (!gone) { kill(pid, SIGKILL); waitpid(pid, &status, 0); }
        GF_REQUIRE(0, "the background run wrote no checkpoint (see %s)", log);
    }
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "pid %d", (int)pid);
    rel_result res;
    /* --stop-after keeps an unlocked second process short (it would otherwise run for long) */
    const char *r[] = {"train", "--resume", d, "--quiet", "--stop-after", "6", NULL};
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, d) && strstr(res.err, pidtxt),
             "--resume while training: exit %d, stderr: %s", res.exit_code, res.err);
    const char *o[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", sn, "--stop-after", "3", NULL};
    rel_gflow(&res, 0, o);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, d) && strstr(res.err, pidtxt),
             "--overwrite while training: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(waitpid(pid, &status, WNOHANG) == 0, "the first run ended early: %d", status);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    GF_CHECK(!has_nul(met), "metrics.tsv holds NUL bytes");
    /* the lock goes with its process: the killed run resumes */
    const char *r2[] = {"train", "--resume", d, "--quiet", "--stop-after", "12", NULL};
    rel_gflow(&res, 0, r2);
    GF_CHECK(res.exit_code == 0 || res.exit_code == 130, "resume after the holder died: exit %d, stderr: %s",
             res.exit_code, res.err);
}

/* `gflow train base --quiet --set run.name=NAME --stop-after STEPS [--set EXTRA]` */
static void train_stopped(rel_result *res, const char *name, const char *steps, const char *extra) {
    char sn[128];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", sn, "--stop-after", steps,
                       extra ? "--set" : NULL, extra, NULL};
    rel_gflow(res, 0, a);
}

static void copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *b = gf_test_slurp(from, &n);
    if (b) gf_test_write_file(to, b, n);
    free(b);
}

/* Two runs stopped at step 12, own and foreign (another model shape): own's directory, the two
 * last.ckpt paths and own's recipe.ini (buffers of 800 and 900 bytes). */
static void two_runs(const char *own, const char *foreign, char *a, char *cka, char *ckb, char *rec) {
    rel_result res;
    dir_of(a, 800, own);
    train_stopped(&res, own, "12", NULL);
    GF_CHECK(res.exit_code == 0, "run %s: %s", own, res.err);
    train_stopped(&res, foreign, "12", "model.d_model=16");
    GF_CHECK(res.exit_code == 0, "run %s: %s", foreign, res.err);
    snprintf(cka, 900, "%s/last.ckpt", a);
    snprintf(ckb, 900, "%s/%s/last.ckpt", rel_runs_dir(), foreign);
    snprintf(rec, 900, "%s/recipe.ini", a);
}

/* Item 2: a last.ckpt of another run (another model shape) in a run directory is refused on
 * --resume, naming the checkpoint and the run's recipe.ini; nothing in the directory changes. */
GF_TEST(smoke, rel_resume_refuses_foreign_checkpoint) {
    rel_result res;
    char a[800], cka[900], ckb[900], met[900], keep[900], mkeep[900], rec[900];
    two_runs("own", "foreign", a, cka, ckb, rec);
    GF_REQUIRE(!gf_test_failed_now(), "the two runs");
    snprintf(met, sizeof met, "%s/metrics.tsv", a);
    copy_file(ckb, cka);
    snprintf(keep, sizeof keep, "%s/own-ckpt-copy", rel_runs_dir());
    snprintf(mkeep, sizeof mkeep, "%s/own-metrics-copy", rel_runs_dir());
    copy_file(cka, keep);
    copy_file(met, mkeep);
    const char *r[] = {"train", "--resume", a, "--quiet", NULL};
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, cka) && strstr(res.err, rec),
             "resume on a foreign checkpoint: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(rel_files_equal(cka, keep) && rel_files_equal(met, mkeep), "the run directory changed");
    /* its own checkpoint still resumes, also when recipe.ini's comment (the build) differs */
    train_stopped(&res, "own", "12", NULL);
    GF_REQUIRE(res.exit_code == 0, "run own again: %s", res.err);
    size_t n = 0;
    char *ini = gf_test_slurp(rec, &n);
    char *nl = ini ? strchr(ini, '\n') : NULL;
    GF_REQUIRE(ini && ini[0] == '#' && nl, "recipe.ini starts with a comment");
    FILE *f = fopen(rec, "w");
    GF_REQUIRE(f, "rewrite %s", rec);
    fprintf(f, "# resolved by another build\n%s", nl + 1);
    fclose(f);
    free(ini);
    const char *r2[] = {"train", "--resume", a, "--quiet", "--stop-after", "15", NULL};
    rel_gflow(&res, 0, r2);
    GF_CHECK(res.exit_code == 0, "resume on its own checkpoint: exit %d, stderr: %s", res.exit_code, res.err);
}

/* Issue 35 item 2: every command that opens a run's checkpoint checks what --resume checks
 * (gf_run_ckpt_path, src/train/runcheck.c): another run's last.ckpt copied into a run directory
 * is refused by eval, export, sample, probe and info, with one line naming the checkpoint and
 * the run's recipe.ini; the run's own last.ckpt, put back, evaluates. */
GF_TEST(smoke, rel_commands_refuse_foreign_checkpoint) {
    rel_result res;
    char a[800], cka[900], ckb[900], rec[900], out[900];
    two_runs("own-cmds", "foreign-cmds", a, cka, ckb, rec);
    GF_REQUIRE(!gf_test_failed_now(), "the two runs");
    snprintf(out, sizeof out, "%s/../foreign.safetensors", rel_runs_dir());
    char keep[900];
    snprintf(keep, sizeof keep, "%s/own-cmds-ckpt", rel_runs_dir());
    copy_file(cka, keep);
    copy_file(ckb, cka);
    const char *cmds[][9] = {
        {"eval", a, "--ckpt", "last", NULL},
        {"eval", cka, NULL},
        {"export", a, out, "--ckpt", "last", NULL},
        {"sample", a, "--ckpt", "last", "--prompt", "the", "--tokens", "2", NULL},
        {"probe", "pca", a, "--ckpt", "last", "--no-plot", NULL},
        {"info", a, NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, cka) && strstr(res.err, rec) &&
                     strstr(res.err, "does not belong"),
                 "gflow %s %s on another run's last.ckpt: exit %d (signal %d): %s", cmds[i][0], cmds[i][1],
                 res.exit_code, res.signal, res.err);
    }
    GF_CHECK(access(out, F_OK) != 0, "export wrote %s", out);
    copy_file(keep, cka);
    const char *own[] = {"eval", a, "--ckpt", "last", NULL};
    rel_gflow(&res, 0, own);
    GF_CHECK(res.exit_code == 0, "eval of the run's own last.ckpt: exit %d: %s", res.exit_code, res.err);
}

/* Issue 35 item 2: a checkpoint evaluates only with the tokenizer it was trained with: the
 * tokenizer corpus changed under a run (its key follows the corpus's sha256) makes eval and
 * sample refuse with one line naming the checkpoint and both tokenizer keys. */
GF_TEST(smoke, rel_commands_refuse_other_tokenizer) {
    char dd[800], sd[900], p[900], q[900], d[800], ck[900];
    snprintf(dd, sizeof dd, "%s/../tok-data", rel_runs_dir());
    mkdir(dd, 0755);
    static const char *files[] = {"train.txt", "valid.txt", "test.txt"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", rel_data_dir(), files[i]);
        snprintf(q, sizeof q, "%s/%s", dd, files[i]);
        copy_file(p, q);
    }
    snprintf(sd, sizeof sd, "data.dir=%s", dd);
    rel_result res;
    train_stopped(&res, "tok-changed", "6", sd);
    GF_REQUIRE(res.exit_code == 0, "run tok-changed: %s", res.err);
    snprintf(q, sizeof q, "%s/train.txt", dd);
    FILE *f = fopen(q, "a");
    GF_REQUIRE(f, "append to %s", q);
    fputs("the the the\n", f);
    fclose(f);
    dir_of(d, sizeof d, "tok-changed");
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    const char *cmds[][9] = {
        {"eval", d, "--ckpt", "last", NULL},
        {"sample", d, "--ckpt", "last", "--prompt", "the", "--tokens", "2", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, ck) && strstr(res.err, "tokenizer word:"),
                 "gflow %s after the tokenizer corpus changed: exit %d (signal %d): %s", cmds[i][0], res.exit_code,
                 res.signal, res.err);
    }
}

/* Item 3: a metrics.tsv shorter than the checkpoint recorded is refused on --resume (never
 * extended with NUL bytes), naming the file; it is left as it was. */
GF_TEST(smoke, rel_resume_refuses_short_metrics) {
    rel_result res;
    char d[800], met[900];
    dir_of(d, sizeof d, "short-metrics");
    train_stopped(&res, "short-metrics", "12", NULL);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    size_t n = 0;
    char *m = gf_test_slurp(met, &n);
    GF_REQUIRE(m && n > 100, "metrics.tsv");
    gf_test_write_file(met, m, n / 2);
    const char *r[] = {"train", "--resume", d, "--quiet", "--stop-after", "15", NULL};
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, met),
             "resume with a short metrics.tsv: exit %d, stderr: %s", res.exit_code, res.err);
    size_t n2 = 0;
    char *m2 = gf_test_slurp(met, &n2);
    GF_CHECK(m2 && n2 == n / 2 && !memcmp(m, m2, n2), "metrics.tsv changed (%zu bytes, was %zu)", n2, n / 2);
    GF_CHECK(!has_nul(met), "metrics.tsv holds NUL bytes");
    free(m);
    free(m2);
}

/* Item 4: `gflow export` never writes over its input or a run's own files, however the path is
 * spelled (./x, a symlink); the files stay as they were. */
GF_TEST(smoke, rel_export_refuses_to_overwrite_run_files) {
    rel_result res;
    char d[800], ck[900], dot[900], link[900], met[900], best[900], keep[900], other[900];
    dir_of(d, sizeof d, "export-guard");
    train_stopped(&res, "export-guard", "12", NULL);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(dot, sizeof dot, "%s/./last.ckpt", d);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    snprintf(best, sizeof best, "%s/best.ckpt", d);
    snprintf(link, sizeof link, "%s/export-link.safetensors", rel_runs_dir());
    snprintf(other, sizeof other, "%s/export-elsewhere/summary.tsv", rel_runs_dir());
    unlink(link);
    GF_REQUIRE(symlink(ck, link) == 0, "symlink");
    char odir[900];
    snprintf(odir, sizeof odir, "%s/export-elsewhere", rel_runs_dir());
    mkdir(odir, 0755);
    snprintf(keep, sizeof keep, "%s/export-elsewhere/recipe.ini", rel_runs_dir());
    gf_test_write_file(keep, "[run]\n", 6); /* makes it look like a run directory */
    struct { const char *src, *out; } cases[] = {
        {d, ck}, {d, dot}, {ck, dot}, {d, link}, {d, met}, {d, best}, {ck, other},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n0 = 0, n1 = 0;
        char *before = gf_test_slurp(ck, &n0);
        const char *x[] = {"export", cases[i].src, cases[i].out, "--ckpt", "last", NULL};
        rel_gflow(&res, 0, x);
        char *after = gf_test_slurp(ck, &n1);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "overwrite"),
                 "export %s %s: exit %d, stderr: %s", cases[i].src, cases[i].out, res.exit_code, res.err);
        GF_CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "export %s %s changed last.ckpt",
                 cases[i].src, cases[i].out);
        free(before);
        free(after);
    }
    GF_CHECK(access(other, F_OK) != 0, "%s was written", other);
    size_t nm = 0;
    char *m = gf_test_slurp(met, &nm);
    GF_CHECK(m && !memcmp(m, "step\t", 5), "metrics.tsv was overwritten");
    /* the columns README documents (and tools/plot_*.sh read by position) */
    static const char header[] = "step\tepoch\tsplit\tloss\tppl\tppl_word\tacc\tlr\tgnorm\n";
    GF_CHECK(m && nm >= sizeof header - 1 && !memcmp(m, header, sizeof header - 1), "metrics.tsv header: %.80s",
             m ? m : "(unreadable)");
    free(m);
    char ok[900];
    snprintf(ok, sizeof ok, "%s/export-ok.safetensors", rel_runs_dir());
    const char *x[] = {"export", d, ok, "--ckpt", "last", NULL};
    rel_gflow(&res, 0, x);
    GF_CHECK(res.exit_code == 0 && access(ok, F_OK) == 0, "a plain export: exit %d: %s", res.exit_code, res.err);
}

/* Item 5: a probe that fails its argument check (a --blocks pattern matching nothing) leaves an
 * existing probe-hessian.tsv as it was and no .tmp behind; a good probe replaces it. */
GF_TEST(smoke, rel_failed_probe_keeps_previous_output) {
    rel_result res;
    char d[800], tsv[900];
    dir_of(d, sizeof d, "probe-keep");
    train_stopped(&res, "probe-keep", "12", NULL);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(tsv, sizeof tsv, "%s/probe-hessian.tsv", d);
    const char keep[] = "block\tlambda_1\nL0.q\t1.5\n";
    gf_test_write_file(tsv, keep, sizeof keep - 1);
    const char *p[] = {"probe", "hessian", d, "--ckpt", "last", "--blocks", "nosuchblock", "--no-plot", "--quiet", NULL};
    rel_gflow(&res, 0, p);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "nosuchblock"), "probe with a bad --blocks: exit %d, stderr: %s",
             res.exit_code, res.err);
    size_t n = 0;
    char *now = gf_test_slurp(tsv, &n);
    GF_CHECK(now && n == sizeof keep - 1 && !memcmp(now, keep, n), "probe-hessian.tsv changed: '%s'", now ? now : "");
    free(now);
    GF_CHECK(rel_count_suffix(d, ".tmp") == 0, "a .tmp was left");
}

/* Issue 20 item 4 (the rest): no command that writes files writes over its inputs or a run's own
 * files, however the path is spelled: compare's --plot, probe's tables and plots (a symlink
 * named like an output, a --pairs file named like one), ablate's summary in a study directory
 * that is an existing run's. Each exits 1 with one line before any work; the files stay. */
GF_TEST(smoke, rel_outputs_refuse_to_overwrite_run_files) {
    rel_result res;
    char d[800], ck[900], met[900], link[900], png[900], pairs[900], sum[900];
    dir_of(d, sizeof d, "out-guard");
    train_stopped(&res, "out-guard", "12", NULL);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    snprintf(sum, sizeof sum, "%s/summary.tsv", d);
    if (access(sum, F_OK) != 0) gf_test_write_text(sum, "run\tout-guard\n"); /* stopped runs have none yet */
    snprintf(link, sizeof link, "%s/out-guard-link.png", rel_runs_dir());
    unlink(link);
    GF_REQUIRE(symlink(ck, link) == 0, "symlink");
    size_t nck = 0, nmet = 0, nsum = 0;
    char *ck0 = gf_test_slurp(ck, &nck), *met0 = gf_test_slurp(met, &nmet), *sum0 = gf_test_slurp(sum, &nsum);
    GF_REQUIRE(ck0 && met0 && sum0, "run files");
    /* compare --plot onto the run's metrics.tsv, recipe.ini, or a symlink to its checkpoint */
    char rec[900];
    snprintf(rec, sizeof rec, "%s/recipe.ini", d);
    const char *plots[] = {met, rec, link};
    for (int i = 0; i < 3; i++) {
        const char *c[] = {"compare", d, "--plot", plots[i], NULL};
        rel_gflow(&res, 0, c);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "overwrite"),
                 "compare --plot %s: exit %d, stderr: %s", plots[i], res.exit_code, res.err);
    }
    /* probe: its plot is a symlink to last.ckpt */
    snprintf(png, sizeof png, "%s/probe-hessian.png", d);
    unlink(png);
    GF_REQUIRE(symlink("last.ckpt", png) == 0, "symlink");
    const char *h[] = {"probe", "hessian", d, "--ckpt", "last", "--blocks", "L0.ffn", "--lanczos-steps", "2",
                       "--top-k", "1", "--hutchinson", "0", "--quiet", NULL};
    rel_gflow(&res, 0, h);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "overwrite") && strstr(res.err, "probe-hessian.png"),
             "probe hessian with probe-hessian.png -> last.ckpt: exit %d, stderr: %s", res.exit_code, res.err);
    unlink(png);
    /* probe: --pairs names a file the probe writes */
    snprintf(pairs, sizeof pairs, "%s/probe-curvature-pairs.tsv", d);
    const char pt[] = "the bird likes a tree .\tthe dog likes a tree .\n";
    gf_test_write_file(pairs, pt, sizeof pt - 1);
    const char *cv[] = {"probe", "curvature", d, "--ckpt", "last", "--pairs", pairs, "--windows", "2",
                        "--null-samples", "10", "--no-plot", "--quiet", NULL};
    rel_gflow(&res, 0, cv);
    size_t npt = 0;
    char *pnow = gf_test_slurp(pairs, &npt);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "overwrite") && pnow && npt == sizeof pt - 1 &&
                 !memcmp(pnow, pt, npt),
             "probe curvature --pairs %s: exit %d, stderr: %s", pairs, res.exit_code, res.err);
    free(pnow);
    /* ablate: the study directory <out_dir>/<name> is this run's directory */
    char abl[900], text[2000];
    snprintf(abl, sizeof abl, "%s/../out-guard-ablation.ini", rel_runs_dir());
    snprintf(text, sizeof text, "[ablation]\nname = out-guard\nbase = %s\nout_dir = %s\n[variant r4]\nmodel.r = 4\n",
             rel_base_recipe(), rel_runs_dir());
    gf_test_write_file(abl, text, strlen(text));
    const char *ab[] = {"ablate", abl, "--report", "--quiet", NULL};
    rel_gflow(&res, 0, ab);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "overwrite") && strstr(res.err, "summary.tsv"),
             "ablate into a run directory: exit %d, stderr: %s", res.exit_code, res.err);
    /* the run is as it was */
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *ck1 = gf_test_slurp(ck, &n1), *met1 = gf_test_slurp(met, &n2), *sum1 = gf_test_slurp(sum, &n3);
    GF_CHECK(ck1 && n1 == nck && !memcmp(ck0, ck1, nck), "last.ckpt changed");
    GF_CHECK(met1 && n2 == nmet && !memcmp(met0, met1, nmet), "metrics.tsv changed");
    GF_CHECK(sum1 && n3 == nsum && !memcmp(sum0, sum1, nsum), "summary.tsv changed");
    free(ck0); free(met0); free(sum0); free(ck1); free(met1); free(sum1);
    /* and the same commands with plain outputs work */
    char ok[900];
    snprintf(ok, sizeof ok, "%s/out-guard-compare.png", rel_runs_dir());
    const char *c[] = {"compare", d, "--plot", ok, NULL};
    rel_gflow(&res, 0, c);
    GF_CHECK(res.exit_code == 0, "a plain compare: exit %d: %s", res.exit_code, res.err);
}
