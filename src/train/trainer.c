/* trainer.c — the training loop: batches, AdamW steps, evaluation, checkpoints, metrics.
 *
 * Determinism: given the seed and the thread count a run is bitwise reproducible, and a run
 * stopped at any checkpoint and resumed writes the same metrics.tsv bytes and weights as an
 * uninterrupted one. The checkpoint carries everything the loop's future depends on: weights,
 * AdamW m/v and step, the loader position (with its shuffle RNG), the trainer state below
 * (best validation, early-stop counter, metrics.tsv length to truncate back to). Dropout keys
 * are derived from (seed, step) at every step, so they need no state.
 *
 * The loop is a short one over gf_train_step() (step.c, which `gflow bench` times too), the
 * evaluation cadence (maybe_eval) and the end of the run (finish_run); what differs between a
 * language model and a classifier is the task's (gflow/task.h).
 *
 * Data parallel (gflow/dist.h): every rank runs this loop on the same global batches and
 * computes its slice (see step.c). Rank 0 alone writes metrics, speed and checkpoints. The
 * checkpoint holds no per-rank state, so a run resumes with any number of ranks.
 */
#include "gflow/session.h"
#include "gflow/checkpoint.h"
#include "gflow/dist.h"
#include "gflow/threads.h"
#include "gflow/version.h"
#include "gflow/fs.h"
#include "gflow/rundir.h"
#include "gflow/ops.h"
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
    double best_val;          /* best full-split validation score (the task's; lower is better; INFINITY: none) */
    int64_t best_step, best_epoch;
    int64_t evals_since_best;
    int64_t metrics_bytes;    /* metrics.tsv length when this state was saved */
    int64_t tokens_seen;
    double train_seconds;     /* wall time in training steps, across resumes */
    int32_t finished;
    int32_t skipped;          /* steps skipped for a non-finite value ([train] nonfinite = skip) */
} gf_train_state;

/* The files a run's results depend on, by role; their sha256 go into every checkpoint, and a
 * resume on changed data is refused (its validation rows would not continue the run's). */
enum { DATA_ROLES = 4 };
static const char *const data_role[DATA_ROLES] = {"train", "valid", "test", "tokenizer"};

typedef struct trainer {
    gf_session s;
    gf_train_state state;
    FILE *metrics, *speed;
    char dir[1024];
    int64_t B, L, steps_per_epoch, total;
    gf_adamw_cfg adamw;
    gf_schedule_cfg sched;
    char *recipe_text;
    int log;
    gf_eval_result last_full; /* the latest full validation of this process, and its step */
    int64_t last_full_step;
    int rank, world;          /* data parallel: this rank, number of ranks (1: single process) */
    int64_t n_items;          /* training windows or pairs */
    double t_start, t_steps;  /* wall clock: start of this process's loop, time in its steps */
    int64_t steps_here;       /* steps done by this process */
    int lock_fd;              /* rank 0: flock on <dir>/.lock, held for the whole run (-1: none) */
    char *ckpt_recipe;        /* resume: the recipe text stored in last.ckpt */
    int64_t ckpt_step;        /* step of last.ckpt on disk (-1: none yet) */
    double t_saved;           /* wall clock of the last save of last.ckpt (or the start): [train] save_every_min */
    char data_sha[DATA_ROLES][65];  /* rank 0: sha256 of the run's data files now ("": missing) */
    char ckpt_sha[DATA_ROLES][65];  /* resume: those recorded in last.ckpt ("": not recorded) */
    /* GPU: steps queued and not yet flushed (gf_train_flush), whose outcome the device holds */
    struct { double lr; int64_t rows; } pend[GF_STEP_RING];
    int n_pend;
    double t_pend;            /* wall clock when the first of them started */
} trainer;

/* Tokenizer, model and data. With N ranks, rank 0 goes first and builds the tokenizer and token
 * caches; the others then find them (no N-fold SentencePiece training, no racing writers). */
static gf_status prepare(trainer *t, const gf_recipe *r) {
    int first_failed = 0;
    gf_status status = GF_OK;
    if (t->world > 1 && t->rank > 0) { status = gf_dist_agree(GF_OK); first_failed = status != GF_OK; }
    if (!status) status = gf_session_open(&t->s, r, t->log);
    if (!status) {
        t->B = r->train.batch_size;
        t->L = gf_session_tokens_per_row(&t->s);
        status = gf_session_memory_check(&t->s, t->B);
        if (!status) status = gf_session_eval_memory_check(&t->s, 1);
        if (!status) status = gf_session_train_loader(&t->s, t->B, &t->n_items, t->log);
    }
    if (!status) status = gf_session_load_split(&t->s, GF_SPLIT_VALID, t->log);
    /* the test split too: a bad one is refused before the run, not after it */
    if (!status) status = gf_session_load_split(&t->s, GF_SPLIT_TEST, 0);
    if (t->world > 1 && t->rank == 0) { status = gf_dist_agree(status); first_failed = status != GF_OK; }
    if (t->world > 1 && !first_failed) status = gf_dist_agree(status);
    return status;
}

