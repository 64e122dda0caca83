/* task_nli.c — the NLI task: premise/hypothesis pairs (SNLI) classified as entailment, neutral
 * or contradiction; accuracy and the confusion matrix. */
#include "gflow/session.h"
#include "gflow/threads.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nli_task {
    gf_nli nli;
    int model_ready;
    gf_snli_data snli[3];    /* examples per split */
    gf_snli_loader *ld;      /* training loader */
    int64_t B;               /* rows of the batch buffers */
    int32_t *prem, *hyp;     /* (B, Ls) */
    float *pmask, *hmask;    /* (B, Ls) */
    int32_t *labels;         /* (B) */
} nli_task;

static nli_task *task_of(const gf_session *s) { return (nli_task *)s->task_data; }

static const char *const class_names[GF_NLI_CLASSES] = {"entailment", "neutral", "contradiction"};

static gf_status nli_open(gf_session *s, int64_t vocab) {
    nli_task *t = calloc(1, sizeof *t);
    if (!t) return gf_error_set(GF_E_NOMEM, "NLI task");
    s->task_data = t;
    gf_model_cfg nc;
    gf_recipe_model_cfg(&s->r, vocab, &nc);
    GF_TRY(gf_nli_init(&t->nli, &nc));
    t->model_ready = 1;
    s->params = &t->nli.params;
    return GF_OK;
}

static void nli_init_weights(gf_session *s, gf_rng *rng) { gf_nli_init_weights(&task_of(s)->nli, rng); }

static gf_status nli_load_split(gf_session *s, gf_split split, const char *path, int log) {
    gf_snli_data *d = &task_of(s)->snli[split];
    double t0 = gf_time_now();
    gf_snli_opts so = {.max_len = s->r.data.max_sentence_len, .pad_id = 0, .skip_bad_rows = s->r.data.skip_bad_rows};
    GF_TRY(gf_snli_load(d, path, s->tok, &so));
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
    return GF_OK;
}

/* the batch buffers for B rows; key names the recipe key that sized them (messages) */
static gf_status alloc_batch(gf_session *s, int64_t B, const char *key) {
    nli_task *t = task_of(s);
    if (t->B >= B) return GF_OK;
    free(t->prem); free(t->hyp); free(t->pmask); free(t->hmask); free(t->labels);
    t->B = B;
    int64_t Ls = s->r.data.max_sentence_len;
    t->prem = malloc((size_t)(B * Ls) * sizeof(int32_t));
    t->hyp = malloc((size_t)(B * Ls) * sizeof(int32_t));
    t->pmask = malloc((size_t)(B * Ls) * sizeof(float));
    t->hmask = malloc((size_t)(B * Ls) * sizeof(float));
    t->labels = malloc((size_t)B * sizeof(int32_t));
    if (!t->prem || !t->hyp || !t->pmask || !t->hmask || !t->labels)
        return gf_error_set(GF_E_NOMEM, "the batch's sentence pairs: %lld rows (%s) x 2 x %lld ids and masks ([data] "
                            "max_sentence_len), %.1f MB: lower %s or max_sentence_len", (long long)B, key,
                            (long long)Ls, (double)B * (double)Ls * 16.0 / 1e6, key);
    return GF_OK;
}

static gf_status nli_train_loader(gf_session *s, int64_t B, int64_t *n_items) {
    nli_task *t = task_of(s);
    GF_TRY(alloc_batch(s, B, "[train] batch_size"));
    GF_TRY(gf_snli_loader_new(&t->ld, &t->snli[GF_SPLIT_TRAIN], 1, (uint64_t)s->r.run.seed));
    *n_items = t->snli[GF_SPLIT_TRAIN].n;
    return GF_OK;
}

/* Up to B pairs of a loader into the batch buffers. */
static gf_status next_from(nli_task *t, gf_snli_loader *ld, int64_t B, int64_t *rows) {
    return gf_snli_loader_next(ld, B, t->prem, t->pmask, t->hyp, t->hmask, t->labels, rows);
}

