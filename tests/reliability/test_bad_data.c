/* test_bad_data.c — bad data gives clear errors, never a crash: odd/truncated/binary SNLI rows
 * (library), empty, binary or non-UTF-8 WikiText files and checksum mismatches (through `gflow train`),
 * token caches that are corrupt, oversized or built by another tokenizer (library and CLI:
 * a stale cache is rebuilt and the run is unchanged). */
#include "gf_test.h"
#include "gflow/data.h"
#include "rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gf_tokenizer *word_tok(void) {
    char p[800];
    snprintf(p, sizeof p, "%s/snli_corpus.txt", gf_test_tmpdir());
    const char *t = " a man is sitting on a bench .\n two dogs run in the park .\n the woman sleeps .\n";
    gf_test_write_file(p, t, strlen(t));
    gf_tokenizer_opts o = {.kind = GF_TOK_WORD};
    gf_tokenizer *tok = NULL;
    if (gf_tokenizer_open(&tok, &o, p) != GF_OK) return NULL;
    return tok;
}

#define HDR "gold_label\tsentence1\tsentence2\tpairID\n"

typedef struct snli_case {
    const char *text;
    size_t len;           /* 0: strlen */
    int want_ok;          /* strict load must succeed */
    const char *needle;   /* in the error message (besides the path) when it fails */
} snli_case;

GF_TEST(data, rel_snli_bad_files_clear_errors) {
    gf_tokenizer *tok = word_tok();
    GF_REQUIRE(tok, "tokenizer: %s", gf_last_error());
    static const char nul_row[] = HDR "neutral\ta man\x00 is\ttwo dogs\tp1\n";
    static const snli_case cases[] = {
        {HDR "neutral\ta man is sitting\ttwo dogs run\tp1\n", 0, 1, NULL},
        {HDR "neutral\ta man is sitting\ttwo dogs run\tp1\r\n", 0, 1, NULL},
        {HDR "neutral\ta man is sitting\n", 0, 0, ":2"},                         /* truncated row */
        {HDR "neutral\ta man\ttwo dogs\tp1\tEXTRA\n", 0, 0, ":2"},               /* extra column */
        {HDR "neutral\ta man is sitting\ttwo dogs run\tp1\nentail", 0, 0, ":3"}, /* cut mid-row */
        {HDR "maybe\ta man\ttwo dogs\tp1\n", 0, 0, ":2"},                        /* unknown label */
        {HDR "\ta man\ttwo dogs\tp1\n", 0, 0, ":2"},                             /* empty label */
        {"", 0, 0, "empty"},                                                     /* empty file */
        {"\n\n\n", 0, 0, ""},                                                    /* blank lines */
        {"sentence1\tsentence2\n a\tb\n", 0, 0, "gold_label"},                   /* missing column */
        {nul_row, sizeof nul_row - 1, 0, "NUL"},                                 /* binary */
        {"\x7f" "ELF\x02\x01\x01\xff\xfe\t\t\t\n\x80\x81", 0, 0, ""},            /* binary garbage */
        {HDR "neutral\t\t\tp1\n", 0, 1, NULL},                                   /* empty sentences */
    };
    char path[800];
    snprintf(path, sizeof path, "%s/bad_snli.txt", gf_test_tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const snli_case *c = &cases[i];
        gf_test_write_file(path, c->text, c->len ? c->len : strlen(c->text));
        for (int skip = 0; skip < 2; skip++) {
            gf_snli_opts o = {.max_len = 6, .pad_id = 0, .skip_bad_rows = skip};
            gf_snli_data d;
            memset(&d, 0, sizeof d);
            gf_status st = gf_snli_load(&d, path, tok, &o);
            if (st == GF_OK) {
                if (!skip && !c->want_ok)
                    gf_test_fail(__FILE__, __LINE__, "case %zu: strict load accepted a bad file", i);
                for (int64_t k = 0; k < d.n; k++)
                    GF_CHECK(d.prem_len[k] >= 0 && d.prem_len[k] <= 6 && d.label[k] >= 0 && d.label[k] <= 2,
                             "case %zu row %lld: invariants", i, (long long)k);
                gf_snli_free(&d);
            } else {
                const char *m = gf_last_error();
                if (c->want_ok) gf_test_fail(__FILE__, __LINE__, "case %zu: %s", i, m);
                else if (!strstr(m, "bad_snli.txt") || (!skip && c->needle && !strstr(m, c->needle)))
                    gf_test_fail(__FILE__, __LINE__, "case %zu (skip %d): message '%s' lacks the file or '%s'", i,
                                 skip, m, c->needle ? c->needle : "");
                GF_CHECK(st == GF_E_PARSE || st == GF_E_INVALID || st == GF_E_CORRUPT, "case %zu: status %s", i,
                         gf_status_name(st));
            }
        }
    }
    gf_tokenizer_free(tok);
}

