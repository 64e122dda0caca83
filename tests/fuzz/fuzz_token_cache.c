/* fuzz_token_cache.c — libFuzzer harness for the token-cache reader (gf_token_cache_open):
 * the input is written to a file and read with the key/source hash the seeds were written
 * with, then with another key and with no source check. */
#include "fuzz_util.h"
#include "gflow/data.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_scratch("tokcache");
    if (fuzz_write(path, data, n)) return 0;
    uint8_t sha[32];
    memset(sha, 0xab, sizeof sha);
    const char *keys[2] = {"word:26:0123456789abcdef", "spm:bpe:100:0123456789abcdef"};
    for (int k = 0; k < 2; k++) {
        gf_tokens ids = {0};
        if (gf_token_cache_open(path, keys[k], k ? NULL : sha, &ids) == GF_OK) {
            volatile int64_t s = 0;
            for (int64_t i = 0; i < ids.n; i++) s += gf_tokens_at(&ids, i);
            (void)s;
        }
        gf_tokens_free(&ids);
    }
    return 0;
}
