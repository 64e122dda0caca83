/* test_failures.c — through the real `gflow` binary: corrupt/truncated checkpoints on
 * resume/eval (clear message naming the file, exit 1, nothing overwritten); non-finite values
 * (stop naming step and tensor with the last checkpoint intact, or skip); write failures
 * (RLIMIT_FSIZE, run directory under a regular file, metrics.tsv on a full device). */
#include "gf_test.h"
#include "gflow/checkpoint.h"
#include "rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void dir_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", rel_runs_dir(), name); }

/* `gflow train base --quiet --set run.name=NAME --set train.max_steps=STEPS [extra...]` */
static void train(rel_result *res, const char *name, int steps, const char *const *extra, int64_t fsize) {
    char sn[128], ss[64];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    snprintf(ss, sizeof ss, "train.max_steps=%d", steps);
    const char *a[32] = {"train", rel_base_recipe(), "--quiet", "--set", sn, "--set", ss};
    int n = 7;
    for (int i = 0; extra && extra[i]; i++) a[n++] = extra[i];
    a[n] = NULL;
    rel_gflow(res, fsize, a);
}

GF_TEST(smoke, rel_corrupt_checkpoint_cli) {
    rel_result res;
    const char *stop[] = {NULL};
    char d[800], ck[900], keep[900], met[900], metk[900];
    dir_of(d, sizeof d, "corrupt");
    train(&res, "corrupt", 12, stop, 0);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    size_t n = 0, nm = 0;
    char *good = gf_test_slurp(ck, &n), *mgood = gf_test_slurp(met, &nm);
    GF_REQUIRE(good && n > 4096 && mgood, "checkpoint read");
    /* the run finished; make it resumable-looking by corrupting in several ways */
    struct { const char *what; size_t len; long flip; } cases[] = {
        {"truncated to half", 0, -1}, {"truncated to 10 bytes", 10, -1}, {"empty", 1, -1},
        {"a flipped byte in the weights", 0, 1}, {"a flipped byte in the header", 0, 20}, {"garbage", 2, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = n;
        char *b = malloc(n);
        memcpy(b, good, n);
        if (cases[i].len == 0 && cases[i].flip < 0) len = n / 2;
        else if (cases[i].len == 10) len = 10;
        else if (cases[i].len == 1) len = 0;
        else if (cases[i].len == 2) { memset(b, 'x', n); len = 1000; }
        if (cases[i].flip == 1) b[n - 200] ^= 0x10;
        if (cases[i].flip == 20) b[20] ^= 0x01;
        gf_test_write_file(ck, b, len);
        snprintf(keep, sizeof keep, "%s/corrupt-copy", rel_runs_dir());
        gf_test_write_file(keep, b, len);
        free(b);
        const char *r[] = {"train", "--resume", d, "--quiet", NULL};
        rel_gflow(&res, 0, r);
        GF_CHECK(res.exit_code == 1 && strstr(res.err, ck) && res.err_lines == 1,
                 "resume on a checkpoint %s: exit %d, stderr: %s", cases[i].what, res.exit_code, res.err);
        const char *e[] = {"eval", d, "--ckpt", "last", NULL};
        rel_gflow(&res, 0, e);
        GF_CHECK(res.exit_code == 1 && strstr(res.err, ck) && res.err_lines == 1,
                 "eval on a checkpoint %s: exit %d, stderr: %s", cases[i].what, res.exit_code, res.err);
        char out[900];
        snprintf(out, sizeof out, "%s/x.safetensors", rel_runs_dir());
        const char *x[] = {"export", d, out, "--ckpt", "last", NULL};
        rel_gflow(&res, 0, x);
        GF_CHECK(res.exit_code == 1 && strstr(res.err, ck) && access(out, F_OK) != 0,
                 "export on a checkpoint %s: exit %d, stderr: %s", cases[i].what, res.exit_code, res.err);
        GF_CHECK(rel_files_equal(ck, keep), "the corrupt checkpoint was overwritten (%s)", cases[i].what);
        GF_CHECK(rel_count_suffix(d, ".tmp") == 0, "a .tmp appeared");
        snprintf(metk, sizeof metk, "%s/metrics-now", rel_runs_dir());
        size_t nn = 0;
        char *mnow = gf_test_slurp(met, &nn);
        GF_CHECK(mnow && nn == nm && !memcmp(mnow, mgood, nm), "metrics.tsv changed by a failed resume (%s)",
                 cases[i].what);
        free(mnow);
    }
    free(good);
    free(mgood);
}

static const char *k_explode[] = {"--set", "optim.lr=1", "--set", "schedule.warmup_steps=1000000", "--set",
                                  "schedule.min_lr=0", "--set", "optim.weight_decay=1e6", "--set",
                                  "train.eval_every=2", NULL};

/* Weight decay 1e6 with a warmup of 10^6 steps: the decay factor |1 - lr_t * wd| grows as
 * t, so weights grow factorially and overflow after ~18 steps (deterministic, no hooks),
 * while checkpoints every 2 steps are still finite. */
GF_TEST(smoke, rel_nonfinite_stops_with_intact_checkpoint) {
    rel_result res;
    char d[800], ck[900];
    dir_of(d, sizeof d, "nonfinite");
    train(&res, "nonfinite", 40, k_explode, 0);
    GF_CHECK(res.exit_code == 1, "exit %d: %s", res.exit_code, res.err);
    GF_CHECK(strstr(res.err, "non-finite") && strstr(res.err, "step ") && strstr(res.err, ".weight") &&
                 res.err_lines == 1,
             "message names the step and the tensor: %s", res.err);
    long bad_step = 0;
    const char *sp = strstr(res.err, "step ");
    if (sp) bad_step = strtol(sp + 5, NULL, 10);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    GF_REQUIRE_OK(gf_ckpt_peek(ck, &m));
    GF_CHECK(m.step > 0 && m.step < bad_step, "last checkpoint at step %lld, failure at step %ld", (long long)m.step,
             bad_step);
    char at[64];
    snprintf(at, sizeof at, "(step %lld), is intact", (long long)m.step);
    GF_CHECK(strstr(res.err, at) && strstr(res.err, ck), "the message names %s and its step: %s", ck, res.err);
    gf_ckpt_meta_free(&m);
    /* and it evaluates (finite weights, valid file) */
    const char *e[] = {"eval", d, "--ckpt", "last", NULL};
    rel_gflow(&res, 0, e);
    GF_CHECK(res.exit_code == 0, "eval of the last good checkpoint: %s", res.err);
}

/* Item 16: the same blow-up before the first checkpoint (no evaluation before the epoch's end
 * at step 66): the message says no checkpoint was written, not that one is intact. */
GF_TEST(smoke, rel_nonfinite_stop_before_first_checkpoint_says_so) {
    rel_result res;
    char d[800], ck[900];
    dir_of(d, sizeof d, "nonfinite-early");
    const char *x[] = {"--overwrite", "--set", "optim.lr=1", "--set", "schedule.warmup_steps=1000000", "--set",
                       "schedule.min_lr=0", "--set", "optim.weight_decay=1e6", "--set", "train.eval_every=0", NULL};
    train(&res, "nonfinite-early", 60, x, 0);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    GF_REQUIRE(access(ck, F_OK) != 0, "a checkpoint was written before the blow-up");
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "non-finite") &&
                 strstr(res.err, "no checkpoint") && !strstr(res.err, "intact"),
             "stop before the first checkpoint: exit %d, stderr: %s", res.exit_code, res.err);
}