/* A token cache whose header claims ~10^9 ids: rejected as corrupt from its size, without
 * trying to allocate 4 GB first (fuzz finding, see docs/reliability.md). */
GF_TEST(data, rel_token_cache_huge_count_rejected) {
    char path[800];
    snprintf(path, sizeof path, "%s/huge.tok", gf_test_tmpdir());
    uint8_t sha[32] = {0};
    gf_ids ids = {0};
    for (int i = 0; i < 10; i++) gf_ids_push(&ids, i);
    GF_REQUIRE_OK(gf_token_cache_write(path, "word:10:0123456789abcdef", sha, 4, &ids));
    gf_ids_free(&ids);
    size_t n = 0;
    unsigned char *b = (unsigned char *)gf_test_slurp(path, &n);
    GF_REQUIRE(b && n == 160 + 40, "cache size %zu", n);
    /* count is the i64 after magic(8) version(4) header_bytes(4) key(64) src_sha(32) */
    int64_t huge = 1000000000;
    size_t off = 0;
    for (size_t o = 0; o + 8 <= 160; o += 8) {
        int64_t v;
        memcpy(&v, b + o, 8);
        if (v == 10) { off = o; break; }
    }
    GF_REQUIRE(off > 0, "count field found");
    memcpy(b + off, &huge, 8);
    gf_test_write_file(path, b, n);
    free(b);
    gf_tokens out = {0};
    GF_CHECK_ERR(gf_token_cache_open(path, "word:10:0123456789abcdef", sha, &out), GF_E_CORRUPT, "huge.tok");
    GF_CHECK(out.n == 0, "nothing returned");
    gf_tokens_free(&out);
}

static int run_train(rel_result *res, const char *name, const char *const *extra, int quiet) {
    const char *a[24] = {"train", rel_base_recipe(), "--set", name, "--set", "train.max_steps=6"};
    int n = 6;
    if (quiet) a[n++] = "--quiet";
    for (int i = 0; extra && extra[i]; i++) a[n++] = extra[i];
    a[n] = NULL;
    rel_gflow(res, 0, a);
    return res->exit_code;
}

GF_TEST(data, rel_wikitext_bad_files_cli) {
    const char *runs = rel_runs_dir();
    char dd[800], p[900], set_dir[900];
    snprintf(dd, sizeof dd, "%s/../baddata", runs);
    mkdir(dd, 0755);
    snprintf(set_dir, sizeof set_dir, "data.dir=%s", dd);
    snprintf(p, sizeof p, "%s/train.txt", dd);
    gf_test_write_corpus(p, 200, 1);
    snprintf(p, sizeof p, "%s/empty.txt", dd);
    gf_test_write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/blank.txt", dd);
    gf_test_write_file(p, "\n\n\n", 3);
    unsigned char bin[4096];
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (unsigned char)(i * 2654435761u >> 13);
    snprintf(p, sizeof p, "%s/binary.txt", dd);
    gf_test_write_file(p, bin, sizeof bin);
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = bin[i] ? bin[i] : 0x80; /* no NUL: only UTF-8 tells */
    snprintf(p, sizeof p, "%s/binary-nonul.txt", dd);
    gf_test_write_file(p, bin, sizeof bin);
    static const char latin1[] = " the man sees a dog .\n the caf\xe9 is old .\n";
    snprintf(p, sizeof p, "%s/latin1.txt", dd);
    gf_test_write_file(p, latin1, sizeof latin1 - 1);
    static const char nul[] = " the man sees a dog .\n\n the dog\0 runs .\n";
    snprintf(p, sizeof p, "%s/nul.txt", dd);
    gf_test_write_file(p, nul, sizeof nul - 1);
    /* a file with a recorded checksum (by its base name) but other content */
    snprintf(p, sizeof p, "%s/wiki.valid.tokens", dd);
    gf_test_write_corpus(p, 50, 9);
    rel_result res;
    /* binary or non-UTF-8 text is refused at its first bad line (issue 20 item 11: random bytes
     * used to train, as junk words, to a per-word perplexity of 1e76) */
    struct { const char *valid, *train, *needle, *needle2; } cases[] = {
        {"empty.txt", "train.txt", "empty.txt", ""},
        {"blank.txt", "train.txt", "blank.txt", ""},
        {"missing.txt", "train.txt", "missing.txt", ""},
        {"wiki.valid.tokens", "train.txt", "wiki.valid.tokens", ""},
        {"train.txt", "empty.txt", "empty.txt", ""},
        {"train.txt", "binary.txt", "binary.txt:1:", "NUL"},
        {"binary.txt", "train.txt", "binary.txt:1:", "NUL"},
        {"train.txt", "binary-nonul.txt", "binary-nonul.txt:1:", "UTF-8"},
        {"latin1.txt", "train.txt", "latin1.txt:2:", "UTF-8"},
        {"nul.txt", "train.txt", "nul.txt:3:", "NUL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sv[300], st[300], stt[300], nm[64];
        snprintf(sv, sizeof sv, "data.valid_file=%s", cases[i].valid);
        snprintf(st, sizeof st, "data.train_file=%s", cases[i].train);
        snprintf(stt, sizeof stt, "tokenizer.train_file=%s", cases[i].train);
        snprintf(nm, sizeof nm, "run.name=bad%zu", i);
        const char *extra[] = {"--set", set_dir, "--set", sv, "--set", st, "--set", stt, NULL};
        run_train(&res, nm, extra, 1);
        if (res.signal) gf_test_fail(__FILE__, __LINE__, "case %zu: gflow crashed (signal %d)", i, res.signal);
        else if (res.exit_code != 1 || !strstr(res.err, cases[i].needle) || !strstr(res.err, cases[i].needle2) ||
                 res.err_lines != 1)
            gf_test_fail(__FILE__, __LINE__, "case %zu (valid %s, train %s): exit %d, stderr: %s", i, cases[i].valid,
                         cases[i].train, res.exit_code, res.err);
    }
    /* SentencePiece reads its corpus itself: checked before it trains on it */
    char scache[1000];
    snprintf(scache, sizeof scache, "tokenizer.cache_dir=%s/spm-cache", dd);
    const char *spm[] = {"--set", set_dir, "--set", "tokenizer.train_file=binary-nonul.txt", "--set",
                         "tokenizer.kind=spm", "--set", "tokenizer.vocab_size=60", "--set", scache, NULL};
    run_train(&res, "run.name=bad-spm", spm, 1);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "binary-nonul.txt:1:") &&
                 strstr(res.err, "UTF-8"),
             "spm on a binary corpus: exit %d: %s", res.exit_code, res.err);
    /* the checksum message names both sums */
    const char *extra[] = {"--set", set_dir, "--set", "data.valid_file=wiki.valid.tokens", NULL};
    run_train(&res, "run.name=badsum", extra, 1);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "sha256") != NULL, "checksum mismatch message: %s", res.err);
}

