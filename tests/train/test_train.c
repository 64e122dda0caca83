/* test_train.c — the training loop end to end on a small synthetic corpus:
 * a tiny model learns it (loss far below the unigram entropy), resume is bitwise
 * identical to an uninterrupted run, bad states are refused. */
#include "gf_test.h"
#include "test_util.h"
#include "gflow.h"
#include "gflow/session.h"
#include "gflow/train.h"
#include "gflow/version.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gf_status tiny_recipe(gf_recipe *r, const char *name, const char *family, int64_t steps) {
    return gf_test_tiny_recipe(r, name, family, (long long)steps, "cpu");
}

GF_TEST(smoke, train_tiny_grassmann_learns) {
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "learn", "grassmann", 120));
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    char dir[700];
    snprintf(dir, sizeof dir, "%s/runs/learn", gf_test_tmpdir());
    double ppl = gf_test_summary_value(dir, "best_val_ppl"), test = gf_test_summary_value(dir, "test_ppl");
    /* ~30 word types; a uniform guess is ppl ~30 and the unigram entropy of this grammar about e^3;
     * the grammar itself allows ~5 choices at a few positions, so a model that learned it is far lower */
    GF_CHECK(ppl < 4.0, "best validation perplexity %.3f, expected < 4 (broken model: > 10)", ppl);
    GF_CHECK(test < 4.5, "test perplexity %.3f", test);
    char p[800];
    snprintf(p, sizeof p, "%s/best.ckpt", dir);
    GF_CHECK(access(p, F_OK) == 0, "best.ckpt written");
    /* a second fresh run into the same directory is refused, not clobbered */
    GF_CHECK_ERR(gf_train_run(&r, &o, &intr), GF_E_INVALID, "already holds a run");
}

/* evals_per_epoch = 3: full evaluations at floor(k * spe / 3) inside each epoch and at its end,
 * then the final one at max_steps; a build id in summary.tsv and the recipe.ini header */
GF_TEST(smoke, train_evals_per_epoch_and_build_id) {
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "thirds", "grassmann", 1));
    const char *sets[] = {"train.eval_every=0", "train.evals_per_epoch=3", "train.eval_batches=0"};
    char text[4096];
    char *rt = NULL;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &rt));
    snprintf(text, sizeof text, "%s", rt);
    free(rt);
    GF_REQUIRE_OK(gf_recipe_parse_text(text, "thirds.ini", sets, 3, &r));
    /* steps per epoch of this corpus: find it from a first run's epoch column */
    r.train.max_steps = 200;
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    char p[800];
    size_t n;
    snprintf(p, sizeof p, "%s/runs/thirds/metrics.tsv", gf_test_tmpdir());
    char *s = gf_test_slurp(p, &n);
    GF_REQUIRE(s, "metrics.tsv");
    long long spe = 0, valid_steps[64] = {0};
    int nv = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        long long step, epoch;
        char split[16];
        if (sscanf(line, "%lld\t%lld\t%15s", &step, &epoch, split) != 3) continue;
        if (!spe && epoch == 1 && !strcmp(split, "train")) spe = step - 1;
        if (!strcmp(split, "valid") && nv < 64) valid_steps[nv++] = step;
    }
    free(s);
    GF_REQUIRE(spe > 3, "steps per epoch found (%lld)", spe);
    int k = 0;
    for (long long e = 0; (e + 1) * spe <= 200; e++)
        for (int j = 1; j <= 3; j++) {
            long long want = e * spe + j * spe / 3;
            GF_CHECK(k < nv && valid_steps[k] == want, "evaluation %d at step %lld, got %lld", k, want,
                     k < nv ? valid_steps[k] : -1LL);
            k++;
        }
    GF_CHECK(nv > k && valid_steps[nv - 1] == 200, "final evaluation at step 200");
    snprintf(p, sizeof p, "%s/runs/thirds/summary.tsv", gf_test_tmpdir());
    s = gf_test_slurp(p, &n);
    GF_REQUIRE(s, "summary.tsv");
    char want[200];
    snprintf(want, sizeof want, "\nbuild\t%s\n", gf_build_id());
    GF_CHECK(strstr(s, want) != NULL, "summary.tsv names the build %s", gf_build_id());
    free(s);
    snprintf(p, sizeof p, "%s/runs/thirds/recipe.ini", gf_test_tmpdir());
    s = gf_test_slurp(p, &n);
    GF_REQUIRE(s, "recipe.ini");
    GF_CHECK(strstr(s, gf_build_id()) != NULL && strchr(gf_build_id(), '+'), "recipe.ini header names the build");
    free(s);
}

