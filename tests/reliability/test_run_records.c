/* test_run_records.c — through the real `gflow` binary: what a run directory records and what
 * --resume continues (issue 20, items 15, 17, 21): a resume on changed data is refused naming
 * the file and both sha256; a run killed before its first checkpoint starts again through
 * --resume and ends as an uninterrupted run; metrics.tsv evaluates each step once, in step
 * order, with a test row whose step and epoch are the best checkpoint's; a run whose recipe
 * predates a key resumes as often as needed; a bf16 run names where its products run (issue 34);
 * `gflow eval` on a split that changed since the checkpoint warns, naming the file and both sha256. */
#include "gf_test.h"
#include "gflow/checkpoint.h"
#include "gflow/data.h"
#include "gflow/session.h"
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

static void copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *b = gf_test_slurp(from, &n);
    if (b) gf_test_write_file(to, b, n);
    free(b);
}

static int count_lines(const char *path) {
    size_t n = 0;
    char *b = gf_test_slurp(path, &n);
    int k = 0;
    for (size_t i = 0; b && i < n; i++) k += b[i] == '\n';
    free(b);
    return k;
}

/* Item 15: a data file that changed after the checkpoint was written: --resume exits 1 with one
 * line naming the file and both sha256, and leaves the run directory as it was;
 * --allow-data-change continues (and says so). */
GF_TEST(smoke, rel_resume_refuses_changed_data) {
    char dd[800], p[900], q[900], d[800], ck[900], met[900], sd[1000], sc[1000];
    snprintf(dd, sizeof dd, "%s/../dchg-data", rel_runs_dir());
    mkdir(dd, 0755);
    const char *files[] = {"train.txt", "valid.txt", "test.txt"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", rel_data_dir(), files[i]);
        snprintf(q, sizeof q, "%s/%s", dd, files[i]);
        copy_file(p, q);
    }
    snprintf(sd, sizeof sd, "data.dir=%s", dd);
    snprintf(sc, sizeof sc, "tokenizer.cache_dir=%s/cache", dd); /* its own caches: the shared ones stay valid */
    dir_of(d, sizeof d, "dchg");
    rel_result res;
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=dchg", "--set", sd,
                       "--set", sc, "--stop-after", "10", NULL};
    rel_gflow(&res, 0, a);
    GF_REQUIRE(res.exit_code == 0, "first part: %s", res.err);
    char valid[900], before[65], after[65];
    snprintf(valid, sizeof valid, "%s/valid.txt", dd);
    GF_REQUIRE_OK(gf_sha256_file(valid, NULL, before));
    FILE *f = fopen(valid, "a");
    GF_REQUIRE(f, "append to %s", valid);
    fputs(" the cat sees the moon . \n", f);
    fclose(f);
    GF_REQUIRE_OK(gf_sha256_file(valid, NULL, after));
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    char ckeep[900], mkeep[900];
    snprintf(ckeep, sizeof ckeep, "%s/dchg-ckpt-copy", rel_runs_dir());
    snprintf(mkeep, sizeof mkeep, "%s/dchg-metrics-copy", rel_runs_dir());
    copy_file(ck, ckeep);
    copy_file(met, mkeep);
    const char *r[] = {"train", "--resume", d, "--quiet", "--stop-after", "15", NULL};
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, valid) && strstr(res.err, before) &&
                 strstr(res.err, after) && strstr(res.err, "--allow-data-change"),
             "resume on changed data: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(rel_files_equal(ck, ckeep) && rel_files_equal(met, mkeep), "the run directory changed");
    /* eval on the changed split evaluates it, with one warning naming the file and both sha256;
     * on the unchanged test split, none */
    const char *ev[] = {"eval", d, "--ckpt", "last", "--split", "valid", NULL};
    rel_gflow(&res, 0, ev);
    GF_CHECK(res.exit_code == 0 && res.err_lines == 1 && strstr(res.err, "warning") && strstr(res.err, valid) &&
                 strstr(res.err, before) && strstr(res.err, after),
             "eval on a changed split: exit %d, stderr: %s", res.exit_code, res.err);
    const char *et[] = {"eval", d, "--ckpt", "last", "--split", "test", NULL};
    rel_gflow(&res, 0, et);
    GF_CHECK(res.exit_code == 0 && res.err_lines == 0,
             "eval on an unchanged split: exit %d, stderr: %s", res.exit_code, res.err);
    const char *ra[] = {"train", "--resume", d, "--stop-after", "15", "--allow-data-change", NULL};
    rel_gflow(&res, 0, ra);
    GF_CHECK((res.exit_code == 0 || res.exit_code == 130) && strstr(res.err, "warning") && strstr(res.err, valid),
             "resume with --allow-data-change: exit %d, stderr: %.2000s", res.exit_code, res.err);
    /* unchanged data resumes as before */
    const char *b[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=dchg", "--set", sd,
                       "--set", sc, "--stop-after", "10", NULL};
    rel_gflow(&res, 0, b);
    GF_REQUIRE(res.exit_code == 0, "second run: %s", res.err);
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 0, "resume on the same data: exit %d, stderr: %s", res.exit_code, res.err);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Item 17: a run killed before its first checkpoint (metrics.tsv rows, no last.ckpt). A new
 * `train` into it names both ways on; `--resume` starts it again from step 0 with its
 * recipe.ini and ends byte-identical to an uninterrupted run. */
