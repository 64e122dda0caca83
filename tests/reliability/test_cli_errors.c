/* test_cli_errors.c — malformed recipes and command lines through the real `gflow` binary:
 * every case exits non-zero (1 runtime error, 2 usage error), with the first line of stderr
 * naming the file:line and key (or the option) at fault; runtime errors print one line only.
 * (The parser's own table, tests/recipe/test_recipe.c, covers the library API; this covers
 * what a user sees.) */
#include "gf_test.h"
#include "rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct cli_case {
    const char *recipe;  /* text of bad.ini: after "[run]\nbase = BASE\n" (line 3 on) unless full */
    int full;            /* recipe is the whole file */
    const char *args[8]; /* command line; "@" = bad.ini, "@base" = the good base recipe */
    int exit_code;
    const char *needle1, *needle2; /* both must be on the first stderr line */
} cli_case;

#define TRAIN_BAD "train", "@", "--quiet"

static const cli_case k_cases[] = {
    /* recipe files: each message names bad.ini:LINE and the key */
    {"[model]\nfoo = 1\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "foo"},
    {"[model]\nr = 4\nr = 5\n", 0, {TRAIN_BAD}, 1, "bad.ini:5", "r"},
    {"[model]\nd_model = 3x2\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "d_model"},
    {"[model]\nd_model = -32\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "d_model"},
    {"[model]\nn_layers = 0\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "n_layers"},
    {"[model]\nr = 40\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "[model] r"},
    {"[model]\noffsets =\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "offsets"},
    {"[model]\noffsets = 0,1\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "offsets"},
    {"[model]\noffsets = 1,-2\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "offsets"},
    {"[model]\noffsets = 1,,2\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "offsets"},
    {"[tokenizer]\nvocab_size = 0\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "vocab_size"},
    {"[modle]\nr = 4\n", 0, {TRAIN_BAD}, 1, "bad.ini", "modle"},
    {"[model]\nthis is not a key\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "syntax"},
    {"[model]\nfamily = lstm\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "family"},
    {"[model]\ngate = maybe\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "gate"},
    {"[train]\nbatch_size = 2.5\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "batch_size"},
    {"[train]\nbatch_size = 0\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "batch_size"},
    {"[model]\ndropout = 1.5\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "dropout"},
    {"[optim]\nlr = nan\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "lr"},
    {"[optim]\nlr = inf\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "lr"},
    {"[schedule]\nmin_lr = 1\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "min_lr"},
    {"[model]\nmax_len = 8\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "max_len"},
    {"[model]\nd_model = 99999999999999999999999\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "d_model"},
    {"[train]\nnonfinite = ignore\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "nonfinite"},
    {"[data]\ndataset = imagenet\n", 0, {TRAIN_BAD}, 1, "bad.ini:4", "dataset"},
    {"[run]\nbase = nothere.ini\n", 1, {TRAIN_BAD}, 1, "bad.ini:2", "nothere.ini"},
    {"[run]\nbase = bad.ini\n", 1, {TRAIN_BAD}, 1, "bad.ini:2", "cycle"},
    {"\x01\x02\xff\xfe garbage\n", 1, {TRAIN_BAD}, 1, "bad.ini:1", "syntax"},
    {"[run]\nname = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
     0, {TRAIN_BAD}, 1, "bad.ini:4", "too long"},
    {"", 1, {TRAIN_BAD}, 1, "bad.ini", "required"},
    /* --set overrides name the option and the key */
    {"", 0, {"train", "@base", "--quiet", "--set", "model.r", NULL}, 1, "--set model.r", "="},
    {"", 0, {"train", "@base", "--quiet", "--set", "foo.bar=1", NULL}, 1, "--set foo.bar=1", "foo"},
    {"", 0, {"train", "@base", "--quiet", "--set", "model.nope=1", NULL}, 1, "--set model.nope=1", "nope"},
    {"", 0, {"train", "@base", "--quiet", "--set", "model.r=abc", NULL}, 1, "--set model.r=abc", "r"},
    {"", 0, {"train", "@base", "--quiet", "--set", "model.r=64", NULL}, 1, "--set model.r=64", "r"},
    {"", 0, {"train", "@base", "--quiet", "--set=train.epochs=-1", NULL}, 1, "train.epochs=-1", "epochs"},
    /* files */
    {"", 0, {"train", "/nonexistent/none.ini", "--quiet", NULL}, 1, "/nonexistent/none.ini", ""},
    {"", 0, {"train", "--resume", "/nonexistent/run", NULL}, 1, "/nonexistent/run/last.ckpt", ""},
    {"", 0, {"eval", "/nonexistent/run", NULL}, 1, "/nonexistent/run", ""},
    {"", 0, {"info", "/nonexistent/x.ini", NULL}, 1, "/nonexistent/x.ini", ""},
    /* command lines: usage errors (exit 2) naming the option or argument */
    {"", 0, {"frobnicate", NULL}, 2, "frobnicate", ""},
    {"", 0, {"train", "@base", "--frob", NULL}, 2, "--frob", ""},
    {"", 0, {"train", "@base", "--set", NULL}, 2, "--set", ""},
    {"", 0, {"train", "--resume", NULL}, 2, "--resume", ""},
    {"", 0, {"train", "@base", "--stop-after", "abc", NULL}, 2, "--stop-after", "abc"},
    {"", 0, {"train", "@base", "--stop-after", "-3", NULL}, 2, "--stop-after", "-3"},
    {"", 0, {"train", "@base", "@base", NULL}, 2, "unexpected argument", ""},
    {"", 0, {"train", NULL}, 2, "recipe", "--resume"},
    {"", 0, {"train", "--resume", "/tmp", "--set", "model.r=4", NULL}, 2, "--set", ""},
    {"", 0, {"eval", "/tmp", "--ckpt", "middle", NULL}, 2, "--ckpt", ""},
    {"", 0, {"eval", "/tmp", "--bogus", NULL}, 2, "--bogus", ""},
    {"", 0, {"export", "/tmp", "--bogus", NULL}, 2, "--bogus", ""},
    /* --ckpt names a file of the run directory: only best or last, in every command that takes it */
    {"", 0, {"export", "/tmp", "/tmp/x.safetensors", "--ckpt", "../x", NULL}, 2, "--ckpt", "'../x'"},
    {"", 0, {"sample", "/tmp", "--prompt", "a", "--ckpt", "middle", NULL}, 2, "--ckpt", "'middle'"},
    {"", 0, {"probe", "pca", "/tmp", "--ckpt", "middle", NULL}, 2, "--ckpt", "'middle'"},
    /* getopt_long's conventions (issue 36): --opt=value, prefixes, `--` */
    {"", 0, {"train", "@base", "--s", "x", NULL}, 2, "'--s' is ambiguous", "--stop-after"},
    {"", 0, {"train", "@base", "--quiet=1", NULL}, 2, "--quiet", "takes no value"},
    {"", 0, {"train", "@base", "--stop-after=", NULL}, 2, "--stop-after", "got ''"},
    {"", 0, {"bench", "@base", "--steps=abc", NULL}, 2, "--steps", "'abc'"},
    {"", 0, {"eval", "--ckpt=middle", "/tmp", NULL}, 2, "--ckpt", "middle"},
    {"", 0, {"sample", "/tmp", "--prompt", NULL}, 2, "--prompt", "needs a value"},
    {"", 0, {"info", "--", "--keys", NULL}, 1, "--keys", "cannot open"},
    {"", 0, {"probe", "pca", "/tmp", "--frob=2", NULL}, 2, "unknown option '--frob'", ""},
};

GF_TEST(unit, rel_cli_bad_inputs_table) {
    const char *base = rel_base_recipe();
    char bad[800];
    snprintf(bad, sizeof bad, "%s/../bad.ini", rel_runs_dir());
    const int n = (int)(sizeof k_cases / sizeof k_cases[0]);
    GF_CHECK(n >= 30, "at least 30 cases (%d)", n);
    for (int i = 0; i < n; i++) {
        const cli_case *c = &k_cases[i];
        char text[4096];
        if (c->full) snprintf(text, sizeof text, "%s", c->recipe);
        else snprintf(text, sizeof text, "[run]\nbase = %s\n%s", base, c->recipe);
        gf_test_write_file(bad, text, strlen(text));
        const char *args[10];
        int na = 0;
        char shown[1024] = "";
        for (int j = 0; j < 8 && c->args[j]; j++) {
            const char *a = c->args[j];
            if (!strcmp(a, "@")) a = bad;
            else if (!strcmp(a, "@base")) a = base;
            args[na++] = a;
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), " %s", c->args[j]);
        }
        args[na] = NULL;
        rel_result res;
        rel_gflow(&res, 0, args);
        if (res.exit_code != c->exit_code)
            gf_test_fail(__FILE__, __LINE__, "case %d (gflow%s | %.60s): exit %d (signal %d), want %d: %s", i, shown,
                         c->recipe, res.exit_code, res.signal, c->exit_code, res.first);
        else if (!strstr(res.first, c->needle1) || !strstr(res.first, c->needle2))
            gf_test_fail(__FILE__, __LINE__, "case %d (gflow%s | %.60s): first stderr line '%s' lacks '%s' or '%s'", i,
                         shown, c->recipe, res.first, c->needle1, c->needle2);
        else if (c->exit_code == 1 && res.err_lines != 1)
            gf_test_fail(__FILE__, __LINE__, "case %d (gflow%s): %d stderr lines, want one: %s", i, shown,
                         res.err_lines, res.err);
    }
    /* and the base recipe itself is accepted (so each case fails for its own reason) */
    const char *ok[] = {"info", base, NULL};
    rel_result res;
    rel_gflow(&res, 0, ok);
    GF_CHECK(res.exit_code == 0, "gflow info on the base recipe: %s", res.err);
}

/* GF_GEMM_BF16 (src/ops/gemm.c) takes blas or dnnl: another value is a usage error naming it,
 * not a silent default */
GF_TEST(unit, rel_gemm_bf16_env_checked) {
    const char *base = rel_base_recipe();
    const char *args[] = {"info", base, NULL};
    rel_result res;
    setenv("GF_GEMM_BF16", "fast", 1);
    rel_gflow(&res, 0, args);
    unsetenv("GF_GEMM_BF16");
    GF_CHECK(res.exit_code == 2, "GF_GEMM_BF16=fast: exit %d, want 2: %s", res.exit_code, res.first);
    GF_CHECK(strstr(res.first, "GF_GEMM_BF16") && strstr(res.first, "'fast'"), "message: %s", res.first);
    setenv("GF_GEMM_BF16", "blas", 1);
    rel_gflow(&res, 0, args);
    unsetenv("GF_GEMM_BF16");
    GF_CHECK(res.exit_code == 0, "GF_GEMM_BF16=blas refused: %s", res.err);
}

/* Issue 20 item 14: every numeric option of every command is parsed whole and range-checked
 * (gf_arg_int / gf_arg_real): a usage error (exit 2) naming the option and the value, before
 * anything runs. Bench cases carry --steps 1 --warmup 0 --peak-n 0 so that a value accepted by
 * mistake costs a second, not a benchmark. */
GF_TEST(unit, rel_numeric_options_checked) {
#define BENCH "bench", "@base"
#define QUICK "--steps", "1", "--warmup", "0", "--peak-n", "0"
    static const struct { const char *args[12]; const char *opt, *val; } cases[] = {
        {{BENCH, QUICK, "--threads", "abc", NULL}, "--threads", "abc"},
        {{BENCH, QUICK, "--batch", "0", NULL}, "--batch", "0"},
        {{BENCH, QUICK, "--batch", "7x", NULL}, "--batch", "7x"},
        {{BENCH, QUICK, "--seq-len", "-5", NULL}, "--seq-len", "-5"},
        {{BENCH, QUICK, "--seq-len", "1000000", NULL}, "--seq-len", "1000000"},
        {{BENCH, "--steps", "2e3", "--warmup", "0", "--peak-n", "0", NULL}, "--steps", "2e3"},
        {{BENCH, "--steps", "1", "--warmup", "-1", "--peak-n", "0", NULL}, "--warmup", "-1"},
        {{BENCH, "--steps", "1", "--warmup", "0", "--peak-n", "64k", NULL}, "--peak-n", "64k"},
        {{"selftest", "--steps", "abc", NULL}, "--steps", "abc"},
        {{"selftest", "--steps", "5", "--seed", "-1", NULL}, "--seed", "-1"},
        {{"selftest", "--steps", "5", "--threads", "1.5", NULL}, "--threads", "1.5"},
        {{"train", "@base", "--stop-after", "99999999999999999999", NULL}, "--stop-after", "99999999999999999999"},
        {{"ablate", "/nonexistent/a.ini", "--stop-after", "5x", NULL}, "--stop-after", "5x"},
        {{"probe", "hessian", "/nonexistent/run", "--lanczos-steps", "99999999999999999999", NULL}, "--lanczos-steps",
         "99999999999999999999"},
        {{"probe", "curvature", "/nonexistent/run", "--seed", "-1", NULL}, "--seed", "-1"},
        {{"probe", "pca", "/nonexistent/run", "--windows", "0x10", NULL}, "--windows", "0x10"},
        {{"probe", "hessian", "/nonexistent/run", "--rel-step", "1e-400", NULL}, "--rel-step", "1e-400"},
        {{"probe", "hessian", "/nonexistent/run", "--top-k", "65", NULL}, "--top-k", "65"},
    };
#undef BENCH
#undef QUICK
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[12];
        char shown[512] = "";
        int n = 0;
        for (; cases[i].args[n]; n++) {
            args[n] = strcmp(cases[i].args[n], "@base") ? cases[i].args[n] : rel_base_recipe();
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), " %s", cases[i].args[n]);
        }
        args[n] = NULL;
        rel_result res;
        rel_gflow(&res, 0, args);
        char quoted[128];
        snprintf(quoted, sizeof quoted, "'%s'", cases[i].val);
        GF_CHECK(res.exit_code == 2 && strstr(res.first, cases[i].opt) && strstr(res.first, quoted),
                 "gflow%s: exit %d (signal %d), want 2 naming %s and %s: %s", shown, res.exit_code, res.signal,
                 cases[i].opt, quoted, res.first);
    }
}

/* <tmp>/rel/NAME: SNLI train/dev/test files (snli_{train,dev,test}.txt) of 40 pairs of
 * consecutive corpus sentences; bad_row (not NULL) is appended to the train file as line 42 */
static void snli_data(const char *name, const char *bad_row, char *dd, size_t cap) {
    char p[3000];
    snprintf(dd, cap, "%s/../%s", rel_runs_dir(), name);
    snprintf(p, sizeof p, "mkdir -p '%s' && cp '%s/train.txt' '%s/'", dd, rel_data_dir(), dd);
    GF_REQUIRE(system(p) == 0, "%s", p);
    /* pairs of consecutive corpus sentences (the word tokenizer knows their words), labels in turn */
    snprintf(p, sizeof p, "%s/train.txt", dd);
    char *corpus = gf_test_slurp(p, NULL), *lines[41], *save = NULL;
    GF_REQUIRE(corpus, "%s", p);
    int n = 0;
    for (char *l = strtok_r(corpus, "\n", &save); l && n < 41; l = strtok_r(NULL, "\n", &save)) lines[n++] = l;
    static const char *const labels[3] = {"entailment", "neutral", "contradiction"};
    const char *splits[3] = {"snli_train.txt", "snli_dev.txt", "snli_test.txt"};
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/%s", dd, splits[s]);
        FILE *f = fopen(p, "w");
        GF_REQUIRE(f, "%s", p);
        fprintf(f, "gold_label\tsentence1\tsentence2\tpairID\n");
        for (int k = 1; k < n; k++) fprintf(f, "%s\t%s\t%s\tp%d\n", labels[k % 3], lines[k - 1], lines[k], k);
        if (s == 0 && bad_row) fprintf(f, "%s\n", bad_row);
        fclose(f);
    }
    free(corpus);
}

/* Issue 20 item 6: `gflow sample` on an NLI (SNLI) run is one line, exit 1, naming the checkpoint
 * and why (no language model to generate with); nothing is written. */
GF_TEST(smoke, rel_sample_refuses_nli_run) {
    char dd[800], sd[900], p[1000];
    snli_data("snli-data", NULL, dd, sizeof dd);
    GF_REQUIRE(!gf_test_failed_now(), "SNLI files");
    snprintf(sd, sizeof sd, "data.dir=%s", dd);
    const char *t[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=nli-sample", "--set", sd,
                       "--set", "data.dataset=snli", "--set", "data.train_file=snli_train.txt", "--set",
                       "data.valid_file=snli_dev.txt", "--set", "data.test_file=snli_test.txt", "--set",
                       "data.max_sentence_len=12", "--set", "model.mix_heads=1", "--set", "train.max_steps=2", NULL};
    rel_result res;
    rel_gflow(&res, 0, t);
    GF_REQUIRE(res.exit_code == 0, "NLI run: %s", res.err);
    char d[900], ck[1000];
    snprintf(d, sizeof d, "%s/nli-sample", rel_runs_dir());
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    /* the run records the block the NLI encoder ran (pre_ln), not the recipe's LM default */
    snprintf(p, sizeof p, "%s/summary.tsv", d);
    char *summary = gf_test_slurp(p, NULL);
    GF_CHECK(summary && strstr(summary, "\nblock\tpre_ln\n"), "%s: no 'block pre_ln' line", p);
    free(summary);
    const char *sm[] = {"sample", d, "--prompt", "the man", "--ckpt", "last", NULL};
    rel_gflow(&res, 0, sm);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, ck) && strstr(res.err, "not a language model"),
             "gflow sample on an NLI run: exit %d (signal %d): %s", res.exit_code, res.signal, res.err);
}

/* Issue 35 item 2: `gflow compare` refuses to put a language-model run and an NLI run in one
 * table (it divided a perplexity by an accuracy: "gap vs first -100.0%"), naming both runs;
 * `gflow eval --split train` is a usage error naming the option (it printed "nan per word"); an
 * NLI split without one class prints "-" for its accuracy, not "nan" (item 4). */
GF_TEST(smoke, rel_compare_refuses_mixed_tasks) {
    char dd[800], sd[900];
    snli_data("snli-compare", NULL, dd, sizeof dd);
    GF_REQUIRE(!gf_test_failed_now(), "SNLI files");
    snprintf(sd, sizeof sd, "data.dir=%s", dd);
    const char *t[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=nli-compare", "--set",
                       sd, "--set", "data.dataset=snli", "--set", "data.train_file=snli_train.txt", "--set",
                       "data.valid_file=snli_dev.txt", "--set", "data.test_file=snli_test.txt", "--set",
                       "data.max_sentence_len=12", "--set", "model.mix_heads=1", "--set", "train.max_steps=2", NULL};
    rel_result res;
    rel_gflow(&res, 0, t);
    GF_REQUIRE(res.exit_code == 0, "NLI run: %s", res.err);
    const char *l[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=lm-compare", "--set",
                       "train.max_steps=5", NULL};
    rel_gflow(&res, 0, l);
    GF_REQUIRE(res.exit_code == 0, "LM run: %s", res.err);
    char lm[900], nli[900];
    snprintf(lm, sizeof lm, "%s/lm-compare", rel_runs_dir());
    snprintf(nli, sizeof nli, "%s/nli-compare", rel_runs_dir());
    const char *c[] = {"compare", lm, nli, "--plot", "none", NULL};
    rel_gflow(&res, 0, c);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, lm) && strstr(res.err, nli) &&
                 strstr(res.err, "'nli'"),
             "compare of an LM and an NLI run: exit %d (signal %d): %s", res.exit_code, res.signal, res.err);
    const char *e[] = {"eval", lm, "--ckpt", "last", "--split", "train", NULL};
    rel_gflow(&res, 0, e);
    GF_CHECK(res.exit_code == 2 && res.err_lines == 1 && strstr(res.err, "--split") && strstr(res.err, "train"),
             "eval --split train: exit %d: %s", res.exit_code, res.err);
    /* item 4: a test split without one class prints no "nan" accuracy for it */
    char tp[1000], cmd[3000], out[1000];
    snprintf(tp, sizeof tp, "%s/snli_test.txt", dd);
    char *text = gf_test_slurp(tp, NULL);
    GF_REQUIRE(text, "%s", tp);
    FILE *f = fopen(tp, "w");
    GF_REQUIRE(f, "%s", tp);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "contradiction\t", 14)) fprintf(f, "%s\n", line);
    fclose(f);
    free(text);
    snprintf(out, sizeof out, "%s/../eval-nli.out", rel_runs_dir());
    snprintf(cmd, sizeof cmd, "'%s' eval '%s' --ckpt last --split test > '%s' 2>&1", rel_gflow_exe(), nli, out);
    int rc = system(cmd);
    char *o = gf_test_slurp(out, NULL);
    GF_CHECK(rc == 0 && o && strstr(o, "contradiction") && !strstr(o, "nan"), "eval of a split without one class: %s",
             o ? o : "");
    free(o);
}

/* [data] skip_bad_rows: a malformed train row stops an SNLI run at its file:line; with the key
 * set the run counts it as skipped and trains */
GF_TEST(smoke, rel_snli_skip_bad_rows) {
    char dd[800], sd[900];
    snli_data("snli-bad", "maybe\ta man\ttwo dogs\tp99", dd, sizeof dd);
    GF_REQUIRE(!gf_test_failed_now(), "SNLI files");
    snprintf(sd, sizeof sd, "data.dir=%s", dd);
    const char *t[] = {"train", rel_base_recipe(), "--set", "run.name=nli-bad", "--set", sd,
                       "--set", "data.dataset=snli", "--set", "data.train_file=snli_train.txt", "--set",
                       "data.valid_file=snli_dev.txt", "--set", "data.test_file=snli_test.txt", "--set",
                       "data.max_sentence_len=12", "--set", "model.mix_heads=1", "--set", "train.max_steps=2",
                       "--overwrite", NULL, NULL, NULL};
    rel_result res;
    rel_gflow(&res, 0, t);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "snli_train.txt:42") && strstr(res.err, "maybe"),
             "strict: exit %d: %s", res.exit_code, res.err);
    t[21] = "--set", t[22] = "data.skip_bad_rows=true";
    rel_gflow(&res, 0, t);
    GF_CHECK(res.exit_code == 0 && strstr(res.err, "snli_train.txt: 40 pairs (0 without a gold label skipped, "
                                                   "1 malformed skipped"),
             "skip_bad_rows: exit %d: %s", res.exit_code, res.err);
}

/* Every command's --help exits 0 and starts with its usage line, and every option it advertises
 * is one its parser knows: `gflow CMD --OPT V /nonexistent/a` may fail (bad value, no such file),
 * but never as an unknown option. */
GF_TEST(smoke, rel_help_options_are_accepted) {
    static const char *const cmds[] = {"train", "eval",     "compare", "sample", "info", "export",
                                       "data",  "selftest", "bench",   "ablate", "probe"};
    int nopts = 0;
    for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
        char cmd[1200], help[16384];
        snprintf(cmd, sizeof cmd, "'%s' %s --help", rel_gflow_exe(), cmds[c]);
        FILE *f = popen(cmd, "r");
        GF_REQUIRE(f, "%s", cmd);
        size_t n = fread(help, 1, sizeof help - 1, f);
        help[n] = 0;
        int st = pclose(f);
        char want[64];
        snprintf(want, sizeof want, "usage: gflow %s", cmds[c]);
        GF_CHECK(st == 0 && !strncmp(help, want, strlen(want)), "%s: status %d, help starts '%.40s'", cmd, st, help);
        char seen[4096] = " ";
        for (char *p = help; (p = strstr(p, "--")); ) {
            char opt[48];
            size_t k = 2;
            while (k < sizeof opt - 1 && (p[k] == '-' || (p[k] >= 'a' && p[k] <= 'z') || (p[k] >= '0' && p[k] <= '9')))
                k++;
            memcpy(opt, p, k);
            opt[k] = 0;
            p += k;
            char key[52];
            snprintf(key, sizeof key, " %s ", opt);
            if (k <= 2 || !strcmp(opt, "--help") || !strcmp(opt, "--bind-to") || strstr(seen, key)) continue;
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s ", opt); /* --bind-to: mpirun's */
            const char *args[] = {cmds[c], opt, "/nonexistent/v", "/nonexistent/a", NULL};
            rel_result res;
            rel_gflow(&res, 0, args);
            char needle[80];
            snprintf(needle, sizeof needle, "unknown option '%s'", opt);
            GF_CHECK(!strstr(res.err, needle), "gflow %s --help advertises %s, which it refuses: %s", cmds[c], opt,
                     res.err);
            nopts++;
        }
    }
    GF_CHECK(nopts > 40, "%d advertised options found: the help parsing is broken", nopts);
}

/* Issue 36: every command parses with getopt_long from its option table: `--opt=value` and
 * `--opt value`, options before and after the arguments, a unique prefix of a long name. */
GF_TEST(smoke, rel_cli_getopt_forms_are_accepted) {
    char cmd[2400], out[900];
    snprintf(out, sizeof out, "%s/../getopt.out", rel_runs_dir());
    snprintf(cmd, sizeof cmd, "'%s' bench --steps=1 --warm 0 --peak-n=0 --no-profile '%s' --set=train.batch_size=2 "
             "--threads=1 > '%s' 2>&1", rel_gflow_exe(), rel_base_recipe(), out);
    int rc = system(cmd);
    char *t = gf_test_slurp(out, NULL);
    GF_CHECK(rc == 0 && t && strstr(t, "steps: 1 (after 0 warmup)") && strstr(t, " B=2 threads=1"),
             "bench with --opt=value forms: status %d: %s", rc, t ? t : "");
    free(t);
    snprintf(cmd, sizeof cmd, "'%s' info --set model.n_layers=1 '%s' > '%s' 2>&1", rel_gflow_exe(), rel_base_recipe(), out);
    rc = system(cmd);
    t = gf_test_slurp(out, NULL);
    GF_CHECK(rc == 0 && t && strstr(t, "blocks.0.") && !strstr(t, "blocks.1."), "info with --set before the recipe: status %d: %s",
             rc, t ? t : "");
    free(t);
}

/* Issue 35 item 4: a message names what it is about: `probe curvature` on a one-layer run named
 * no checkpoint (": curvature needs at least 2 layers"; the name was read after the probe's
 * close had cleared it). Item 1: its --pairs file is read within bounds. */
GF_TEST(smoke, rel_probe_one_layer_names_the_run) {
    const char *t[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=one-layer", "--set",
                       "model.n_layers=1", "--stop-after", "3", NULL};
    rel_result res;
    rel_gflow(&res, 0, t);
    GF_REQUIRE(res.exit_code == 0, "one-layer run: %s", res.err);
    char d[900], ck[1000], want[1100];
    snprintf(d, sizeof d, "%s/one-layer", rel_runs_dir());
    snprintf(ck, sizeof ck, "%s/last.ckpt", d);
    snprintf(want, sizeof want, "%s: curvature needs at least 2 layers", ck);
    const char *p[] = {"probe", "curvature", d, "--ckpt", "last", "--no-plot", NULL};
    rel_gflow(&res, 0, p);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, want), /* after the probe's progress lines */
             "probe curvature on one layer: exit %d, want one line with '%s': %s", res.exit_code, want, res.err);
    /* item 1's bounded reading for the prompt-pair file: --pairs /dev/zero looped forever */
    const char *z[] = {"probe", "curvature", d, "--ckpt", "last", "--no-plot", "--pairs", "/dev/zero", NULL};
    rel_limits lim = {.seconds = 30};
    rel_gflow_limited(&res, &lim, z);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "/dev/zero:1: NUL"),
             "probe --pairs /dev/zero: exit %d (signal %d): %s", res.exit_code, res.signal, res.err);
}

/* Issue 35 item 4: no NaN or infinity printed as a result: `compare` on a run with no validation
 * row yet printed "inf (-1)" and a gap of "nan%"; it shows "-". */
GF_TEST(smoke, rel_compare_prints_no_inf_or_nan) {
    const char *l[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=cmp-done", "--set",
                       "train.max_steps=5", NULL};
    rel_result res;
    rel_gflow(&res, 0, l);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    char done[900], fresh[900], met[1000], cmd[3000], out[900];
    snprintf(done, sizeof done, "%s/cmp-done", rel_runs_dir());
    snprintf(fresh, sizeof fresh, "%s/cmp-fresh", rel_runs_dir());
    snprintf(met, sizeof met, "%s/metrics.tsv", fresh);
    mkdir(fresh, 0755);
    gf_test_write_text(met, "step\tepoch\tsplit\tloss\tppl\tppl_word\tacc\tlr\tgnorm\n");
    snprintf(out, sizeof out, "%s/../compare.out", rel_runs_dir());
    for (int order = 0; order < 2; order++) {
        snprintf(cmd, sizeof cmd, "'%s' compare '%s' '%s' --plot none > '%s' 2>&1", rel_gflow_exe(),
                 order ? done : fresh, order ? fresh : done, out);
        int rc = system(cmd);
        char *t = gf_test_slurp(out, NULL);
        GF_CHECK(rc == 0 && t && !strstr(t, "inf") && !strstr(t, "nan") && strstr(t, "| - running |"),
                 "compare with a run without validation rows (order %d): %s", order, t ? t : "");
        free(t);
    }
}

/* Issue 35 item 4: a library's message names the input it concerns: a prompt word the word
 * tokenizer cannot encode is reported for --prompt, not as a bare "word '...' is not in the
 * vocabulary". */
GF_TEST(smoke, rel_sample_prompt_error_names_the_option) {
    const char *t[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=prompt-err",
                       "--stop-after", "3", NULL};
    rel_result res;
    rel_gflow(&res, 0, t);
    GF_REQUIRE(res.exit_code == 0, "run: %s", res.err);
    char d[900];
    snprintf(d, sizeof d, "%s/prompt-err", rel_runs_dir());
    const char *s[] = {"sample", d, "--ckpt", "last", "--prompt", "zzqxj", "--tokens", "2", NULL};
    rel_gflow(&res, 0, s);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "--prompt: ") && strstr(res.err, "zzqxj"),
             "sample with an unknown prompt word: exit %d: %s", res.exit_code, res.err);
}