static void compare_runs(const char *family, gf_precision prec) {
    char straight[64], split[64];
    snprintf(straight, sizeof straight, "straight-%s-%d", family, (int)prec);
    snprintf(split, sizeof split, "split-%s-%d", family, (int)prec);
    gf_recipe ra, rb;
    GF_REQUIRE_OK(tiny_recipe(&ra, straight, family, 40));
    GF_REQUIRE_OK(tiny_recipe(&rb, split, family, 40));
    ra.run.precision = rb.run.precision = prec;
    int intr = 0;
    gf_train_opts o = {.quiet = 1};
    GF_REQUIRE_OK(gf_train_run(&ra, &o, &intr));
    GF_CHECK(!intr, "uninterrupted");
    /* the same run, stopped after 17 steps (mid-way between checkpoints) and resumed twice */
    char bdir[700];
    snprintf(bdir, sizeof bdir, "%s/runs/%s", gf_test_tmpdir(), split);
    gf_train_opts o1 = {.quiet = 1, .stop_after = 17};
    GF_REQUIRE_OK(gf_train_run(&rb, &o1, &intr));
    GF_CHECK(intr, "stopped early");
    gf_train_opts o2 = {.quiet = 1, .resume_dir = bdir, .stop_after = 29};
    GF_REQUIRE_OK(gf_train_run(&rb, &o2, &intr));
    gf_train_opts o3 = {.quiet = 1, .resume_dir = bdir};
    GF_REQUIRE_OK(gf_train_run(&rb, &o3, &intr));
    GF_CHECK(!intr, "finished");
    char pa[800], pb[800];
    size_t na, nb;
    snprintf(pa, sizeof pa, "%s/runs/%s/metrics.tsv", gf_test_tmpdir(), straight);
    snprintf(pb, sizeof pb, "%s/metrics.tsv", bdir);
    char *a = gf_test_slurp(pa, &na), *b = gf_test_slurp(pb, &nb);
    GF_REQUIRE(a && b, "metrics files");
    GF_CHECK(na == nb && memcmp(a, b, na) == 0, "%s: metrics.tsv differs after resume (%zu vs %zu bytes)", family, na, nb);
    GF_CHECK(na > 500, "metrics has content");
    free(a);
    free(b);
    /* weights and optimizer moments of the final checkpoints are bit-identical */
    gf_params pa_, pb_;
    gf_lm la, lb;
    gf_model_cfg c;
    gf_model_cfg_default(&c);
    snprintf(pa, sizeof pa, "%s/runs/%s/last.ckpt", gf_test_tmpdir(), straight);
    snprintf(pb, sizeof pb, "%s/last.ckpt", bdir);
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    GF_REQUIRE_OK(gf_ckpt_peek(pa, &m));
    int64_t vocab = strtoll(gf_ckpt_meta_get_kv(&m, "vocab"), NULL, 10);
    gf_ckpt_meta_free(&m);
    c.family = strcmp(family, "transformer") ? GF_FAMILY_GRASSMANN : GF_FAMILY_TRANSFORMER;
    c.vocab = vocab; c.d_model = 32; c.d_ff = 64; c.n_layers = 2; c.max_len = 16; c.r = 6; c.heads = 4;
    c.offsets.n = 3; c.offsets.v[0] = 1; c.offsets.v[1] = 2; c.offsets.v[2] = 4;
    GF_REQUIRE_OK(gf_lm_init(&la, &c));
    GF_REQUIRE_OK(gf_lm_init(&lb, &c));
    GF_REQUIRE_OK(gf_ckpt_load(pa, &la.params, NULL));
    GF_REQUIRE_OK(gf_ckpt_load(pb, &lb.params, NULL));
    pa_ = la.params;
    pb_ = lb.params;
    size_t bytes = (size_t)pa_.n * sizeof(float);
    GF_CHECK(memcmp(pa_.data, pb_.data, bytes) == 0, "weights differ");
    GF_CHECK(memcmp(pa_.m, pb_.m, bytes) == 0 && memcmp(pa_.v, pb_.v, bytes) == 0, "AdamW moments differ");
    gf_lm_free(&la);
    gf_lm_free(&lb);
}

GF_TEST(smoke, resume_is_bitwise_identical_grassmann) { compare_runs("grassmann", GF_PREC_FP32); }
GF_TEST(smoke, resume_is_bitwise_identical_transformer) { compare_runs("transformer", GF_PREC_FP32); }
/* [run] precision = bf16 (oneDNN where the CPU has bf16 arithmetic): deterministic, so resumable */
GF_TEST(smoke, resume_is_bitwise_identical_grassmann_bf16) { compare_runs("grassmann", GF_PREC_BF16); }
GF_TEST(smoke, resume_is_bitwise_identical_transformer_bf16) { compare_runs("transformer", GF_PREC_BF16); }

