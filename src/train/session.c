/* session.c — build tokenizer, data and model from a recipe; evaluate a split. */
#include "session.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

void gf_session_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c) { gf_recipe_model_cfg(r, vocab, c); }

gf_status gf_session_open(gf_session *s, const gf_recipe *r, int log) {
    memset(s, 0, sizeof *s);
    s->r = *r;
    s->is_nli = r->data.dataset == GF_DS_SNLI;
    gf_threads_set((int)r->run.threads);
    /* the tokenizer is trained on WikiText-2 train whatever the task (SNLI uses it too) */
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/%s", gf_recipe_data_dir(r), r->tokenizer.train_file);
    if (access(tpath, F_OK) != 0)
        return gf_error_set(GF_E_NOTFOUND, "%s: tokenizer corpus not found ([tokenizer] train_file = %s under '%s'); "
                            "run `gflow data fetch wikitext2` or set GFLOW_DATA_MIRROR", tpath,
                            r->tokenizer.train_file, gf_recipe_data_dir(r));
    GF_TRY(gf_data_verify(tpath));
    gf_tokenizer_opts to = {.kind = r->tokenizer.kind, .vocab_size = r->tokenizer.vocab_size,
                            .model_type = r->tokenizer.model_type, .cache_dir = r->tokenizer.cache_dir};
    double t0 = gf_time_now();
    gf_status st = gf_tokenizer_open(&s->tok, &to, tpath);
    if (st) return gf_error_wrap(st, "tokenizer ([tokenizer] in the recipe): ");
    if (log)
        fprintf(stderr, "tokenizer: %s, vocabulary %lld (%.1f s)\n", gf_tokenizer_key(s->tok),
                (long long)gf_tokenizer_vocab_size(s->tok), gf_time_now() - t0);
    gf_rng_seed(&s->rng, (uint64_t)r->run.seed);
    if (s->is_nli) {
        gf_nli_cfg nc;
        gf_session_nli_cfg(r, gf_tokenizer_vocab_size(s->tok), &nc);
        st = gf_nli_init(&s->nli, &nc);
        if (st) return gf_error_wrap(st, "[model]: ");
        s->params = &s->nli.params;
        gf_nli_init_weights(&s->nli, &s->rng);
    } else {
        gf_model_cfg mc;
        gf_session_model_cfg(r, gf_tokenizer_vocab_size(s->tok), &mc);
        st = gf_lm_init(&s->lm, &mc);
        if (st) return gf_error_wrap(st, "[model]: ");
        s->params = &s->lm.params;
        gf_lm_init_weights(&s->lm, &s->rng);
    }
    s->model_ready = 1;
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
    double t0 = gf_time_now();
    if (s->is_nli) {
        gf_snli_opts so = {.max_len = s->r.data.max_sentence_len, .pad_id = 0, .skip_bad_rows = s->r.data.skip_bad_rows};
        GF_TRY(gf_snli_load(&s->snli[split], path, s->tok, &so));
        gf_snli_data *d = &s->snli[split];
        if (split == GF_SPLIT_TRAIN && s->r.data.train_fraction < 1.0) {
            int64_t keep = (int64_t)ceil((double)d->n * s->r.data.train_fraction);
            d->n = keep < 1 ? 1 : keep; /* the sample file is already random: its first rows are a random subset */
        }
        if (log)
            fprintf(stderr, "data: %s: %lld pairs (%lld without a gold label skipped, %lld malformed skipped, "
                    "%lld sentences truncated to %lld tokens; %.1f s)\n", path, (long long)d->n,
                    (long long)d->skipped_no_label, (long long)d->skipped_bad, (long long)d->truncated,
                    (long long)d->Ls, gf_time_now() - t0);
        if (d->n == 0) return gf_error_set(GF_E_INVALID, "%s: no labelled pairs", path);
        s->loaded[split] = 1;
        return GF_OK;
    }
    gf_cache_event ev;
    char why[512] = "";
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

void gf_session_nli_cfg(const gf_recipe *r, int64_t vocab, gf_nli_cfg *c) { gf_recipe_nli_cfg(r, vocab, c); }

static gf_status alloc_batch(gf_session *s, int64_t B) {
    if (s->B >= B) return GF_OK;
    free(s->win); free(s->prem); free(s->hyp); free(s->pmask); free(s->hmask); free(s->labels);
    s->win = NULL; s->prem = s->hyp = s->labels = NULL; s->pmask = s->hmask = NULL;
    s->B = B;
    if (s->is_nli) {
        int64_t Ls = s->r.data.max_sentence_len;
        s->prem = malloc((size_t)(B * Ls) * sizeof(int32_t));
        s->hyp = malloc((size_t)(B * Ls) * sizeof(int32_t));
        s->pmask = malloc((size_t)(B * Ls) * sizeof(float));
        s->hmask = malloc((size_t)(B * Ls) * sizeof(float));
        s->labels = malloc((size_t)B * sizeof(int32_t));
        if (!s->prem || !s->hyp || !s->pmask || !s->hmask || !s->labels) return gf_error_set(GF_E_NOMEM, "batch");
    } else {
        s->win = malloc((size_t)(B * (s->r.data.seq_len + 1)) * sizeof(int32_t));
        if (!s->win) return gf_error_set(GF_E_NOMEM, "batch");
    }
    return GF_OK;
}

gf_status gf_session_train_loader(gf_session *s, int64_t B, int64_t *n_items, int log) {
    GF_TRY(gf_session_load_split(s, GF_SPLIT_TRAIN, log));
    GF_TRY(alloc_batch(s, B));
    s->train_B = B;
    uint64_t seed = (uint64_t)s->r.run.seed;
    if (s->is_nli) {
        GF_TRY(gf_snli_loader_new(&s->snli_ld, &s->snli[GF_SPLIT_TRAIN], 1, seed));
        *n_items = s->snli[GF_SPLIT_TRAIN].n;
    } else {
        GF_TRY(gf_lm_loader_new(&s->lm_ld, s->ids[GF_SPLIT_TRAIN].data, s->ids[GF_SPLIT_TRAIN].n, s->r.data.seq_len,
                                1, 0, seed));
        *n_items = gf_lm_loader_n_windows(s->lm_ld);
    }
    return GF_OK;
}

static gf_status next_from(gf_session *s, gf_lm_loader *lm, gf_snli_loader *nl, int64_t B, int64_t *rows) {
    if (nl) return gf_snli_loader_next(nl, B, s->prem, s->pmask, s->hyp, s->hmask, s->labels, rows);
    return gf_lm_loader_next(lm, s->win, B, rows);
}

gf_status gf_session_next(gf_session *s, int64_t *rows) { return next_from(s, s->lm_ld, s->snli_ld, s->train_B, rows); }

gf_tensor *gf_session_forward(gf_session *s, int64_t rows) { return gf_session_forward_rows(s, 0, rows); }

gf_tensor *gf_session_forward_rows(gf_session *s, int64_t lo, int64_t n) {
    if (s->is_nli) {
        int64_t Ls = s->r.data.max_sentence_len;
        return gf_nli_forward(&s->nli, &s->ctx, s->prem + lo * Ls, s->pmask + lo * Ls, s->hyp + lo * Ls,
                              s->hmask + lo * Ls, s->labels + lo, n, Ls, NULL);
    }
    return gf_lm_forward(&s->lm, &s->ctx, s->win + lo * (s->r.data.seq_len + 1), n, s->r.data.seq_len, NULL);
}

int64_t gf_session_tokens_per_row(const gf_session *s) {
    return s->is_nli ? 2 * s->r.data.max_sentence_len : s->r.data.seq_len;
}

gf_status gf_session_loader_state(const gf_session *s, gf_loader_state *st) {
    if (s->snli_ld) gf_snli_loader_get_state(s->snli_ld, st);
    else gf_lm_loader_get_state(s->lm_ld, st);
    return GF_OK;
}

gf_status gf_session_set_loader_state(gf_session *s, const gf_loader_state *st) {
    return s->snli_ld ? gf_snli_loader_set_state(s->snli_ld, st) : gf_lm_loader_set_state(s->lm_ld, st);
}

static gf_status eval_nli(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res) {
    gf_snli_loader *ld = NULL;
    GF_TRY(alloc_batch(s, s->r.eval.batch_size));
    GF_TRY(gf_snli_loader_new(&ld, &s->snli[split], 0, 0));
    int32_t *pred = malloc((size_t)s->B * sizeof(int32_t));
    int old_grad = gf_ctx_set_grad(&s->ctx, 0), old_train = s->ctx.training;
    s->ctx.training = 0;
    double nll = 0.0;
    int64_t cnt = 0, correct = 0, nb = 0, rows = 0;
    int rank = gf_dist_rank(), world = gf_dist_size();
    gf_status st = GF_OK;
    /* the loader fills the session's batch buffers: keep the training batch out of the way */
    for (;;) {
        if (max_batches > 0 && nb >= max_batches) break;
        st = next_from(s, NULL, ld, s->r.eval.batch_size, &rows);
        if (st || rows == 0) break;
        if (nb++ % world != rank) continue; /* data parallel: batch nb belongs to rank nb mod N */
        gf_nli_out out = {.pred_buf = pred};
        gf_nli_forward(&s->nli, &s->ctx, s->prem, s->pmask, s->hyp, s->hmask, s->labels, rows,
                       s->r.data.max_sentence_len, &out);
        nll += out.nll_sum;
        cnt += out.n_counted;
        correct += out.n_correct;
        for (int64_t i = 0; i < rows; i++)
            if (s->labels[i] >= 0 && pred[i] >= 0 && pred[i] < 3) res->confusion[s->labels[i]][pred[i]]++;
        gf_ctx_reset(&s->ctx);
    }
    gf_ctx_set_grad(&s->ctx, old_grad);
    s->ctx.training = old_train;
    free(pred);
    gf_snli_loader_free(ld);
    if (st) return st;
    double tot[12] = {nll, (double)cnt, (double)correct};
    for (int i = 0; i < 9; i++) tot[3 + i] = (double)res->confusion[i / 3][i % 3];
    GF_TRY(gf_dist_sum_f64(tot, 12));
    nll = tot[0], cnt = (int64_t)tot[1], correct = (int64_t)tot[2];
    for (int i = 0; i < 9; i++) res->confusion[i / 3][i % 3] = (int64_t)tot[3 + i];
    res->n_tokens = cnt;
    res->loss = cnt ? nll / (double)cnt : NAN;
    res->ppl = NAN;
    res->acc = cnt ? (double)correct / (double)cnt : NAN;
    return GF_OK;
}

gf_status gf_session_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res) {
    memset(res, 0, sizeof *res);
    res->ppl_word = NAN;
    res->acc = NAN;
    GF_TRY(gf_session_load_split(s, split, 0));
    if (s->is_nli) return eval_nli(s, split, max_batches, res);
    int64_t L = s->r.data.seq_len, B = s->r.eval.batch_size;
    gf_lm_loader *ld = NULL;
    GF_TRY(gf_lm_loader_new(&ld, s->ids[split].data, s->ids[split].n, L, 0, 1, 0));
    int32_t *batch = malloc((size_t)(B * (L + 1)) * sizeof(int32_t)); // (B, L+1)
    if (!batch) { gf_lm_loader_free(ld); return gf_error_set(GF_E_NOMEM, "eval batch"); }
    int old_grad = gf_ctx_set_grad(&s->ctx, 0), old_train = s->ctx.training;
    s->ctx.training = 0;
    double nll = 0.0;
    int64_t cnt = 0, nb = 0, rows = 0;
    int rank = gf_dist_rank(), world = gf_dist_size();
    gf_status st = GF_OK;
    for (;;) {
        if (max_batches > 0 && nb >= max_batches) break;
        st = gf_lm_loader_next(ld, batch, B, &rows);
        if (st || rows == 0) break;
        if (nb++ % world != rank) continue; /* data parallel: batch nb belongs to rank nb mod N */
        gf_lm_out out = {0};
        gf_lm_forward(&s->lm, &s->ctx, batch, rows, L, &out);
        nll += out.nll_sum;
        cnt += out.n_tokens;
        gf_ctx_reset(&s->ctx);
    }
    gf_ctx_set_grad(&s->ctx, old_grad);
    s->ctx.training = old_train;
    free(batch);
    gf_lm_loader_free(ld);
    if (st) return st;
    double tot[2] = {nll, (double)cnt};
    GF_TRY(gf_dist_sum_f64(tot, 2));
    nll = tot[0], cnt = (int64_t)tot[1];
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
    if (s->model_ready) { if (s->is_nli) gf_nli_free(&s->nli); else gf_lm_free(&s->lm); }
    if (s->lm_ld) gf_lm_loader_free(s->lm_ld);
    if (s->snli_ld) gf_snli_loader_free(s->snli_ld);
    free(s->win); free(s->prem); free(s->hyp); free(s->pmask); free(s->hmask); free(s->labels);
    for (int i = 0; i < 3; i++) { gf_ids_free(&s->ids[i]); if (s->loaded[i] && s->is_nli) gf_snli_free(&s->snli[i]); }
    if (s->tok) gf_tokenizer_free(s->tok);
    memset(s, 0, sizeof *s);
}

gf_status gf_session_model_from_ckpt(const char *path, gf_recipe *r, gf_lm *lm) {
    gf_ckpt_meta m;
    GF_TRY(gf_ckpt_peek_recipe(path, r, &m));
    gf_status st = GF_OK;
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

gf_status gf_lm_export(const gf_lm *lm, const gf_recipe *r, const char *path) {
    char *text = NULL;
    GF_TRY(gf_recipe_resolved_text(r, &text));
    char vocab[32];
    snprintf(vocab, sizeof vocab, "%lld", (long long)lm->cfg.vocab);
    const char *keys[5] = {"format", "family", "block", "vocab", "recipe"};
    const char *vals[5] = {"gflow-lm-1", gf_family_name(lm->cfg.family), gf_block_name(lm->cfg.block), vocab, text};
    gf_status st = gf_safetensors_save_params(path, &lm->params, 5, keys, vals);
    free(text);
    return st;
}
