/* make_seeds.c — writes the generated seed files of the fuzz corpora (valid checkpoints of
 * fuzz_ckpt.c's model, valid token caches for fuzz_token_cache.c's key): make_seeds DIR. */
#include "gflow/checkpoint.h"
#include "gflow/data.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: make_seeds DIR\n"); return 2; }
    char p[1024];
    gf_params g;
    gf_params_init(&g);
    int64_t s_emb[2] = {11, 8}, s_w[2] = {8, 8}, s_b[1] = {8};
    gf_params_add(&g, "tok_emb.weight", GF_PK_EMBED, 2, s_emb);
    gf_params_add(&g, "blocks.0.fc.weight", GF_PK_WEIGHT, 2, s_w);
    gf_params_add(&g, "blocks.0.fc.bias", GF_PK_BIAS, 1, s_b);
    if (gf_params_alloc(&g) != GF_OK) return 1;
    for (int64_t i = 0; i < g.n; i++) { g.data[i] = 0.01f * (float)i; g.m[i] = 1e-3f; g.v[i] = 1e-6f; }
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    m.step = 12;
    m.epoch = 1;
    gf_ckpt_meta_set_recipe(&m, "[run]\nname = x\n");
    gf_ckpt_meta_set_blob(&m.rng, "0123456789abcdef", 16);
    gf_ckpt_meta_set_kv(&m, "vocab", "11");
    snprintf(p, sizeof p, "%s/ckpt/full.ckpt", argv[1]);
    if (gf_ckpt_save(p, &g, &m)) { fprintf(stderr, "%s\n", gf_last_error()); return 1; }
    snprintf(p, sizeof p, "%s/ckpt/bare.ckpt", argv[1]);
    if (gf_ckpt_save(p, &g, NULL)) return 1;
    gf_ckpt_meta_free(&m);
    uint8_t sha[32];
    memset(sha, 0xab, sizeof sha);
    gf_ids ids = {0};
    for (int i = 0; i < 40; i++) gf_ids_push(&ids, i % 26);
    snprintf(p, sizeof p, "%s/token_cache/small.tok", argv[1]);
    if (gf_token_cache_write(p, "word:26:0123456789abcdef", sha, 2, &ids)) return 1;
    ids.n = 0;
    snprintf(p, sizeof p, "%s/token_cache/empty.tok", argv[1]);
    if (gf_token_cache_write(p, "word:26:0123456789abcdef", sha, 2, &ids)) return 1;
    gf_ids_free(&ids);
    return 0;
}
