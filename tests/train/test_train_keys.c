/* test_train_keys.c — recipe keys whose effect on a run no other test pinned down: the [schedule]
 * learning rate a run logs, the [optim] keys' way into AdamW and clip's into the step, [data]
 * train_fraction's steps per epoch, and that [eval] batch_size does not change what an evaluation
 * measures. */
#include "gf_test.h"
#include "test_util.h"
#include "gflow.h"
#include "gflow/session.h"
#include "gflow/train.h"
#include <stdlib.h>
#include <string.h>

/* [schedule] kind, warmup_steps, min_lr: every train row's lr column is the schedule's lr for the
 * step that row logs. The row of step s (1-based, written after the step) carries the lr that step
 * used, gf_schedule_lr at the 0-based step s-1 (trainer.c train_one). The schedule spans all
 * [train] epochs and max_steps only cuts it short (docs/results.md: "every model sees the same
 * truncated schedule"), so the run here stops at 25 of its 3 epochs' steps, past one epoch end
 * (where epoch_cosine steps). The reference is built from the values set, not from the recipe, so
 * a key lost between recipe and trainer fails too. lr is printed %.6e: 7 significant digits. */
static void schedule_lr_column(const char *name, const char *kind, gf_schedule_kind k) {
    enum { STEPS = 25, EPOCHS = 3 };
    char set_kind[64];
    snprintf(set_kind, sizeof set_kind, "schedule.kind=%s", kind);
    const char *sets[] = {set_kind, "schedule.warmup_steps=4", "schedule.min_lr=1e-3", "optim.lr=2e-2",
                          "train.epochs=3", "data.train_fraction=0.2", "train.eval_every=0", "train.eval_batches=1"};
    gf_recipe r;
    GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&r, name, STEPS, sets, (int)(sizeof sets / sizeof *sets)));
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    char p[800];
    snprintf(p, sizeof p, "%s/runs/%s/metrics.tsv", gf_test_tmpdir(), name);
    char *s = gf_test_slurp(p, NULL);
    GF_REQUIRE(s, "metrics.tsv");
    long long steps[STEPS + 8], spe = 0;
    double lrs[STEPS + 8];
    int n = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        long long step, epoch;
        char split[16];
        double loss, ppl, lr;
        char pw[32], acc[32];
        if (sscanf(line, "%lld\t%lld\t%15s\t%lf\t%lf\t%31s\t%31s\t%lf", &step, &epoch, split, &loss, &ppl, pw, acc,
                   &lr) != 8 || strcmp(split, "train"))
            continue;
        if (!spe && epoch == 1) spe = step - 1;
        if (n < STEPS + 8) { steps[n] = step; lrs[n] = lr; }
        n++;
    }
    free(s);
    GF_REQUIRE(n == STEPS, "%s: %d train rows, expected %d", kind, n, STEPS);
    /* the run must be cut short of its schedule and cross an epoch end, or the check shows neither */
    GF_REQUIRE(spe > 4 && spe < STEPS && EPOCHS * spe > STEPS + 5, "%s: %lld steps per epoch", kind, spe);
    gf_schedule_cfg want = {.kind = k, .lr = 2e-2, .min_lr = 1e-3, .warmup_steps = 4};
    for (int i = 0; i < n; i++) {
        GF_CHECK(steps[i] == i + 1, "%s: row %d logs step %lld", kind, i, steps[i]);
        double w = gf_schedule_lr(&want, steps[i] - 1, spe, EPOCHS * spe);
        if (!(fabs(lrs[i] - w) <= 1e-6 * w))
            gf_test_fail(__FILE__, __LINE__, "%s: step %lld logs lr %.7g, the schedule gives %.7g", kind, steps[i],
                         lrs[i], w);
    }
}

GF_TEST(smoke, train_lr_column_follows_cosine_schedule) {
    schedule_lr_column("keys-cosine", "cosine", GF_SCHED_COSINE);
}
GF_TEST(smoke, train_lr_column_follows_epoch_cosine_schedule) {
    schedule_lr_column("keys-epoch-cosine", "epoch_cosine", GF_SCHED_EPOCH_COSINE);
}

/* [optim] beta1, beta2, eps, weight_decay, decay_bias/norm/embed and [schedule] reach AdamW and the
 * schedule (gf_recipe_optim_cfg, which the trainer uses) as set. Two recipes with every value
 * different, each bool once true and once false, so a field left at its default or hard-wired
 * fails one of them. ([optim] clip goes to the step directly, not through this config.) */
