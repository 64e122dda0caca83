/* fuzz_snli.c — libFuzzer harness for the SNLI reader: the input is written to a file and
 * loaded with gf_snli_load (strict, then skip_bad_rows) using a word tokenizer built once
 * from a tiny corpus. Loaded data must respect its own invariants. */
#include "fuzz_util.h"
#include "gflow/data.h"
#include <stdlib.h>

static gf_tokenizer *g_tok;

static void setup(void) {
    const char *corpus = fuzz_scratch("snli_corpus");
    static const char text[] = " a man is sitting on a bench .\n two dogs run in the park .\n"
                               " the woman is sleeping .\n a child plays with a ball .\n";
    if (fuzz_write(corpus, (const uint8_t *)text, sizeof text - 1)) abort();
    gf_tokenizer_opts o = {.kind = GF_TOK_WORD};
    if (gf_tokenizer_open(&g_tok, &o, corpus) != GF_OK) abort();
    /* the scratch name is per tag; the data file below uses another */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!g_tok) setup();
    static char path[300];
    if (!path[0]) snprintf(path, sizeof path, "%s.tsv", fuzz_scratch("snli_corpus"));
    if (fuzz_write(path, data, n)) return 0;
    for (int skip = 0; skip < 2; skip++) {
        gf_snli_opts o = {.max_len = 8, .pad_id = 0, .skip_bad_rows = skip};
        gf_snli_data d;
        memset(&d, 0, sizeof d);
        if (gf_snli_load(&d, path, g_tok, &o) == GF_OK) {
            for (int64_t i = 0; i < d.n; i++) {
                if (d.prem_len[i] < 0 || d.prem_len[i] > d.Ls || d.hyp_len[i] < 0 || d.hyp_len[i] > d.Ls ||
                    d.label[i] < 0 || d.label[i] > 2) abort();
                for (int64_t j = 0; j < d.Ls; j++)
                    if (d.premise[i * d.Ls + j] < 0 || d.premise[i * d.Ls + j] >= gf_tokenizer_vocab_size(g_tok))
                        abort();
            }
            gf_snli_free(&d);
        }
    }
    return 0;
}
