/* test_study_data.c — issue 48, items 7-12, through the real binary: a study survives a failing
 * run (ablate), the evaluation batch is in the up-front memory estimate, `data fetch` from an
 * empty mirror fails, a build-tree gflow's data directory is the source tree's, `compare` reads
 * metrics.tsv strictly, and every text gflow reads follows one UTF-8 policy. */
#include "gf_test.h"
#include "gflow/data.h"
#include "rel_util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* <tmp>/rel/NAME (a sibling of the runs directory) */
static void rel_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/../%s", rel_runs_dir(), name);
}

/* the line of a TSV file starting with "key\t" (a static buffer), NULL when absent */
static const char *tsv_line(const char *path, const char *key) {
    static char line[4096];
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t kl = strlen(key);
    const char *hit = NULL;
    while (!hit && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == '\t') hit = line;
    fclose(f);
    return hit;
}

/* Item 7: a variant that fails (lr 1e30: a non-finite loss) is reported with its error, the
 * variants after it still run, the study exits 1; the summary says "failed" with the error (also
 * when regenerated with --report); running the study again retries only the failed run. */
GF_TEST(smoke, rel_ablate_failed_variant_does_not_stop_the_study) {
    char abl[900], study[900], text[2000], tsv[1100], p[1200];
    rel_path(abl, sizeof abl, "study-fail.ini");
    rel_path(study, sizeof study, "study-fail");
    snprintf(text, sizeof text,
             "[ablation]\nname = st\nbase = %s\nout_dir = %s\n"
             "[variant bad]\noptim.lr = 1e30\ntrain.max_steps = 10\n"
             "[variant after]\ntrain.max_steps = 10\n",
             rel_base_recipe(), study);
    gf_test_write_file(abl, text, strlen(text));
    const char *ab[] = {"ablate", abl, "--quiet", NULL};
    rel_result res;
    rel_gflow(&res, 0, ab);
    GF_CHECK(res.exit_code == 1, "a failed variant: exit %d, want 1; stderr: %s", res.exit_code, res.err);
    GF_CHECK(strstr(res.err, "st/bad failed: ") && strstr(res.err, "non-finite"),
             "stderr names the failed run and its error: %s", res.err);
    snprintf(p, sizeof p, "%s/st/after/summary.tsv", study);
    GF_CHECK(access(p, F_OK) == 0, "the variant after the failed one did not run: %s", res.err);
    snprintf(tsv, sizeof tsv, "%s/st/summary.tsv", study);
    for (int pass = 0; pass < 2; pass++) {
        const char *bad = tsv_line(tsv, "bad");
        GF_CHECK(bad && !strncmp(bad, "bad\tfailed\t", 11) && strstr(bad, "non-finite"),
                 "%s: the failed variant's row%s: %s", tsv, pass ? " after --report" : "", bad ? bad : "(none)");
        const char *after = tsv_line(tsv, "after");
        GF_CHECK(after && !strncmp(after, "after\tdone\t", 11), "the row after it: %s", after ? after : "(none)");
        if (pass) break;
        const char *rep[] = {"ablate", abl, "--report", "--quiet", NULL};
        rel_gflow(&res, 0, rep);
        GF_CHECK(res.exit_code == 0, "--report: exit %d, stderr: %s", res.exit_code, res.err);
    }
    /* again: base and after are finished, bad is retried (and fails again) */
    const char *again[] = {"ablate", abl, NULL};
    rel_gflow(&res, 0, again);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "st/bad: ") && strstr(res.err, "(it failed before: retrying)"),
             "the re-run retries the failed run: exit %d, stderr: %s", res.exit_code, res.err);
    GF_CHECK(strstr(res.err, "st/after: finished, skipped") && strstr(res.err, "st/base: finished, skipped"),
             "the re-run skips the finished runs: %s", res.err);
}

/* Item 8: the evaluation batch is in the up-front memory estimate. An [eval] batch_size whose
 * batch cannot fit (beyond physical memory; under `ulimit -v` 2,000,000 KiB) exits 1 before the
 * first step with one line naming the key, and leaves no run directory (before: 10 steps, then
 * "error (no-memory): eval batch" naming no key, and a run directory that needed --overwrite). */
