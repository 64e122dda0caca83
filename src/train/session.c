/* session.c — build tokenizer, model and data from a recipe through the recipe's task; evaluate
 * a split; export the weights. */
#include "gflow/session.h"
#include "gflow/checkpoint.h"
#include "gflow/device.h"
#include "gflow/dist.h"
#include "gflow/safetensors.h"
#include "gflow/threads.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tasks. A new task: its task_<name>.c (one gf_task_ops) and its entry here. */
extern const gf_task_ops gf_task_lm, gf_task_nli;
static const gf_task_ops *const tasks[] = {&gf_task_lm, &gf_task_nli};

const gf_task_ops *gf_task_of(const gf_recipe *r) {
    for (size_t i = 0; i < sizeof tasks / sizeof tasks[0]; i++)
        if (gf_dataset_get(r->data.dataset) && tasks[i]->kind == gf_dataset_get(r->data.dataset)->kind) return tasks[i];
    return NULL;
}

void gf_session_split_path(const gf_session *s, gf_split split, char *path, size_t cap) {
    gf_recipe_split_path(&s->r, split, path, cap);
}

/* The split's file now against the sha256 the checkpoint recorded of it (data.SPLIT.sha256, as
 * the trainer writes it; a checkpoint of an older build records none, and a missing file is
 * reported by loading it) */
void gf_session_warn_split_changed(const gf_session *s, const char *ckpt, gf_split split) {
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    char key[64], file[1024], now[65];
    snprintf(key, sizeof key, "data.%s.sha256", gf_split_name(split));
    gf_session_split_path(s, split, file, sizeof file);
    const char *then = gf_ckpt_peek(ckpt, &m) == GF_OK ? gf_ckpt_meta_get_kv(&m, key) : NULL;
    if (then && strlen(then) == 64 && gf_sha256_file(file, NULL, now) == GF_OK && strcmp(then, now))
        fprintf(stderr, "warning: %s: the %s split changed since %s was written (sha256 %s then, %s now): these "
                "numbers are of the new file, not comparable with the run's own\n", file, gf_split_name(split), ckpt, then, now);
    gf_ckpt_meta_free(&m);
    gf_error_clear(); /* a checkpoint or file that cannot be read here is reported where it is loaded */
}

/* A split file must exist and, when its checksum is recorded, match it. */
static gf_status check_file(const gf_session *s, gf_split split, char *path, size_t cap) {
    gf_session_split_path(s, split, path, cap);
    struct stat sb;
    if (stat(path, &sb) == 0) return gf_data_verify(path);
    const char *fetch = gf_dataset_get(s->r.data.dataset)->fetch;
    char how[128] = "check the path";
    if (fetch) snprintf(how, sizeof how, "run `gflow data fetch %s` or set GFLOW_DATA_MIRROR to a directory that holds it", fetch);
    const char *key = gf_split_name(split);
    return gf_error_set(GF_E_NOTFOUND, "%s: data file not found ([data] %s_file under dir '%s'); %s", path,
                        key, gf_recipe_data_dir(&s->r), how);
}

/* A run on the GPU: the step context gets a device arena, the parameter block (drawn on the
 * host: a CPU run and a GPU run start from the same bits) moves to the device, cuBLAS takes
 * [run] tf32, and the session its GPU step. The task's batches stay host arrays, which the ops
 * stage. */
static gf_status use_device(gf_session *s) {
    GF_TRY(gf_session_device_check(&s->r));
    GF_TRY(gf_ctx_use_cuda(&s->ctx, (size_t)64 << 20));
    GF_TRY(gf_params_to_device(s->params, s->r.run.device));
    if (s->r.run.precision == GF_PREC_BF16) GF_TRY(gf_params_keep_bf16(s->params)); /* the weights rounded once */
    GF_TRY(gf_cuda_tf32(s->r.run.tf32));
    return gf_gpu_step_open(&s->gpu);
}