GF_TEST(smoke, rel_resume_restarts_run_killed_before_first_checkpoint) {
    char d[800], ref[800], ck[900], met[900], log[900], p[900];
    dir_of(d, sizeof d, "nock");
    dir_of(ref, sizeof ref, "nock-ref");
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(met, sizeof met, "%s/metrics.tsv", d);
    snprintf(log, sizeof log, "%s/nock.log", rel_runs_dir());
    /* no evaluation before the epoch's end (step 66 of this corpus), and saves only there */
    const char *ra[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=nock-ref", "--set",
                        "train.eval_every=0", "--set", "train.max_steps=80", NULL};
    rel_result res;
    rel_gflow(&res, 0, ra);
    GF_REQUIRE(res.exit_code == 0, "reference run: %s", res.err);
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=nock", "--set",
                       "train.eval_every=0", "--set", "train.max_steps=80", NULL};
    unlink(ck);
    unlink(met);
    pid_t pid = rel_gflow_spawn(log, a);
    GF_REQUIRE(pid > 0, "spawn");
    int status = 0, gone = 0;
    for (int i = 0; i < 20000 && count_lines(met) < 4; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) { gone = 1; break; }
        sleep_ms(1);
    }
    if (!gone) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    GF_REQUIRE(!gone && access(ck, F_OK) != 0 && count_lines(met) >= 4,
               "the run was not killed between its first rows and its first checkpoint (see %s)", log);
    const char *b[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=nock", "--set", "train.eval_every=0",
                       "--set", "train.max_steps=80", NULL};
    rel_gflow(&res, 0, b);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "first checkpoint") &&
                 strstr(res.err, "--resume") && strstr(res.err, "--overwrite"),
             "a new train into the run: exit %d, stderr: %s", res.exit_code, res.err);
    const char *r[] = {"train", "--resume", d, "--quiet", NULL};
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 0, "--resume of a run without a checkpoint: exit %d, stderr: %s", res.exit_code, res.err);
    snprintf(p, sizeof p, "%s/metrics.tsv", ref);
    GF_CHECK(rel_files_equal(p, met), "metrics.tsv differs from the uninterrupted run");
    const char *why;
    snprintf(p, sizeof p, "%s/last.ckpt", ref);
    GF_CHECK(rel_ckpt_weights_equal(p, ck, &why), "last.ckpt: %s", why);
    /* a best.ckpt without last.ckpt: a checkpoint was lost, not never written; nothing restarts */
    char lost[900], q[1000];
    dir_of(lost, sizeof lost, "nock-lost");
    mkdir(lost, 0755);
    snprintf(p, sizeof p, "%s/recipe.ini", d);
    snprintf(q, sizeof q, "%s/recipe.ini", lost);
    copy_file(p, q);
    snprintf(p, sizeof p, "%s/best.ckpt", ref);
    snprintf(q, sizeof q, "%s/best.ckpt", lost);
    copy_file(p, q);
    const char *l[] = {"train", "--resume", lost, "--quiet", NULL};
    rel_gflow(&res, 0, l);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, q),
             "--resume with best.ckpt but no last.ckpt: exit %d, stderr: %s", res.exit_code, res.err);
    snprintf(q, sizeof q, "%s/metrics.tsv", lost);
    GF_CHECK(access(q, F_OK) != 0, "%s was written", q);
    /* a directory that holds no run is still an error naming the checkpoint */
    char empty[900];
    dir_of(empty, sizeof empty, "nock-empty");
    mkdir(empty, 0755);
    const char *e[] = {"train", "--resume", empty, "--quiet", NULL};
    rel_gflow(&res, 0, e);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "last.ckpt"),
             "--resume of an empty directory: exit %d, stderr: %s", res.exit_code, res.err);
}

