/* model_cfg.c — the model configs of tests and benchmarks: they start from the schema's defaults
 * and take the config as a recipe describes it (gf_recipe_model_cfg: [model] is a gf_model_cfg,
 * gflow/model.h, plus the tokenizer's vocab). */
#include "recipe/recipe_internal.h"

/* A recipe of only defaults, with the required [model] keys given and max_len and
 * classifier_hidden derived as gf_recipe_load derives them. */
static void from_defaults(gf_model_cfg *c, gf_family family, int64_t n_layers, int64_t d_ff, int snli) {
    gf_recipe r;
    gf_recipe_defaults(&r);
    gf_recipe_model_cfg(&r, r.tokenizer.vocab_size, c);
    c->family = family;
    c->n_layers = n_layers;
    c->d_model = 256;
    c->d_ff = d_ff;
    c->max_len = snli ? r.data.max_sentence_len : r.data.seq_len;
    c->classifier_hidden = c->d_model;
}

void gf_model_cfg_default(gf_model_cfg *c) { from_defaults(c, GF_FAMILY_GRASSMANN, 6, 1024, 0); }

void gf_nli_cfg_default(gf_model_cfg *c, gf_family family) {
    from_defaults(c, family, 2, 512, 1);
    c->block = GF_NLI_BLOCK;
    c->r = 64;
}