gf_status gf_session_open_model(gf_session *s, const gf_recipe *r, int64_t vocab, int flags) {
    memset(s, 0, sizeof *s);
    s->r = *r;
    s->task = gf_task_of(r);
    if (!s->task) return gf_error_set(GF_E_INVALID, "[data] dataset: no task handles dataset %d", (int)r->data.dataset);
    s->vocab = vocab;
    gf_rng_seed(&s->rng, (uint64_t)r->run.seed);
    gf_status status = s->task->open(s, vocab);
    if (status == GF_E_NOMEM) /* name the keys that size the parameter block */
        return gf_error_wrap(status, "[model] d_model %lld, d_ff %lld, n_layers %lld, max_len %lld, vocabulary %lld: ",
                             (long long)r->model.d_model, (long long)r->model.d_ff, (long long)r->model.n_layers,
                             (long long)r->model.max_len, (long long)vocab);
    if (status) return gf_error_wrap(status, "[model]: ");
    if (flags & GF_SESSION_INIT) s->task->init_weights(s, &s->rng);
    gf_ctx_init(&s->ctx, (size_t)64 << 20, &s->rng);
    s->ctx.precision = r->run.precision;
    s->ctx_ready = 1;
    return r->run.device == GF_DEV_CPU || (flags & GF_SESSION_HOST) ? GF_OK : use_device(s);
}

gf_status gf_session_device_check(const gf_recipe *r) {
    if (r->run.device == GF_DEV_CPU) return GF_OK;
    if (!gf_cuda_built())
        return gf_error_set(GF_E_INVALID, "[run] device = cuda: gflow was built without CUDA (reconfigure with "
                            "-Dcuda=enabled where nvcc and cuBLAS are installed; docs/cuda.md)");
    gf_cuda_info info;
    gf_cuda_probe(&info);
    if (info.n_devices == 0)
        return gf_error_set(GF_E_INVALID, "[run] device = cuda: no CUDA device visible (%s)", info.why);
    if (gf_dist_size() > 1)
        return gf_error_set(GF_E_INVALID, "[run] device = cuda: data parallelism over MPI (%d ranks) does not run on "
                            "the GPU (one GPU, one process: start gflow without mpirun, or use device = cpu)",
                            gf_dist_size());
    return GF_OK;
}

/* Bytes this process may still allocate: physical memory, or less under RLIMIT_AS (its soft
 * limit less the address space already mapped); *why names the bound. */
static double memory_available(const char **why) {
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    *why = "physical memory";
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return phys;
    double mapped = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = 0;
    if (f && fscanf(f, "%lld", &pages) == 1) mapped = (double)pages * (double)sysconf(_SC_PAGE_SIZE);
    if (f) fclose(f);
    double as = (double)rl.rlim_cur - mapped;
    if (as >= phys) return phys;
    *why = "RLIMIT_AS, ulimit -v";
    return as < 0 ? 0 : as;
}

/* A lower bound of one training step's memory: activations of tokens x n_layers and the
 * parameters four times (weights, gradients, AdamW m and v). Calibrated on 2026-11-27 with
 * `gflow bench --steps 1 --warmup 1` (fp32, CPU; arena_mb, and peak RSS by /usr/bin/time -v):
 * the step arena held 23 KB per token and layer (quickstart, d_model 128, d_ff 512), 44 KB
 * (wikitext2-transformer, 256/1024), 47 KB (wikitext2-12l) and 56 KB (snli); 12 d_model + 4 d_ff
 * floats is 51-66 % of each (bf16 held more), so a step refused by it could not have run. */
static double step_bound(const gf_session *s, int64_t B) {
    const gf_recipe *r = &s->r;
    const double tokens = (double)B * (double)gf_session_tokens_per_row(s);
    const double act = 4.0 * tokens * (double)r->model.n_layers * (12.0 * (double)r->model.d_model + 4.0 * (double)r->model.d_ff);
    return act + 16.0 * (double)s->params->n;
}

