/* task_lm.c — the language-model task: next-token prediction over windows of a token stream
 * (WikiText-2, or the user's text: any data set of kind GF_DSK_LM), perplexity per token and per
 * word, the unigram baseline. */
#include "gflow/session.h"
#include "gflow/dist.h"
#include "gflow/threads.h"
#include "gflow/version.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lm_task {
    gf_lm lm;
    int model_ready;
    gf_tokens toks[3];       /* token stream per split (mapped from its token cache) */
    int64_t words[3];        /* whitespace words + one <eos> a line, for per-word PPL */
    gf_lm_loader *ld;        /* training loader */
    int64_t B;               /* rows of win */
    int32_t *win;            /* (B, L+1) */
    gf_lm_fed fed;           /* this context step's (lm_feed_rows) */
} lm_task;

extern const gf_task_ops gf_task_lm; /* defined at the end */

static lm_task *task_of(const gf_session *s) { return (lm_task *)s->task_data; }

gf_lm *gf_session_lm(gf_session *s) { return s->task == &gf_task_lm ? &task_of(s)->lm : NULL; }

const gf_tokens *gf_session_tokens(const gf_session *s, gf_split split) {
    return s->task == &gf_task_lm ? &task_of(s)->toks[split] : NULL;
}

static gf_status lm_open(gf_session *s, int64_t vocab) {
    lm_task *t = calloc(1, sizeof *t);
    if (!t) return gf_error_set(GF_E_NOMEM, "language-model task");
    s->task_data = t;
    gf_model_cfg mc;
    gf_recipe_model_cfg(&s->r, vocab, &mc);
    GF_TRY(gf_lm_init(&t->lm, &mc));
    t->model_ready = 1;
    s->params = &t->lm.params;
    return GF_OK;
}

static void lm_init_weights(gf_session *s, gf_rng *rng) { gf_lm_init_weights(&task_of(s)->lm, rng); }

static gf_status lm_load_split(gf_session *s, gf_split split, const char *path, int log) {
    lm_task *t = task_of(s);
    gf_tokens *ids = &t->toks[split];
    double t0 = gf_time_now();
    gf_cache_event ev;
    char why[512] = "";
    GF_TRY(gf_lm_split_tokens(s->tok, path, gf_recipe_cache_dir(&s->r), ids, &ev, why, sizeof why, log));
    if (split != GF_SPLIT_TRAIN) GF_TRY(gf_wikitext_word_count(path, &t->words[split]));
    if (split == GF_SPLIT_TRAIN && s->r.data.train_fraction < 1.0) {
        int64_t keep = (int64_t)ceil((double)ids->n * s->r.data.train_fraction);
        if (keep < 2) keep = 2;
        ids->n = keep < ids->n ? keep : ids->n;
    }
    if (log)
        fprintf(stderr, "data: %s: %lld tokens (%s%s%s, %.1f s)\n", path, (long long)ids->n,
                ev == GF_CACHE_HIT ? "cached" : ev == GF_CACHE_BUILT ? "tokenized" : "re-tokenized",
                why[0] ? ": " : "", why, gf_time_now() - t0);
    const int64_t L = s->r.data.seq_len, windows = (ids->n - 1) / L;
    if (ids->n < L + 1)
        return gf_error_set(GF_E_INVALID, "%s: %lld tokens, fewer than one window of seq_len+1 = %lld", path,
                            (long long)ids->n, (long long)L + 1);
    if (split == GF_SPLIT_TRAIN && windows < s->r.train.batch_size)
        return gf_error_set(GF_E_INVALID, "%s: %lld tokens make %lld windows of [data] seq_len %lld, fewer than one "
                            "batch ([train] batch_size %lld): more text, or a smaller batch_size or seq_len", path,
                            (long long)ids->n, (long long)windows, (long long)L, (long long)s->r.train.batch_size);
    return GF_OK;
}

static gf_status alloc_batch(gf_session *s, int64_t B) {
    lm_task *t = task_of(s);
    if (t->B >= B) return GF_OK;
    free(t->win);
    t->B = B;
    t->win = malloc((size_t)(B * (s->r.data.seq_len + 1)) * sizeof(int32_t));
    if (!t->win)
        return gf_error_set(GF_E_NOMEM, "the batch's token windows: %lld rows ([train] batch_size) x %lld ids "
                            "([data] seq_len + 1), %.1f MB: lower batch_size or seq_len", (long long)B,
                            (long long)s->r.data.seq_len + 1,
                            (double)B * (double)(s->r.data.seq_len + 1) * sizeof(int32_t) / 1e6);
    return GF_OK;
}