static gf_status nli_next_batch(gf_session *s, int64_t *rows) {
    return next_from(task_of(s), task_of(s)->ld, s->train_B, rows);
}

/* Random ids in full-length sentences, random labels (gflow bench). */
static gf_status nli_random_batch(gf_session *s, int64_t B, gf_rng *rng) {
    GF_TRY(alloc_batch(s, B, "--batch"));
    nli_task *t = task_of(s);
    int64_t n = B * s->r.data.max_sentence_len;
    for (int64_t i = 0; i < n; i++) {
        t->prem[i] = (int32_t)gf_rng_below(rng, (uint64_t)s->vocab);
        t->hyp[i] = (int32_t)gf_rng_below(rng, (uint64_t)s->vocab);
        t->pmask[i] = t->hmask[i] = 1.0f;
    }
    for (int64_t i = 0; i < B; i++) t->labels[i] = (int32_t)gf_rng_below(rng, GF_NLI_CLASSES);
    return GF_OK;
}

static gf_tensor *nli_forward_rows(gf_session *s, int64_t lo, int64_t n) {
    nli_task *t = task_of(s);
    int64_t Ls = s->r.data.max_sentence_len;
    return gf_nli_forward(&t->nli, &s->ctx, t->prem + lo * Ls, t->pmask + lo * Ls, t->hyp + lo * Ls,
                          t->hmask + lo * Ls, t->labels + lo, n, Ls, NULL);
}

static int64_t nli_tokens_per_row(const gf_recipe *r) { return 2 * r->data.max_sentence_len; }

static void nli_loader_state(const gf_session *s, gf_loader_state *ls) {
    gf_snli_loader_get_state(task_of(s)->ld, ls);
}

static gf_status nli_set_loader_state(gf_session *s, const gf_loader_state *ls) {
    return gf_snli_loader_set_state(task_of(s)->ld, ls);
}

static gf_status nli_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res) {
    nli_task *t = task_of(s);
    gf_snli_loader *ld = NULL;
    GF_TRY(alloc_batch(s, s->r.eval.batch_size, "[eval] batch_size"));
    int32_t *pred = malloc((size_t)t->B * sizeof(int32_t));
    if (!pred)
        return gf_error_set(GF_E_NOMEM, "the evaluation batch's predictions: %lld rows ([eval] batch_size)",
                            (long long)t->B);
    gf_status ls = gf_snli_loader_new(&ld, &t->snli[split], 0, 0);
    if (ls) { free(pred); return ls; }
    double sums[12] = {0}; /* NLL, counted rows, correct rows, confusion [gold][pred] */
    int64_t rows = 0;
    gf_status status = GF_OK;
    gf_eval_pass p;
    gf_eval_begin(&p, s, max_batches);
    /* the loader fills the task's batch buffers: the training batch is fetched afresh next step */
    while (gf_eval_more(&p)) {
        status = next_from(t, ld, s->r.eval.batch_size, &rows);
        if (status || rows == 0) break;
        if (!gf_eval_mine(&p)) continue;
        gf_nli_out out = {.pred_buf = pred};
        gf_nli_forward(&t->nli, &s->ctx, t->prem, t->pmask, t->hyp, t->hmask, t->labels, rows,
                       s->r.data.max_sentence_len, &out);
        sums[0] += out.nll_sum;
        sums[1] += (double)out.n_counted;
        sums[2] += (double)out.n_correct;
        for (int64_t i = 0; i < rows; i++)
            if (t->labels[i] >= 0 && pred[i] >= 0 && pred[i] < 3) sums[3 + 3 * t->labels[i] + pred[i]] += 1.0;
        gf_ctx_reset(&s->ctx);
    }
    free(pred);
    gf_snli_loader_free(ld);
    GF_TRY(gf_eval_end(&p, status, sums, 12));
    int64_t cnt = (int64_t)sums[1], correct = (int64_t)sums[2];
    for (int i = 0; i < 9; i++) res->confusion[i / 3][i % 3] = (int64_t)sums[3 + i];
    res->n_tokens = cnt;
    res->loss = cnt ? sums[0] / (double)cnt : NAN;
    res->ppl = NAN;
    res->acc = cnt ? (double)correct / (double)cnt : NAN;
    return GF_OK;
}