typedef struct row { long long step, epoch; char split[16], loss[32], ppl_word[32]; } row;

/* metrics.tsv rows (header skipped); returns the count (at most cap) */
static int read_rows(const char *path, row *rows, int cap) {
    size_t n = 0;
    char *s = gf_test_slurp(path, &n);
    int k = 0;
    for (char *line = s ? strtok(s, "\n") : NULL; line && k < cap; line = strtok(NULL, "\n")) {
        row *r = &rows[k];
        char ppl[32];
        if (sscanf(line, "%lld\t%lld\t%15s\t%31s\t%31s\t%31s", &r->step, &r->epoch, r->split, r->loss, ppl,
                   r->ppl_word) == 6)
            k++;
    }
    free(s);
    return k;
}

static long long summary_int(const char *dir, const char *key) {
    char p[900], want[80];
    snprintf(p, sizeof p, "%s/summary.tsv", dir);
    snprintf(want, sizeof want, "\n%s\t", key);
    size_t n = 0;
    char *s = gf_test_slurp(p, &n);
    const char *at = s ? strstr(s, want) : NULL;
    long long v = at ? strtoll(at + strlen(want), NULL, 10) : -999;
    free(s);
    return v;
}

/* Item 21: max_steps a multiple of eval_every: the last step is evaluated once, over the whole
 * split; rows are in step order but for the final test row, whose step and epoch are the best
 * checkpoint's (summary.tsv best_step, best_epoch). With partial evaluations and without. */
GF_TEST(smoke, rel_metrics_rows_once_and_test_row_is_best) {
    const char *partial[] = {"train.eval_batches=0", "train.eval_batches=3"};
    for (int c = 0; c < 2; c++) {
        char name[64], sn[80], d[800], met[900];
        snprintf(name, sizeof name, "rows%d", c);
        snprintf(sn, sizeof sn, "run.name=%s", name);
        dir_of(d, sizeof d, name);
        const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", sn, "--set",
                           "train.max_steps=20", "--set", "train.eval_every=5", "--set", partial[c], NULL};
        rel_result res;
        rel_gflow(&res, 0, a);
        GF_REQUIRE(res.exit_code == 0, "%s: %s", partial[c], res.err);
        snprintf(met, sizeof met, "%s/metrics.tsv", d);
        row rows[128];
        int n = read_rows(met, rows, 128);
        GF_REQUIRE(n > 20, "%s: %d rows", partial[c], n);
        int final_valid = 0;
        for (int i = 0; i < n; i++) {
            if (!strcmp(rows[i].split, "valid") && rows[i].step == 20) {
                final_valid++; /* per-word perplexity: only a full evaluation has one */
                GF_CHECK(strcmp(rows[i].ppl_word, "-") != 0, "%s: the last step's evaluation is partial", partial[c]);
            }
            for (int j = 0; j < i; j++)
                GF_CHECK(strcmp(rows[i].split, rows[j].split) || rows[i].step != rows[j].step,
                         "%s: two %s rows at step %lld (lines %d and %d)", partial[c], rows[i].split, rows[i].step,
                         j + 2, i + 2);
            if (i > 0 && i < n - 1)
                GF_CHECK(rows[i].step >= rows[i - 1].step, "%s: line %d (step %lld) after step %lld", partial[c],
                         i + 2, rows[i].step, rows[i - 1].step);
        }
        GF_CHECK(final_valid == 1, "%s: %d valid rows at the last step", partial[c], final_valid);
        const row *t = &rows[n - 1];
        long long bs = summary_int(d, "best_step"), be = summary_int(d, "best_epoch");
        GF_CHECK(!strcmp(t->split, "test") && t->step == bs && t->epoch == be - 1,
                 "%s: the test row (step %lld, epoch %lld) is not the best checkpoint's (best_step %lld, "
                 "best_epoch %lld)", partial[c], t->step, t->epoch, bs, be);
    }
}