/* README (step arena) and docs/performance.md: after the first step the step arena is one chunk
 * sized to its high-water mark, so a steady-state CPU training step does no malloc. Steps through
 * gf_train_step as the trainer drives them, dropout on, both families. */
static void steps_allocate_nothing(const char *family, gf_precision prec) {
    enum { K = 6, B = 16 };
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "nomalloc", family, K));
    r.run.precision = prec;
    gf_session s;
    GF_REQUIRE_OK(gf_session_open(&s, &r, 0));
    int64_t items = 0;
    GF_REQUIRE_OK(gf_session_train_loader(&s, B, &items, 0));
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&r, &ac, &sch);
    gf_adamw_state opt;
    gf_adamw_reset(s.params, &opt);
    s.ctx.training = 1;
    /* the session's 64 MB first chunk holds this model's step (2-3 MB at 16 rows) outright: a 1 MB
     * one (the smallest chunk) makes step 1 grow the arena and its reset coalesce the chain, the
     * path a real model takes */
    GF_REQUIRE(s.ctx.arena.used == 0, "%s: the step arena holds %zu bytes before any step", family, s.ctx.arena.used);
    gf_arena_free(&s.ctx.arena);
    gf_arena_init(&s.ctx.arena, (size_t)1 << 20);
    int64_t at_open = s.ctx.arena.n_chunk_allocs, after_first = -1;
    for (int64_t step = 0; step < K; step++) {
        int64_t rows = 0;
        GF_REQUIRE_OK(gf_session_next(&s, &rows));
        if (rows == 0) GF_REQUIRE_OK(gf_session_next(&s, &rows));
        gf_rng_seed(&s.rng, 7 + (uint64_t)step);
        gf_step_in in = {.rows = rows, .lo = 0, .n = rows, .lr = 1e-3, .clip = r.optim.clip};
        gf_step_out out;
        GF_REQUIRE_OK(gf_train_step(&s, &opt, &ac, &in, &out));
        GF_REQUIRE(!out.nonfinite, "%s step %lld: non-finite %s", family, (long long)step + 1, out.nonfinite);
        if (step == 0) after_first = s.ctx.arena.n_chunk_allocs;
    }
    /* the first step must have grown the arena, or the check below proves nothing */
    GF_CHECK(after_first > at_open + 1, "%s: step 1 did not grow the arena (%lld chunk mallocs at open, %lld after)",
             family, (long long)at_open, (long long)after_first);
    GF_CHECK(s.ctx.arena.n_chunk_allocs == after_first, "%s: %lld arena mallocs in steps 2-%d", family,
             (long long)(s.ctx.arena.n_chunk_allocs - after_first), K);
    GF_CHECK(s.ctx.arena.first->next == NULL, "%s: the arena is more than one chunk after %d steps", family, K);
    gf_session_close(&s);
}

GF_TEST(smoke, train_steps_allocate_nothing_grassmann) { steps_allocate_nothing("grassmann", GF_PREC_FP32); }
GF_TEST(smoke, train_steps_allocate_nothing_transformer) { steps_allocate_nothing("transformer", GF_PREC_FP32); }
/* bf16: the rounded copies of the GEMM inputs come from the step arena too */
GF_TEST(smoke, train_steps_allocate_nothing_grassmann_bf16) { steps_allocate_nothing("grassmann", GF_PREC_BF16); }

/* [train] early_stop_patience (docs/recipe-keys.md): with a learning rate too small to move any
 * weight (1e-30 against weights of ~0.02: below half an ulp) and no dropout, every validation
 * equals the first, so patience 2 at two evaluations per epoch stops the run right after its
 * third evaluation (1.5 epochs); the run reports the first evaluation as its best, and the last
 * evaluation is not repeated (build 920fff3 wrote an early-stopped run's last valid row twice). */