/* A cache built by another tokenizer, or a truncated one, put where this run's cache belongs:
 * the run re-tokenizes (and says so) and trains exactly as with a clean cache. */
GF_TEST(data, rel_stale_token_cache_cli) {
    const char *runs = rel_runs_dir();
    char cache[900], cache_b[900], sc[1000], sb[1000], p[1000], q[1000];
    snprintf(cache, sizeof cache, "%s/../tc_a", runs);
    snprintf(cache_b, sizeof cache_b, "%s/../tc_b", runs);
    snprintf(sc, sizeof sc, "tokenizer.cache_dir=%s", cache);
    snprintf(sb, sizeof sb, "tokenizer.cache_dir=%s", cache_b);
    rel_result res;
    const char *ea[] = {"--set", sc, NULL};
    GF_REQUIRE(run_train(&res, "run.name=tc-clean", ea, 1) == 0, "clean run: %s", res.err);
    /* tokenizer B: word vocabulary of another corpus (valid.txt), its own cache dir */
    const char *eb[] = {"--set", sb, "--set", "tokenizer.train_file=valid.txt", NULL};
    GF_REQUIRE(run_train(&res, "run.name=tc-other", eb, 1) == 0, "other-tokenizer run: %s", res.err);
    /* copy B's cache files over A's, matched by split name */
    const char *splits[] = {"train.txt", "valid.txt"};
    int copied = 0;
    for (int s = 0; s < 2; s++) {
        char cmd[3000];
        snprintf(cmd, sizeof cmd,
                 "a=$(ls %s/%s.*.tok 2>/dev/null | head -1); b=$(ls %s/%s.*.tok 2>/dev/null | head -1); "
                 "[ -n \"$a\" ] && [ -n \"$b\" ] && cp \"$b\" \"$a\"",
                 cache, splits[s], cache_b, splits[s]);
        copied += system(cmd) == 0;
    }
    GF_REQUIRE(copied == 2, "cache files of both tokenizers found (%d)", copied);
    GF_REQUIRE(run_train(&res, "run.name=tc-stale", ea, 0) == 0, "run over a stale cache: %s", res.err);
    GF_CHECK(strstr(res.err, "re-tokenized") && strstr(res.err, "tokenizer"), "stale cache not reported: %.2000s",
             res.err);
    snprintf(p, sizeof p, "%s/tc-clean/metrics.tsv", runs);
    snprintf(q, sizeof q, "%s/tc-stale/metrics.tsv", runs);
    GF_CHECK(rel_files_equal(p, q), "run over a stale cache differs from a clean one");
    /* a truncated cache: rebuilt too */
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "for f in %s/train.txt.*.tok; do truncate -s 200 \"$f\"; done", cache);
    GF_CHECK(system(cmd) == 0, "truncate");
    GF_REQUIRE(run_train(&res, "run.name=tc-trunc", ea, 0) == 0, "run over a truncated cache: %s", res.err);
    GF_CHECK(strstr(res.err, "re-tokenized") != NULL, "truncated cache not reported: %.2000s", res.err);
    snprintf(q, sizeof q, "%s/tc-trunc/metrics.tsv", runs);
    GF_CHECK(rel_files_equal(p, q), "run over a truncated cache differs from a clean one");
}

