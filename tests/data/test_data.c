/* test_data.c — suite `data`: checksums, fetch script, SNLI reader, tokenizers,
 * token caches, LM/SNLI loaders. Tests on the real corpus skip when
 * GFLOW_DATA_MIRROR is unset. Fixtures live in tests/data/fixtures/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gf_test.h"
#include "test_util.h"
#include "gflow/data.h"
#include "gflow/error.h"
#include "gflow/fs.h"
#include "gflow/rng.h"
#include "gflow/tokenizer.h"

/* a file of tests/data/fixtures/ (a static buffer: one use at a time) */
static const char *fix(const char *name) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/fixtures/%s", gf_test_source_root(), name);
    return path;
}

/* a fresh scratch directory per test */
static const char *scratch(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/data_%s", gf_test_tmpdir(), name);
    mkdir(buf, 0777);
    return buf;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static const char *mirror(void) {
    const char *m = getenv("GFLOW_DATA_MIRROR");
    return m && *m ? m : NULL;
}

/* ---- checksums ---- */

GF_TEST(data, sha256_good_and_tampered) {
    char p[1200];
    snprintf(p, sizeof p, "%s/abc.txt", scratch("sha"));
    write_file(p, "abc");
    char hex[65];
    GF_REQUIRE_OK(gf_sha256_file(p, NULL, hex));
    const char *want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    GF_CHECK(strcmp(hex, want) == 0, "sha256('abc') = %s", hex);
    GF_CHECK_OK(gf_sha256_verify(p, want));
    write_file(p, "abd");
    GF_CHECK_ERR(gf_sha256_verify(p, want), GF_E_CORRUPT, "abc.txt");
    /* a data file with a recorded sum is checked by its base name */
    char q[1200];
    snprintf(q, sizeof q, "%s/wiki.valid.tokens", scratch("sha"));
    write_file(q, " = tampered = \n");
    GF_CHECK_ERR(gf_data_verify(q), GF_E_CORRUPT, "wiki.valid.tokens");
}

GF_TEST(data, fetch_script_rejects_tampered_and_reports_missing) {
    const char *d = scratch("fetch");
    char cmd[4096], m[1200], out[1200];
    snprintf(m, sizeof m, "%s/mirror/wikitext-2", d);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", m);
    GF_REQUIRE(system(cmd) == 0, "mkdir");
    snprintf(cmd, sizeof cmd, "cd %s && printf ' x \\n' > wiki.valid.tokens", m);
    GF_REQUIRE(system(cmd) == 0, "write fake split");
    snprintf(out, sizeof out, "%s/log.txt", d);
    /* from another cwd, as `gflow data fetch` would run it */
    snprintf(cmd, sizeof cmd, "cd / && GFLOW_DATA_MIRROR=%s/mirror %s/datasets/fetch.sh wikitext2 %s/dest > %s 2>&1",
             d, gf_test_source_root(), d, out);
    int rc = system(cmd);
    GF_CHECK(rc != 0, "tampered file must fail the fetch");
    FILE *f = fopen(out, "r");
    GF_REQUIRE(f != NULL, "log");
    char log[8192] = "";
    size_t n = fread(log, 1, sizeof log - 1, f);
    log[n] = '\0';
    fclose(f);
    GF_CHECK(strstr(log, "REJECTED: wikitext-2/wiki.valid.tokens") != NULL, "log: %s", log);
    GF_CHECK(strstr(log, "MISSING:  wikitext-2/wiki.train.tokens") != NULL, "log: %s", log);
    char inst[1200];
    snprintf(inst, sizeof inst, "%s/dest/wikitext-2/wiki.valid.tokens", d);
    struct stat sb;
    GF_CHECK(stat(inst, &sb) != 0, "rejected file must not be installed");
}

GF_TEST(data, split_path_reports_missing_split) {
    char p[4096];
    const char *d = scratch("split");
    GF_CHECK_ERR(gf_data_split_path(d, GF_DS_SNLI, GF_SPLIT_TRAIN, p, sizeof p), GF_E_NOTFOUND,
                 "snli_1.0_train.txt");
    if (!mirror()) return;
    GF_CHECK_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_VALID, p, sizeof p));
    GF_CHECK_OK(gf_data_verify(p));
    GF_CHECK_ERR(gf_data_split_path(mirror(), GF_DS_SNLI, GF_SPLIT_TRAIN, p, sizeof p), GF_E_NOTFOUND,
                 "snli_1.0_train_0.01.txt");
}