static void check_eval_refused(const rel_limits *lim, const char *value, const char *name) {
    char set[64], nset[64], dir[1000];
    snprintf(set, sizeof set, "eval.batch_size=%s", value);
    snprintf(nset, sizeof nset, "run.name=%s", name);
    snprintf(dir, sizeof dir, "%s/%s", rel_runs_dir(), name);
    const char *args[] = {"train", rel_base_recipe(), "--quiet", "--set", set, "--set", nset, NULL};
    rel_result res;
    rel_gflow_limited(&res, lim, args);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "[eval] batch_size") &&
                 strstr(res.err, "evaluation batch"),
             "eval.batch_size=%s: exit %d (signal %d), want 1 and one line naming [eval] batch_size: %s", value,
             res.exit_code, res.signal, res.err);
    GF_CHECK(access(dir, F_OK) != 0, "eval.batch_size=%s: the refused run left %s", value, dir);
}

GF_TEST(smoke, rel_eval_batch_memory_checked_before_first_step) {
    rel_limits none = {.seconds = 120};
    check_eval_refused(&none, "1000000000000", "huge-eval-batch");
#if defined(__SANITIZE_ADDRESS__)
    gf_test_skip("the RLIMIT_AS case: ASan reserves terabytes of address space");
#else
    rel_limits as = {.as_bytes = 2000000LL * 1024, .seconds = 120};
    check_eval_refused(&as, "100000000", "big-eval-batch");
#endif
}

/* Item 9: `gflow data fetch` from a mirror that holds none of the data set's splits exits 1 with
 * a line saying nothing was fetched, naming the splits and the mirror (before: "done with 3
 * MISSING split(s)", exit 0). */
GF_TEST(smoke, rel_data_fetch_from_empty_mirror_fails) {
    char mirror[900], dest[900];
    rel_path(mirror, sizeof mirror, "empty-mirror");
    rel_path(dest, sizeof dest, "fetch-dest");
    mkdir(mirror, 0755);
    const char *old = getenv("GFLOW_DATA_MIRROR");
    char *saved = old ? strdup(old) : NULL;
    setenv("GFLOW_DATA_MIRROR", mirror, 1);
    const char *sets[][2] = {{"wikitext2", "wikitext-2/wiki.valid.tokens"}, {"snli", "snli_1.0/snli_1.0_dev.txt"}};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"data", "fetch", sets[i][0], dest, NULL};
        rel_result res;
        rel_gflow(&res, 0, args);
        GF_CHECK(res.exit_code == 1 && strstr(res.err, "nothing fetched") && strstr(res.err, sets[i][1]) &&
                     strstr(res.err, mirror),
                 "fetch %s from an empty mirror: exit %d, want 1 naming the splits and the mirror: %s", sets[i][0],
                 res.exit_code, res.err);
    }
    if (saved) setenv("GFLOW_DATA_MIRROR", saved, 1);
    else unsetenv("GFLOW_DATA_MIRROR");
    free(saved);
}

/* Item 10: a gflow in its build directory keeps its data in the source tree's datasets/, from any
 * working directory, and `gflow data dir` prints it as an absolute path (before: "datasets/data",
 * resolved against the working directory, where the tokenizer corpus was then "not found"). */
GF_TEST(smoke, rel_data_dir_is_the_source_trees_from_any_cwd) {
    char out[900], cmd[3000];
    rel_path(out, sizeof out, "data-dir.out");
    snprintf(cmd, sizeof cmd, "cd '%s' && env -u GFLOW_DATA_DIR '%s' data dir > '%s' 2>&1", rel_runs_dir(),
             rel_gflow_exe(), out);
    int st = system(cmd);
    char *text = gf_test_slurp(out, NULL);
    GF_REQUIRE(st == 0 && text, "gflow data dir: status %d: %s", st, text ? text : "");
    char *src = realpath(gf_test_source_root(), NULL), want[PATH_MAX + 64];
    snprintf(want, sizeof want, "\ndata\t%s/datasets/data\ncache\t%s/datasets/cache\n", src ? src : "?", src ? src : "?");
    GF_CHECK(strstr(text, want) != NULL, "from %s, want%s in: %s", rel_runs_dir(), want, text);
    free(src);
    free(text);
}

/* Item 11: metrics.tsv is checked as it is read: `gflow compare` on a run whose metrics.tsv is
 * garbage, or holds one bad row, exits 1 naming metrics.tsv:line (before: exit 0, and gnuplot's
 * "Skipping data file with no valid points", naming no file); `ablate --report` likewise. A last
 * line cut by a kill is not an error. */
