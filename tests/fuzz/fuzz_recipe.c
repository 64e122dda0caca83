/* fuzz_recipe.c — libFuzzer harness for the recipe parser (gf_recipe_parse_text). The input
 * is split at the first 0x00 byte: before it the recipe text, after it an optional --set
 * override, so both the INI path and the override path are fuzzed. A recipe that parses must
 * round-trip through gf_recipe_resolved_text to an equal struct. */
#include "gflow/recipe.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *text = malloc(n + 1);
    if (!text) return 0;
    memcpy(text, data, n);
    text[n] = 0;
    size_t tl = strlen(text);
    const char *set = tl < n ? text + tl + 1 : NULL;
    gf_recipe *r = malloc(sizeof *r), *r2 = malloc(sizeof *r2);
    const char *sets[1] = {set};
    /* "fuzz.ini" in the cwd: a `base = x` names a file relative to it (usually absent) */
    gf_status st = gf_recipe_parse_text(text, "fuzz.ini", sets, set ? 1 : 0, r);
    if (st == GF_OK) {
        char *res = NULL;
        if (gf_recipe_resolved_text(r, &res) == GF_OK) {
            if (gf_recipe_parse_text(res, "resolved.ini", NULL, 0, r2) != GF_OK || !gf_recipe_equal(r, r2)) {
                fprintf(stderr, "resolved text does not round-trip: %s\n%s\n", gf_last_error(), res);
                abort();
            }
            free(res);
        }
    }
    free(r);
    free(r2);
    free(text);
    return 0;
}