/* ---- word tokenizer ---- */

static gf_tokenizer *word_tok_from(const char *dir, const char *text) {
    char p[1200];
    snprintf(p, sizeof p, "%s/corpus.txt", dir);
    write_file(p, text);
    gf_tokenizer_opts o = {.kind = GF_TOK_WORD};
    gf_tokenizer *t = NULL;
    if (gf_tokenizer_open(&t, &o, p) != GF_OK) return NULL;
    return t;
}

GF_TEST(data, word_tokenizer_roundtrip) {
    gf_tokenizer *t = word_tok_from(scratch("word"), " \n a b <unk> \n b c a \n");
    GF_REQUIRE(t != NULL, "%s", gf_last_error());
    /* order of first appearance, <eos> after each line: <eos> a b <unk> c */
    GF_CHECK(gf_tokenizer_vocab_size(t) == 5, "V=%lld", (long long)gf_tokenizer_vocab_size(t));
    GF_CHECK(gf_tokenizer_eol_id(t) == 0, "eol %d", gf_tokenizer_eol_id(t));
    GF_CHECK(strcmp(gf_tokenizer_id_to_piece(t, 4), "c") == 0, "piece 4");
    gf_ids ids = {0};
    GF_CHECK_OK(gf_tokenizer_encode(t, "c a  b", 6, &ids));
    GF_CHECK(ids.n == 3 && ids.data[0] == 4 && ids.data[1] == 1 && ids.data[2] == 2, "ids");
    GF_CHECK_OK(gf_ids_push(&ids, gf_tokenizer_eol_id(t)));
    GF_CHECK_OK(gf_tokenizer_encode(t, "zzz a", 5, &ids)); /* unknown -> <unk> */
    GF_CHECK(ids.n == 6 && ids.data[4] == 3, "unk id");
    char *s = NULL;
    GF_CHECK_OK(gf_tokenizer_decode(t, ids.data, ids.n, &s));
    GF_CHECK(s && strcmp(s, "c a b\n<unk> a") == 0, "decoded '%s'", s ? s : "(null)");
    GF_CHECK(strncmp(gf_tokenizer_key(t), "word:5:", 7) == 0, "key %s", gf_tokenizer_key(t));
    free(s);
    gf_ids_free(&ids);
    gf_tokenizer_free(t);
}

/* ---- SentencePiece ---- */

static void make_spm_corpus(const char *path) {
    static const char *words[] = {"the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away",
                                  "from", "home", "and", "then", "slept", "quietly", "under", "a",
                                  "tree", "bird", "sang"};
    FILE *f = fopen(path, "w");
    if (!f) return;
    gf_rng r;
    gf_rng_seed(&r, 7);
    for (int l = 0; l < 1500; l++) {
        int n = 3 + (int)gf_rng_below(&r, 8);
        for (int k = 0; k < n; k++) fprintf(f, "%s%s", k ? " " : "", words[gf_rng_below(&r, 20)]);
        fputs(l % 5 == 0 ? " .\n" : "\n", f);
    }
    fclose(f);
}