/* `train base --set run.name=NAME --set train.max_steps=30 <k_explode> --set train.nonfinite=skip [extra]` */
static void train_skip(rel_result *res, const char *name, const char *extra) {
    char sn[128];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    const char *full[40] = {"train", rel_base_recipe(), "--overwrite", "--set", sn, "--set", "train.max_steps=30"};
    int m = 7;
    for (int i = 0; k_explode[i]; i++) full[m++] = k_explode[i];
    full[m++] = "--set";
    full[m++] = "train.nonfinite=skip";
    if (extra) { full[m++] = "--set"; full[m++] = extra; }
    full[m] = NULL;
    rel_gflow(res, 0, full);
}

/* Item 22: skipped steps are counted in summary.tsv and the last log line; past
 * [train] max_skip_frac of the run's steps the run stops (exit 1) naming the count and the key. */
GF_TEST(smoke, rel_nonfinite_skip_policy) {
    rel_result res;
    train_skip(&res, "nonfinite-skip", "train.max_skip_frac=1");
    GF_CHECK(res.exit_code == 0, "skip policy: exit %d: %.3000s", res.exit_code, res.err);
    GF_CHECK(strstr(res.err, "non-finite") && strstr(res.err, "skipped"), "skipped steps are reported: %.2000s",
             res.err);
    char d[800], p[900];
    dir_of(d, sizeof d, "nonfinite-skip");
    snprintf(p, sizeof p, "%s/metrics.tsv", d);
    size_t n = 0;
    char *m = gf_test_slurp(p, &n);
    int skipped = 0; /* a skipped step's train row has no perplexity */
    for (char *line = m ? strtok(m, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char split[16], loss[32], ppl[32];
        if (sscanf(line, "%*d\t%*d\t%15s\t%31s\t%31s", split, loss, ppl) == 3 && !strcmp(split, "train") &&
            !strcmp(ppl, "-"))
            skipped++;
    }
    free(m);
    GF_CHECK(skipped > 2, "only %d steps skipped: the trigger changed", skipped);
    snprintf(p, sizeof p, "%s/summary.tsv", d);
    char *s = gf_test_slurp(p, &n), want[64];
    snprintf(want, sizeof want, "\nskipped_steps\t%d\n", skipped);
    GF_CHECK(s && strstr(s, want), "summary.tsv lacks '%s'", want + 1);
    free(s);
    const char *last = res.err + strlen(res.err);
    if (last > res.err) last--;
    while (last > res.err && last[-1] != '\n') last--;
    snprintf(want, sizeof want, "%d of 30 steps were skipped", skipped);
    GF_CHECK(strstr(last, want), "the last log line does not say '%s': %s", want, last);
    /* the default max_skip_frac (0.05: 1 of 30 steps) stops the run at its second skip */
    train_skip(&res, "nonfinite-skip-limit", NULL);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "max_skip_frac") && strstr(res.err, "2 steps skipped"),
             "too many skipped steps: exit %d: %.3000s", res.exit_code, res.err);
}