/* Drop the line "<line>\n" from text in place; 1 when it was there. */
static int drop_line(char *text, const char *line) {
    size_t n = strlen(line);
    for (char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') {
            memmove(p, p + n + 1, strlen(p + n + 1) + 1);
            return 1;
        }
    return 0;
}

/* A run started by a build that knew fewer keys (its recipe.ini and last.ckpt lack
 * [train] save_every_min): each resume saves the run's own recipe text again, so the next
 * resume still finds the checkpoint's recipe equal to recipe.ini. */
GF_TEST(smoke, rel_resume_keeps_the_run_recipe_text) {
    char d[800], ck[900], ini[900];
    dir_of(d, sizeof d, "oldkeys");
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(ini, sizeof ini, "%s/recipe.ini", d);
    rel_result res;
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=oldkeys",
                       "--stop-after", "5", NULL};
    rel_gflow(&res, 0, a);
    GF_REQUIRE(res.exit_code == 0, "first part: %s", res.err);
    /* rewrite both as the older build wrote them */
    const char *key = "save_every_min = 5";
    size_t n = 0;
    char *text = gf_test_slurp(ini, &n);
    GF_REQUIRE(text && drop_line(text, key), "recipe.ini has '%s'", key);
    gf_test_write_file(ini, text, strlen(text));
    free(text);
    gf_session s;
    GF_REQUIRE_OK(gf_session_from_ckpt(&s, ck));
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    GF_REQUIRE_OK(gf_ckpt_peek(ck, &m));
    GF_REQUIRE(m.recipe && drop_line(m.recipe, key), "last.ckpt's recipe has '%s'", key);
    GF_CHECK_OK(gf_ckpt_save(ck, s.params, &m));
    gf_ckpt_meta_free(&m);
    gf_session_close(&s);
    const char *steps[] = {"10", "15"};
    for (int i = 0; i < 2; i++) {
        const char *r[] = {"train", "--resume", d, "--quiet", "--stop-after", steps[i], NULL};
        rel_gflow(&res, 0, r);
        GF_CHECK(res.exit_code == 0, "resume %d of a run without %s: exit %d, stderr: %s", i + 1, key, res.exit_code,
                 res.err);
    }
}

/* docs/cuda.md: eval, info, export, probe and sample open a checkpoint on the CPU whatever
 * device trained it. A CPU run's checkpoints, their recipes rewritten to device = cuda as a GPU
 * run saves them: each command still runs here, where gf_session_open refuses device = cuda
 * (no CUDA in the build, or no GPU visible). */