GF_TEST(data, spm_train_cache_roundtrip) {
    const char *d = scratch("spm");
    char corpus[1200], cache[1200];
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", d);
    snprintf(cache, sizeof cache, "%s/cache", d);
    make_spm_corpus(corpus);
    gf_tokenizer_opts o = {.kind = GF_TOK_SPM, .vocab_size = 80, .model_type = GF_SPM_BPE, .cache_dir = cache};
    gf_tokenizer *t = NULL;
    GF_REQUIRE_OK(gf_tokenizer_open(&t, &o, corpus));
    GF_CHECK(gf_tokenizer_vocab_size(t) == 80, "V=%lld", (long long)gf_tokenizer_vocab_size(t));
    GF_CHECK(strncmp(gf_tokenizer_key(t), "spm:bpe:80:", 11) == 0, "key %s", gf_tokenizer_key(t));
    const char *text = "the dog ran far away from home";
    gf_ids ids = {0};
    GF_CHECK_OK(gf_tokenizer_encode(t, text, strlen(text), &ids));
    GF_CHECK(ids.n > 1 && ids.n < (int64_t)strlen(text), "%lld pieces", (long long)ids.n);
    int64_t first = ids.n;
    GF_CHECK_OK(gf_ids_push(&ids, gf_tokenizer_eol_id(t)));
    GF_CHECK_OK(gf_tokenizer_encode(t, "a bird sang", 11, &ids));
    char *s = NULL;
    GF_CHECK_OK(gf_tokenizer_decode(t, ids.data, ids.n, &s));
    GF_CHECK(s && strcmp(s, "the dog ran far away from home\na bird sang") == 0, "decoded '%s'", s ? s : "");
    free(s);
    GF_CHECK(gf_tokenizer_id_to_piece(t, ids.data[0]) != NULL, "piece");
    GF_CHECK(gf_tokenizer_id_to_piece(t, 80) == NULL, "out of range piece");
    /* the second open reuses the cached model file: same mtime, same ids */
    char model[1400];
    snprintf(model, sizeof model, "%s/spm-bpe-80-%.16s.model", cache, gf_tokenizer_key(t) + 11); /* corpus sha16 */
    struct stat a, b;
    GF_REQUIRE(stat(model, &a) == 0, "cached model %s", model);
    gf_tokenizer *t2 = NULL;
    GF_REQUIRE_OK(gf_tokenizer_open(&t2, &o, corpus));
    GF_REQUIRE(stat(model, &b) == 0, "model");
    GF_CHECK(a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec, "model retrained");
    gf_ids ids2 = {0};
    GF_CHECK_OK(gf_tokenizer_encode(t2, text, strlen(text), &ids2));
    GF_CHECK(ids2.n == first && memcmp(ids2.data, ids.data, (size_t)first * 4) == 0, "same ids after reload");
    gf_ids_free(&ids);
    gf_ids_free(&ids2);
    gf_tokenizer_free(t);
    gf_tokenizer_free(t2);
    /* a size SentencePiece cannot reach names the largest it can */
    o.model_type = GF_SPM_UNIGRAM;
    o.vocab_size = 5000;
    GF_CHECK_ERR(gf_tokenizer_open(&t, &o, corpus), GF_E_INVALID, "largest it can reach is");
}

/* ---- SNLI ---- */

static gf_tokenizer *snli_tok(const char *name) {
    return word_tok_from(scratch(name),
                         "The dog is running fast. A dog runs. A \"big\" cat is awake. A cat sleeps.\n"
                         "dogs are animals\n");
}

