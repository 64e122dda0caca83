/* fuzz_wordpiece.c — libFuzzer harness for the WordPiece tokenizer (src/data/wordpiece.c): any bytes
 * as one line, with a vocabulary built once holding multi-byte pieces and continuations. Encoding
 * either fails (invalid UTF-8) or gives ids in range that decode. */
#include "fuzz_util.h"
#include "gflow/data.h"
#include <stdlib.h>

static gf_tokenizer *g_tok;

static void setup(void) {
    const char *vocab = fuzz_scratch("wp_vocab");
    static const char text[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\na\n##a\nun\n##aff\n##able\n,\n.\n!\n"
                               "cafe\n\xe5\x8c\x97\n##\xe4\xba\xac\n\xcf\x83\n##\xcf\x82\n\xe1\x84\x92\n##\xe1\x85\xa1\n"
                               "##\xf0\x9f\x98\x80\n@\n1\n##0\n";
    if (fuzz_write(vocab, (const uint8_t *)text, sizeof text - 1)) abort();
    gf_tokenizer_opts o = {.kind = GF_TOK_WORDPIECE, .vocab_size = 26};
    if (gf_tokenizer_open(&g_tok, &o, vocab) != GF_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!g_tok) setup();
    gf_ids ids = {0};
    if (gf_tokenizer_encode(g_tok, (const char *)data, n, &ids) == GF_OK) {
        for (int64_t i = 0; i < ids.n; i++)
            if (ids.data[i] < 0 || ids.data[i] >= gf_tokenizer_vocab_size(g_tok) || ids.data[i] == 3) abort();
        char *text = NULL;
        if (gf_tokenizer_decode(g_tok, ids.data, ids.n, &text) != GF_OK) abort();
        free(text);
    }
    gf_ids_free(&ids);
    return 0;
}