static gf_status lm_train_loader(gf_session *s, int64_t B, int64_t *n_items) {
    lm_task *t = task_of(s);
    GF_TRY(alloc_batch(s, B));
    GF_TRY(gf_lm_loader_new(&t->ld, &t->toks[GF_SPLIT_TRAIN], s->r.data.seq_len, 1, 0, (uint64_t)s->r.run.seed));
    *n_items = gf_lm_loader_n_windows(t->ld);
    return GF_OK;
}

static gf_status lm_next_batch(gf_session *s, int64_t *rows) {
    return gf_lm_loader_next(task_of(s)->ld, task_of(s)->win, s->train_B, rows);
}

static gf_status lm_random_batch(gf_session *s, int64_t B, gf_rng *rng) {
    GF_TRY(alloc_batch(s, B));
    int32_t *win = task_of(s)->win;
    for (int64_t i = 0; i < B * (s->r.data.seq_len + 1); i++) win[i] = (int32_t)gf_rng_below(rng, (uint64_t)s->vocab);
    return GF_OK;
}

static gf_tensor *lm_forward_rows(gf_session *s, int64_t lo, int64_t n) {
    lm_task *t = task_of(s);
    const int32_t *w = t->win + lo * (s->r.data.seq_len + 1);
    const gf_lm_fed *f = &t->fed;
    if (f->windows == w && f->B == n && f->epoch == s->ctx.pack_epoch) return gf_lm_forward_fed(&t->lm, &s->ctx, f);
    return gf_lm_forward(&t->lm, &s->ctx, w, n, s->r.data.seq_len, NULL);
}

static int64_t lm_feed_rows(gf_session *s, int64_t lo, int64_t n) {
    lm_task *t = task_of(s);
    return gf_lm_feed(&t->lm, &s->ctx, t->win + lo * (s->r.data.seq_len + 1), n, s->r.data.seq_len, &t->fed);
}

static int64_t lm_tokens_per_row(const gf_recipe *r) { return r->data.seq_len; }

static void lm_loader_state(const gf_session *s, gf_loader_state *ls) { gf_lm_loader_get_state(task_of(s)->ld, ls); }

static gf_status lm_set_loader_state(gf_session *s, const gf_loader_state *ls) {
    return gf_lm_loader_set_state(task_of(s)->ld, ls);
}

static gf_status lm_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res) {
    lm_task *t = task_of(s);
    int64_t L = s->r.data.seq_len, B = s->r.eval.batch_size;
    gf_lm_loader *ld = NULL;
    GF_TRY(gf_lm_loader_new(&ld, &t->toks[split], L, 0, 1, 0));
    int32_t *batch = malloc((size_t)(B * (L + 1)) * sizeof(int32_t)); // (B, L+1)
    if (!batch) {
        gf_lm_loader_free(ld);
        return gf_error_set(GF_E_NOMEM, "the evaluation batch: %lld rows ([eval] batch_size) x %lld ids ([data] "
                            "seq_len + 1), %.1f MB: lower [eval] batch_size", (long long)B, (long long)(L + 1),
                            4e-6 * (double)B * (double)(L + 1));
    }
    double sums[2] = {0.0, 0.0}; /* NLL, predicted tokens */
    int64_t rows = 0;
    gf_status status = GF_OK;
    gf_eval_pass p;
    gf_eval_begin(&p, s, max_batches);
    while (gf_eval_more(&p)) {
        status = gf_lm_loader_next(ld, batch, B, &rows);
        if (status || rows == 0) break;
        if (!gf_eval_mine(&p)) continue;
        gf_lm_out out = {0};
        gf_lm_forward(&t->lm, &s->ctx, batch, rows, L, &out);
        sums[0] += out.nll_sum;
        sums[1] += (double)out.n_tokens;
        gf_ctx_reset(&s->ctx);
    }
    free(batch);
    gf_lm_loader_free(ld);
    GF_TRY(gf_eval_end(&p, status, sums, 2));
    double nll = sums[0];
    int64_t cnt = (int64_t)sums[1];
    res->n_tokens = cnt;
    res->loss = cnt ? nll / (double)cnt : NAN;
    res->ppl = exp(res->loss);
    /* per word: the whole split's NLL over its word count (one <eos> per line), so runs with
     * different tokenizers compare; only meaningful when the whole split was evaluated */
    int full = max_batches <= 0 || rows == 0;
    if (full && split != GF_SPLIT_TRAIN && t->words[split] > 0) res->ppl_word = exp(nll / (double)t->words[split]);
    return GF_OK;
}

static double lm_score(const gf_eval_result *res) { return res->loss; }

static double lm_train_ppl(float loss) { return exp(loss); }

static void lm_log_eval(const gf_eval_result *res, int64_t step, int64_t epoch, int full) {
    fprintf(stderr, "eval  step %lld | epoch %lld | valid loss %.4f | ppl %.2f%s\n", (long long)step,
            (long long)epoch + 1, res->loss, res->ppl, full ? "" : " (partial)");
}