GF_TEST(data, snli_header_by_name_skips_dash) {
    gf_tokenizer *t = snli_tok("snli1");
    GF_REQUIRE(t != NULL, "%s", gf_last_error());
    gf_snli_opts o = {.max_len = 4, .pad_id = 0};
    gf_snli_data d;
    GF_REQUIRE_OK(gf_snli_load(&d, fix("snli_reordered.txt"), t, &o));
    GF_CHECK(d.n == 3, "n=%lld", (long long)d.n);
    GF_CHECK(d.rows_read == 4 && d.skipped_no_label == 1, "rows %lld skipped %lld", (long long)d.rows_read,
             (long long)d.skipped_no_label);
    GF_CHECK(d.label[0] == GF_SNLI_ENTAILMENT && d.label[1] == GF_SNLI_CONTRADICTION && d.label[2] == GF_SNLI_NEUTRAL,
             "labels %d %d %d", d.label[0], d.label[1], d.label[2]);
    /* premise (sentence1) and hypothesis (sentence2) come from their named columns, quotes verbatim */
    char *s = NULL;
    GF_CHECK_OK(gf_tokenizer_decode(t, d.premise + 1 * d.Ls, d.prem_len[1], &s));
    GF_CHECK(s && strcmp(s, "A \"big\" cat is") == 0, "premise 1 '%s'", s ? s : "");
    free(s);
    GF_CHECK_OK(gf_tokenizer_decode(t, d.hypothesis + 0 * d.Ls, d.hyp_len[0], &s));
    GF_CHECK(s && strcmp(s, "A dog runs.") == 0, "hypothesis 0 '%s'", s ? s : "");
    free(s);
    GF_CHECK(d.prem_len[0] == 4 && d.truncated >= 2, "truncation to Ls=4 (len %d, truncated %lld)", d.prem_len[0],
             (long long)d.truncated);
    GF_CHECK(d.hyp_len[0] == 3 && d.hypothesis[0 * d.Ls + 3] == 0, "padding");
    gf_snli_free(&d);
    gf_tokenizer_free(t);
}

GF_TEST(data, snli_bad_rows_name_file_and_line) {
    gf_tokenizer *t = snli_tok("snli2");
    GF_REQUIRE(t != NULL, "%s", gf_last_error());
    gf_snli_opts o = {.max_len = 8};
    gf_snli_data d;
    GF_CHECK_ERR(gf_snli_load(&d, fix("snli_bad.txt"), t, &o), GF_E_PARSE, "snli_bad.txt:3:");
    o.skip_bad_rows = 1;
    GF_REQUIRE_OK(gf_snli_load(&d, fix("snli_bad.txt"), t, &o));
    GF_CHECK(d.n == 2 && d.skipped_bad == 2, "n=%lld bad=%lld", (long long)d.n, (long long)d.skipped_bad);
    gf_snli_free(&d);
    /* unknown label is reported at its line too */
    char p[1200];
    snprintf(p, sizeof p, "%s/lab.txt", scratch("snli2"));
    write_file(p, "gold_label\tsentence1\tsentence2\npositive\tA dog runs.\tA dog runs.\n");
    o.skip_bad_rows = 0;
    GF_CHECK_ERR(gf_snli_load(&d, p, t, &o), GF_E_PARSE, "lab.txt:2: unknown gold_label 'positive'");
    write_file(p, "gold\tsentence1\tsentence2\n");
    GF_CHECK_ERR(gf_snli_load(&d, p, t, &o), GF_E_PARSE, "no column 'gold_label'");
    gf_tokenizer_free(t);
}