gf_status gf_session_memory_check(const gf_session *s, int64_t B) {
    const gf_recipe *r = &s->r;
    if (r->run.device != GF_DEV_CPU) return GF_OK; /* activations live on the GPU */
    const double need = step_bound(s, B);
    const char *why;
    const double have = memory_available(&why);
    if (need <= have) return GF_OK;
    const int lm = s->task->language_model;
    return gf_error_set(GF_E_NOMEM, "a training step needs at least %.1f GB, more than the %.1f GB this process may "
                        "use (%s): batch %lld ([train] batch_size) x %lld tokens (%s) through %lld layers ([model] "
                        "n_layers) of d_model %lld and d_ff %lld, and %lld parameters x 4 (AdamW); lower batch_size "
                        "or %s", need / 1e9, have / 1e9, why, (long long)B, (long long)gf_session_tokens_per_row(s),
                        lm ? "[data] seq_len" : "2 x [data] max_sentence_len", (long long)r->model.n_layers,
                        (long long)r->model.d_model, (long long)r->model.d_ff, (long long)s->params->n,
                        lm ? "seq_len" : "max_sentence_len");
}

/* The evaluation's share: its batch of [eval] batch_size rows is allocated whole, whatever the
 * split holds (4 bytes an id, at least), beside the training step's lower bound when it trains
 * or the weights alone. */
gf_status gf_session_eval_memory_check(const gf_session *s, int training) {
    const gf_recipe *r = &s->r;
    const double batch = 4.0 * (double)r->eval.batch_size * (double)gf_session_tokens_per_row(s);
    const double rest = training && r->run.device == GF_DEV_CPU ? step_bound(s, r->train.batch_size)
                                                                : 4.0 * (double)s->params->n;
    const char *why;
    const double have = memory_available(&why);
    if (batch + rest <= have) return GF_OK;
    return gf_error_set(GF_E_NOMEM, "the evaluation batch needs at least %.1f GB (%lld rows, [eval] batch_size, x %lld "
                        "ids x 4 bytes), and %.1f GB more %s: more than the %.1f GB this process may use (%s); lower "
                        "[eval] batch_size", batch / 1e9, (long long)r->eval.batch_size,
                        (long long)gf_session_tokens_per_row(s), rest / 1e9,
                        training ? "for the training step beside it" : "for the weights", have / 1e9, why);
}

/* text with [data] file: its train, valid and test parts (gf_text_split; kept while the file is unchanged) */
static gf_status split_text(const gf_recipe *r, int log) {
    char src[2 * PATH_MAX], dir[2 * PATH_MAX];
    gf_recipe_text_source(r, src, sizeof src);
    gf_recipe_text_split_dir(r, dir, sizeof dir);
    return gf_text_split(src, r->data.valid_fraction, r->data.test_fraction, dir, log);
}