static void path_in(const trainer *t, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", t->dir, name);
}

/* continues a checkpoint (--resume of a run stopped before its first starts afresh) */
static int resuming(const gf_train_opts *o) { return o->resume_dir && !o->restart; }


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
    int w = fprintf(t->metrics, "%lld\t%lld\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", (long long)t->state.step,
                    (long long)t->state.epoch, split, a, b, c, d, e, f);
    if (w < 0 || fflush(t->metrics) != 0 || ferror(t->metrics))
        return gf_error_set(GF_E_IO, "%s/metrics.tsv: write failed: %s", t->dir, strerror(errno));
    return GF_OK;
}

static gf_status write_ckpt(trainer *t, const char *name) {
    fflush(t->metrics);
    t->state.metrics_bytes = (int64_t)ftell(t->metrics);
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    m.step = t->state.step;
    m.epoch = t->state.epoch;
    gf_loader_state ls;
    gf_session_loader_state(&t->s, &ls);
    gf_status status = gf_ckpt_meta_set_recipe(&m, t->recipe_text);
    if (!status) status = gf_ckpt_meta_set_blob(&m.rng, &t->s.rng, sizeof t->s.rng);
    if (!status) status = gf_ckpt_meta_set_blob(&m.loader, &ls, sizeof ls);
    if (!status) status = gf_ckpt_meta_set_blob(&m.optim, &t->state, sizeof t->state);
    if (!status) status = gf_ckpt_meta_set_kv(&m, "tokenizer", gf_tokenizer_key(t->s.tok));
    if (!status) status = gf_ckpt_meta_set_kv(&m, "build", gf_build_id());
    char vocab[32];
    snprintf(vocab, sizeof vocab, "%lld", (long long)gf_tokenizer_vocab_size(t->s.tok));
    if (!status) status = gf_ckpt_meta_set_kv(&m, "vocab", vocab);
    for (int i = 0; i < DATA_ROLES && !status; i++) {
        char key[64];
        snprintf(key, sizeof key, "data.%s.sha256", data_role[i]);
        if (t->data_sha[i][0]) status = gf_ckpt_meta_set_kv(&m, key, t->data_sha[i]);
    }
    char path[1100];
    path_in(t, name, path, sizeof path);
    if (!status) status = gf_ckpt_save(path, t->s.params, &m);
    gf_ckpt_meta_free(&m);
    return status;
}

/* Rank 0 writes; every rank keeps count of last.ckpt (a failed save on rank 0 ends the job). */
static gf_status save_ckpt(trainer *t, const char *name) {
    GF_TRY(t->rank == 0 ? write_ckpt(t, name) : GF_OK);
    if (!strcmp(name, "last.ckpt")) {
        t->ckpt_step = t->state.step;
        t->t_saved = gf_time_now();
    }
    return GF_OK;
}

/* What a run that stops on an error leaves to resume from, for its message. */
static void ckpt_note(const trainer *t, char *buf, size_t cap) {
    if (t->rank > 0) snprintf(buf, cap, "rank 0 names the checkpoint left");
    else if (t->ckpt_step >= 0)
        snprintf(buf, cap, "the last checkpoint, %s/last.ckpt (step %lld), is intact", t->dir, (long long)t->ckpt_step);
    else snprintf(buf, cap, "no checkpoint was written yet, so nothing in %s resumes (the run starts again from "
                  "step 0)", t->dir);
}

static void data_path(const trainer *t, int role, char *path, size_t cap) {
    if (role < DATA_ROLES - 1) gf_session_split_path(&t->s, (gf_split)role, path, cap);
    else gf_recipe_tokenizer_path(&t->s.r, path, cap);
}

/* sha256 of each data file ("" when it is missing: loading it reports that) */
static gf_status hash_data(trainer *t) {
    char path[DATA_ROLES][1024];
    for (int i = 0; i < DATA_ROLES; i++) {
        data_path(t, i, path[i], sizeof path[i]);
        t->data_sha[i][0] = 0;
        for (int j = 0; j < i; j++) /* the tokenizer's corpus is usually the train split: hash it once */
            if (!strcmp(path[i], path[j])) memcpy(t->data_sha[i], t->data_sha[j], sizeof t->data_sha[i]);
        if (!t->data_sha[i][0] && access(path[i], F_OK) == 0) GF_TRY(gf_sha256_file(path[i], NULL, t->data_sha[i]));
    }
    return GF_OK;
}

/* Resume: each data file must be the one last.ckpt recorded (a checkpoint of an older build
 * records none); --allow-data-change continues on changed data, and says so. */