/* Issue 20 item 12: a SentencePiece model file changed in place (one byte of a piece) keys new
 * token caches: every split is re-tokenized with the model now there, and the run equals one
 * whose cache directory held only that model. */
GF_TEST(data, rel_spm_model_change_retokenizes) {
    const char *runs = rel_runs_dir();
    char ca[900], cb[900], sa[1000], sb[1000], model[1200], cmd[4000], p[1000], q[1000];
    snprintf(ca, sizeof ca, "%s/../spm_a", runs);
    snprintf(cb, sizeof cb, "%s/../spm_b", runs);
    snprintf(sa, sizeof sa, "tokenizer.cache_dir=%s", ca);
    snprintf(sb, sizeof sb, "tokenizer.cache_dir=%s", cb);
    rel_result res;
    const char *ea[] = {"--set", sa, "--set", "tokenizer.kind=spm", "--set", "tokenizer.vocab_size=60", NULL};
    GF_REQUIRE(run_train(&res, "run.name=spm-first", ea, 1) == 0, "first run: %s", res.err);
    snprintf(cmd, sizeof cmd, "ls %s/spm-*.model", ca);
    FILE *ls = popen(cmd, "r");
    GF_REQUIRE(ls && fgets(model, sizeof model, ls), "the trained model in %s", ca);
    pclose(ls);
    model[strcspn(model, "\n")] = 0;
    /* rename the piece "▁the" to "▁thQ": the file still loads, and "the" encodes differently */
    size_t n = 0;
    char *m = gf_test_slurp(model, &n);
    char *at = NULL;
    for (size_t i = 0; m && i + 7 <= n && !at; i++)
        if (!memcmp(m + i, "\x06\xe2\x96\x81the", 7)) at = m + i;
    GF_REQUIRE(at, "piece '▁the' in %s", model);
    at[6] = 'Q';
    gf_test_write_file(model, m, n);
    /* a cache directory holding only the changed model: the reference */
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/", cb, model, cb);
    GF_REQUIRE(system(cmd) == 0, "%s", cmd);
    free(m);
    GF_REQUIRE(run_train(&res, "run.name=spm-changed", ea, 1) == 0, "run over the changed model: %s", res.err);
    const char *eb[] = {"--set", sb, "--set", "tokenizer.kind=spm", "--set", "tokenizer.vocab_size=60", NULL};
    GF_REQUIRE(run_train(&res, "run.name=spm-clean", eb, 1) == 0, "reference run: %s", res.err);
    snprintf(p, sizeof p, "%s/spm-changed/metrics.tsv", runs);
    snprintf(q, sizeof q, "%s/spm-clean/metrics.tsv", runs);
    GF_CHECK(rel_files_equal(p, q), "a run over caches of the old model differs from one over the changed model");
    GF_CHECK(rel_count_suffix(ca, ".tok") == 6, "%d token caches in %s, want 3 per model", rel_count_suffix(ca, ".tok"),
             ca);
}

/* Issue 35 item 1 for data files: a split or tokenizer corpus that is not a regular file
 * (/dev/zero behind a symlink) is refused naming it; it was hashed and read without end. */
GF_TEST(data, rel_data_file_not_regular_refused) {
    char dd[800], p[900], set_dir[900];
    snprintf(dd, sizeof dd, "%s/../devdata", rel_runs_dir());
    mkdir(dd, 0755);
    snprintf(set_dir, sizeof set_dir, "data.dir=%s", dd);
    snprintf(p, sizeof p, "%s/train.txt", dd);
    gf_test_write_corpus(p, 200, 1);
    snprintf(p, sizeof p, "%s/test.txt", dd);
    gf_test_write_corpus(p, 50, 2);
    snprintf(p, sizeof p, "%s/valid.txt", dd);
    unlink(p);
    GF_REQUIRE(symlink("/dev/zero", p) == 0, "symlink %s", p);
    const char *a[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=devdata", "--set", set_dir,
                       "--stop-after", "1", NULL};
    rel_limits lim = {.seconds = 30};
    rel_result res;
    rel_gflow_limited(&res, &lim, a);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, p) && strstr(res.err, "not a regular file"),
             "valid split -> /dev/zero: exit %d (signal %d): %s", res.exit_code, res.signal, res.err);
}