GF_TEST(smoke, rel_write_failures_keep_previous_checkpoint) {
    rel_result res;
    char d[800], ck[900], copy[900], p[900], q[900];
    dir_of(d, sizeof d, "fsize");
    const char *stop[] = {"--stop-after", "7", NULL};
    train(&res, "fsize", 20, stop, 0);
    GF_REQUIRE(res.exit_code == 0, "first part: %s", res.err);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(copy, sizeof copy, "%s/fsize-last-copy", rel_runs_dir());
    size_t n = 0;
    char *b = gf_test_slurp(ck, &n);
    GF_REQUIRE(b, "last.ckpt");
    gf_test_write_file(copy, b, n);
    free(b);
    /* resume with files limited below a checkpoint's size: the next save fails */
    const char *r[] = {"train", "--resume", d, "--quiet", NULL};
    rel_gflow(&res, (int64_t)n / 2, r);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, ".ckpt") && res.err_lines == 1,
             "save under RLIMIT_FSIZE: exit %d (signal %d): %s", res.exit_code, res.signal, res.err);
    GF_CHECK(rel_files_equal(ck, copy), "last.ckpt changed by a failed save");
    GF_CHECK(rel_count_suffix(d, ".tmp") == 0, "a .tmp was left behind");
    /* and the run still completes, identical to an uninterrupted one */
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 0, "resume after the failure: %s", res.err);
    const char *none[] = {NULL};
    train(&res, "fsize-ref", 20, none, 0);
    snprintf(p, sizeof p, "%s/metrics.tsv", d);
    dir_of(q, sizeof q, "fsize-ref/metrics.tsv");
    GF_CHECK(rel_files_equal(p, q), "metrics after a failed save + resume differ from an uninterrupted run");

    /* a run directory under a regular file */
    char file[900], so[1000];
    snprintf(file, sizeof file, "%s/plainfile", rel_runs_dir());
    gf_test_write_file(file, "x", 1);
    snprintf(so, sizeof so, "run.out_dir=%s/sub", file);
    const char *o[] = {"--set", so, NULL};
    train(&res, "under-file", 5, o, 0);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "plainfile") && res.err_lines == 1,
             "run dir under a file: exit %d: %s", res.exit_code, res.err);
}

/* metrics.tsv on a device that is full: every write fails, and the run must say so rather
 * than finish with an empty log. */
GF_TEST(smoke, rel_metrics_write_failure_reported) {
    if (access("/dev/full", W_OK) != 0) { gf_test_skip("no /dev/full"); return; }
    rel_result res;
    char d[800], met[900];
    dir_of(d, sizeof d, "devfull");
    mkdir(d, 0755);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    unlink(met);
    GF_REQUIRE(symlink("/dev/full", met) == 0, "symlink");
    const char *o[] = {"--overwrite", NULL};
    train(&res, "devfull", 6, o, 0);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "metrics.tsv"),
             "metrics.tsv writes failing (ENOSPC) went unreported: exit %d: %s", res.exit_code, res.err);
}