static gf_status check_data(const trainer *t, const gf_train_opts *o, const char *cpath) {
    static const char *const what[DATA_ROLES] = {"train split", "validation split", "test split", "tokenizer corpus"};
    for (int i = 0; i < DATA_ROLES; i++) {
        if (!t->ckpt_sha[i][0] || !t->data_sha[i][0] || !strcmp(t->ckpt_sha[i], t->data_sha[i])) continue;
        char path[1024];
        data_path(t, i, path, sizeof path);
        if (!o->allow_data_change)
            return gf_error_set(GF_E_INVALID, "%s: the %s changed since %s was written (sha256 %s then, %s now): the "
                                "resumed run would not continue this one (its validation rows would differ); restore "
                                "the file, or pass --allow-data-change to continue on the new data", path, what[i],
                                cpath, t->ckpt_sha[i], t->data_sha[i]);
        if (t->log)
            fprintf(stderr, "warning: %s: the %s changed since %s was written (sha256 %s then, %s now); continuing on "
                    "it (--allow-data-change)\n", path, what[i], cpath, t->ckpt_sha[i], t->data_sha[i]);
    }
    return GF_OK;
}

/* Resume: last.ckpt must be this run's (its recipe is the run's recipe.ini, byte for byte, or
 * they differ only where the run computes: [run] device, threads) and metrics.tsv at least as
 * long as the checkpoint recorded (it is cut back, never extended). */
static gf_status check_resume(const trainer *t, const char *mpath, const char *cpath, const char *rpath) {
    GF_TRY(gf_run_ckpt_belongs(cpath, t->ckpt_recipe, rpath,
                               "put the run's own checkpoint back, or start afresh with --overwrite"));
    struct stat st;
    if (stat(mpath, &st) != 0) return gf_error_set(GF_E_IO, "%s: %s (needed to resume)", mpath, strerror(errno));
    if ((int64_t)st.st_size < t->state.metrics_bytes)
        return gf_error_set(GF_E_CORRUPT, "%s has %lld bytes, fewer than the %lld that %s recorded: rows were lost "
                            "after the checkpoint; restore the file, or start afresh with --overwrite", mpath,
                            (long long)st.st_size, (long long)t->state.metrics_bytes, cpath);
    return GF_OK;
}

/* A fresh run may not replace another: a run with a checkpoint is resumed, one stopped before
 * its first starts again through --resume (from its recipe.ini). */
static gf_status check_fresh(const trainer *t, const gf_train_opts *o, const char *cpath, const char *mpath) {
    if (o->restart && access(cpath, F_OK) == 0)
        return gf_error_set(GF_E_INVALID, "%s appeared while starting the run again: resume it with `gflow train "
                            "--resume %s`", cpath, t->dir);
    if (o->overwrite || o->restart || (access(cpath, F_OK) != 0 && access(mpath, F_OK) != 0)) return GF_OK;
    if (access(cpath, F_OK) != 0)
        return gf_error_set(GF_E_INVALID, "run directory %s holds a run stopped before its first checkpoint (no "
                            "last.ckpt): start it again with `gflow train --resume %s` (from step 0, with its "
                            "recipe.ini), or pass --overwrite to start this recipe there", t->dir, t->dir);
    return gf_error_set(GF_E_INVALID,
                        "run directory %s already holds a run: continue it with `gflow train --resume %s`, "
                        "or pick another name (--set run.name=...), or pass --overwrite", t->dir, t->dir);
}

static gf_status open_run_dir(trainer *t, const gf_train_opts *o) {
    GF_TRY(gf_mkdir_p(t->dir));
    GF_TRY(hash_data(t));
    char mpath[1100], cpath[1100], rpath[1100], spath[1100];
    path_in(t, "metrics.tsv", mpath, sizeof mpath);
    path_in(t, "last.ckpt", cpath, sizeof cpath);
    path_in(t, "recipe.ini", rpath, sizeof rpath);
    path_in(t, "speed.tsv", spath, sizeof spath);
    if (!resuming(o)) {
        GF_TRY(check_fresh(t, o, cpath, mpath));
        GF_TRY(gf_run_dir_clear(t->dir)); /* an --overwrite leaves nothing of the run before */
        gf_atomic_file af;
        FILE *f;
        GF_TRY(gf_atomic_fopen(&af, rpath, &f));
        GF_TRY(gf_atomic_finish(&af, fputs(t->recipe_text, f) < 0 ? gf_error_set(GF_E_IO, "%s: cannot write: %s",
                                                                              rpath, strerror(errno)) : GF_OK));
        GF_TRY(gf_fopen_nofollow(mpath, 'w', &t->metrics));
        GF_TRY(gf_fopen_nofollow(spath, 'w', &t->speed));
        if (fprintf(t->metrics, "step\tepoch\tsplit\tloss\tppl\tppl_word\tacc\tlr\tgnorm\n") < 0 ||
            fflush(t->metrics) != 0 || fprintf(t->speed, "step\tms_per_step\ttokens_per_s\tcomm_ms\n") < 0 || fflush(t->speed) != 0)
            return gf_error_set(GF_E_IO, "%s: write failed: %s", mpath, strerror(errno));
        return GF_OK;
    }
    /* resume: metrics.tsv is cut back to what the checkpoint had seen */
    GF_TRY(check_resume(t, mpath, cpath, rpath));
    GF_TRY(check_data(t, o, cpath));
    GF_TRY(gf_fopen_nofollow(mpath, 'a', &t->metrics));
    if (ftruncate(fileno(t->metrics), (off_t)t->state.metrics_bytes) != 0)
        return gf_error_set(GF_E_IO, "%s: cannot truncate to %lld bytes for resume: %s", mpath,
                            (long long)t->state.metrics_bytes, strerror(errno));
    return gf_fopen_nofollow(spath, 'a', &t->speed);
}