GF_TEST(unit, recipe_optim_keys_reach_adamw) {
    static const struct {
        const char *sets[10];
        double beta1, beta2, eps, wd;
        int bias, norm, embed;
        double lr, min_lr;
        int64_t warmup;
        gf_schedule_kind kind;
    } c[2] = {
        {{"optim.beta1=0.8", "optim.beta2=0.95", "optim.eps=1e-6", "optim.weight_decay=0.25", "optim.decay_bias=true",
          "optim.decay_norm=true", "optim.decay_embed=false", "optim.lr=3e-3", "schedule.kind=epoch_cosine",
          "schedule.warmup_steps=7"},
         0.8, 0.95, 1e-6, 0.25, 1, 1, 0, 3e-3, 1e-3, 7, GF_SCHED_EPOCH_COSINE},
        {{"optim.beta1=0.5", "optim.beta2=0.9", "optim.eps=1e-7", "optim.weight_decay=0", "optim.decay_bias=false",
          "optim.decay_norm=false", "optim.decay_embed=true", "optim.lr=4e-4", "schedule.kind=constant",
          "schedule.min_lr=2e-5"},
         0.5, 0.9, 1e-7, 0.0, 0, 0, 1, 4e-4, 2e-5, 5, GF_SCHED_CONSTANT},
    };
    for (int i = 0; i < 2; i++) {
        gf_recipe r;
        GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&r, "keys-optim", 1, c[i].sets, 10));
        gf_adamw_cfg a;
        gf_schedule_cfg sc;
        memset(&a, 0x55, sizeof a);
        memset(&sc, 0x55, sizeof sc);
        gf_recipe_optim_cfg(&r, &a, &sc);
        GF_CHECK(a.beta1 == c[i].beta1 && a.beta2 == c[i].beta2, "recipe %d: betas (%g, %g)", i, a.beta1, a.beta2);
        GF_CHECK(a.eps == c[i].eps, "recipe %d: eps %g, expected %g", i, a.eps, c[i].eps);
        GF_CHECK(a.weight_decay == c[i].wd, "recipe %d: weight_decay %g, expected %g", i, a.weight_decay, c[i].wd);
        GF_CHECK(a.decay[GF_PK_WEIGHT] == 1, "recipe %d: weights must always decay", i);
        GF_CHECK(a.decay[GF_PK_BIAS] == c[i].bias && a.decay[GF_PK_NORM] == c[i].norm &&
                     a.decay[GF_PK_EMBED] == c[i].embed,
                 "recipe %d: decay bias/norm/embed %d/%d/%d, expected %d/%d/%d", i, a.decay[GF_PK_BIAS],
                 a.decay[GF_PK_NORM], a.decay[GF_PK_EMBED], c[i].bias, c[i].norm, c[i].embed);
        GF_CHECK(sc.kind == c[i].kind && sc.lr == c[i].lr && sc.min_lr == c[i].min_lr &&
                     sc.warmup_steps == c[i].warmup,
                 "recipe %d: schedule kind %d lr %g min_lr %g warmup %lld", i, (int)sc.kind, sc.lr, sc.min_lr,
                 (long long)sc.warmup_steps);
    }
}

/* [data] train_fraction = 0.5 keeps the first ceil(N/2) of the train split's N tokens (task_lm.c):
 * floor((ceil(N/2) - 1) / L) windows (training takes full windows only), ceil(windows / B) steps
 * an epoch, about half of the full split's. A one-epoch run takes exactly that many steps. */
GF_TEST(smoke, train_fraction_halves_the_epoch) {
    gf_recipe full;
    GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&full, "keys-frac-full", 1, NULL, 0));
    gf_session s;
    GF_REQUIRE_OK(gf_session_open(&s, &full, 0));
    int64_t full_windows = 0;
    GF_REQUIRE_OK(gf_session_train_loader(&s, full.train.batch_size, &full_windows, 0));
    const int64_t N = gf_session_tokens(&s, GF_SPLIT_TRAIN)->n;
    gf_session_close(&s);
    const int64_t L = full.data.seq_len, B = full.train.batch_size;
    GF_REQUIRE(full_windows == (N - 1) / L, "full split: %lld windows of %lld tokens", (long long)full_windows,
               (long long)N);
    const int64_t keep = (N + 1) / 2, want = ((keep - 1) / L + B - 1) / B, full_spe = (full_windows + B - 1) / B;
    GF_REQUIRE(full_spe > 20 && llabs(2 * want - full_spe) <= 2, "half of %lld steps is not %lld", (long long)full_spe,
               (long long)want);
    const char *sets[] = {"data.train_fraction=0.5", "train.epochs=1", "train.max_steps=0", "train.eval_every=0"};
    gf_recipe r;
    GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&r, "keys-frac-half", 1, sets, 4));
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    char dir[700];
    snprintf(dir, sizeof dir, "%s/runs/keys-frac-half", gf_test_tmpdir());
    GF_CHECK(gf_test_summary_value(dir, "steps") == (double)want, "one epoch at train_fraction 0.5: %g steps, expected %lld "
             "(the full split: %lld)", gf_test_summary_value(dir, "steps"), (long long)want, (long long)full_spe);
    GF_CHECK(gf_test_summary_value(dir, "epochs") == 1.0, "epochs %g", gf_test_summary_value(dir, "epochs"));
}

/* [eval] batch_size changes how the split is cut into batches, never what is measured: the
 * evaluation keeps the partial last batch and the short tail window (padded with ignored targets,
 * gflow/data.h keep_tail), so every batch size scores all N-1 targets of the split's N tokens, to
 * the same loss up to summation order. The sizes include 1, ones leaving a partial last batch, and
 * one larger than the split (a single partial batch). */