GF_TEST(smoke, train_early_stop_patience) {
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "patience", "grassmann", 100000));
    const char *sets[] = {"train.eval_every=0",  "train.evals_per_epoch=2", "train.eval_batches=0",
                          "train.early_stop_patience=2", "optim.lr=1e-30",  "schedule.kind=constant",
                          "schedule.warmup_steps=0",     "schedule.min_lr=0", "model.dropout=0"};
    enum { NSETS = sizeof sets / sizeof *sets };
    char *rt = NULL;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &rt));
    GF_REQUIRE_OK(gf_recipe_parse_text(rt, "patience.ini", sets, NSETS, &r));
    free(rt);
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    GF_REQUIRE(!intr, "not interrupted");
    char dir[700], p[800];
    snprintf(dir, sizeof dir, "%s/runs/patience", gf_test_tmpdir());
    snprintf(p, sizeof p, "%s/metrics.tsv", dir);
    size_t n;
    char *s = gf_test_slurp(p, &n);
    GF_REQUIRE(s, "metrics.tsv");
    long long spe = 0, last_train = 0, valid[8] = {0}, test_step = -1;
    double vloss[8] = {0};
    int nv = 0, ntest = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        long long step, epoch;
        char split[16];
        double loss;
        if (sscanf(line, "%lld\t%lld\t%15s\t%lf", &step, &epoch, split, &loss) != 4) continue;
        if (!strcmp(split, "train")) {
            if (!spe && epoch == 1) spe = step - 1;
            last_train = step;
        } else if (!strcmp(split, "valid")) {
            if (nv < 8) { valid[nv] = step; vloss[nv] = loss; }
            nv++;
        } else if (!strcmp(split, "test")) {
            test_step = step;
            ntest++;
        }
    }
    free(s);
    GF_REQUIRE(spe >= 4, "steps per epoch found (%lld)", spe);
    GF_CHECK(nv == 3, "%d validation rows, expected 3 (stop after the third evaluation, none repeated)", nv);
    long long want[3] = {spe / 2, spe, spe + spe / 2};
    for (int i = 0; i < 3 && i < nv; i++)
        GF_CHECK(valid[i] == want[i], "evaluation %d at step %lld, expected %lld", i + 1, valid[i], want[i]);
    GF_CHECK(nv < 2 || (vloss[1] == vloss[0] && vloss[2] == vloss[0]),
             "the weights moved: validation losses %.9g %.9g %.9g (the test needs them equal)", vloss[0], vloss[1],
             vloss[2]);
    GF_CHECK(last_train == spe + spe / 2, "training stopped at step %lld, expected %lld", last_train,
             spe + spe / 2);
    GF_CHECK(ntest == 1 && test_step == spe / 2, "%d test rows, at step %lld; expected one, at the best step %lld",
             ntest, test_step, spe / 2);
    GF_CHECK(gf_test_summary_value(dir, "best_step") == (double)(spe / 2), "summary best_step %g, expected %lld",
             gf_test_summary_value(dir, "best_step"), spe / 2);
    GF_CHECK(gf_test_summary_value(dir, "steps") == (double)(spe + spe / 2), "summary steps %g", gf_test_summary_value(dir, "steps"));
}

/* [eval] split (docs/recipe-keys.md) is gflow eval's default split; training still selects the
 * best checkpoint on valid whatever it says */
GF_TEST(smoke, eval_split_is_gflow_evals_default) {
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "evalsplit", "grassmann", 6));
    const char *sets[] = {"eval.split=test"};
    char *rt = NULL;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &rt));
    GF_REQUIRE_OK(gf_recipe_parse_text(rt, "evalsplit.ini", sets, 1, &r));
    free(rt);
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    char dir[700];
    snprintf(dir, sizeof dir, "%s/runs/evalsplit", gf_test_tmpdir());
    gf_eval_result dflt, test, valid;
    GF_REQUIRE_OK(gf_eval_run_dir(dir, "best", NULL, &dflt));
    GF_REQUIRE_OK(gf_eval_run_dir(dir, "best", "test", &test));
    GF_REQUIRE_OK(gf_eval_run_dir(dir, "best", "valid", &valid));
    GF_CHECK(dflt.loss == test.loss && dflt.n_tokens == test.n_tokens,
             "gflow eval without --split: loss %.9g over %lld tokens, test split %.9g over %lld", dflt.loss,
             (long long)dflt.n_tokens, test.loss, (long long)test.n_tokens);
    GF_CHECK(valid.loss != test.loss, "valid and test give the same loss %.9g: the test cannot tell them apart",
             valid.loss);
    GF_CHECK(fabs(gf_test_summary_value(dir, "best_val_loss") - valid.loss) < 1e-5,
             "summary best_val_loss %.9g, the best checkpoint's valid loss %.9g (training must select on valid)",
             gf_test_summary_value(dir, "best_val_loss"), valid.loss);
    GF_CHECK(fabs(gf_test_summary_value(dir, "test_loss") - test.loss) < 1e-5, "summary test_loss %.9g, eval %.9g",
             gf_test_summary_value(dir, "test_loss"), test.loss);
}

/* [run] seed decides the run: two fresh runs with one seed end on the same validation loss, bit
 * for bit; another seed (initialisation, dropout, batch order) gives another */
GF_TEST(smoke, train_seed_decides_the_run) {
    double v[3];
    static const char *const seeds[3] = {"run.seed=11", "run.seed=11", "run.seed=12"};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "seed%d", i);
        v[i] = gf_test_train_summary(name, 8, &seeds[i], 1, "best_val_loss");
    }
    GF_CHECK(v[0] == v[1], "seed 11 twice: best validation loss %.9g then %.9g", v[0], v[1]);
    GF_CHECK(v[0] != v[2], "seeds 11 and 12: the same best validation loss %.9g", v[0]);
}
