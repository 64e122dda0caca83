/* test_text.c — dataset = text: the token stream built in parallel is the serial one on any
 * thread count, bad text names its file and line (across parts and blocks), one file splits on
 * line boundaries and is split again when it changes, and the CLI trains, evaluates, samples
 * and ablates on a text recipe, reusing its token cache. */
#include "gf_test.h"
#include "gflow/data.h"
#include "gflow/threads.h"
#include "reliability/rel_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

static const char *dir_of(const char *name) {
    static char d[4][800];
    static int k;
    char *p = d[k++ % 4];
    snprintf(p, 800, "%s/text_%s", gf_test_tmpdir(), name);
    mkdir(p, 0755);
    return p;
}

static gf_tokenizer *word_tok(const char *dir) {
    char p[900];
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    gf_test_write_text(p, " a b c d . <unk>\n");
    gf_tokenizer_opts o = {.kind = GF_TOK_WORD};
    gf_tokenizer *t = NULL;
    return gf_tokenizer_open(&t, &o, p) ? NULL : t;
}

/* n lines of "a b c d ." but line bad_at (1-based; 0: none) is `bad` */
static void write_lines(const char *path, int n, int bad_at, const char *bad) {
    FILE *f = fopen(path, "wb");
    for (int i = 1; f && i <= n; i++) fputs(i == bad_at ? bad : " a b c d . \n", f);
    if (f) fclose(f);
}

GF_TEST(data, text_stream_same_on_any_thread_count) {
    const char *d = dir_of("threads");
    gf_tokenizer *tok = word_tok(d);
    GF_REQUIRE(tok, "%s", gf_last_error());
    char src[900], c1[900], c2[900];
    snprintf(src, sizeof src, "%s/corpus.txt", d);
    snprintf(c1, sizeof c1, "%s/c1", d);
    snprintf(c2, sizeof c2, "%s/c2", d);
    /* 9.6 MB: more than one block of two threads' 4 MB parts, lines of varying length */
    FILE *f = fopen(src, "wb");
    for (int i = 0; f && i < 400000; i++) fprintf(f, "%s\n", i % 7 ? " a b c d ." : i % 3 ? "" : " b <unk> zz a");
    if (f) fclose(f);
    int old = gf_threads_get();
    gf_tokens a = {0}, b = {0};
    gf_cache_event ev;
    gf_threads_set(1);
    GF_CHECK_OK(gf_lm_split_tokens(tok, src, c1, &a, &ev, NULL, 0, 0));
    gf_threads_set(2);
    GF_CHECK_OK(gf_lm_split_tokens(tok, src, c2, &b, &ev, NULL, 0, 0));
    gf_threads_set(old);
    gf_ids ref = {0};
    GF_REQUIRE_OK(gf_lm_tokenize_file(tok, src, &ref));
    GF_CHECK(a.width == 2 && a.n == ref.n && b.n == ref.n, "%lld, %lld ids, serial %lld", (long long)a.n,
             (long long)b.n, (long long)ref.n);
    int64_t diff = -1;
    for (int64_t i = 0; i < ref.n && i < a.n && i < b.n && diff < 0; i++)
        if (gf_tokens_at(&a, i) != ref.data[i] || gf_tokens_at(&b, i) != ref.data[i]) diff = i;
    GF_CHECK(diff < 0, "ids differ from the serial stream at %lld", (long long)diff);
    gf_ids_free(&ref);
    gf_tokens_free(&a);
    gf_tokens_free(&b);
    gf_tokenizer_free(tok);
}

GF_TEST(data, text_bad_lines_name_file_and_line) {
    const char *d = dir_of("bad");
    gf_tokenizer *tok = word_tok(d);
    GF_REQUIRE(tok, "%s", gf_last_error());
    static const struct { int lines, at; const char *bad; const char *needle; } cases[] = {
        {10, 3, " a \xc3\x28 b \n", ":3: not UTF-8 text: byte 0xc3 at column 4"},
        {10, 2, " a \0 b \n", ":2: not text: a NUL byte at column 4"},
        {10, 7, " a b \r\n", ":7: a CRLF line end"},
        {10, 10, " a b \r", ":10: a CRLF line end"},
        /* in the second thread's part, and in the second block (past 8 MB of 12-byte lines) */
        {1000, 900, " a \xff\n", ":900: not UTF-8"},
        {800000, 750001, " a \xed\xa0\x80 b\n", ":750001: not UTF-8"},
    };
    int old = gf_threads_get();
    gf_threads_set(2);
    char src[900], cache[900];
    snprintf(src, sizeof src, "%s/corpus.txt", d);
    snprintf(cache, sizeof cache, "%s/cache", d);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].bad[3] == '\0') { /* the NUL case: written by hand */
            FILE *f = fopen(src, "wb");
            for (int k = 1; f && k <= cases[i].lines; k++) fwrite(k == cases[i].at ? " a \0 b \n" : " a b c d . \n", 1, k == cases[i].at ? 8 : 12, f);
            if (f) fclose(f);
        } else {
            write_lines(src, cases[i].lines, cases[i].at, cases[i].bad);
        }
        gf_tokens t = {0};
        gf_status s = gf_lm_split_tokens(tok, src, cache, &t, NULL, NULL, 0, 0);
        GF_CHECK(s == GF_E_PARSE && strstr(gf_last_error(), src) && strstr(gf_last_error(), cases[i].needle),
                 "case %zu: %s: %s", i, gf_status_name(s), gf_last_error());
        gf_tokens_free(&t);
    }
    gf_threads_set(old);
    gf_tokenizer_free(tok);
}