GF_TEST(data, snli_loader_masks_and_state) {
    gf_tokenizer *t = snli_tok("snli3");
    GF_REQUIRE(t != NULL, "%s", gf_last_error());
    gf_snli_opts o = {.max_len = 6, .pad_id = 0};
    gf_snli_data d;
    GF_REQUIRE_OK(gf_snli_load(&d, fix("snli_reordered.txt"), t, &o));
    gf_snli_loader *ld = NULL;
    GF_REQUIRE_OK(gf_snli_loader_new(&ld, &d, 1, 42));
    enum { B = 2, Ls = 6, STEPS = 9 };
    int32_t p[B * Ls], h[B * Ls], y[B];
    float pm[B * Ls], hm[B * Ls];
    int64_t n;
    /* run a bit, save, record STEPS batches, restore into a new loader, compare */
    for (int i = 0; i < 3; i++) GF_CHECK_OK(gf_snli_loader_next(ld, B, p, pm, h, hm, y, &n));
    gf_loader_state st;
    gf_snli_loader_get_state(ld, &st);
    int32_t rec[STEPS][B * Ls + B];
    for (int i = 0; i < STEPS; i++) {
        GF_CHECK_OK(gf_snli_loader_next(ld, B, p, pm, h, hm, y, &n));
        memcpy(rec[i], p, sizeof p);
        memcpy(rec[i] + B * Ls, y, sizeof y);
        for (int r = 0; r < B; r++)
            for (int k = 0; k < Ls; k++) {
                float want = (r < n && k < 6 && p[r * Ls + k] != 0) ? 1.0f : 0.0f;
                (void)want;
                if (r >= n) GF_CHECK(pm[r * Ls + k] == 0.0f && y[r] == GF_IGNORE_ID, "unused row");
            }
    }
    gf_snli_loader *l2 = NULL;
    GF_REQUIRE_OK(gf_snli_loader_new(&l2, &d, 1, 999));
    GF_REQUIRE_OK(gf_snli_loader_set_state(l2, &st));
    for (int i = 0; i < STEPS; i++) {
        GF_CHECK_OK(gf_snli_loader_next(l2, B, p, pm, h, hm, y, &n));
        GF_CHECK(memcmp(rec[i], p, sizeof p) == 0 && memcmp(rec[i] + B * Ls, y, sizeof y) == 0, "batch %d differs", i);
    }
    /* masks: premise "The dog is running fast." = 5 words -> 5 ones */
    gf_snli_loader *l3 = NULL;
    GF_REQUIRE_OK(gf_snli_loader_new(&l3, &d, 0, 0));
    GF_CHECK_OK(gf_snli_loader_next(l3, B, p, pm, h, hm, y, &n));
    GF_CHECK(n == 2 && y[0] == GF_SNLI_ENTAILMENT, "sequential first rows");
    float sum = 0;
    for (int k = 0; k < Ls; k++) sum += pm[k];
    GF_CHECK(sum == 5.0f && pm[4] == 1.0f && pm[5] == 0.0f, "premise mask sum %g", sum);
    gf_snli_loader_free(ld);
    gf_snli_loader_free(l2);
    gf_snli_loader_free(l3);
    gf_snli_free(&d);
    gf_tokenizer_free(t);
}

/* ---- LM windows, loader, cache ---- */

GF_TEST(data, lm_window_counts) {
    int32_t tok[23];
    for (int i = 0; i < 23; i++) tok[i] = i;
    gf_lm_loader *ld = NULL;
    /* 23 tokens, L=5: (23-1)/5 = 4 full windows, 2 targets left for a tail window */
    gf_tokens ts = {.data = tok, .n = 23, .width = 4}, short3 = {.data = tok, .n = 3, .width = 4};
    GF_REQUIRE_OK(gf_lm_loader_new(&ld, &ts, 5, 0, 0, 1));
    GF_CHECK(gf_lm_loader_n_windows(ld) == 4, "windows %lld", (long long)gf_lm_loader_n_windows(ld));
    int32_t b[3 * 6];
    int64_t n;
    GF_CHECK_OK(gf_lm_loader_next(ld, b, 3, &n));
    GF_CHECK(n == 3 && b[0] == 0 && b[5] == 5 && b[6] == 5 && b[17] == 15, "window contents");
    GF_CHECK_OK(gf_lm_loader_next(ld, b, 3, &n));
    GF_CHECK(n == 1 && b[0] == 15 && b[5] == 20 && b[6] == GF_IGNORE_ID, "last window + unused rows");
    GF_CHECK_OK(gf_lm_loader_next(ld, b, 3, &n));
    GF_CHECK(n == 0, "epoch end returns 0 rows");
    gf_loader_state st;
    gf_lm_loader_get_state(ld, &st);
    GF_CHECK(st.epoch == 1 && st.index == 0, "next epoch started");
    gf_lm_loader_free(ld);
    GF_REQUIRE_OK(gf_lm_loader_new(&ld, &ts, 5, 0, 1, 1));
    GF_CHECK(gf_lm_loader_n_windows(ld) == 5, "with tail");
    GF_CHECK_OK(gf_lm_loader_next(ld, b, 3, &n));
    GF_CHECK_OK(gf_lm_loader_next(ld, b, 3, &n));
    GF_CHECK(n == 2 && b[6] == 20 && b[8] == 22 && b[9] == GF_IGNORE_ID && b[11] == GF_IGNORE_ID, "tail window");
    gf_lm_loader_free(ld);
    GF_CHECK_ERR(gf_lm_loader_new(&ld, &short3, 5, 0, 0, 1), GF_E_INVALID, "no window");
}

