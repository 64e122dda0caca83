/* model_cfg.c — the model configs a recipe describes ([model] keys, for a tokenizer of `vocab` ids). */
#include "gflow/recipe.h"

void gf_recipe_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c) {
    gf_model_cfg_default(c);
    c->family = r->model.family;
    c->block = r->model.block;
    c->vocab = vocab;
    c->d_model = r->model.d_model;
    c->d_ff = r->model.d_ff;
    c->n_layers = r->model.n_layers;
    c->max_len = r->model.max_len;
    c->dropout = (float)r->model.dropout;
    c->ln_eps = (float)r->model.ln_eps;
    c->init_std = (float)r->model.init_std;
    c->r = r->model.r;
    c->n_offsets = (int32_t)r->model.offsets.n;
    for (int64_t i = 0; i < r->model.offsets.n && i < GF_MAX_OFFSETS; i++) c->offsets[i] = r->model.offsets.v[i];
    c->n_schedule = (int32_t)r->model.offset_schedule.n;
    for (int64_t i = 0; i < r->model.offset_schedule.n && i < GF_MAX_LAYERS; i++)
        c->offset_schedule[i] = r->model.offset_schedule.v[i];
    c->eps = (float)r->model.eps;
    c->normalize = r->model.normalize;
    c->gate = r->model.gate;
    c->plucker = r->model.plucker;
    c->heads = r->model.heads;
}

void gf_recipe_nli_cfg(const gf_recipe *r, int64_t vocab, gf_nli_cfg *c) {
    gf_nli_cfg_default(c, r->model.family);
    c->vocab = vocab;
    c->d_model = r->model.d_model;
    c->d_ff = r->model.d_ff;
    c->n_layers = r->model.n_layers;
    c->max_len = r->model.max_len;
    c->r = r->model.r;
    c->window = r->model.window;
    c->stride = r->model.stride;
    c->mix_heads = r->model.mix_heads;
    c->heads = r->model.heads;
    c->classifier_hidden = r->model.classifier_hidden;
    c->dropout = (float)r->model.dropout;
    c->eps = (float)r->model.eps;
    c->ln_eps = (float)r->model.ln_eps;
    c->init_std = (float)r->model.init_std;
    c->normalize = r->model.normalize;
}