static char *slurp_part(const char *dir, const char *part) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s.txt", dir, part);
    return gf_test_slurp(p, NULL);
}

GF_TEST(data, text_split_on_lines_kept_until_the_file_changes) {
    const char *d = dir_of("split");
    char src[900], parts[900], stamp[1000];
    snprintf(src, sizeof src, "%s/corpus.txt", d);
    snprintf(parts, sizeof parts, "%s/parts", d);
    snprintf(stamp, sizeof stamp, "%s/source.sha256", parts);
    write_lines(src, 100, 0, NULL); /* 1200 bytes: train [0, 960), valid [960, 1080), test the rest */
    GF_REQUIRE_OK(gf_text_split(src, 0.1, 0.1, parts, 0));
    char *tr = slurp_part(parts, "train"), *va = slurp_part(parts, "valid"), *te = slurp_part(parts, "test");
    GF_REQUIRE(tr && va && te, "parts written");
    GF_CHECK(strlen(tr) == 960 && strlen(va) == 120 && strlen(te) == 120, "part sizes %zu %zu %zu", strlen(tr),
             strlen(va), strlen(te));
    free(tr), free(va), free(te);
    /* kept: the stamp is not rewritten while the source is unchanged */
    struct stat s1, s2;
    GF_REQUIRE(stat(stamp, &s1) == 0, "stamp");
    GF_REQUIRE_OK(gf_text_split(src, 0.1, 0.1, parts, 0));
    GF_REQUIRE(stat(stamp, &s2) == 0 && s1.st_ino == s2.st_ino, "parts of an unchanged file are kept");
    /* a changed file is split again; a line is never cut (its first byte decides its part) */
    FILE *f = fopen(src, "wb");
    fputs(" a long first line of the corpus , longer than a tenth of it .\n b .\n c .\n", f);
    fclose(f);
    GF_REQUIRE_OK(gf_text_split(src, 0.1, 0.1, parts, 0));
    va = slurp_part(parts, "valid");
    te = slurp_part(parts, "test");
    GF_CHECK(va && te && !strcmp(va, " b .\n") && !strcmp(te, " c .\n"), "valid '%s', test '%s'", va, te);
    free(va), free(te);
    /* a part without a line, a missing file, bad text: errors naming the file (and line) */
    write_lines(src, 3, 0, NULL);
    GF_CHECK_ERR(gf_text_split(src, 0.01, 0.4, parts, 0), GF_E_INVALID, "its valid part is empty");
    write_lines(src, 30, 12, " a\r\n");
    GF_CHECK_ERR(gf_text_split(src, 0.1, 0.1, parts, 0), GF_E_PARSE, "corpus.txt:12: a CRLF line end");
    gf_test_write_text(src, "");
    GF_CHECK_ERR(gf_text_split(src, 0.1, 0.1, parts, 0), GF_E_INVALID, "its train part is empty");
    snprintf(src, sizeof src, "%s/nosuch.txt", d);
    GF_CHECK_ERR(gf_text_split(src, 0.1, 0.1, parts, 0), GF_E_NOTFOUND, "nosuch.txt");
}

static void text_recipe(const char *d, const char *path) {
    char text[2048];
    snprintf(text, sizeof text,
             "[run]\nname = t\nout_dir = %s/runs\nthreads = 2\n[data]\ndataset = text\ndir = %s\nfile = corpus.txt\n"
             "valid_fraction = 0.1\ntest_fraction = 0.1\nseq_len = 16\n[tokenizer]\nkind = spm\nvocab_size = 60\n"
             "cache_dir = %s/cache\n[model]\nfamily = grassmann\nn_layers = 1\nd_model = 16\nd_ff = 32\nr = 4\n"
             "offsets = 1,2\n[optim]\nlr = 1e-2\n[train]\nepochs = 1\nbatch_size = 8\nmax_steps = 6\nlog_every = 1\n",
             d, d, d);
    gf_test_write_text(path, text);
}

