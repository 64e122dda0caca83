/* test_train_wordpiece.c — suite `smoke`: recipes/wikitext2-wp.ini (BERT WordPiece) trains on
 * WikiText-2's train split (shrunk to a tiny model and 4 steps), its per-word perplexity is the
 * whole split's NLL over the split's words, and `gflow data encode` and `gflow sample` read the
 * run. Skipped without GFLOW_DATA_MIRROR. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gf_test.h"
#include "reliability/rel_util.h"
#include "test_util.h"
#include "gflow/data.h"
#include "gflow/train.h"

/* a shell command's stdout (first line, trailing newline cut) and its exit status */
static int sh(const char *cmd, char *out, size_t cap) {
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    if (fgets(out, (int)cap, p)) out[strcspn(out, "\n")] = '\0';
    while (fgetc(p) != EOF) {}
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ids a split's stream holds (tokens of every line and a [SEP] each), and its words */
static void counts(const char *vocab, const char *split, int64_t *ids, int64_t *words) {
    gf_tokenizer_opts o = {.kind = GF_TOK_WORDPIECE, .vocab_size = 30522};
    gf_tokenizer *t = NULL;
    gf_ids v = {0};
    *ids = *words = -1;
    if (gf_tokenizer_open(&t, &o, vocab) || gf_lm_tokenize_file(t, split, &v) || gf_wikitext_word_count(split, words))
        gf_test_fail(__FILE__, __LINE__, "counting %s: %s", split, gf_last_error());
    *ids = v.n;
    gf_ids_free(&v);
    gf_tokenizer_free(t);
}

/* WikiText-2 train as it is; the first lines of valid and test, so the full evaluations are quick */
static void prepare(const char *m, const char *d) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/data/wikitext-2 && ln -sf %s/wikitext-2/wiki.train.tokens %s/data/wikitext-2/ && "
             "head -n 100 %s/wikitext-2/wiki.valid.tokens > %s/data/wikitext-2/valid-head.tokens && "
             "head -n 60 %s/wikitext-2/wiki.test.tokens > %s/data/wikitext-2/test-head.tokens && "
             "%s/datasets/fetch.sh bert-base-uncased %s/data > %s/fetch.log 2>&1",
             d, m, d, m, d, m, d, gf_test_source_root(), d, d);
    GF_REQUIRE(system(cmd) == 0, "preparing %s (fetch log in %s/fetch.log)", d, d);
}

GF_TEST(smoke, wordpiece_recipe_trains_on_wikitext2) {
    const char *m = getenv("GFLOW_DATA_MIRROR");
    if (!m || !*m) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    char d[700], set[12][800], recipe[800];
    snprintf(d, sizeof d, "%s/wp_train", gf_test_tmpdir());
    prepare(m, d);
    if (gf_test_failed_now()) return;
    const char *fmt[12] = {"run.name=wp-smoke", "run.out_dir=%s/runs", "data.dir=%s/data",
                           "data.valid_file=wikitext-2/valid-head.tokens", "data.test_file=wikitext-2/test-head.tokens",
                           "tokenizer.cache_dir=%s/cache", "data.seq_len=32", "model.n_layers=1",
                           "model.d_model=16", "model.d_ff=32", "model.r=4", "train.max_steps=4"};
    const char *sets[16];
    for (int i = 0; i < 12; i++) {
        snprintf(set[i], sizeof set[i], fmt[i], d);
        sets[i] = set[i];
    }
    sets[12] = "train.batch_size=4";
    sets[13] = "model.offsets=1,2";
    sets[14] = "train.eval_batches=0";
    sets[15] = "run.threads=2";
    snprintf(recipe, sizeof recipe, "%s/recipes/wikitext2-wp.ini", gf_test_source_root());
    gf_recipe r;
    GF_REQUIRE_OK(gf_recipe_load(recipe, sets, 16, &r));
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));

    char run[800], p[900], vocab[900], line[512];
    snprintf(run, sizeof run, "%s/runs/wp-smoke", d);
    snprintf(p, sizeof p, "%s/summary.tsv", run);
    char *sum = gf_test_slurp(p, NULL);
    GF_REQUIRE(sum != NULL, "no %s", p);
    GF_CHECK(strstr(sum, "\ntokenizer\twordpiece:30522:07eced375cec144d\n") && strstr(sum, "\nvocab\t30522\n"),
             "summary: %s", sum);
    free(sum);
    /* per word: exp(NLL / words), NLL = loss x the ids predicted (all but the stream's first) */
    snprintf(vocab, sizeof vocab, "%s/data/bert-base-uncased/vocab.txt", d);
    static const char *const split[2][3] = {{"valid-head", "best_val_loss", "val_ppl_word"},
                                            {"test-head", "test_loss", "test_ppl_word"}};
    for (int i = 0; i < 2; i++) {
        int64_t ids, words;
        snprintf(p, sizeof p, "%s/data/wikitext-2/%s.tokens", d, split[i][0]);
        counts(vocab, p, &ids, &words);
        double loss = gf_test_summary_value(run, split[i][1]), ppl_word = gf_test_summary_value(run, split[i][2]);
        double want = exp(loss * (double)(ids - 1) / (double)words);
        GF_CHECK(ids > words && words > 0 && fabs(ppl_word / want - 1) < 1e-5,
                 "%s: ppl per word %.4f, expected exp(%.6f x %lld / %lld) = %.4f", split[i][0], ppl_word, loss,
                 (long long)(ids - 1), (long long)words, want);
    }
    /* the run's tokenizer, as the model sees text; sample decodes WordPiece back to words */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "echo 'i like strawberries' | env -u GFLOW_DATA_MIRROR %s data encode %s", rel_gflow_exe(), run);
    GF_CHECK(sh(cmd, line, sizeof line) == 0 && !strcmp(line, "1045 2066 13137 20968"), "data encode RUN: '%s'", line);
    snprintf(cmd, sizeof cmd, "%s data encode %s --set run.seed=2 </dev/null 2>/dev/null", rel_gflow_exe(), run);
    GF_CHECK(sh(cmd, line, sizeof line) == 2, "data encode RUN --set: a usage error");
    snprintf(cmd, sizeof cmd, "%s sample %s --prompt 'Strawberries are' --tokens 3 --seed 1 2>&1", rel_gflow_exe(), run);
    GF_CHECK(sh(cmd, line, sizeof line) == 0 && !strncmp(line, "strawberries are", 16), "sample: '%s'", line);
}