static gf_status evaluate(trainer *t, int full, gf_eval_result *res) {
    GF_TRY(gf_session_eval(&t->s, GF_SPLIT_VALID, full ? 0 : t->s.r.train.eval_batches, res));
    GF_TRY(metrics_line(t, "valid", res->loss, res->ppl, res->ppl_word, res->acc, NAN, NAN));
    if (t->log) t->s.task->log_eval(res, t->state.step, t->state.epoch, full);
    return GF_OK;
}

/* full evaluations decide best.ckpt and early stopping */
static gf_status note_full_eval(trainer *t, const gf_eval_result *res, int *stop_early) {
    t->last_full = *res;
    t->last_full_step = t->state.step;
    double score = t->s.task->score(res);
    if (score < t->state.best_val) {
        t->state.best_val = score;
        t->state.best_step = t->state.step;
        t->state.best_epoch = t->state.epoch;
        t->state.evals_since_best = 0;
        GF_TRY(save_ckpt(t, "best.ckpt"));
    } else {
        t->state.evals_since_best++;
    }
    int64_t patience = t->s.r.train.early_stop_patience;
    if (patience > 0 && t->state.evals_since_best >= patience) *stop_early = 1;
    return GF_OK;
}

/* an evaluation inside the epoch after step `step`: every eval_every steps, or at the
 * evals_per_epoch - 1 evenly spaced points floor(k * steps_per_epoch / n), k = 1 .. n-1 (the
 * epoch's end is always evaluated) */
static int mid_epoch_eval_due(const trainer *t, int64_t step) {
    const gf_recipe *r = &t->s.r;
    if (r->train.eval_every > 0) return step % r->train.eval_every == 0;
    int64_t n = r->train.evals_per_epoch, pos = step % t->steps_per_epoch;
    for (int64_t k = 1; k < n; k++)
        if (pos == k * t->steps_per_epoch / n) return 1;
    return 0;
}

/* maybe_eval evaluates after step `step` */
static int eval_due(const trainer *t, int64_t step) {
    return step % t->steps_per_epoch == 0 || step == t->total || mid_epoch_eval_due(t, step);
}

/* After a step: the epoch's end and the run's last step evaluate the whole split (once: the
 * final evaluation is this one), a due mid-epoch point evaluates (part of) it; each saves
 * last.ckpt. */
static gf_status maybe_eval(trainer *t, int *stop_early) {
    gf_eval_result ev;
    if (t->state.step % t->steps_per_epoch == 0) {
        GF_TRY(evaluate(t, 1, &ev));
        GF_TRY(note_full_eval(t, &ev, stop_early));
        t->state.epoch++;
        return save_ckpt(t, "last.ckpt");
    }
    int last = t->state.step == t->total;
    if (!last && !mid_epoch_eval_due(t, t->state.step)) return GF_OK;
    int full = last || t->s.r.train.eval_batches == 0;
    GF_TRY(evaluate(t, full, &ev));
    if (full) GF_TRY(note_full_eval(t, &ev, stop_early));
    return save_ckpt(t, "last.ckpt");
}

/* [train] save_every (steps) and save_every_min (minutes since the last save): last.ckpt
 * between evaluations too, so a kill loses little. The clock decides only when a save happens;
 * a save changes nothing the run computes, so the run is the same whenever it saves. */
static int save_due(const trainer *t, int64_t step) {
    const gf_recipe *r = &t->s.r;
    if (r->train.save_every > 0 && step % r->train.save_every == 0) return 1;
    /* rank 0 alone keeps the clock (the other ranks write nothing) */
    return t->rank == 0 && r->train.save_every_min > 0 && gf_time_now() - t->t_saved >= 60.0 * r->train.save_every_min;
}

static gf_status maybe_save(trainer *t) {
    if (t->ckpt_step == t->state.step) return GF_OK;
    return save_due(t, t->state.step) ? save_ckpt(t, "last.ckpt") : GF_OK;
}

static double tokens_per_s(const trainer *t) {
    return t->state.train_seconds > 0 ? (double)t->state.tokens_seen / t->state.train_seconds : 0.0;
}