/* inode of the test split's token cache under d/cache (0: none): a rebuilt cache is a new file */
static ino_t test_cache_inode(const char *d) {
    char cdir[900], p[1300];
    snprintf(cdir, sizeof cdir, "%s/cache", d);
    DIR *dd = opendir(cdir);
    struct dirent *e;
    ino_t ino = 0;
    struct stat sb;
    while (dd && (e = readdir(dd)))
        if (!strncmp(e->d_name, "test.txt.", 9) && strstr(e->d_name, ".tok")) {
            snprintf(p, sizeof p, "%s/%s", cdir, e->d_name);
            if (stat(p, &sb) == 0) ino = sb.st_ino;
        }
    if (dd) closedir(dd);
    return ino;
}

/* the CLI on a text recipe: train a few steps, evaluate, sample and ablate; a second command
 * reads the token caches, a changed corpus is split and tokenized again */
GF_TEST(smoke, text_recipe_trains_evaluates_samples_and_reuses_its_cache) {
    const char *d = dir_of("cli");
    char src[900], ini[900], run[900];
    snprintf(src, sizeof src, "%s/corpus.txt", d);
    snprintf(ini, sizeof ini, "%s/t.ini", d);
    snprintf(run, sizeof run, "%s/runs/t", d);
    gf_test_write_corpus(src, 1500, 3);
    text_recipe(d, ini);
    rel_result r;
    rel_gflow(&r, 0, (const char *const[]){"train", ini, NULL});
    GF_REQUIRE(r.exit_code == 0, "train: %s", r.err);
    GF_CHECK(strstr(r.err, "split into") && strstr(r.err, "train.txt:") && strstr(r.err, "(tokenized,") &&
                 strstr(r.err, "done: best valid ppl"), "train log: %s", r.err);
    const ino_t built = test_cache_inode(d);
    GF_REQUIRE(built, "the test split's token cache");
    rel_gflow(&r, 0, (const char *const[]){"eval", run, "--split", "test", NULL});
    GF_CHECK(r.exit_code == 0 && !strstr(r.err, "split into") &&
                 test_cache_inode(d) == built, "eval reads the cache: %s", r.err);
    rel_gflow(&r, 0, (const char *const[]){"sample", run, "--prompt", "the cat", "--tokens", "8", NULL});
    GF_CHECK(r.exit_code == 0, "sample: %s", r.err);
    char abl[900], sum[900], ab_text[1200];
    snprintf(abl, sizeof abl, "%s/ab.ini", d);
    snprintf(ab_text, sizeof ab_text, "[ablation]\nname = ab\nbase = t.ini\nout_dir = %s/runs\n\n[variant tf]\n"
             "model.family = transformer\n", d);
    gf_test_write_text(abl, ab_text);
    rel_gflow(&r, 0, (const char *const[]){"ablate", abl, "--quiet", NULL});
    snprintf(sum, sizeof sum, "%s/runs/ab/summary.md", d);
    char *md = gf_test_slurp(sum, NULL);
    GF_CHECK(r.exit_code == 0 && md && strstr(md, "tf"), "ablate: %s", r.err);
    free(md);
    /* its test part changed (same size, the train part and so the tokenizer unchanged) */
    size_t n = 0;
    char *text = gf_test_slurp(src, &n);
    GF_REQUIRE(text && n > 10, "corpus");
    memcpy(text + n - 8, "ZZZ", 3);
    gf_test_write_file(src, text, n);
    free(text);
    rel_gflow(&r, 0, (const char *const[]){"eval", run, "--split", "test", NULL});
    GF_CHECK(r.exit_code == 0 && strstr(r.err, "the test split changed") && test_cache_inode(d) != built,
             "a changed corpus is split and tokenized again: %s", r.err);
}

