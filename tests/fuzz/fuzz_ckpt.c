/* fuzz_ckpt.c — libFuzzer harness for the checkpoint reader: the input is written to a file
 * and read with gf_ckpt_peek and gf_ckpt_load into a small fixed model (the seed corpus holds
 * checkpoints of that model, so mutations reach the tensor table and the CRC check). A load
 * that fails must leave the parameters untouched. */
#include "fuzz_util.h"
#include "gflow/checkpoint.h"
#include <stdlib.h>
#include <string.h>

static gf_params g_p;
static float *g_copy;

static void setup(void) {
    gf_params_init(&g_p);
    int64_t s_emb[2] = {11, 8}, s_w[2] = {8, 8}, s_b[1] = {8};
    gf_params_add(&g_p, "tok_emb.weight", GF_PK_EMBED, 2, s_emb);
    gf_params_add(&g_p, "blocks.0.fc.weight", GF_PK_WEIGHT, 2, s_w);
    gf_params_add(&g_p, "blocks.0.fc.bias", GF_PK_BIAS, 1, s_b);
    if (gf_params_alloc(&g_p) != GF_OK) abort();
    for (int64_t i = 0; i < g_p.n; i++) g_p.data[i] = (float)i;
    g_copy = malloc((size_t)g_p.n * sizeof(float));
}

/* `gf_fuzz_ckpt --make-seeds DIR`-style helper is in tools/fuzz.sh (gflow writes the seeds). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!g_copy) setup();
    const char *path = fuzz_scratch("ckpt");
    if (fuzz_write(path, data, n)) return 0;
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    if (gf_ckpt_peek(path, &m) == GF_OK) {
        (void)gf_ckpt_meta_get_kv(&m, "vocab");
        if (m.recipe) (void)strlen(m.recipe);
    }
    gf_ckpt_meta_free(&m);
    memcpy(g_copy, g_p.data, (size_t)g_p.n * sizeof(float));
    gf_ckpt_meta_init(&m);
    if (gf_ckpt_load(path, &g_p, &m) != GF_OK) {
        if (memcmp(g_copy, g_p.data, (size_t)g_p.n * sizeof(float))) {
            fprintf(stderr, "failed load modified the parameters\n");
            abort();
        }
    }
    gf_ckpt_meta_free(&m);
    return 0;
}