GF_TEST(data, lm_loader_state_restores_batches) {
    enum { N = 1001, L = 7, B = 4, STEPS = 60 };
    static int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = i;
    gf_lm_loader *a = NULL, *c = NULL;
    const gf_tokens ts = {.data = tok, .n = N, .width = 4};
    GF_REQUIRE_OK(gf_lm_loader_new(&a, &ts, L, 1, 0, 1234));
    int32_t b[B * (L + 1)];
    int64_t n;
    for (int i = 0; i < 20; i++) GF_CHECK_OK(gf_lm_loader_next(a, b, B, &n));
    gf_loader_state st;
    gf_lm_loader_get_state(a, &st);
    static int32_t rec[STEPS][B * (L + 1)];
    int64_t seen_rows = 0;
    for (int i = 0; i < STEPS; i++) { /* crosses an epoch boundary (142 windows) */
        GF_CHECK_OK(gf_lm_loader_next(a, b, B, &n));
        memcpy(rec[i], b, sizeof b);
        seen_rows += n;
    }
    gf_loader_state end;
    gf_lm_loader_get_state(a, &end);
    GF_CHECK(end.epoch >= 1, "epoch %lld", (long long)end.epoch);
    GF_REQUIRE_OK(gf_lm_loader_new(&c, &ts, L, 1, 0, 1)); /* other seed: state overrides */
    GF_REQUIRE_OK(gf_lm_loader_set_state(c, &st));
    for (int i = 0; i < STEPS; i++) {
        GF_CHECK_OK(gf_lm_loader_next(c, b, B, &n));
        GF_CHECK(memcmp(rec[i], b, sizeof b) == 0, "batch %d differs after restore", i);
    }
    /* shuffled order is a permutation and differs between epochs */
    gf_lm_loader *s = NULL;
    GF_REQUIRE_OK(gf_lm_loader_new(&s, &ts, L, 1, 0, 5));
    int64_t nw = gf_lm_loader_n_windows(s);
    static int64_t first[2][200];
    for (int e = 0; e < 2; e++) {
        int64_t k = 0;
        int32_t one[L + 1];
        while (gf_lm_loader_next(s, one, 1, &n) == GF_OK && n == 1) first[e][k++] = one[0] / L;
        GF_CHECK(k == nw, "epoch %d saw %lld of %lld windows", e, (long long)k, (long long)nw);
    }
    int same = 1, sorted = 1;
    for (int64_t k = 0; k < nw; k++) {
        same &= first[0][k] == first[1][k];
        sorted &= first[0][k] == k;
    }
    GF_CHECK(!same && !sorted, "per-epoch shuffle");
    gf_loader_state bad = st;
    bad.n_items = 3;
    GF_CHECK_ERR(gf_lm_loader_set_state(c, &bad), GF_E_INVALID, "items");
    gf_lm_loader_free(a);
    gf_lm_loader_free(c);
    gf_lm_loader_free(s);
}

