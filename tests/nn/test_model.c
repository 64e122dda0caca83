/* test_model.c — parameter counts against the spec's table, causality of both families,
 * and a tiny overfit (a broken model cannot get the loss near zero). */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/model.h"
#include <string.h>

static int64_t count(gf_family fam, gf_block_kind blk, int64_t layers, int64_t maxlen) {
    gf_model_cfg c;
    gf_model_cfg_default(&c);
    c.family = fam;
    c.block = blk;
    c.n_layers = layers;
    c.max_len = maxlen;
    gf_lm m;
    if (gf_lm_init(&m, &c) != GF_OK) return -1;
    int64_t n = m.params.n;
    gf_lm_free(&m);
    return n;
}

GF_TEST(unit, model_parameter_counts_match_spec) {
    /* grassmann-spec.md §1.5 / §7 at V = 30,522, d = 256, r = 32, d_ff = 1024 */
    GF_CHECK(count(GF_FAMILY_TRANSFORMER, GF_BLOCK_POST_LN, 6, 128) == 12585472, "T 6/128");
    GF_CHECK(count(GF_FAMILY_GRASSMANN, GF_BLOCK_POST_LN, 6, 128) == 12607168, "G post 6/128");
    GF_CHECK(count(GF_FAMILY_GRASSMANN, GF_BLOCK_PRE_LN, 6, 128) == 12610240, "G pre 6/128");
    GF_CHECK(count(GF_FAMILY_TRANSFORMER, GF_BLOCK_PRE_LN, 12, 256) == 17356800, "T 12/256");
    GF_CHECK(count(GF_FAMILY_GRASSMANN, GF_BLOCK_POST_LN, 12, 256) == 17400192, "G post 12/256");
    GF_CHECK(count(GF_FAMILY_GRASSMANN, GF_BLOCK_PRE_LN, 12, 256) == 17406336, "G pre 12/256");
}

static void tiny_cfg(gf_model_cfg *c, gf_family fam, gf_block_kind blk) {
    gf_model_cfg_default(c);
    c->family = fam;
    c->block = blk;
    c->vocab = 37;
    c->d_model = 16;
    c->d_ff = 32;
    c->n_layers = 2;
    c->max_len = 10;
    c->r = 5;
    c->heads = 4;
    c->dropout = 0.0f;
    c->init_std = 0.3f;
}

GF_TEST(unit, model_causal_both_families) {
    for (int v = 0; v < 5; v++) {
        gf_model_cfg c;
        tiny_cfg(&c, v < 2 ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN, v % 2 ? GF_BLOCK_PRE_LN : GF_BLOCK_POST_LN);
        if (v == 4) { c.offset_schedule.n = 2; c.offset_schedule.v[0] = 1; c.offset_schedule.v[1] = 3; }
        gf_lm m;
        GF_REQUIRE_OK(gf_lm_init(&m, &c));
        gf_rng rng;
        gf_rng_seed(&rng, 5);
        gf_lm_init_weights(&m, &rng);
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        int32_t w[11];
        for (int i = 0; i < 11; i++) w[i] = (int32_t)((i * 7 + 3) % 37);
        gf_lm_out o1 = {.want_logits = 1}, o2 = {.want_logits = 1};
        gf_lm_forward(&m, &ctx, w, 1, 10, &o1);
        float l1[370];
        memcpy(l1, o1.logits->data, sizeof l1);
        int64_t t = 4;
        w[t + 1] = (w[t + 1] + 11) % 37; /* change the input token at position t+1 */
        gf_lm_forward(&m, &ctx, w, 1, 10, &o2);
        for (int64_t s = 0; s < 10; s++) {
            int same = memcmp(l1 + s * 37, o2.logits->data + s * 37, 37 * sizeof(float)) == 0;
            if (s <= t) GF_CHECK(same, "variant %d: logits at %lld changed by token %lld", v, (long long)s, (long long)t + 1);
            else if (s == t + 1) GF_CHECK(!same, "variant %d: logits at t+1 must change", v);
        }
        gf_ctx_free(&ctx);
        gf_lm_free(&m);
    }
}