static gf_status write_summary(trainer *t, const gf_eval_result *val, const gf_eval_result *test) {
    char path[1100];
    path_in(t, "summary.tsv", path, sizeof path);
    gf_atomic_file af;
    FILE *f;
    GF_TRY(gf_atomic_fopen(&af, path, &f));
    const gf_recipe *r = &t->s.r;
    fprintf(f, "key\tvalue\n");
    fprintf(f, "build\t%s\n", gf_build_id());
    fprintf(f, "run\t%s\nfamily\t%s\nblock\t%s\nparams\t%lld\n", r->run.name, gf_family_name(r->model.family),
            gf_block_name(r->model.block), (long long)t->s.params->n);
    if (r->run.precision == GF_PREC_BF16) fprintf(f, "precision\tbf16 (%s)\n", gf_gemm_bf16_path_on(r->run.device));
    else fprintf(f, "precision\tfp32\n");
    fprintf(f, "tokenizer\t%s\nvocab\t%lld\nsteps\t%lld\nepochs\t%lld\n", gf_tokenizer_key(t->s.tok),
            (long long)gf_tokenizer_vocab_size(t->s.tok), (long long)t->state.step, (long long)t->state.epoch);
    fprintf(f, "skipped_steps\t%d\n", (int)t->state.skipped);
    fprintf(f, "best_step\t%lld\nbest_epoch\t%lld\n", (long long)t->state.best_step,
            (long long)t->state.best_epoch + 1);
    t->s.task->summary(&t->s, f, val, test);
    fprintf(f, "tokens_per_s\t%.1f\ntrain_seconds\t%.1f\nthreads\t%d\n", tokens_per_s(t), t->state.train_seconds,
            gf_threads_get());
    return gf_atomic_finish(&af, GF_OK);
}

/* Rank 0 locks the run directory before it reads or writes anything in it, so two processes
 * (a --resume or an --overwrite while the run is still training) cannot interleave. */
static gf_status lock_run_dir(trainer *t, const gf_train_opts *o) {
    if (!resuming(o)) GF_TRY(gf_mkdir_p(t->dir));
    return gf_dir_lock(t->dir, &t->lock_fd);
}

/* Steps per epoch and in all, the optimizer; the train state from last.ckpt or afresh. */
static gf_status plan_run(trainer *t, const gf_train_opts *o) {
    const gf_recipe *r = &t->s.r;
    t->steps_per_epoch = (t->n_items + t->B - 1) / t->B;
    t->total = r->train.epochs * t->steps_per_epoch;
    if (r->train.max_steps > 0 && r->train.max_steps < t->total) t->total = r->train.max_steps;
    gf_recipe_optim_cfg(r, &t->adamw, &t->sched);
    if (!resuming(o)) {
        gf_adamw_reset(t->s.params, &t->state.adamw);
        t->state.best_val = INFINITY;
        t->state.best_step = t->state.best_epoch = -1;
        if (o->restart && t->log)
            fprintf(stderr, "resume: %s has no last.ckpt (stopped before its first checkpoint): starting it again "
                    "from step 0 with its recipe.ini\n", t->dir);
        return GF_OK;
    }
    char cpath[1100];
    path_in(t, "last.ckpt", cpath, sizeof cpath);
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    gf_status status = gf_ckpt_peek(cpath, &m);
    /* the tokenizer follows its corpus, whose change --allow-data-change accepts (check_data) */
    if (!status && !o->allow_data_change) status = gf_session_check_tokenizer(&t->s, cpath, &m);
    gf_ckpt_meta_free(&m);
    gf_ckpt_meta_init(&m);
    if (!status) status = gf_ckpt_load(cpath, t->s.params, &m);
    if (!status && (m.optim.size != sizeof t->state || m.loader.size != sizeof(gf_loader_state) ||
                    m.rng.size != sizeof t->s.rng))
        status = gf_error_set(GF_E_CORRUPT, "%s: trainer state blobs have unexpected sizes (written by another "
                              "gflow version?)", cpath);
    if (!status) {
        memcpy(&t->state, m.optim.data, sizeof t->state);
        t->ckpt_step = t->state.step;
        t->ckpt_recipe = m.recipe ? strdup(m.recipe) : NULL;
        /* later saves keep the run's recipe text: a newer build resolves keys the run's
         * recipe.ini lacks, and the next resume compares the two */
        char *same = t->ckpt_recipe ? strdup(t->ckpt_recipe) : NULL;
        if (same) { free(t->recipe_text); t->recipe_text = same; }
        for (int i = 0; i < DATA_ROLES; i++) {
            char key[64];
            snprintf(key, sizeof key, "data.%s.sha256", data_role[i]);
            const char *v = gf_ckpt_meta_get_kv(&m, key);
            snprintf(t->ckpt_sha[i], sizeof t->ckpt_sha[i], "%s", v && strlen(v) == 64 ? v : "");
        }
        memcpy(&t->s.rng, m.rng.data, sizeof t->s.rng);
        status = gf_session_set_loader_state(&t->s, (const gf_loader_state *)m.loader.data);
        if (status) gf_error_wrap(status, "%s: loader state: ", cpath);
    }
    gf_ckpt_meta_free(&m);
    GF_TRY(status);
    if (t->log)
        fprintf(stderr, "resume: %s at step %lld (epoch %lld)\n", cpath, (long long)t->state.step,
                (long long)t->state.epoch + 1);
    return GF_OK;
}

