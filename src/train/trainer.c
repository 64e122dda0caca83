/* trainer.c — the training loop: batches, AdamW steps, evaluation, checkpoints, metrics.
 *
 * Determinism: given the seed and the thread count a run is bitwise reproducible, and a run
 * stopped at any checkpoint and resumed writes the same metrics.tsv bytes and weights as an
 * uninterrupted one. The checkpoint carries everything the loop's future depends on: weights,
 * AdamW m/v and step, the loader position (with its shuffle RNG), the dropout RNG, the trainer
 * state below (best validation, early-stop counter, metrics.tsv length to truncate back to).
 *
 * Data parallel (gflow/dist.h): every rank runs this loop on the same global batches and
 * computes its slice; gradients are summed in one allreduce before clipping, so the clip, the
 * non-finite check and AdamW see the global gradient on every rank and the weights stay equal.
 * Rank 0 alone writes metrics, speed and checkpoints. The checkpoint holds no per-rank state, so
 * a run resumes with any number of ranks.
 */
#include "session.h"
#include "gflow/version.h"
#include "gflow/fs.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <omp.h>
#include <unistd.h>

/* POD stored in the checkpoint's optim blob */
typedef struct gf_train_state {
    gf_adamw_state adamw;
    int64_t step;             /* optimizer steps done */
    int64_t epoch;            /* 0-based epoch of the next batch */
    double best_val;          /* best full-split validation loss so far (INFINITY: none) */
    int64_t best_step, best_epoch;
    int64_t evals_since_best;
    int64_t metrics_bytes;    /* metrics.tsv length when this state was saved */
    int64_t tokens_seen;
    double train_seconds;     /* wall time in training steps, across resumes */
    int32_t finished, pad_;
} gf_train_state;

typedef struct trainer {
    gf_session s;
    gf_train_state st;
    FILE *metrics, *speed;
    char dir[1024];
    int64_t B, L, spe, total;
    gf_adamw_cfg adamw;
    gf_schedule_cfg sched;
    char *recipe_text;
    int log;
    gf_eval_result last_full; /* the latest full validation of this process, and its step */
    int64_t last_full_step;
    int rank, world;          /* data parallel: this rank, number of ranks (1: single process) */
    int64_t n_items;          /* training windows or pairs */
} trainer;

/* Tokenizer, model and data. With N ranks, rank 0 goes first and builds the tokenizer and token
 * caches; the others then find them (no N-fold SentencePiece training, no racing writers). */
static gf_status prepare(trainer *t, const gf_recipe *r) {
    int first_failed = 0;
    gf_status st = GF_OK;
    if (t->world > 1 && t->rank > 0) { st = gf_dist_agree(GF_OK); first_failed = st != GF_OK; }
    if (!st) st = gf_session_open(&t->s, r, t->log);
    if (!st) {
        t->B = r->train.batch_size;
        t->L = gf_session_tokens_per_row(&t->s);
        st = gf_session_train_loader(&t->s, t->B, &t->n_items, t->log);
    }
    if (!st) st = gf_session_load_split(&t->s, GF_SPLIT_VALID, t->log);
    if (!st && t->world > 1) st = gf_session_load_split(&t->s, GF_SPLIT_TEST, 0);
    if (t->world > 1 && t->rank == 0) { st = gf_dist_agree(st); first_failed = st != GF_OK; }
    if (t->world > 1 && !first_failed) st = gf_dist_agree(st);
    return st;
}

static void path_in(const trainer *t, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", t->dir, name);
}