GF_TEST(smoke, rel_compare_checks_metrics_tsv) {
    char good[1000], bad[1000], p[1100], png[1000], cmd[4000];
    snprintf(good, sizeof good, "%s/metrics-good", rel_runs_dir());
    snprintf(bad, sizeof bad, "%s/metrics-bad", rel_runs_dir());
    const char *tr[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=metrics-good", "--set",
                        "train.max_steps=10", NULL};
    rel_result res;
    rel_gflow(&res, 0, tr);
    GF_REQUIRE(res.exit_code == 0, "train: %s", res.err);
    rel_path(png, sizeof png, "metrics-compare.png");
    snprintf(p, sizeof p, "%s/metrics.tsv", good);
    /* a row cut by a kill (no newline) is skipped, not refused */
    FILE *f = fopen(p, "a");
    GF_REQUIRE(f != NULL, "%s", p);
    fputs("11\t0\ttra", f);
    fclose(f);
    const char *ok[] = {"compare", good, "--plot", "none", NULL};
    rel_gflow(&res, 0, ok);
    GF_CHECK(res.exit_code == 0, "compare of a good run with a torn last line: exit %d: %s", res.exit_code, res.err);
    static const struct { const char *text, *where; } cases[] = {
        {"garbage\x01\x02 not a table\n1 2 3\n", "metrics.tsv:1:"},
        {"step\tepoch\tsplit\tloss\tppl\tppl_word\tacc\tlr\tgnorm\n5\t0\tvalid\t2.0\t7.3\t-\t-\t-\t-\n"
         "10\t0\tvalid\tzwei\t7.1\t-\t-\t-\t-\n", "metrics.tsv:3: loss"},
        {"step\tepoch\tsplit\tloss\tppl\n1\t0\tbanana\t1\t2\n", "metrics.tsv:2: split"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", bad, good, bad);
        GF_REQUIRE(system(cmd) == 0, "%s", cmd);
        snprintf(p, sizeof p, "%s/metrics.tsv", bad);
        gf_test_write_file(p, cases[i].text, strlen(cases[i].text));
        const char *cmp[] = {"compare", good, bad, "--plot", png, NULL};
        rel_gflow(&res, 0, cmp);
        GF_CHECK(res.exit_code == 1 && strstr(res.err, cases[i].where) && strstr(res.err, "metrics-bad"),
                 "compare with metrics.tsv case %zu: exit %d, want 1 naming '%s': %s", i, res.exit_code,
                 cases[i].where, res.err);
    }
    /* the ablation report reads the same tables */
    char abl[900], study[900], text[1200];
    rel_path(abl, sizeof abl, "study-metrics.ini");
    rel_path(study, sizeof study, "study-metrics");
    snprintf(text, sizeof text, "[ablation]\nname = sm\nbase = %s\nout_dir = %s\n", rel_base_recipe(), study);
    gf_test_write_file(abl, text, strlen(text));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/sm/base' && printf 'step\\tepoch\\tsplit\\tloss\\tppl\\n5\\t0\\tvalid\\tx\\t1\\n' > "
             "'%s/sm/base/metrics.tsv'", study, study);
    GF_REQUIRE(system(cmd) == 0, "%s", cmd);
    const char *rep[] = {"ablate", abl, "--report", "--quiet", NULL};
    rel_gflow(&res, 0, rep);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "base/metrics.tsv:2: loss"),
             "ablate --report with a bad metrics.tsv: exit %d: %s", res.exit_code, res.err);
}

/* Item 12: one UTF-8 policy for every text gflow reads (gf_text_check). An SNLI file with a byte
 * that is not UTF-8 is refused at file:line:column as a WikiText split is (before: accepted, the
 * byte tokenized as part of a word), also with skip_bad_rows: it is not a malformed row but not
 * text. The validator itself: overlongs, surrogates, code points past U+10FFFF, cut sequences. */