static void log_start(const trainer *t) {
    fprintf(stderr, "train: %lld %s, %lld steps/epoch, %lld steps, batch %lld, %d threads%s\n", (long long)t->n_items,
            t->s.task->rows, (long long)t->steps_per_epoch, (long long)t->total, (long long)t->B, gf_threads_get(),
            t->world > 1 ? " per rank" : "");
    if (t->world > 1)
        fprintf(stderr, "data parallel: %d ranks (%d on this host), %lld rows per rank, allreduce of %lld floats "
                "(%.1f MB) per step\n", t->world, gf_dist_local_size(), (long long)(t->B / t->world),
                (long long)t->s.params->n, 4e-6 * (double)t->s.params->n);
}

/* step `step` has a progress line */
static int log_due(const trainer *t, int64_t step) {
    return step % t->s.r.train.log_every == 0 || step == 1 || step == t->total;
}

static void log_step(const trainer *t, float loss, double lr, double grad_norm) {
    if (!log_due(t, t->state.step)) return;
    char eta[32];
    double per = t->t_steps / (double)t->steps_here;
    gf_fmt_eta(eta, sizeof eta, per * (double)(t->total - t->state.step));
    fprintf(stderr, "step %lld/%lld | epoch %lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f ms | %.0f tok/s | ETA %s\n",
            (long long)t->state.step, (long long)t->total, (long long)t->state.epoch + 1, loss, lr, grad_norm,
            per * 1e3, (double)(t->B * t->L) / per, eta);
}

/* A step with a non-finite loss or gradient: stop, or ([train] nonfinite = skip) count it, and
 * stop once more than [train] max_skip_frac of the run's steps were skipped. */
static gf_status nonfinite_step(trainer *t, double lr, const gf_step_out *out) {
    const gf_recipe *r = &t->s.r;
    char note[1400];
    ckpt_note(t, note, sizeof note);
    if (r->train.nonfinite == GF_NONFINITE_STOP)
        return gf_error_set(GF_E_NONFINITE, "step %lld: non-finite value in %s (loss %g, grad norm %g); stopped, %s "
                            "([train] nonfinite = skip skips such steps)", (long long)t->state.step + 1, out->nonfinite,
                            (double)out->loss, out->grad_norm, note);
    if (t->log)
        fprintf(stderr, "warning: step %lld: non-finite value in %s; step skipped\n", (long long)t->state.step + 1,
                out->nonfinite);
    t->state.step++;
    t->state.skipped++;
    GF_TRY(metrics_line(t, "train", out->loss, NAN, NAN, NAN, lr, out->grad_norm));
    int64_t allowed = (int64_t)floor(r->train.max_skip_frac * (double)t->total);
    if (t->state.skipped > allowed)
        return gf_error_set(GF_E_NONFINITE, "step %lld: %d steps skipped for non-finite values (the last in %s), more "
                            "than [train] max_skip_frac = %g of the run's %lld steps allows (%lld); stopped, %s",
                            (long long)t->state.step, (int)t->state.skipped, out->nonfinite, r->train.max_skip_frac,
                            (long long)t->total, (long long)allowed, note);
    return GF_OK;
}

/* the 0-based index of the next step to run (steps queued on the GPU count: they have run there) */
static int64_t next_step(const trainer *t) { return t->state.step + t->n_pend; }

/* A step's outcome, once known: its metrics row and progress line, or the non-finite policy;
 * dt: its wall time */
static gf_status step_done(trainer *t, double lr, int64_t rows, const gf_step_out *out, double dt) {
    if (out->nonfinite) return nonfinite_step(t, lr, out);
    t->state.step++;
    t->state.tokens_seen += rows * t->L;
    t->t_steps += dt;
    t->state.train_seconds += dt;
    t->steps_here++;
    GF_TRY(metrics_line(t, "train", out->loss, t->s.task->train_ppl(out->loss), NAN, NAN, lr, out->grad_norm));
    if (t->log) log_step(t, out->loss, lr, out->grad_norm);
    return GF_OK;
}

/* One speed.tsv row for the n applied steps up to this one (n > 1: a flush's averages) */
static gf_status speed_line(trainer *t, double dt, int64_t tokens, double comm, int n) {
    if (t->speed && (fprintf(t->speed, "%lld\t%.1f\t%.1f\t%.1f\n", (long long)t->state.step, dt * 1e3 / n,
                             (double)tokens / dt, comm * 1e3 / n) < 0 || fflush(t->speed) != 0))
        return gf_error_set(GF_E_IO, "%s/speed.tsv: write failed: %s", t->dir, strerror(errno));
    return GF_OK;
}

/* The steps queued on the GPU: one wait for their outcomes, then each as a CPU step's, in order
 * (the same metrics rows; a non-finite one stops or is skipped here, as it would be there) */
static gf_status flush_steps(trainer *t) {
    if (t->n_pend == 0) return GF_OK;
    const int k = t->n_pend;
    t->n_pend = 0;
    gf_step_out outs[GF_STEP_RING];
    int n = 0;
    GF_TRY(gf_train_flush(&t->s, &t->state.adamw, outs, &n));
    GF_ASSERT(n == k, "flush_steps: %d records for %d queued steps", n, k);
    const double dt = (gf_time_now() - t->t_pend) / k; /* the device's time, shared evenly */
    int applied = 0;
    int64_t tokens = 0;
    for (int i = 0; i < k; i++) {
        GF_TRY(step_done(t, t->pend[i].lr, t->pend[i].rows, &outs[i], dt));
        if (!outs[i].nonfinite) applied++, tokens += t->pend[i].rows * t->L;
    }
    return applied ? speed_line(t, dt * applied, tokens, 0.0, applied) : GF_OK;
}

