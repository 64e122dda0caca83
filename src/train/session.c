/* session.c — build tokenizer, data and model from a recipe; evaluate a split. */
#include "session.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *split_file(const gf_recipe *r, gf_split s) {
    return s == GF_SPLIT_TRAIN ? r->data.train_file : s == GF_SPLIT_VALID ? r->data.valid_file : r->data.test_file;
}

void gf_session_split_path(const gf_session *s, gf_split split, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", gf_recipe_data_dir(&s->r), split_file(&s->r, split));
}

/* A split file must exist and, when its checksum is recorded, match it. */
static gf_status check_file(const gf_session *s, gf_split split, char *path, size_t cap) {
    gf_session_split_path(s, split, path, cap);
    struct stat st;
    if (stat(path, &st) != 0)
        return gf_error_set(GF_E_NOTFOUND,
                            "%s: data file not found ([data] %s_file = %s under dir '%s'); run `gflow data fetch %s` "
                            "or set GFLOW_DATA_MIRROR to a directory that holds it",
                            path, split == GF_SPLIT_TRAIN ? "train" : split == GF_SPLIT_VALID ? "valid" : "test",
                            split_file(&s->r, split), gf_recipe_data_dir(&s->r),
                            s->r.data.dataset == GF_DS_SNLI ? "snli" : "wikitext2");
    return gf_data_verify(path);
}

void gf_session_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c) {
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

gf_status gf_session_open(gf_session *s, const gf_recipe *r, int log) {
    memset(s, 0, sizeof *s);
    s->r = *r;
    s->is_nli = r->data.dataset == GF_DS_SNLI;
    if (s->is_nli)
        return gf_error_set(GF_E_INVALID, "[data] dataset = snli: the NLI heads are not wired into this build yet");
    gf_threads_set((int)r->run.threads);
    /* the tokenizer is trained on WikiText-2 train whatever the task (SNLI uses it too) */
    char tpath[1024];
    GF_TRY(check_file(s, GF_SPLIT_TRAIN, tpath, sizeof tpath));
    gf_tokenizer_opts to = {.kind = r->tokenizer.kind, .vocab_size = r->tokenizer.vocab_size,
                            .model_type = r->tokenizer.model_type, .cache_dir = r->tokenizer.cache_dir};
    double t0 = gf_time_now();
    gf_status st = gf_tokenizer_open(&s->tok, &to, tpath);
    if (st) return gf_error_wrap(st, "tokenizer ([tokenizer] in the recipe): ");
    if (log)
        fprintf(stderr, "tokenizer: %s, vocabulary %lld (%.1f s)\n", gf_tokenizer_key(s->tok),
                (long long)gf_tokenizer_vocab_size(s->tok), gf_time_now() - t0);
    gf_model_cfg mc;
    gf_session_model_cfg(r, gf_tokenizer_vocab_size(s->tok), &mc);
    st = gf_lm_init(&s->lm, &mc);
    if (st) return gf_error_wrap(st, "[model]: ");
    s->model_ready = 1;
    s->params = &s->lm.params;
    gf_rng_seed(&s->rng, (uint64_t)r->run.seed);
    gf_lm_init_weights(&s->lm, &s->rng);
    /* the dropout stream is separate from the init stream, and both follow from the seed */
    gf_rng_seed(&s->rng, (uint64_t)r->run.seed ^ 0x5DEECE66Dull);
    gf_ctx_init(&s->ctx, (size_t)64 << 20, &s->rng);
    s->ctx_ready = 1;
    return GF_OK;
}

gf_status gf_session_load_split(gf_session *s, gf_split split, int log) {
    if (s->loaded[split]) return GF_OK;
    char path[1024];
    GF_TRY(check_file(s, split, path, sizeof path));
    gf_cache_event ev;
    char why[512] = "";
    double t0 = gf_time_now();
    GF_TRY(gf_lm_split_tokens(s->tok, path, s->r.tokenizer.cache_dir, &s->ids[split], &ev, why, sizeof why));
    if (split != GF_SPLIT_TRAIN) GF_TRY(gf_wikitext_word_count(path, &s->words[split]));
    if (split == GF_SPLIT_TRAIN && s->r.data.train_fraction < 1.0) {
        int64_t keep = (int64_t)ceil((double)s->ids[split].n * s->r.data.train_fraction);
        if (keep < 2) keep = 2;
        s->ids[split].n = keep < s->ids[split].n ? keep : s->ids[split].n;
    }
    if (log)
        fprintf(stderr, "data: %s: %lld tokens (%s%s%s, %.1f s)\n", path, (long long)s->ids[split].n,
                ev == GF_CACHE_HIT ? "cached" : ev == GF_CACHE_BUILT ? "tokenized" : "re-tokenized",
                why[0] ? ": " : "", why, gf_time_now() - t0);
    if (s->ids[split].n < s->r.data.seq_len + 1)
        return gf_error_set(GF_E_INVALID, "%s: %lld tokens, fewer than one window of seq_len+1 = %lld", path,
                            (long long)s->ids[split].n, (long long)s->r.data.seq_len + 1);
    s->loaded[split] = 1;
    return GF_OK;
}

gf_status gf_session_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res) {
    memset(res, 0, sizeof *res);
    res->ppl_word = NAN;
    res->acc = NAN;
    GF_TRY(gf_session_load_split(s, split, 0));
    int64_t L = s->r.data.seq_len, B = s->r.eval.batch_size;
    gf_lm_loader *ld = NULL;
    GF_TRY(gf_lm_loader_new(&ld, s->ids[split].data, s->ids[split].n, L, 0, 1, 0));
    int32_t *batch = malloc((size_t)(B * (L + 1)) * sizeof(int32_t)); // (B, L+1)
    if (!batch) { gf_lm_loader_free(ld); return gf_error_set(GF_E_NOMEM, "eval batch"); }
    int old_grad = gf_ctx_set_grad(&s->ctx, 0), old_train = s->ctx.training;
    s->ctx.training = 0;
    double nll = 0.0;
    int64_t cnt = 0, nb = 0, rows = 0;
    gf_status st = GF_OK;
    for (;;) {
        if (max_batches > 0 && nb >= max_batches) break;
        st = gf_lm_loader_next(ld, batch, B, &rows);
        if (st || rows == 0) break;
        gf_lm_out out = {0};
        gf_lm_forward(&s->lm, &s->ctx, batch, rows, L, &out);
        nll += out.nll_sum;
        cnt += out.n_tokens;
        nb++;
        gf_ctx_reset(&s->ctx);
    }
    gf_ctx_set_grad(&s->ctx, old_grad);
    s->ctx.training = old_train;
    free(batch);
    gf_lm_loader_free(ld);
    if (st) return st;
    res->n_tokens = cnt;
    res->loss = cnt ? nll / (double)cnt : NAN;
    res->ppl = exp(res->loss);
    /* per word: the whole split's NLL over its word count (one <eos> per line), so runs with
     * different tokenizers compare; only meaningful when the whole split was evaluated */
    int full = max_batches <= 0 || rows == 0;
    if (full && split != GF_SPLIT_TRAIN && s->words[split] > 0) res->ppl_word = exp(nll / (double)s->words[split]);
    return GF_OK;
}