GF_TEST(data, token_cache_detects_other_tokenizer_and_corruption) {
    const char *d = scratch("cache");
    char split[1200], cdir[1200];
    snprintf(split, sizeof split, "%s/wiki.tiny.tokens", d);
    snprintf(cdir, sizeof cdir, "%s/cache", d);
    write_file(split, " a b c \n \n b a \n");
    gf_tokenizer *t1 = word_tok_from(scratch("cache_t1"), " a b c \n");
    gf_tokenizer *t2 = word_tok_from(scratch("cache_t2"), " c b a d \n");
    GF_REQUIRE(t1 && t2, "%s", gf_last_error());
    gf_tokens ids = {0};
    gf_cache_event ev;
    char why[256];
    GF_REQUIRE_OK(gf_lm_split_tokens(t1, split, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_BUILT && ids.n == 8, "built, %lld tokens", (long long)ids.n);
    GF_REQUIRE_OK(gf_lm_split_tokens(t1, split, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_HIT && ids.n == 8, "hit");
    /* the t1 cache read under t2's key is rejected with both names */
    char cpath[1400];
    gf_token_cache_path(t1, split, cdir, cpath, sizeof cpath);
    GF_CHECK_ERR(gf_token_cache_open(cpath, gf_tokenizer_key(t2), NULL, &ids), GF_E_INVALID, "built by tokenizer");
    /* a cache file from another tokenizer under this tokenizer's name is rebuilt */
    char c2[1400];
    gf_token_cache_path(t2, split, cdir, c2, sizeof c2);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", cpath, c2);
    GF_REQUIRE(system(cmd) == 0, "cp");
    GF_REQUIRE_OK(gf_lm_split_tokens(t2, split, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_REBUILT && strstr(why, "built by tokenizer"), "rebuilt: %s", why);
    GF_CHECK(ids.n == 8 && ids.width == 2 && gf_tokens_at(&ids, 0) == 2, "t2 ids (a is 2 under t2, uint16), got %d",
             gf_tokens_at(&ids, 0));
    /* flip one payload byte: checksum catches it */
    FILE *f = fopen(cpath, "r+b");
    GF_REQUIRE(f != NULL, "open cache");
    fseek(f, 170, SEEK_SET);
    fputc(0x7f, f);
    fclose(f);
    GF_CHECK_ERR(gf_token_cache_open(cpath, gf_tokenizer_key(t1), NULL, &ids), GF_E_CORRUPT, "checksum");
    GF_REQUIRE_OK(gf_lm_split_tokens(t1, split, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_REBUILT && strstr(why, "checksum"), "rebuilt after corruption: %s", why);
    /* changed source text is detected too */
    write_file(split, " a a \n");
    GF_REQUIRE_OK(gf_lm_split_tokens(t1, split, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_REBUILT && ids.n == 3, "source change: %s", why);
    /* a split of the same file name elsewhere keeps its own cache: neither rebuilds the other */
    char other[1300];
    snprintf(other, sizeof other, "%s/elsewhere", d);
    GF_REQUIRE_OK(gf_mkdir_p(other));
    snprintf(other + strlen(other), sizeof other - strlen(other), "/wiki.tiny.tokens");
    write_file(other, " b \n");
    GF_REQUIRE_OK(gf_lm_split_tokens(t1, other, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_BUILT && ids.n == 2, "the other corpus: built, %lld tokens", (long long)ids.n);
    GF_REQUIRE_OK(gf_lm_split_tokens(t1, split, cdir, &ids, &ev, why, sizeof why, 0));
    GF_CHECK(ev == GF_CACHE_HIT && ids.n == 3, "the first corpus' cache kept (%d: %s)", (int)ev, why);
    gf_tokens_free(&ids);
    gf_tokenizer_free(t1);
    gf_tokenizer_free(t2);
}

/* ---- real data (GFLOW_DATA_MIRROR) ---- */

GF_TEST(data, wikitext_word_counts_real) {
    if (!mirror()) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    char p[4096];
    int64_t n = 0;
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_VALID, p, sizeof p));
    GF_CHECK_OK(gf_wikitext_word_count(p, &n));
    GF_CHECK(n == 217646, "valid words %lld", (long long)n);
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_TEST, p, sizeof p));
    GF_CHECK_OK(gf_wikitext_word_count(p, &n));
    GF_CHECK(n == 245569, "test words %lld", (long long)n);
}

GF_TEST(data, wikitext_word_vocab_real) {
    if (!mirror()) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    char p[4096], v[4096];
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_TRAIN, p, sizeof p));
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_VALID, v, sizeof v));
    gf_tokenizer_opts o = {.kind = GF_TOK_WORD};
    gf_tokenizer *t = NULL;
    GF_REQUIRE_OK(gf_tokenizer_open(&t, &o, p));
    GF_CHECK(gf_tokenizer_vocab_size(t) == 33278, "V=%lld", (long long)gf_tokenizer_vocab_size(t));
    gf_ids ids = {0};
    GF_CHECK_OK(gf_lm_tokenize_file(t, v, &ids));
    GF_CHECK(ids.n == 217646, "valid tokens %lld", (long long)ids.n);
    gf_ids_free(&ids);
    gf_tokenizer_free(t);
}