gf_status gf_session_open_tokenizer(const gf_recipe *r, gf_tokenizer **tok, int log) {
    *tok = NULL;
    /* the tokenizer is trained on WikiText-2 train whatever the task (SNLI uses it too); wordpiece reads
     * its vocabulary */
    char tpath[2 * PATH_MAX];
    if (r->data.file[0]) GF_TRY(split_text(r, log)); /* its parts, the tokenizer's corpus among them */
    gf_recipe_tokenizer_path(r, tpath, sizeof tpath);
    const int wp = r->tokenizer.kind == GF_TOK_WORDPIECE;
    if (access(tpath, F_OK) != 0 && !r->tokenizer.train_file[0])
        return gf_error_set(GF_E_NOTFOUND, "%s: data file not found ([data] train_file under dir '%s'; the tokenizer "
                            "is trained on it)", tpath, gf_recipe_data_dir(r));
    if (access(tpath, F_OK) != 0)
        return gf_error_set(GF_E_NOTFOUND, "%s: tokenizer %s not found ([tokenizer] train_file = %s under '%s'); "
                            "run `gflow data fetch %s` or set GFLOW_DATA_MIRROR", tpath, wp ? "vocabulary" : "corpus",
                            r->tokenizer.train_file, gf_recipe_data_dir(r), wp ? "bert-base-uncased" : "wikitext2");
    GF_TRY(gf_data_verify(tpath));
    gf_tokenizer_opts to = {.kind = r->tokenizer.kind, .vocab_size = r->tokenizer.vocab_size,
                            .model_type = r->tokenizer.model_type, .cache_dir = gf_recipe_cache_dir(r)};
    double t0 = gf_time_now();
    gf_status status = gf_tokenizer_open(tok, &to, tpath);
    if (status) return gf_error_wrap(status, "tokenizer ([tokenizer] in the recipe): ");
    if (log)
        fprintf(stderr, "tokenizer: %s, vocabulary %lld (%.1f s)\n", gf_tokenizer_key(*tok),
                (long long)gf_tokenizer_vocab_size(*tok), gf_time_now() - t0);
    return GF_OK;
}

/* gf_session_open, its flags those of gf_session_open_model (GF_SESSION_HOST: no device check) */
static gf_status open_with_data(gf_session *s, const gf_recipe *r, int log, int flags) {
    memset(s, 0, sizeof *s);
    if (!(flags & GF_SESSION_HOST)) GF_TRY(gf_session_device_check(r));
    gf_threads_set((int)r->run.threads);
    gf_tokenizer *tok = NULL;
    GF_TRY(gf_session_open_tokenizer(r, &tok, log));
    gf_status status = gf_session_open_model(s, r, gf_tokenizer_vocab_size(tok), flags);
    s->tok = tok;
    GF_TRY(status);
    /* the dropout stream is separate from the init stream, and both follow from the seed */
    gf_rng_seed(&s->rng, (uint64_t)r->run.seed ^ 0x5DEECE66Dull);
    return GF_OK;
}

gf_status gf_session_open(gf_session *s, const gf_recipe *r, int log) {
    return open_with_data(s, r, log, GF_SESSION_INIT);
}

gf_status gf_session_from_ckpt(gf_session *s, const char *path) {
    memset(s, 0, sizeof *s);
    gf_recipe r;
    gf_ckpt_meta m;
    GF_TRY(gf_ckpt_peek_recipe(path, &r, &m));
    const char *v = gf_ckpt_meta_get_kv(&m, "vocab");
    int64_t vocab = v ? strtoll(v, NULL, 10) : 0;
    gf_ckpt_meta_free(&m);
    if (vocab <= 0) return gf_error_set(GF_E_CORRUPT, "%s: checkpoint lacks its vocabulary size (kv 'vocab')", path);
    /* the model alone (gflow info, export) is read on the host, wherever it trained */
    GF_TRY(gf_session_open_model(s, &r, vocab, GF_SESSION_HOST));
    return gf_ckpt_load(path, s->params, NULL);
}

gf_status gf_session_check_tokenizer(const gf_session *s, const char *path, const gf_ckpt_meta *m) {
    const char *had = gf_ckpt_meta_get_kv(m, "tokenizer"), *now = gf_tokenizer_key(s->tok);
    if (!had || !strcmp(had, now)) return GF_OK; /* a checkpoint from before the key was recorded */
    return gf_error_set(GF_E_INVALID, "%s was trained with tokenizer %s, but the recipe's [tokenizer] now gives %s "
                        "(its corpus or .model file changed): its token ids would mean other pieces; restore the "
                        "tokenizer's files", path, had, now);
}