GF_TEST(smoke, rel_commands_open_cuda_checkpoint_on_cpu) {
    char d[800], ck[900], out[900];
    int gpu_here = 0;
    dir_of(d, sizeof d, "cudackpt");
    rel_result res;
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=cudackpt",
                       "--set", "train.max_steps=5", NULL};
    rel_gflow(&res, 0, a);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    const char *names[] = {"last.ckpt", "best.ckpt"};
    for (int i = 0; i < 2; i++) {
        snprintf(ck, sizeof ck, "%s/%s", d, names[i]);
        gf_session s;
        GF_REQUIRE_OK(gf_session_from_ckpt(&s, ck));
        gf_ckpt_meta m;
        gf_ckpt_meta_init(&m);
        GF_REQUIRE_OK(gf_ckpt_peek(ck, &m));
        char *dev = m.recipe ? strstr(m.recipe, "\ndevice = cpu\n") : NULL;
        GF_REQUIRE(dev, "%s's recipe has no line 'device = cpu'", names[i]);
        /* "cuda" is one byte longer than "cpu": rebuild the text */
        size_t n = strlen(m.recipe);
        char *t = malloc(n + 2);
        GF_REQUIRE(t, "malloc");
        size_t at = (size_t)(dev - m.recipe) + strlen("\ndevice = ");
        memcpy(t, m.recipe, at);
        memcpy(t + at, "cuda", 4);
        memcpy(t + at + 4, m.recipe + at + 3, n - at - 3 + 1);
        free(m.recipe);
        m.recipe = t;
        GF_CHECK_OK(gf_ckpt_save(ck, s.params, &m));
        gf_ckpt_meta_free(&m);
        gf_session_close(&s);
        gf_recipe r;
        GF_REQUIRE_OK(gf_ckpt_peek_recipe(ck, &r, NULL));
        GF_REQUIRE(r.run.device == GF_DEV_CUDA, "%s: the rewritten recipe does not say device = cuda", names[i]);
        /* without a usable GPU here gf_session_open refuses that recipe as it stands, so the
         * commands below pass only by opening it on the CPU */
        if (i == 0) gpu_here = gf_session_device_check(&r) == GF_OK;
    }
    if (gpu_here) printf("    a GPU is usable here: the commands below could open the checkpoint on it\n");
    snprintf(out, sizeof out, "%s/cudackpt.safetensors", rel_runs_dir());
    const char *cmds[][12] = {
        {"eval", d, "--ckpt", "last", NULL},
        {"eval", d, NULL},
        {"info", d, NULL},
        {"export", d, out, "--ckpt", "last", NULL},
        {"probe", "pca", d, "--ckpt", "last", "--windows", "4", NULL},
        {"sample", d, "--ckpt", "last", "--prompt", "the cat", "--tokens", "4", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 0, "gflow %s on a device = cuda checkpoint: exit %d, stderr: %s", cmds[i][0],
                 res.exit_code, res.err);
    }
}

/* Issue 34: a bf16 run says in one line where its products run and, on a CPU where they cannot be
 * faster (here forced: GF_GEMM_BF16=blas, the path of a CPU without bf16 arithmetic), that they
 * are no faster than fp32; summary.tsv records the same path. An fp32 run prints no such line. */
GF_TEST(smoke, rel_bf16_run_says_where_its_products_run) {
    const char *prec[] = {"run.precision=bf16", "run.precision=fp32"};
    const char *names[] = {"run.name=prec16", "run.name=prec32"};
    setenv("GF_GEMM_BF16", "blas", 1);
    for (int c = 0; c < 2; c++) {
        const char *a[] = {"train", rel_base_recipe(), "--overwrite", "--set", names[c], "--set", prec[c], "--set",
                           "train.max_steps=2", "--set", "train.eval_every=0", NULL};
        rel_result res;
        rel_gflow(&res, 0, a);
        GF_REQUIRE(res.exit_code == 0, "%s: exit %d: %s", prec[c], res.exit_code, res.err);
        const char *line = strstr(res.err, "\nprecision: ");
        char d[800], p[900];
        dir_of(d, sizeof d, names[c] + strlen("run.name="));
        snprintf(p, sizeof p, "%s/summary.tsv", d);
        size_t n = 0;
        char *sum = gf_test_slurp(p, &n);
        GF_REQUIRE(sum, "no %s", p);
        if (c == 0) {
            const char *want = "\nprecision: bf16 products (OpenBLAS on bf16-rounded inputs";
            const char *eol = line ? strchr(line + 1, '\n') : NULL;
            GF_CHECK(line && eol && !strncmp(line, want, strlen(want)) && eol - line > 20 && !strncmp(eol - 20, "no faster than fp32)", 20),
                     "no bf16 line in:\n%s", res.err);
            GF_CHECK(strstr(sum, "\nprecision\tbf16 (OpenBLAS on bf16-rounded inputs") != NULL, "summary.tsv:\n%s", sum);
        } else {
            GF_CHECK(!line, "an fp32 run printed a precision line:\n%s", res.err);
            GF_CHECK(strstr(sum, "\nprecision\tfp32\n") != NULL, "summary.tsv:\n%s", sum);
        }
        free(sum);
    }
    unsetenv("GF_GEMM_BF16");
}