void gf_session_close(gf_session *s) {
    if (s->ctx_ready) gf_ctx_free(&s->ctx);
    if (s->model_ready) gf_lm_free(&s->lm);
    for (int i = 0; i < 3; i++) gf_ids_free(&s->ids[i]);
    if (s->tok) gf_tokenizer_free(s->tok);
    memset(s, 0, sizeof *s);
}

gf_status gf_session_model_from_ckpt(const char *path, gf_recipe *r, gf_lm *lm) {
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    GF_TRY(gf_ckpt_peek(path, &m));
    gf_status st = m.recipe ? gf_recipe_parse_text(m.recipe, path, NULL, 0, r)
                            : gf_error_set(GF_E_CORRUPT, "%s: checkpoint carries no recipe", path);
    const char *v = gf_ckpt_meta_get_kv(&m, "vocab");
    int64_t vocab = v ? strtoll(v, NULL, 10) : 0;
    if (!st && vocab <= 0) st = gf_error_set(GF_E_CORRUPT, "%s: checkpoint lacks its vocabulary size (kv 'vocab')", path);
    gf_ckpt_meta_free(&m);
    GF_TRY(st);
    if (r->data.dataset == GF_DS_SNLI)
        return gf_error_set(GF_E_INVALID, "%s: an NLI checkpoint; this command handles language models", path);
    gf_model_cfg mc;
    gf_session_model_cfg(r, vocab, &mc);
    GF_TRY(gf_lm_init(lm, &mc));
    st = gf_ckpt_load(path, &lm->params, NULL);
    if (st) gf_lm_free(lm);
    return st;
}