GF_TEST(data, rel_snli_not_utf8_refused_at_line_and_column) {
    char corpus[900], path[900];
    rel_path(corpus, sizeof corpus, "utf8-corpus.txt");
    rel_path(path, sizeof path, "utf8-snli.txt");
    const char *t = " a man is sitting on a bench .\n two dogs run in the park .\n caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x95\n";
    gf_test_write_file(corpus, t, strlen(t));
    gf_tokenizer_opts to = {.kind = GF_TOK_WORD};
    gf_tokenizer *tok = NULL;
    GF_REQUIRE_OK(gf_tokenizer_open(&tok, &to, corpus));
    static const struct { const char *text, *where; } cases[] = {
        /* Latin-1 e-acute in sentence2: line 3, after "neutral\t" (8), "a man sits\t" (11), "the caf" (7) */
        {"gold_label\tsentence1\tsentence2\tpairID\nneutral\ta man\ttwo dogs\tp1\n"
         "neutral\ta man sits\tthe caf\xe9\tp2\n", ":3: not UTF-8 text: byte 0xe9 at column 27"},
        {"gold_label\tsentence1\tsentence2\tpairID\nentailment\t\xc0\xaf\tx\tp1\n", ":2: not UTF-8 text: byte 0xc0 at column 12"},
        {"gold_label\tsentence1\tsentence2\tpairID\nentailment\ta\t\xed\xa0\x80\tp1\n", ":2: not UTF-8 text: byte 0xed at column 14"},
        {"gold_label\tsentence1\tsentence2\tpairID\nentailment\ta\tb\tp\xf4\x90\x80\x80\n", ":2: not UTF-8 text: byte 0xf4 at column 17"},
        {"gold_label\tsentence1\tsen\xe2\x82\n", ":1: not UTF-8 text: byte 0xe2 at column 25"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gf_test_write_file(path, cases[i].text, strlen(cases[i].text));
        for (int skip = 0; skip < 2; skip++) {
            gf_snli_opts o = {.max_len = 6, .pad_id = 0, .skip_bad_rows = skip};
            gf_snli_data d;
            memset(&d, 0, sizeof d);
            gf_status st = gf_snli_load(&d, path, tok, &o);
            GF_CHECK(st == GF_E_PARSE && strstr(gf_last_error(), "utf8-snli.txt") &&
                         strstr(gf_last_error(), cases[i].where),
                     "case %zu (skip_bad_rows %d): status %s, want '%s': %s", i, skip, gf_status_name(st),
                     cases[i].where, st ? gf_last_error() : "(accepted)");
            if (!st) gf_snli_free(&d);
        }
    }
    /* well-formed UTF-8 of every length passes */
    const char ok[] = "gold_label\tsentence1\tsentence2\tpairID\nneutral\tcaf\xc3\xa9 \xe2\x82\xac\t\xf0\x9f\x90\x95\tp1\n";
    gf_test_write_file(path, ok, strlen(ok));
    gf_snli_opts o = {.max_len = 6, .pad_id = 0};
    gf_snli_data d;
    GF_CHECK_OK(gf_snli_load(&d, path, tok, &o));
    gf_snli_free(&d);
    gf_tokenizer_free(tok);
}

/* ... and so do prompts: `gflow sample --prompt` with a Latin-1 byte exits 1 with one line naming
 * --prompt and the column, a `probe curvature --pairs` file names file:line and the column
 * (before: the byte went to the tokenizer as part of a word). */
GF_TEST(smoke, rel_sample_prompt_not_utf8_refused) {
    const char *tr[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=utf8-prompt", "--set",
                        "train.max_steps=5", NULL};
    rel_result res;
    rel_gflow(&res, 0, tr);
    GF_REQUIRE(res.exit_code == 0, "train: %s", res.err);
    char dir[1000];
    snprintf(dir, sizeof dir, "%s/utf8-prompt", rel_runs_dir());
    const char *sm[] = {"sample", dir, "--prompt", "the caf\xe9", "--tokens", "3", NULL};
    rel_gflow(&res, 0, sm);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "--prompt: not UTF-8 text: byte 0xe9 at column 8"),
             "sample with a Latin-1 prompt: exit %d: %s", res.exit_code, res.err);
    /* a probe's prompt-pair file too */
    char pairs[900];
    rel_path(pairs, sizeof pairs, "utf8-pairs.tsv");
    const char *pt = "# prompt pairs\nthe man sees\tthe dog sees\nthe caf\xe9 is\tthe dog is\n";
    gf_test_write_file(pairs, pt, strlen(pt));
    const char *pr[] = {"probe", "curvature", dir, "--pairs", pairs, "--quiet", NULL};
    rel_gflow(&res, 0, pr);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "utf8-pairs.tsv:3: not UTF-8 text: byte 0xe9 at column 8"),
             "probe --pairs with a Latin-1 byte: exit %d: %s", res.exit_code, res.err);
}