/* Issue 20 item 18: a flipped byte in the trailer says what is wrong there: a reserved byte is
 * not reported as a checksum mismatch between two equal sums. */
GF_TEST(smoke, rel_checkpoint_trailer_damage_named) {
    rel_result res;
    char d[800], ck[900];
    dir_of(d, sizeof d, "trailer");
    const char *none[] = {NULL};
    train(&res, "trailer", 4, none, 0);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    size_t n = 0;
    char *good = gf_test_slurp(ck, &n);
    GF_REQUIRE(good && n > 64, "last.ckpt");
    /* the trailer: "GFLOWEND", crc32 (4), reserved zeros (4) */
    struct { size_t at; const char *needle; } cases[] = {
        {n - 16, "end marker"}, {n - 6, "checksum mismatch"}, {n - 2, "trailer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        good[cases[i].at] ^= 0x04;
        gf_test_write_file(ck, good, n);
        good[cases[i].at] ^= 0x04;
        const char *e[] = {"eval", d, "--ckpt", "last", NULL};
        rel_gflow(&res, 0, e);
        unsigned a = 0, b = 0;
        const char *cm = strstr(res.err, "stored ");
        int same = cm && sscanf(cm, "stored %x, computed %x", &a, &b) == 2 && a == b;
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, ck) && strstr(res.err, cases[i].needle) &&
                     !same,
                 "byte %zu of %zu flipped: exit %d, stderr: %s", cases[i].at, n, res.exit_code, res.err);
    }
    free(good);
}

/* Issue 20 item 19: a last.ckpt that is a symlink loop is reported as what it is (ELOOP), naming
 * the file, by every command that reads it; not as a missing checkpoint. */
GF_TEST(smoke, rel_checkpoint_symlink_loop_named) {
    rel_result res;
    char d[800], ck[900], out[900];
    dir_of(d, sizeof d, "ckloop");
    const char *none[] = {NULL};
    train(&res, "ckloop", 2, none, 0);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    unlink(ck);
    GF_REQUIRE(symlink("last.ckpt", ck) == 0, "symlink");
    snprintf(out, sizeof out, "%s/ckloop.safetensors", rel_runs_dir());
    const char *cmds[][8] = {
        {"eval", d, "--ckpt", "last", NULL},
        {"export", d, out, "--ckpt", "last", NULL},
        {"info", d, NULL},
        {"probe", "pca", d, "--ckpt", "last", NULL},
        {"sample", d, "--ckpt", "last", "--prompt", "the cat", NULL},
        {"train", "--resume", d, "--quiet", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, ck) &&
                     strstr(res.err, "symbolic links") && !strstr(res.err, "not found"),
                 "gflow %s on a looping last.ckpt: exit %d, stderr: %s", cmds[i][0], res.exit_code, res.err);
    }
    GF_CHECK(access(out, F_OK) != 0, "export wrote %s", out);
}

/* Issue 35 item 4: a tokenizer whose model cannot be written (RLIMIT_FSIZE here, a full disk
 * alike) is an error naming the model file and errno's text, not "sentencepiece training on
 * <corpus> failed: Internal: ..." (which blamed the corpus). */
GF_TEST(smoke, rel_tokenizer_write_failure_names_the_model) {
    char cache[900], set_cache[1000];
    snprintf(cache, sizeof cache, "%s/../spm-full", rel_runs_dir());
    snprintf(set_cache, sizeof set_cache, "tokenizer.cache_dir=%s", cache);
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=spm-full", "--set", set_cache, "--set",
                       "tokenizer.kind=spm", "--set", "tokenizer.vocab_size=60", "--stop-after", "1", NULL};
    rel_result res;
    rel_gflow(&res, 1000, a); /* bytes: smaller than the model */
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, cache) && strstr(res.err, ".model") &&
                 strstr(res.err, "File too large") && !strstr(res.err, "Internal"),
             "spm model write under RLIMIT_FSIZE: exit %d (signal %d): %s", res.exit_code, res.signal, res.err);
    GF_CHECK(rel_count_suffix(cache, ".model") == 0, "a partial model was left in %s", cache);
}