/* One training step on the next batch. On the CPU its outcome is known at once (metrics and
 * speed lines); on the GPU it is queued, and the queue is flushed when it is full and before
 * anything reads an outcome: the step's progress line, an evaluation or a checkpoint after it,
 * the end of the run, a stop. */
static gf_status train_one(trainer *t, const gf_train_opts *o, int *stop_all) {
    const gf_recipe *r = &t->s.r;
    int64_t rows = 0;
    GF_TRY(gf_session_next(&t->s, &rows));
    if (rows == 0) GF_TRY(gf_session_next(&t->s, &rows)); /* epoch rolled over */
    double t0 = gf_time_now();
    const int64_t k = next_step(t);
    gf_step_in in = {.rows = rows, .clip = r->optim.clip, .stop_flag = o->stop_flag, .defer = 1,
                     .stop_nonfinite = r->train.nonfinite == GF_NONFINITE_STOP};
    in.lr = gf_schedule_lr(&t->sched, k, t->steps_per_epoch, t->steps_per_epoch * r->train.epochs);
    /* this rank's rows of the global batch (all of it for a single process) */
    in.lo = t->rank * rows / t->world;
    in.n = (t->rank + 1) * rows / t->world - in.lo;
    /* the step's dropout keys follow from (seed, step) on every rank and the masks from the global
     * row (dropout.c): any number of ranks, and a resume with another number, draws the same masks */
    gf_rng_seed(&t->s.rng, (uint64_t)r->run.seed ^ 0x5DEECE66Dull ^ ((uint64_t)(k + 1) * 0x9E3779B97F4A7C15ull));
    gf_step_out out;
    GF_TRY(gf_train_step(&t->s, &t->state.adamw, &t->adamw, &in, &out));
    *stop_all = out.stop_all;
    if (!out.queued) {
        const double dt = gf_time_now() - t0;
        GF_TRY(step_done(t, in.lr, rows, &out, dt));
        return out.nonfinite ? GF_OK : speed_line(t, dt, rows * t->L, out.s_comm, 1);
    }
    if (t->n_pend == 0) t->t_pend = t0;
    t->pend[t->n_pend].lr = in.lr;
    t->pend[t->n_pend].rows = rows;
    t->n_pend++;
    const int64_t done = k + 1;
    if (t->n_pend == GF_STEP_RING || log_due(t, done) || eval_due(t, done) || save_due(t, done) ||
        done >= t->total || (o->stop_flag && *o->stop_flag) || (o->stop_after > 0 && done >= o->stop_after))
        return flush_steps(t);
    return GF_OK;
}

/* The best checkpoint on the validation and test splits (the paper's protocol). The best weights
 * are evaluated in place, then the last ones restored. */
static gf_status eval_best(trainer *t, gf_eval_result *val, gf_eval_result *test) {
    char bpath[1100];
    path_in(t, "best.ckpt", bpath, sizeof bpath);
    gf_params *P = t->s.params;
    size_t bytes = (size_t)P->n * sizeof(float);
    float *keep = malloc(3 * bytes); /* (3, n): weights, AdamW m, v (on the host, wherever the block is) */
    if (!keep) return gf_error_set(GF_E_NOMEM, "copy of the last weights");
    gf_status status = gf_params_get(P, GF_PP_DATA, keep);
    if (!status) status = gf_params_get(P, GF_PP_M, keep + P->n);
    if (!status) status = gf_params_get(P, GF_PP_V, keep + 2 * P->n);
    if (status) {
        free(keep);
        return status;
    }
    if (t->state.best_step >= 0 && t->state.best_step == t->last_full_step) {
        *val = t->last_full; /* the best is the current weights, just evaluated */
    } else {
        /* rank 0 reads best.ckpt; the others get its weights (no shared file system needed) */
        if (t->state.best_step >= 0) {
            status = gf_dist_agree(t->rank == 0 ? gf_ckpt_load(bpath, P, NULL) : GF_OK);
            if (!status) status = gf_dist_bcast_f32(P->data, P->n);
        }
        if (!status) status = gf_session_eval(&t->s, GF_SPLIT_VALID, 0, val);
    }
    if (!status) status = gf_session_eval(&t->s, GF_SPLIT_TEST, 0, test);
    gf_status back = gf_params_set(P, GF_PP_DATA, keep);
    if (!back) back = gf_params_set(P, GF_PP_M, keep + P->n);
    if (!back) back = gf_params_set(P, GF_PP_V, keep + 2 * P->n);
    free(keep);
    return status ? status : back;
}

/* Everything from the last checkpoint to here is deterministic, so a run killed during these
 * final evaluations redoes them on resume and writes the same bytes; only the save below marks
 * the run finished. */