/* The unigram baseline: train-split token frequencies (add-one smoothed) scored on a split,
 * per token. A language model worth its name must beat it by a wide margin. */
static double unigram_ppl(const gf_session *s, gf_split split) {
    int64_t V = gf_tokenizer_vocab_size(s->tok);
    const gf_tokens *tr = &task_of(s)->toks[GF_SPLIT_TRAIN], *ev = &task_of(s)->toks[split];
    double *cnt = calloc((size_t)V, sizeof(double));
    int32_t *blk = malloc((size_t)65536 * sizeof *blk); /* read in blocks: the streams stay mapped, not resident */
    if (!cnt || !blk || ev->n < 2) { free(cnt); free(blk); return NAN; }
    for (int64_t i = 0; i < tr->n; i += 65536) {
        int64_t n = tr->n - i < 65536 ? tr->n - i : 65536;
        gf_tokens_copy(tr, i, n, blk);
        gf_tokens_release(tr);
        for (int64_t k = 0; k < n; k++) cnt[blk[k]] += 1.0;
    }
    double tot = (double)tr->n + (double)V, nll = 0.0;
    for (int64_t i = 1; i < ev->n; i += 65536) {
        int64_t n = ev->n - i < 65536 ? ev->n - i : 65536;
        gf_tokens_copy(ev, i, n, blk);
        gf_tokens_release(ev);
        for (int64_t k = 0; k < n; k++) nll -= log((cnt[blk[k]] + 1.0) / tot);
    }
    free(cnt);
    free(blk);
    return exp(nll / (double)(ev->n - 1));
}

static void lm_summary(const gf_session *s, FILE *f, const gf_eval_result *val, const gf_eval_result *test) {
    fprintf(f, "best_val_loss\t%.6f\nbest_val_ppl\t%.4f\nval_ppl_word\t%.4f\n", val->loss, val->ppl, val->ppl_word);
    fprintf(f, "test_loss\t%.6f\ntest_ppl\t%.4f\ntest_ppl_word\t%.4f\n", test->loss, test->ppl, test->ppl_word);
    fprintf(f, "unigram_val_ppl\t%.4f\nunigram_test_ppl\t%.4f\n", unigram_ppl(s, GF_SPLIT_VALID),
            unigram_ppl(s, GF_SPLIT_TEST));
}

static void lm_log_done(const gf_session *s, const gf_run_end *e) {
    fprintf(stderr,
            "done: best valid ppl %.2f (step %lld, epoch %lld; unigram baseline %.2f), per word %.2f | test ppl "
            "%.2f, per word %.2f | %.0f tok/s | %.0f s\n",
            e->val->ppl, (long long)e->best_step, (long long)e->best_epoch + 1, unigram_ppl(s, GF_SPLIT_VALID),
            e->val->ppl_word, e->test->ppl, e->test->ppl_word, e->tokens_per_s, e->seconds);
}

static void lm_describe(const gf_session *s, FILE *f) {
    const gf_model_cfg *c = &task_of(s)->lm.cfg;
    fprintf(f, "\nmodel: %s LM, block %s, %lld layers, d_model %lld, vocab %lld\n", gf_family_name(c->family),
            gf_block_name(c->block), (long long)c->n_layers, (long long)c->d_model, (long long)c->vocab);
    fprintf(f, "parameters: %lld\n", (long long)s->params->n);
    double fl = gf_lm_flops_per_token(c, s->r.data.seq_len);
    fprintf(f, "FLOPs per token at L=%lld: forward %.1f M, training step (x3) %.1f M\n", (long long)s->r.data.seq_len,
            fl / 1e6, 3 * fl / 1e6);
}

static void lm_close(gf_session *s) {
    lm_task *t = task_of(s);
    if (!t) return;
    if (t->model_ready) gf_lm_free(&t->lm);
    if (t->ld) gf_lm_loader_free(t->ld);
    free(t->win);
    for (int i = 0; i < 3; i++) gf_tokens_free(&t->toks[i]);
    free(t);
    s->task_data = NULL;
}

const gf_task_ops gf_task_lm = {
    .name = "lm", .kind = GF_DSK_LM, .rows = "windows", .format = "gflow-lm-1",
    .language_model = 1,
    .open = lm_open, .init_weights = lm_init_weights, .load_split = lm_load_split, .train_loader = lm_train_loader,
    .next_batch = lm_next_batch, .random_batch = lm_random_batch, .forward_rows = lm_forward_rows,
    .feed_rows = lm_feed_rows,
    .tokens_per_row = lm_tokens_per_row, .loader_state = lm_loader_state, .set_loader_state = lm_set_loader_state,
    .eval = lm_eval, .score = lm_score, .train_ppl = lm_train_ppl, .log_eval = lm_log_eval, .summary = lm_summary,
    .log_done = lm_log_done, .describe = lm_describe, .close = lm_close,
};