gf_status gf_session_open_ckpt(gf_session *s, const gf_recipe *r, const char *path) {
    GF_TRY(open_with_data(s, r, 0, GF_SESSION_INIT | GF_SESSION_HOST)); /* wherever it trained */
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    gf_status st = gf_ckpt_peek(path, &m);
    if (!st) st = gf_session_check_tokenizer(s, path, &m);
    gf_ckpt_meta_free(&m);
    return st ? st : gf_ckpt_load(path, s->params, NULL);
}

gf_status gf_session_load_split(gf_session *s, gf_split split, int log) {
    if (s->loaded[split]) return GF_OK;
    char path[1024];
    GF_TRY(check_file(s, split, path, sizeof path));
    GF_TRY(s->task->load_split(s, split, path, log));
    s->loaded[split] = 1;
    return GF_OK;
}

gf_status gf_session_train_loader(gf_session *s, int64_t B, int64_t *n_items, int log) {
    GF_TRY(gf_session_load_split(s, GF_SPLIT_TRAIN, log));
    s->train_B = B;
    return s->task->train_loader(s, B, n_items);
}

gf_status gf_session_next(gf_session *s, int64_t *rows) { return s->task->next_batch(s, rows); }

gf_tensor *gf_session_forward_rows(gf_session *s, int64_t lo, int64_t n) {
    s->ctx.batch_row0 = lo; /* dropout masks follow the global row (dropout.c) */
    s->ctx.batch_rows = n;
    gf_tensor *loss = s->task->forward_rows(s, lo, n);
    s->ctx.batch_row0 = s->ctx.batch_rows = 0;
    return loss;
}

int64_t gf_session_tokens_per_row(const gf_session *s) { return s->task->tokens_per_row(&s->r); }

gf_status gf_session_loader_state(const gf_session *s, gf_loader_state *ls) {
    s->task->loader_state(s, ls);
    return GF_OK;
}

gf_status gf_session_set_loader_state(gf_session *s, const gf_loader_state *ls) {
    return s->task->set_loader_state(s, ls);
}

gf_status gf_session_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res) {
    memset(res, 0, sizeof *res);
    res->ppl_word = NAN;
    res->acc = NAN;
    GF_TRY(gf_session_load_split(s, split, 0));
    return s->task->eval(s, split, max_batches, res);
}

void gf_session_close(gf_session *s) {
    gf_gpu_step_close(s->gpu);
    if (s->ctx_ready) gf_ctx_free(&s->ctx);
    if (s->task) s->task->close(s);
    if (s->tok) gf_tokenizer_free(s->tok);
    memset(s, 0, sizeof *s);
}

/* The weights with the metadata tools/load_gflow.py reads; block NULL: none (a task whose
 * model has no [model] block choice). */
static gf_status export_params(const gf_params *p, const gf_recipe *r, const char *format, gf_family family,
                               const char *block, int64_t vocab, const char *path) {
    char *text = NULL;
    GF_TRY(gf_recipe_resolved_text(r, &text));
    char vocab_text[32];
    snprintf(vocab_text, sizeof vocab_text, "%lld", (long long)vocab);
    const char *keys[5] = {"format", "family"}, *vals[5] = {format, gf_family_name(family)};
    int n = 2;
    if (block) keys[n] = "block", vals[n++] = block;
    keys[n] = "vocab", vals[n++] = vocab_text;
    keys[n] = "recipe", vals[n++] = text;
    gf_status status = gf_safetensors_save_params(path, p, n, keys, vals);
    free(text);
    return status;
}

gf_status gf_session_export(const gf_session *s, const char *path) {
    const char *block = s->task->language_model ? gf_block_name(s->r.model.block) : NULL;
    return export_params(s->params, &s->r, s->task->format, s->r.model.family, block, s->vocab, path);
}

gf_status gf_lm_export(const gf_lm *lm, const gf_recipe *r, const char *path) {
    return export_params(&lm->params, r, gf_task_lm.format, lm->cfg.family, gf_block_name(lm->cfg.block),
                         lm->cfg.vocab, path);
}