static void fmt_num(char *buf, size_t cap, double v, const char *fmt) {
    if (isnan(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, fmt, v);
}

/* One metrics.tsv line; a failed write (full disk, file size limit) is an error, never silent. */
static gf_status metrics_line(trainer *t, const char *split, double loss, double ppl, double ppl_word, double acc,
                              double lr, double gnorm) {
    if (!t->metrics) return GF_OK; /* ranks other than 0 write nothing */
    char a[32], b[32], c[32], d[32], e[32], f[32];
    fmt_num(a, sizeof a, loss, "%.6f");
    fmt_num(b, sizeof b, ppl, "%.4f");
    fmt_num(c, sizeof c, ppl_word, "%.4f");
    fmt_num(d, sizeof d, acc, "%.5f");
    fmt_num(e, sizeof e, lr, "%.6e");
    fmt_num(f, sizeof f, gnorm, "%.6f");
    int w = fprintf(t->metrics, "%lld\t%lld\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", (long long)t->st.step,
                    (long long)t->st.epoch, split, a, b, c, d, e, f);
    if (w < 0 || fflush(t->metrics) != 0 || ferror(t->metrics))
        return gf_error_set(GF_E_IO, "%s/metrics.tsv: write failed: %s", t->dir, strerror(errno));
    return GF_OK;
}

static gf_status save_ckpt(trainer *t, const char *name) {
    if (t->rank != 0) return GF_OK;
    fflush(t->metrics);
    t->st.metrics_bytes = (int64_t)ftell(t->metrics);
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    m.step = t->st.step;
    m.epoch = t->st.epoch;
    gf_loader_state ls;
    gf_session_loader_state(&t->s, &ls);
    gf_status st = gf_ckpt_meta_set_recipe(&m, t->recipe_text);
    if (!st) st = gf_ckpt_meta_set_blob(&m.rng, &t->s.rng, sizeof t->s.rng);
    if (!st) st = gf_ckpt_meta_set_blob(&m.loader, &ls, sizeof ls);
    if (!st) st = gf_ckpt_meta_set_blob(&m.optim, &t->st, sizeof t->st);
    if (!st) st = gf_ckpt_meta_set_kv(&m, "tokenizer", gf_tokenizer_key(t->s.tok));
    if (!st) st = gf_ckpt_meta_set_kv(&m, "build", gf_build_id());
    char vb[32];
    snprintf(vb, sizeof vb, "%lld", (long long)gf_tokenizer_vocab_size(t->s.tok));
    if (!st) st = gf_ckpt_meta_set_kv(&m, "vocab", vb);
    char path[1100];
    path_in(t, name, path, sizeof path);
    if (!st) st = gf_ckpt_save(path, t->s.params, &m);
    gf_ckpt_meta_free(&m);
    return st;
}

static gf_status open_run_dir(trainer *t, const gf_train_opts *o) {
    GF_TRY(gf_mkdir_p(t->dir));
    char mpath[1100], cpath[1100], rpath[1100], spath[1100];
    path_in(t, "metrics.tsv", mpath, sizeof mpath);
    path_in(t, "last.ckpt", cpath, sizeof cpath);
    path_in(t, "recipe.ini", rpath, sizeof rpath);
    path_in(t, "speed.tsv", spath, sizeof spath);
    if (!o->resume_dir) {
        if (!o->overwrite && (access(cpath, F_OK) == 0 || access(mpath, F_OK) == 0))
            return gf_error_set(GF_E_INVALID,
                                "run directory %s already holds a run: continue it with `gflow train --resume %s`, "
                                "or pick another name (--set run.name=...), or pass --overwrite",
                                t->dir, t->dir);
        char bpath[1100];
        path_in(t, "best.ckpt", bpath, sizeof bpath);
        remove(cpath);
        remove(bpath);
        FILE *f = fopen(rpath, "w");
        if (!f || fputs(t->recipe_text, f) < 0 || fclose(f) != 0)
            return gf_error_set(GF_E_IO, "%s: cannot write: %s", rpath, strerror(errno));
        t->metrics = fopen(mpath, "w");
        t->speed = fopen(spath, "w");
        if (!t->metrics || !t->speed) return gf_error_set(GF_E_IO, "%s: cannot create: %s", mpath, strerror(errno));
        if (fprintf(t->metrics, "step\tepoch\tsplit\tloss\tppl\tppl_word\tacc\tlr\tgnorm\n") < 0 ||
            fflush(t->metrics) != 0 || fprintf(t->speed, "step\tms_per_step\ttokens_per_s\tcomm_ms\n") < 0 || fflush(t->speed) != 0)
            return gf_error_set(GF_E_IO, "%s: write failed: %s", mpath, strerror(errno));
        return GF_OK;
    }
    /* resume: metrics.tsv is cut back to what the checkpoint had seen */
    if (truncate(mpath, (off_t)t->st.metrics_bytes) != 0)
        return gf_error_set(GF_E_IO, "%s: cannot truncate to %lld bytes for resume: %s", mpath,
                            (long long)t->st.metrics_bytes, strerror(errno));
    t->metrics = fopen(mpath, "a");
    t->speed = fopen(spath, "a");
    if (!t->metrics || !t->speed) return gf_error_set(GF_E_IO, "%s: cannot open: %s", mpath, strerror(errno));
    return GF_OK;
}

/* Name the first parameter whose gradient is not finite. */
static const char *first_nonfinite_grad(const gf_params *p) {
    for (int64_t i = 0; i < p->n_items; i++) {
        const gf_param *q = p->items[i];
        int64_t n = gf_tensor_numel(&q->t);
        for (int64_t j = 0; j < n; j++)
            if (!isfinite(q->t.grad[j])) return q->name;
    }
    return NULL;
}

static gf_status evaluate(trainer *t, int full, gf_eval_result *res) {
    GF_TRY(gf_session_eval(&t->s, GF_SPLIT_VALID, full ? 0 : t->s.r.train.eval_batches, res));
    GF_TRY(metrics_line(t, "valid", res->loss, res->ppl, res->ppl_word, res->acc, NAN, NAN));
    if (t->log && t->s.is_nli)
        fprintf(stderr, "eval  step %lld | epoch %lld | dev loss %.4f | accuracy %.4f%s\n", (long long)t->st.step,
                (long long)t->st.epoch + 1, res->loss, res->acc, full ? "" : " (partial)");
    else if (t->log)
        fprintf(stderr, "eval  step %lld | epoch %lld | valid loss %.4f | ppl %.2f%s\n", (long long)t->st.step,
                (long long)t->st.epoch + 1, res->loss, res->ppl, full ? "" : " (partial)");
    return GF_OK;
}

/* full evaluations decide best.ckpt and early stopping */
static gf_status note_full_eval(trainer *t, const gf_eval_result *res, int *stop_early) {
    t->last_full = *res;
    t->last_full_step = t->st.step;
    /* language models select on validation loss (perplexity), classifiers on dev accuracy */
    double score = t->s.is_nli ? -res->acc : res->loss;
    if (score < t->st.best_val) {
        t->st.best_val = score;
        t->st.best_step = t->st.step;
        t->st.best_epoch = t->st.epoch;
        t->st.evals_since_best = 0;
        GF_TRY(save_ckpt(t, "best.ckpt"));
    } else {
        t->st.evals_since_best++;
    }
    int64_t pat = t->s.r.train.early_stop_patience;
    if (pat > 0 && t->st.evals_since_best >= pat) *stop_early = 1;
    return GF_OK;
}

/* an evaluation inside the epoch: every eval_every steps, or at the evals_per_epoch - 1 evenly
 * spaced points floor(k * spe / n), k = 1 .. n-1 (the epoch's end is always evaluated) */
static int mid_epoch_eval_due(const trainer *t) {
    const gf_recipe *r = &t->s.r;
    if (r->train.eval_every > 0) return t->st.step % r->train.eval_every == 0;
    int64_t n = r->train.evals_per_epoch, pos = t->st.step % t->spe;
    for (int64_t k = 1; k < n; k++)
        if (pos == k * t->spe / n) return 1;
    return 0;
}

static void fmt_eta(char *buf, size_t cap, double s) {
    if (!isfinite(s) || s < 0) { snprintf(buf, cap, "?"); return; }
    long h = (long)(s / 3600), m = (long)(fmod(s, 3600) / 60), sec = (long)fmod(s, 60);
    if (h) snprintf(buf, cap, "%ldh%02ldm", h, m);
    else snprintf(buf, cap, "%ldm%02lds", m, sec);
}

/* The unigram baseline: train-split token frequencies (add-one smoothed) scored on a split,
 * per token. A language model worth its name must beat it by a wide margin. */
static double unigram_ppl(const gf_session *s, gf_split split) {
    int64_t V = gf_tokenizer_vocab_size(s->tok);
    const gf_ids *tr = &s->ids[GF_SPLIT_TRAIN], *ev = &s->ids[split];
    double *cnt = calloc((size_t)V, sizeof(double));
    if (!cnt || ev->n < 2) { free(cnt); return NAN; }
    for (int64_t i = 0; i < tr->n; i++) cnt[tr->data[i]] += 1.0;
    double tot = (double)tr->n + (double)V, nll = 0.0;
    for (int64_t i = 1; i < ev->n; i++) nll -= log((cnt[ev->data[i]] + 1.0) / tot);
    free(cnt);
    return exp(nll / (double)(ev->n - 1));
}

static gf_status write_summary(trainer *t, const gf_eval_result *val, const gf_eval_result *test) {
    char path[1100];
    path_in(t, "summary.tsv", path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f) return gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    const gf_recipe *r = &t->s.r;
    fprintf(f, "key\tvalue\n");
    fprintf(f, "build\t%s\n", gf_build_id());
    fprintf(f, "run\t%s\nfamily\t%s\nblock\t%s\nparams\t%lld\n", r->run.name, gf_family_name(r->model.family),
            gf_block_name(r->model.block), (long long)t->s.params->n);
    fprintf(f, "tokenizer\t%s\nvocab\t%lld\nsteps\t%lld\nepochs\t%lld\n", gf_tokenizer_key(t->s.tok),
            (long long)gf_tokenizer_vocab_size(t->s.tok), (long long)t->st.step, (long long)t->st.epoch);
    fprintf(f, "best_step\t%lld\nbest_epoch\t%lld\n", (long long)t->st.best_step, (long long)t->st.best_epoch + 1);
    if (t->s.is_nli) {
        static const char *lab[3] = {"entailment", "neutral", "contradiction"};
        fprintf(f, "train_pairs\t%lld\n", (long long)t->s.snli[GF_SPLIT_TRAIN].n);
        fprintf(f, "best_val_loss\t%.6f\nbest_val_acc\t%.5f\ntest_loss\t%.6f\ntest_acc\t%.5f\n", val->loss, val->acc,
                test->loss, test->acc);
        for (int g = 0; g < 3; g++) {
            int64_t n = test->confusion[g][0] + test->confusion[g][1] + test->confusion[g][2];
            fprintf(f, "test_acc_%s\t%.5f\n", lab[g], n ? (double)test->confusion[g][g] / (double)n : NAN);
            fprintf(f, "test_confusion_%s\t%lld,%lld,%lld\n", lab[g], (long long)test->confusion[g][0],
                    (long long)test->confusion[g][1], (long long)test->confusion[g][2]);
        }
    } else {
        fprintf(f, "best_val_loss\t%.6f\nbest_val_ppl\t%.4f\nval_ppl_word\t%.4f\n", val->loss, val->ppl, val->ppl_word);
        fprintf(f, "test_loss\t%.6f\ntest_ppl\t%.4f\ntest_ppl_word\t%.4f\n", test->loss, test->ppl, test->ppl_word);
        fprintf(f, "unigram_val_ppl\t%.4f\nunigram_test_ppl\t%.4f\n", unigram_ppl(&t->s, GF_SPLIT_VALID),
                unigram_ppl(&t->s, GF_SPLIT_TEST));
    }
    fprintf(f, "tokens_per_s\t%.1f\ntrain_seconds\t%.1f\nthreads\t%d\n",
            t->st.train_seconds > 0 ? (double)t->st.tokens_seen / t->st.train_seconds : 0.0, t->st.train_seconds,
            gf_threads_get());
    if (fclose(f) != 0) return gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    return GF_OK;
}

static gf_status run(trainer *t, const gf_train_opts *o, int *interrupted) {
    const gf_recipe *r = &t->s.r;
    int64_t nw = t->n_items;
    if (t->B % t->world != 0)
        return gf_error_set(GF_E_INVALID, "[train] batch_size = %lld does not divide among %d ranks: the global batch "
                            "stays the recipe's and each rank takes batch_size / N rows (pick N dividing it)",
                            (long long)t->B, t->world);
    t->spe = (nw + t->B - 1) / t->B;
    t->total = r->train.epochs * t->spe;
    if (r->train.max_steps > 0 && r->train.max_steps < t->total) t->total = r->train.max_steps;
    gf_recipe_optim_cfg(r, &t->adamw, &t->sched);

    if (o->resume_dir) {
        char cpath[1100];
        path_in(t, "last.ckpt", cpath, sizeof cpath);
        gf_ckpt_meta m;
        gf_ckpt_meta_init(&m);
        gf_status st = gf_ckpt_load(cpath, t->s.params, &m);
        if (!st && (m.optim.size != sizeof t->st || m.loader.size != sizeof(gf_loader_state) ||
                    m.rng.size != sizeof t->s.rng))
            st = gf_error_set(GF_E_CORRUPT, "%s: trainer state blobs have unexpected sizes (written by another "
                              "gflow version?)", cpath);
        if (!st) {
            memcpy(&t->st, m.optim.data, sizeof t->st);
            memcpy(&t->s.rng, m.rng.data, sizeof t->s.rng);
            st = gf_session_set_loader_state(&t->s, (const gf_loader_state *)m.loader.data);
            if (st) gf_error_wrap(st, "%s: loader state: ", cpath);
        }
        gf_ckpt_meta_free(&m);
        GF_TRY(st);
        if (t->log)
            fprintf(stderr, "resume: %s at step %lld (epoch %lld)\n", cpath, (long long)t->st.step,
                    (long long)t->st.epoch + 1);
    } else {
        gf_adamw_reset(t->s.params, &t->st.adamw);
        t->st.best_val = INFINITY;
        t->st.best_step = t->st.best_epoch = -1;
    }
    /* only rank 0 touches the run directory; every rank learns whether it could */
    GF_TRY(gf_dist_agree(t->rank == 0 ? open_run_dir(t, o) : GF_OK));
    if (t->st.finished) {
        if (t->log) fprintf(stderr, "run %s already finished (%lld steps)\n", t->dir, (long long)t->st.step);
        return GF_OK;
    }
    if (t->log)
        fprintf(stderr, "train: %lld %s, %lld steps/epoch, %lld steps, batch %lld, %d threads%s\n", (long long)nw,
                t->s.is_nli ? "sentence pairs" : "windows", (long long)t->spe, (long long)t->total, (long long)t->B,
                gf_threads_get(), t->world > 1 ? " per rank" : "");
    if (t->log && t->world > 1)
        fprintf(stderr, "data parallel: %d ranks (%d on this host), %lld rows per rank, allreduce of %lld floats "
                "(%.1f MB) per step\n", t->world, gf_dist_local_size(), (long long)(t->B / t->world),
                (long long)t->s.params->n, 4e-6 * (double)t->s.params->n);

    double t_start = gf_time_now(), t_steps = 0.0;
    int64_t steps_here = 0;
    int stop_early = 0, stop_all = 0;
    t->s.ctx.training = 1;
    while (t->st.step < t->total && !stop_early) {
        /* ranks see a signal at different moments: with N > 1 they stop on the flag they agreed on */
        if (t->world == 1 ? (o->stop_flag && *o->stop_flag) : stop_all) { *interrupted = 1; break; }
        if (o->stop_after > 0 && t->st.step >= o->stop_after) { *interrupted = 1; break; }
        int64_t rows = 0;
        GF_TRY(gf_session_next(&t->s, &rows));
        if (rows == 0) GF_TRY(gf_session_next(&t->s, &rows)); /* epoch rolled over */
        double t0 = gf_time_now();
        double lr = gf_schedule_lr(&t->sched, t->st.step, t->spe, t->spe * r->train.epochs);
        gf_params_zero_grad(t->s.params);
        /* this rank's rows of the global batch (all of it for a single process) */
        int64_t lo = t->rank * rows / t->world, n = (t->rank + 1) * rows / t->world - lo;
        float lv = 0.0f;
        if (t->rank > 0) /* distinct dropout masks per rank, reproducible from (seed, step, rank) */
            gf_rng_seed(&t->s.rng, (uint64_t)r->run.seed ^ 0x5DEECE66Dull ^
                                       ((uint64_t)(t->st.step + 1) * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)t->rank << 48));
        if (n > 0) {
            gf_tensor *loss = gf_session_forward_rows(&t->s, lo, n);
            lv = loss->data[0];
            gf_tape_backward(&t->s.ctx, loss);
            gf_ctx_reset(&t->s.ctx);
        }
        double comm = 0.0;
        if (t->world > 1) {
            /* the global loss is the row-weighted mean of the ranks' means: pre-scale, then sum */
            double c0 = gf_dist_comm_seconds();
            float w = (float)n / (float)rows;
            GF_TRY(gf_dist_sum_scaled_f32(t->s.params->grad, t->s.params->n, w));
            double red[2] = {(double)lv * (double)w, o->stop_flag && *o->stop_flag ? 1.0 : 0.0};
            GF_TRY(gf_dist_sum_f64(red, 2));
            lv = (float)red[0];
            stop_all = red[1] > 0;
            comm = gf_dist_comm_seconds() - c0;
        }
        double gn = gf_clip_grad_norm(t->s.params, r->optim.clip);
        if (!isfinite(lv) || !isfinite(gn)) {
            const char *bad = !isfinite(lv) ? "the loss" : first_nonfinite_grad(t->s.params);
            if (r->train.nonfinite == GF_NONFINITE_STOP)
                return gf_error_set(GF_E_NONFINITE,
                                    "step %lld: non-finite value in %s (loss %g, grad norm %g); stopped, the last "
                                    "checkpoint in %s is intact ([train] nonfinite = skip skips such steps)",
                                    (long long)t->st.step + 1, bad ? bad : "a gradient", (double)lv, gn, t->dir);
            if (t->log)
                fprintf(stderr, "warning: step %lld: non-finite value in %s; step skipped\n",
                        (long long)t->st.step + 1, bad ? bad : "a gradient");
            t->st.step++;
            GF_TRY(metrics_line(t, "train", lv, NAN, NAN, NAN, lr, gn));
            continue;
        }
        gf_adamw_step(t->s.params, &t->st.adamw, &t->adamw, lr);
        t->st.step++;
        t->st.tokens_seen += rows * t->L;
        double dt = gf_time_now() - t0;
        t_steps += dt;
        t->st.train_seconds += dt;
        steps_here++;
        GF_TRY(metrics_line(t, "train", lv, t->s.is_nli ? NAN : exp(lv), NAN, NAN, lr, gn));
        if (t->speed && (fprintf(t->speed, "%lld\t%.1f\t%.1f\t%.1f\n", (long long)t->st.step, dt * 1e3,
                                 (double)(rows * t->L) / dt, comm * 1e3) < 0 || fflush(t->speed) != 0))
            return gf_error_set(GF_E_IO, "%s/speed.tsv: write failed: %s", t->dir, strerror(errno));
        int epoch_end = t->st.step % t->spe == 0;
        if (t->log && (t->st.step % r->train.log_every == 0 || t->st.step == 1 || t->st.step == t->total)) {
            char eta[32];
            double per = t_steps / (double)steps_here;
            fmt_eta(eta, sizeof eta, per * (double)(t->total - t->st.step));
            fprintf(stderr,
                    "step %lld/%lld | epoch %lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f ms | %.0f tok/s | ETA %s\n",
                    (long long)t->st.step, (long long)t->total, (long long)t->st.epoch + 1, lv, lr, gn, per * 1e3,
                    (double)(t->B * t->L) / per, eta);
        }
        if (epoch_end) {
            gf_eval_result ev;
            GF_TRY(evaluate(t, 1, &ev));
            GF_TRY(note_full_eval(t, &ev, &stop_early));
            t->st.epoch++;
            GF_TRY(save_ckpt(t, "last.ckpt"));
        } else if (mid_epoch_eval_due(t)) {
            gf_eval_result ev;
            int full = r->train.eval_batches == 0;
            GF_TRY(evaluate(t, full, &ev));
            if (full) GF_TRY(note_full_eval(t, &ev, &stop_early));
            GF_TRY(save_ckpt(t, "last.ckpt"));
        }
        t->s.ctx.training = 1;
    }
    if (*interrupted) {
        GF_TRY(save_ckpt(t, "last.ckpt"));
        if (t->log)
            fprintf(stderr, "stopped at step %lld; continue with `gflow train --resume %s`\n", (long long)t->st.step,
                    t->dir);
        return GF_OK;
    }
    /* a run that ended mid-epoch (max_steps, early stop) gets its final full evaluation */
    gf_eval_result val, test;
    if (t->st.step % t->spe != 0) {
        GF_TRY(evaluate(t, 1, &val));
        int dummy = 0;
        GF_TRY(note_full_eval(t, &val, &dummy));
    }
    /* Report the best checkpoint (the paper's protocol: best validation, then test). Everything
     * from the last checkpoint to here is deterministic, so a run killed during these final
     * evaluations redoes them on resume and writes the same bytes; only the save below marks
     * the run finished. The best weights are evaluated in place, then the last ones restored. */
    char bpath[1100];
    path_in(t, "best.ckpt", bpath, sizeof bpath);
    gf_params *P = t->s.params;
    size_t bytes = (size_t)P->n * sizeof(float);
    float *keep = malloc(3 * bytes);
    if (!keep) return gf_error_set(GF_E_NOMEM, "copy of the last weights");
    memcpy(keep, P->data, bytes);
    memcpy(keep + P->n, P->m, bytes);
    memcpy(keep + 2 * P->n, P->v, bytes);
    gf_status st = GF_OK;
    if (t->st.best_step >= 0 && t->st.best_step == t->last_full_step) {
        val = t->last_full; /* the best is the current weights, just evaluated */
    } else {
        /* rank 0 reads best.ckpt; the others get its weights (no shared file system needed) */
        if (t->st.best_step >= 0) {
            st = gf_dist_agree(t->rank == 0 ? gf_ckpt_load(bpath, P, NULL) : GF_OK);
            if (!st) st = gf_dist_bcast_f32(P->data, P->n);
        }
        if (!st) st = gf_session_eval(&t->s, GF_SPLIT_VALID, 0, &val);
    }
    if (!st) st = gf_session_eval(&t->s, GF_SPLIT_TEST, 0, &test);
    memcpy(P->data, keep, bytes);
    memcpy(P->m, keep + P->n, bytes);
    memcpy(P->v, keep + 2 * P->n, bytes);
    free(keep);
    GF_TRY(st);
    int64_t step_now = t->st.step;
    t->st.step = t->st.best_step;
    GF_TRY(metrics_line(t, "test", test.loss, test.ppl, test.ppl_word, test.acc, NAN, NAN));
    t->st.step = step_now;
    if (t->rank == 0) GF_TRY(write_summary(t, &val, &test));
    t->st.finished = 1;
    GF_TRY(save_ckpt(t, "last.ckpt"));
    if (t->log && t->s.is_nli)
        fprintf(stderr, "done: best dev accuracy %.4f (step %lld, epoch %lld) | test accuracy %.4f | %.0f s\n", val.acc,
                (long long)t->st.best_step, (long long)t->st.best_epoch + 1, test.acc, gf_time_now() - t_start);
    else if (t->log)
        fprintf(stderr,
                "done: best valid ppl %.2f (step %lld, epoch %lld; unigram baseline %.2f), per word %.2f | test ppl "
                "%.2f, per word %.2f | %.0f tok/s | %.0f s\n",
                val.ppl, (long long)t->st.best_step, (long long)t->st.best_epoch + 1, unigram_ppl(&t->s, GF_SPLIT_VALID),
                val.ppl_word, test.ppl, test.ppl_word, t->st.train_seconds > 0 ? (double)t->st.tokens_seen / t->st.train_seconds : 0.0,
                gf_time_now() - t_start);
    return GF_OK;
}