static gf_status finish_run(trainer *t) {
    gf_eval_result val, test;
    /* the last step was evaluated on the whole split (maybe_eval); the test row is the best
     * checkpoint's, and carries its step and epoch (the current weights' when none is best) */
    GF_TRY(eval_best(t, &val, &test));
    int64_t step_now = t->state.step, epoch_now = t->state.epoch;
    if (t->state.best_step >= 0) {
        t->state.step = t->state.best_step;
        t->state.epoch = t->state.best_epoch;
    }
    gf_status status = metrics_line(t, "test", test.loss, test.ppl, test.ppl_word, test.acc, NAN, NAN);
    t->state.step = step_now;
    t->state.epoch = epoch_now;
    GF_TRY(status);
    if (t->rank == 0) GF_TRY(write_summary(t, &val, &test));
    t->state.finished = 1;
    GF_TRY(save_ckpt(t, "last.ckpt"));
    gf_run_end end = {.val = &val, .test = &test, .best_step = t->state.best_step,
                      .best_epoch = t->state.best_epoch, .tokens_per_s = tokens_per_s(t),
                      .seconds = gf_time_now() - t->t_start};
    if (t->log) t->s.task->log_done(&t->s, &end);
    if (t->log && t->state.skipped)
        fprintf(stderr, "warning: %d of %lld steps were skipped for non-finite values ([train] nonfinite = skip; "
                "summary.tsv: skipped_steps)\n", (int)t->state.skipped, (long long)t->state.step);
    return GF_OK;
}

static gf_status run(trainer *t, const gf_train_opts *o, int *interrupted) {
    if (t->B % t->world != 0)
        return gf_error_set(GF_E_INVALID, "[train] batch_size = %lld does not divide among %d ranks: the global batch "
                            "stays the recipe's and each rank takes batch_size / N rows (pick N dividing it)",
                            (long long)t->B, t->world);
    GF_TRY(gf_dist_agree(t->rank == 0 ? lock_run_dir(t, o) : GF_OK));
    GF_TRY(plan_run(t, o));
    /* only rank 0 touches the run directory; every rank learns whether it could */
    GF_TRY(gf_dist_agree(t->rank == 0 ? open_run_dir(t, o) : GF_OK));
    if (t->state.finished) {
        if (t->log) fprintf(stderr, "run %s already finished (%lld steps)\n", t->dir, (long long)t->state.step);
        return GF_OK;
    }
    if (t->log) log_start(t);
    t->t_start = gf_time_now();
    int stop_early = 0, stop_all = 0;
    t->t_saved = gf_time_now();
    t->s.ctx.training = 1;
    while (next_step(t) < t->total && !stop_early) {
        /* ranks see a signal at different moments: with N > 1 they stop on the flag they agreed on */
        if (t->world == 1 ? (o->stop_flag && *o->stop_flag) : stop_all) { *interrupted = 1; break; }
        if (o->stop_after > 0 && next_step(t) >= o->stop_after) { *interrupted = 1; break; }
        GF_TRY(train_one(t, o, &stop_all));
        if (t->n_pend) continue; /* queued on the GPU: no evaluation or save is due (train_one) */
        GF_TRY(maybe_eval(t, &stop_early));
        GF_TRY(maybe_save(t));
        t->s.ctx.training = 1;
    }
    GF_TRY(flush_steps(t)); /* a stop between flushes */
    if (!*interrupted) return finish_run(t);
    GF_TRY(save_ckpt(t, "last.ckpt"));
    if (t->log)
        fprintf(stderr, "stopped at step %lld; continue with `gflow train --resume %s`\n", (long long)t->state.step,
                t->dir);
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
    t->ckpt_step = -1;
    t->lock_fd = -1;
    gf_status status = gf_recipe_resolved_text(r, &t->recipe_text);
    if (!status) {
        if (o->resume_dir) snprintf(t->dir, sizeof t->dir, "%s", o->resume_dir);
        else snprintf(t->dir, sizeof t->dir, "%s/%s", r->run.out_dir, r->run.name);
        status = prepare(t, r);
        /* ranks on one host share its cores unless the recipe fixes the thread count */
        if (!status && gf_dist_local_size() > 1 && r->run.threads <= 0) {
            int per = omp_get_num_procs() / gf_dist_local_size();
            gf_threads_set(per < 1 ? 1 : per);
        }
    }
    if (!status && t->log)
        fprintf(stderr, "model: %s (%s), %lld parameters\n", gf_family_name(r->model.family),
                gf_block_name(r->model.block), (long long)t->s.params->n);
    /* bf16: where its products run, and whether they can be faster than fp32 here */
    if (!status && t->log && r->run.precision == GF_PREC_BF16)
        fprintf(stderr, "precision: bf16 products (%s)\n", gf_gemm_bf16_path_on(r->run.device));
    if (!status) status = run(t, o, interrupted);
    if (t->metrics) fclose(t->metrics);
    if (t->speed) fclose(t->speed);
    gf_dir_unlock(&t->lock_fd);
    free(t->recipe_text);
    free(t->ckpt_recipe);
    gf_session_close(&t->s);
    free(t);
    return status;
}