/* three files: a missing, an empty or a too small split is refused naming the file */
GF_TEST(data, text_missing_empty_and_small_splits_refused) {
    const char *d = dir_of("splits");
    char ini[900], p[900], text[1024];
    snprintf(ini, sizeof ini, "%s/t.ini", d);
    snprintf(text, sizeof text,
             "[run]\nname = t\nout_dir = %s/runs\nthreads = 1\n[data]\ndataset = text\ndir = %s\ntrain_file = tr.txt\n"
             "valid_file = va.txt\ntest_file = te.txt\nseq_len = 8\n[tokenizer]\nkind = word\ncache_dir = %s/cache\n"
             "[model]\nfamily = grassmann\nn_layers = 1\nd_model = 16\nd_ff = 32\nr = 4\noffsets = 1,2\n[optim]\n"
             "lr = 1e-2\n[train]\nepochs = 1\nbatch_size = 8\nmax_steps = 2\n", d, d, d);
    gf_test_write_text(ini, text);
    snprintf(p, sizeof p, "%s/tr.txt", d);
    gf_test_write_corpus(p, 60, 1); /* 60 lines: 917 tokens, 114 windows of 8 */
    snprintf(p, sizeof p, "%s/va.txt", d);
    gf_test_write_corpus(p, 5, 2);
    rel_result r;
    rel_gflow(&r, 0, (const char *const[]){"train", ini, NULL});
    GF_CHECK(r.exit_code != 0 && strstr(r.err, "te.txt: data file not found ([data] test_file"), "missing: %s", r.err);
    snprintf(p, sizeof p, "%s/te.txt", d);
    gf_test_write_text(p, "");
    rel_gflow(&r, 0, (const char *const[]){"train", ini, NULL});
    GF_CHECK(r.exit_code != 0 && strstr(r.err, "te.txt: 0 tokens, fewer than one window"), "empty: %s", r.err);
    gf_test_write_corpus(p, 5, 3);
    rel_gflow(&r, 0, (const char *const[]){"train", ini, NULL});
    GF_CHECK(r.exit_code == 0, "three good files train: %s", r.err);
    rel_gflow(&r, 0, (const char *const[]){"train", ini, "--set", "train.batch_size=200", "--set", "run.name=b", NULL});
    GF_CHECK(r.exit_code != 0 && strstr(r.err, "tr.txt: 917 tokens make 114 windows of [data] seq_len 8, fewer than one "
                                        "batch ([train] batch_size 200)"), "small: %s", r.err);
}

/* kB of the mapping at addr resident in this process (its Rss in /proc/self/smaps), -1 when not found */
static long mapping_rss_kb(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512], want[32];
    snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)addr);
    long kb = -1;
    int in = 0;
    while (f && kb < 0 && fgets(line, sizeof line, f)) {
        if (!strncmp(line, want, strlen(want))) in = 1;
        else if (in && !strncmp(line, "Rss:", 4)) kb = strtol(line + 4, NULL, 10);
    }
    if (f) fclose(f);
    return kb;
}

/* a mapped token cache read window by window, in shuffled order, over a whole epoch: the pages
 * read go back to the page cache, the RSS does not grow with the stream */
GF_TEST(data, text_mapped_stream_keeps_the_rss_flat) {
    const char *d = dir_of("rss");
    char path[900];
    snprintf(path, sizeof path, "%s/big.tok", d);
    gf_ids ids = {0};
    for (int64_t i = 0; i < 10000000; i++) GF_REQUIRE_OK(gf_ids_push(&ids, (int32_t)(i % 50000)));
    uint8_t sha[32] = {0};
    GF_REQUIRE_OK(gf_token_cache_write(path, "word:50000:0123456789abcdef", sha, 2, &ids)); /* 20 MB */
    gf_ids_free(&ids);
    gf_tokens t = {0};
    GF_REQUIRE_OK(gf_token_cache_open(path, "word:50000:0123456789abcdef", sha, &t));
    const long before = mapping_rss_kb(t.map);
    gf_lm_loader *ld = NULL;
    GF_REQUIRE_OK(gf_lm_loader_new(&ld, &t, 127, 1, 0, 3));
    static int32_t batch[64 * 128];
    int64_t rows = 0, seen = 0, bad = 0;
    do {
        GF_REQUIRE_OK(gf_lm_loader_next(ld, batch, 64, &rows));
        for (int64_t r = 0; r < rows; r++) bad += batch[r * 128 + 1] != (batch[r * 128] + 1) % 50000;
        seen += rows;
    } while (rows);
    const long after = mapping_rss_kb(t.map);
    GF_CHECK(seen == gf_lm_loader_n_windows(ld) && !bad, "%lld windows read, %lld wrong", (long long)seen, (long long)bad);
    GF_CHECK(before >= 0 && after >= 0 && after - before < 1024, "the 20 MB mapping: %ld kB resident before, %ld kB "
             "after reading all of it", before, after);
    gf_lm_loader_free(ld);
    gf_tokens_free(&t);
}