GF_TEST(smoke, eval_batch_size_does_not_change_the_loss) {
    gf_recipe r;
    GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&r, "keys-evalbs", 8, NULL, 0));
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    GF_REQUIRE_OK(gf_train_run(&r, &o, &intr));
    char dir[700], ckpt[800];
    snprintf(dir, sizeof dir, "%s/runs/keys-evalbs", gf_test_tmpdir());
    snprintf(ckpt, sizeof ckpt, "%s/best.ckpt", dir);
    gf_eval_result ref; /* the run's own eval batch size: 0, i.e. the train batch size 8 */
    GF_REQUIRE_OK(gf_eval_run_dir(dir, "best", "valid", &ref));
    static const char *const bs[] = {"eval.batch_size=1", "eval.batch_size=3", "eval.batch_size=5",
                                     "eval.batch_size=4096"};
    for (int i = 0; i < 4; i++) {
        gf_recipe re;
        GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&re, "keys-evalbs", 8, &bs[i], 1));
        gf_session s;
        GF_REQUIRE_OK(gf_session_open(&s, &re, 0));
        gf_eval_result res;
        gf_status st = gf_ckpt_load(ckpt, s.params, NULL);
        if (!st) st = gf_session_eval(&s, GF_SPLIT_VALID, 0, &res);
        const int64_t N = st ? 0 : gf_session_tokens(&s, GF_SPLIT_VALID)->n, L = re.data.seq_len;
        gf_session_close(&s);
        GF_REQUIRE_OK(st);
        const int64_t windows = (N - 1 + L - 1) / L, B = re.eval.batch_size;
        const int short_tail = (N - 1) % L != 0, partial = windows % 3 != 0 && windows % 5 != 0 && windows < 4096;
        if (i == 0) /* the split must end in a short window and in a partial batch of 3, of 5 and of 4096 */
            GF_REQUIRE(short_tail && partial,
                       "valid split of %lld tokens, %lld windows: the test needs a short last window and a "
                       "partial last batch", (long long)N, (long long)windows);
        GF_CHECK(res.n_tokens == N - 1 && ref.n_tokens == N - 1, "batch size %lld: %lld targets scored (batch size "
                 "8: %lld), the split has %lld", (long long)B, (long long)res.n_tokens, (long long)ref.n_tokens,
                 (long long)(N - 1));
        GF_CHECK_NEAR(res.loss, ref.loss, 0, 1e-6);
    }
}

/* [optim] clip reaches the step (it bypasses gf_adamw_cfg). Clipping the global norm to 1e-12
 * leaves AdamW's update lr * m / (sqrt(v) + eps) about 1e-6 of lr (gradients far below eps), so
 * the run ends where a run at lr 1e-30 does; clip 0 (off) learns. Weight decay off: it alone
 * would move the weights. */
GF_TEST(smoke, train_clip_reaches_the_step) {
    static const char *const lr_or_clip[3] = {"optim.clip=1e-12", "optim.lr=1e-30", "optim.clip=0"};
    double v[3];
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "keys-clip%d", i);
        const char *sets[] = {lr_or_clip[i], "optim.weight_decay=0", "model.dropout=0", "train.eval_every=0",
                              "schedule.min_lr=0"};
        v[i] = gf_test_train_summary(name, 12, sets, 5, "best_val_loss");
    }
    GF_CHECK(fabs(v[0] - v[1]) < 1e-3, "clip 1e-12: validation loss %.6f, untrained (lr 1e-30) %.6f", v[0], v[1]);
    GF_CHECK(v[2] < v[1] - 0.1, "clip off: validation loss %.6f, not below the untrained %.6f", v[2], v[1]);
}

/* [run] precision reaches the training step: bf16 (inputs of every matrix product rounded to
 * bfloat16) ends elsewhere than fp32, near it (the same seed, 20 steps of the tiny model), and
 * the same bf16 run twice ends on the same bits. */
GF_TEST(smoke, train_precision_reaches_the_step) {
    static const char *const prec[3] = {"run.precision=fp32", "run.precision=bf16", "run.precision=bf16"};
    double v[3];
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "keys-prec%d", i);
        const char *sets[] = {prec[i], "train.eval_every=0"};
        v[i] = gf_test_train_summary(name, 20, sets, 2, "best_val_loss");
    }
    GF_CHECK(v[1] != v[0], "bf16 ended on fp32's validation loss %.9g: the precision did not reach the GEMMs", v[0]);
    GF_CHECK(fabs(v[1] - v[0]) <= 0.02 * v[0], "bf16 %.6f, fp32 %.6f: more than 2 %% apart", v[1], v[0]);
    GF_CHECK(v[2] == v[1], "bf16 twice: %.9g then %.9g", v[1], v[2]);
    /* summary.tsv says which precision, and for bf16 how the products ran */
    for (int i = 0; i < 2; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/runs/keys-prec%d/summary.tsv", gf_test_tmpdir(), i);
        char *s = gf_test_slurp(path, NULL);
        GF_REQUIRE(s, "%s", path);
        GF_CHECK(strstr(s, i ? "\nprecision\tbf16 (" : "\nprecision\tfp32\n") != NULL, "%s: no precision line", path);
        free(s);
    }
}