gf_status gf_train_run(const gf_recipe *r, const gf_train_opts *o, int *interrupted) {
    trainer *t = calloc(1, sizeof *t);
    if (!t) return gf_error_set(GF_E_NOMEM, "trainer");
    *interrupted = 0;
    t->rank = gf_dist_rank();
    t->world = gf_dist_size();
    t->log = !o->quiet && t->rank == 0;
    t->last_full_step = -1;
    gf_status st = gf_recipe_resolved_text(r, &t->recipe_text);
    if (!st) {
        if (o->resume_dir) snprintf(t->dir, sizeof t->dir, "%s", o->resume_dir);
        else snprintf(t->dir, sizeof t->dir, "%s/%s", r->run.out_dir, r->run.name);
        st = prepare(t, r);
        /* ranks on one host share its cores unless the recipe fixes the thread count */
        if (!st && gf_dist_local_size() > 1 && r->run.threads <= 0) {
            int per = omp_get_num_procs() / gf_dist_local_size();
            gf_threads_set(per < 1 ? 1 : per);
        }
    }
    if (!st && t->log) {
        fprintf(stderr, "model: %s (%s), %lld parameters\n", gf_family_name(r->model.family),
                gf_block_name(r->model.block), (long long)t->s.params->n);
    }
    if (!st) st = run(t, o, interrupted);
    if (t->metrics) fclose(t->metrics);
    if (t->speed) fclose(t->speed);
    free(t->recipe_text);
    gf_session_close(&t->s);
    free(t);
    return st;
}