GF_TEST(data, snli_dev_real) {
    if (!mirror()) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    char p[4096];
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_SNLI, GF_SPLIT_VALID, p, sizeof p));
    gf_tokenizer *t = word_tok_from(scratch("snli_real"), "A man <unk> .\n");
    GF_REQUIRE(t != NULL, "%s", gf_last_error());
    gf_snli_opts o = {.max_len = 48};
    gf_snli_data d;
    GF_REQUIRE_OK(gf_snli_load(&d, p, t, &o));
    GF_CHECK(d.rows_read == 10000 && d.skipped_no_label == 158 && d.n == 9842, "rows %lld skipped %lld n %lld",
             (long long)d.rows_read, (long long)d.skipped_no_label, (long long)d.n);
    GF_CHECK(d.label_count[0] == 3329 && d.label_count[1] == 3235 && d.label_count[2] == 3278, "label counts");
    gf_snli_free(&d);
    gf_tokenizer_free(t);
}

GF_TEST(data, spm_bpe_30522_real) {
    if (!mirror()) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    char p[4096], cache[1200];
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_TRAIN, p, sizeof p));
    snprintf(cache, sizeof cache, "%s/cache", scratch("bpe_real"));
    gf_tokenizer_opts o = {.kind = GF_TOK_SPM, .vocab_size = 30522, .model_type = GF_SPM_BPE, .cache_dir = cache};
    gf_tokenizer *t = NULL;
    GF_REQUIRE_OK(gf_tokenizer_open(&t, &o, p));
    GF_CHECK(gf_tokenizer_vocab_size(t) == 30522, "V");
    const char *line = " The game 's opening theme was composed by <unk> . ";
    gf_ids ids = {0};
    GF_CHECK_OK(gf_tokenizer_encode(t, line, strlen(line), &ids));
    char *s = NULL;
    GF_CHECK_OK(gf_tokenizer_decode(t, ids.data, ids.n, &s));
    GF_CHECK(s && strcmp(s, "The game 's opening theme was composed by <unk> .") == 0, "decoded '%s'", s ? s : "");
    free(s);
    gf_ids_free(&ids);
    gf_tokenizer_free(t);
}

// ~6 s: suite slow
GF_TEST(slow, spm_unigram_too_large_real) {
    if (!mirror()) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    char p[4096], cache[1200];
    GF_REQUIRE_OK(gf_data_split_path(mirror(), GF_DS_WIKITEXT2, GF_SPLIT_TRAIN, p, sizeof p));
    snprintf(cache, sizeof cache, "%s/cache", scratch("uni_real"));
    gf_tokenizer_opts o = {.kind = GF_TOK_SPM, .vocab_size = 30522, .model_type = GF_SPM_UNIGRAM, .cache_dir = cache};
    gf_tokenizer *t = NULL;
    /* SentencePiece names the limit (22,839 with <unk> as a user symbol); we pass it through */
    GF_CHECK_ERR(gf_tokenizer_open(&t, &o, p), GF_E_INVALID, "the largest it can reach is 22839");
    GF_CHECK(t == NULL, "no tokenizer on error");
}