/* classifiers select on dev accuracy */
static double nli_score(const gf_eval_result *res) { return -res->acc; }

static double nli_train_ppl(float loss) { (void)loss; return NAN; }

static void nli_log_eval(const gf_eval_result *res, int64_t step, int64_t epoch, int full) {
    fprintf(stderr, "eval  step %lld | epoch %lld | dev loss %.4f | accuracy %.4f%s\n", (long long)step,
            (long long)epoch + 1, res->loss, res->acc, full ? "" : " (partial)");
}

static void nli_summary(const gf_session *s, FILE *f, const gf_eval_result *val, const gf_eval_result *test) {
    fprintf(f, "train_pairs\t%lld\n", (long long)task_of(s)->snli[GF_SPLIT_TRAIN].n);
    fprintf(f, "best_val_loss\t%.6f\nbest_val_acc\t%.5f\ntest_loss\t%.6f\ntest_acc\t%.5f\n", val->loss, val->acc,
            test->loss, test->acc);
    for (int g = 0; g < 3; g++) {
        const int64_t *row = test->confusion[g];
        int64_t n = row[0] + row[1] + row[2];
        fprintf(f, "test_acc_%s\t%.5f\n", class_names[g], n ? (double)row[g] / (double)n : NAN);
        fprintf(f, "test_confusion_%s\t%lld,%lld,%lld\n", class_names[g], (long long)row[0], (long long)row[1],
                (long long)row[2]);
    }
}

static void nli_log_done(const gf_session *s, const gf_run_end *e) {
    (void)s;
    fprintf(stderr, "done: best dev accuracy %.4f (step %lld, epoch %lld) | test accuracy %.4f | %.0f s\n",
            e->val->acc, (long long)e->best_step, (long long)e->best_epoch + 1, e->test->acc, e->seconds);
}

static void nli_describe(const gf_session *s, FILE *f) {
    const gf_model_cfg *c = &task_of(s)->nli.cfg;
    fprintf(f, "\nmodel: %s NLI classifier, %lld layers, d_model %lld, vocab %lld, sentences of %lld tokens\n",
            gf_family_name(c->family), (long long)c->n_layers, (long long)c->d_model, (long long)c->vocab,
            (long long)s->r.data.max_sentence_len);
    fprintf(f, "parameters: %lld\n", (long long)s->params->n);
}

static void nli_close(gf_session *s) {
    nli_task *t = task_of(s);
    if (!t) return;
    if (t->model_ready) gf_nli_free(&t->nli);
    if (t->ld) gf_snli_loader_free(t->ld);
    free(t->prem); free(t->hyp); free(t->pmask); free(t->hmask); free(t->labels);
    for (int i = 0; i < 3; i++) if (s->loaded[i]) gf_snli_free(&t->snli[i]);
    free(t);
    s->task_data = NULL;
}

const gf_task_ops gf_task_nli = {
    .name = "nli", .kind = GF_DSK_PAIRS, .rows = "sentence pairs", .format = "gflow-nli-1",
    .open = nli_open, .init_weights = nli_init_weights, .load_split = nli_load_split,
    .train_loader = nli_train_loader, .next_batch = nli_next_batch, .random_batch = nli_random_batch,
    .forward_rows = nli_forward_rows, .tokens_per_row = nli_tokens_per_row, .loader_state = nli_loader_state,
    .set_loader_state = nli_set_loader_state, .eval = nli_eval, .score = nli_score, .train_ppl = nli_train_ppl,
    .log_eval = nli_log_eval, .summary = nli_summary, .log_done = nli_log_done, .describe = nli_describe,
    .close = nli_close,
};
