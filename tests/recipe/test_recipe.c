/* test_recipe.c — recipe parsing, validation, resolution and the generated key docs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gf_test.h"
#include "test_util.h"
#include "gflow.h"
#include "gflow/recipe.h"


static void tmp_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", gf_test_tmpdir(), name);
}

/* A valid minimal recipe, 14 lines, ending inside [model]; cases append from line 15. */
static const char *k_head =
    "[run]\n"
    "name = t\n"
    "[data]\n"
    "dataset = wikitext2\n"
    "[optim]\n"
    "lr = 1e-3\n"
    "[train]\n"
    "epochs = 1\n"
    "batch_size = 4\n"
    "[model]\n"
    "family = grassmann\n"
    "n_layers = 2\n"
    "d_model = 64\n"
    "d_ff = 128\n";

typedef struct bad_case {
    int full;            /* 1: text replaces the head */
    const char *text;
    const char *set;     /* one --set, or NULL */
    gf_status code;
    const char *where;   /* substring: location */
    const char *what;    /* substring: key and reason */
} bad_case;

static const bad_case k_bad[] = {
    {0, "r = 300\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] r: must be <= d_model (64), got 300"},
    {0, "r = abc\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] r: not an integer"},
    {0, "r = 3.5\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] r: not an integer"},
    {0, "r = 1\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] r: must be >= 2, got 1"},
    {0, "bogus = 1\n", NULL, GF_E_PARSE, "x.ini:15:", "[model] bogus: unknown key"},
    {0, "[nosuch]\nx = 1\n", NULL, GF_E_PARSE, "x.ini:15:", "unknown section [nosuch]"},
    {0, "[nosuch]\n", NULL, GF_E_PARSE, "x.ini:15:", "unknown section [nosuch]"},
    {0, "d_ff = 64\n", NULL, GF_E_PARSE, "x.ini:15:", "[model] d_ff: duplicate key (first set on line 14)"},
    {0, "dropout = 1\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] dropout: must be < 1, got 1"},
    {0, "dropout = -0.1\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] dropout: must be >= 0"},
    {0, "dropout = x\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] dropout: not a number"},
    {0, "normalize = maybe\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] normalize: not a bool"},
    {0, "block = mid_ln\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] block: must be one of post_ln|pre_ln, got 'mid_ln'"},
    {0, "offsets =\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] offsets: must not be empty"},
    {0, "offsets = 1,0,4\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] offsets: must be >= 1, got 0"},
    {0, "offsets = 1,-2\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] offsets: must be >= 1, got -2"},
    {0, "offsets = 1,,2\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] offsets: empty entry"},
    {0, "offsets = 1,a\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] offsets: not an integer list"},
    {0, "offset_schedule = 1,2,4\n", NULL, GF_E_INVALID, "x.ini:15:",
     "[model] offset_schedule: must have n_layers (2) entries, got 3"},
    {0, "[tokenizer]\nvocab_size = 0\n", NULL, GF_E_INVALID, "x.ini:16:", "[tokenizer] vocab_size: must be >= 1, got 0"},
    {0, "heads = 3\n", "model.family=transformer", GF_E_INVALID, "x.ini:15:",
     "[model] heads: d_model (64) must be divisible by heads, got 3"},
    {1, "name = t\n[run]\n", NULL, GF_E_PARSE, "x.ini:1:", "key 'name' before any [section]"},
    {0, "this is not a key\n", NULL, GF_E_PARSE, "x.ini:15:", "syntax error"},
    {0, "[model\n", NULL, GF_E_PARSE, "x.ini:15:", "syntax error"},
    {1, "[run]\nname = t\n", NULL, GF_E_INVALID, "x.ini:", "[data] dataset: required key missing"},
    {1, "[run]\nname =\n", NULL, GF_E_INVALID, "x.ini:2:", "[run] name: must not be empty"},
    {0, "r = 11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111"
        "111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111"
        "11111111111111111111111111111111111111111\n", NULL, GF_E_PARSE, "x.ini:15:", "line too long"},
    {0, "[schedule]\nmin_lr = 0.01\n", NULL, GF_E_INVALID, "x.ini:16:", "[schedule] min_lr: must be <= [optim] lr"},
    {0, "[train]\neval_every = 5\nevals_per_epoch = 2\n", NULL, GF_E_INVALID, "x.ini:17:",
     "[train] evals_per_epoch: set both it and eval_every (5); choose one"},
    {0, "[data]\ntrain_fraction = 0\n", NULL, GF_E_INVALID, "x.ini:16:", "[data] train_fraction: must be > 0"},
    {0, "[data]\nseq_len = 0\n", NULL, GF_E_INVALID, "x.ini:16:", "[data] seq_len: must be >= 1, got 0"},
    {0, "max_len = 64\n", NULL, GF_E_INVALID, "x.ini:15:", "[model] max_len: must be >= [data] seq_len (128), got 64"},
    {0, "[run]\nout_dir = a;b\n", NULL, GF_E_INVALID, "x.ini:16:", "[run] out_dir: must not contain"},
    {0, "[run]\nbase = nothere.ini\n", NULL, GF_E_NOTFOUND, "x.ini:16:", "[run] base: cannot open"},
    {0, "[train]\nnonfinite = ignore\n", NULL, GF_E_INVALID, "x.ini:16:", "must be one of stop|skip, got 'ignore'"},
    {0, "[train]\nmax_skip_frac = 1.5\n", NULL, GF_E_INVALID, "x.ini:16:", "[train] max_skip_frac: must be <= 1"},
    {0, "[train]\nsave_every = -3\n", NULL, GF_E_INVALID, "x.ini:16:", "[train] save_every: must be >= 0"},
    {0, "[train]\nsave_every_min = soon\n", NULL, GF_E_INVALID, "x.ini:16:", "[train] save_every_min: not a number"},
    {0, "[optim]\nbeta1 = nan\n", NULL, GF_E_INVALID, "x.ini:16:", "[optim] beta1: must be finite"},
    {0, "[train]\nlog_every = 99999999999999999999\n", NULL, GF_E_INVALID, "x.ini:16:", "[train] log_every: out of range"},
    {0, "[data]\ndataset = imagenet\n", NULL, GF_E_PARSE, "x.ini:16:", "[data] dataset: duplicate key (first set on line 4)"},
    {1, "[run]\nname = t\n[data]\ndataset = imagenet\n", NULL, GF_E_INVALID, "x.ini:4:",
     "[data] dataset: must be one of wikitext2|snli"},
    /* --set */
    {0, "", "model.r=abc", GF_E_INVALID, "--set model.r=abc: ", "[model] r: not an integer"},
    {0, "", "model.r", GF_E_INVALID, "--set model.r: ", "expected section.key=value (no '=')"},
    {0, "", "r=3", GF_E_INVALID, "--set r=3: ", "no section"},
    {0, "", "nosuch.r=3", GF_E_INVALID, "--set nosuch.r=3: ", "unknown section [nosuch]"},
    {0, "", "model.nope=3", GF_E_INVALID, "--set model.nope=3: ", "[model] nope: unknown key"},
    {0, "", "run.base=x.ini", GF_E_INVALID, "--set run.base=x.ini: ", "only a recipe file"},
    {0, "", "model.r=100", GF_E_INVALID, "--set model.r=100: ", "[model] r: must be <= d_model (64), got 100"},
    {0, "", "model.offsets=", GF_E_INVALID, "--set model.offsets=: ", "[model] offsets: must not be empty"},
    /* the model's own checks (gf_model_cfg_check, gf_nli_cfg_check) at the key's origin */
    {0, "", "model.n_layers=70", GF_E_INVALID, "--set model.n_layers=70: ", "[model] n_layers: must be <= 64, got 70"},
    {1, "[run]\nname = t\n[data]\ndataset = snli\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\nbatch_size = 4\n"
        "[model]\nfamily = grassmann\nn_layers = 2\nd_model = 64\nd_ff = 128\nr = 16\nmix_heads = 7\n", NULL,
     GF_E_INVALID, "x.ini:16:", "[model] mix_heads: must divide both C(r,2) = 120 and d_model = 64, got 7"},
    /* the snli encoder is always gated, with Pluecker features: their ablations are the LM's only */
    {1, "[run]\nname = t\n[data]\ndataset = snli\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\nbatch_size = 4\n"
        "[model]\nfamily = grassmann\nn_layers = 2\nd_model = 64\nd_ff = 128\nr = 16\ngate = false\n", NULL,
     GF_E_INVALID, "x.ini:16:", "[model] gate: false is an ablation of the language model only"},
    {1, "[run]\nname = t\n[data]\ndataset = snli\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\nbatch_size = 4\n"
        "[model]\nfamily = grassmann\nn_layers = 2\nd_model = 64\nd_ff = 128\nr = 16\n", "model.plucker=false",
     GF_E_INVALID, "--set model.plucker=false: ", "[model] plucker: false is an ablation of the language model only"},
    {1, "[run]\nname = t\n[data]\ndataset = snli\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\nbatch_size = 4\n"
        "[model]\nfamily = transformer\nn_layers = 2\nd_model = 64\nd_ff = 128\nblock = post_ln\n", NULL,
     GF_E_INVALID, "x.ini:15:", "[model] block: post_ln is a layout of the language model only"},
};

GF_TEST(unit, recipe_malformed_table) {
    char path[1024];
    tmp_path(path, sizeof path, "x.ini");
    const int n = (int)(sizeof k_bad / sizeof k_bad[0]);
    GF_CHECK(n >= 30, "at least 30 cases (%d)", n);
    for (int i = 0; i < n; i++) {
        const bad_case *c = &k_bad[i];
        char text[4096];
        snprintf(text, sizeof text, "%s%s", c->full ? "" : k_head, c->text);
        gf_test_write_text(path, text);
        gf_recipe r;
        const char *sets[1] = {c->set};
        gf_status s = gf_recipe_load(path, sets, c->set ? 1 : 0, &r);
        const char *msg = gf_last_error();
        if (s != c->code)
            gf_test_fail(__FILE__, __LINE__, "case %d (%s%s): got %s (%s), want %s", i, c->text,
                         c->set ? c->set : "", gf_status_name(s), s ? msg : "", gf_status_name(c->code));
        else if (!strstr(msg, c->where) || !strstr(msg, c->what))
            gf_test_fail(__FILE__, __LINE__, "case %d: message '%s' lacks '%s' or '%s'", i, msg, c->where, c->what);
    }
    /* the head itself is valid, so every case above fails for its own reason */
    gf_test_write_text(path, k_head);
    gf_recipe r;
    GF_CHECK_OK(gf_recipe_load(path, NULL, 0, &r));
    GF_CHECK_ERR(gf_recipe_load("/nonexistent/dir/none.ini", NULL, 0, &r), GF_E_NOTFOUND, "none.ini: cannot open");
}

static void load_shipped(const char *name, gf_recipe *r, gf_status *st) {
    char path[1024];
    snprintf(path, sizeof path, "%s/recipes/%s", gf_test_source_root(), name);
    *st = gf_recipe_load(path, NULL, 0, r);
}

static const char *k_shipped[] = {"wikitext2.ini",         "wikitext2-transformer.ini", "wikitext2-12l.ini",
                                  "wikitext2-12l-transformer.ini", "quickstart.ini",  "wikitext2-wp.ini",
                                  "wikitext2-wp-transformer.ini",  "wikitext2-wp-12l.ini",
                                  "wikitext2-wp-12l-transformer.ini"};

GF_TEST(unit, recipe_shipped_and_round_trip) {
    for (size_t i = 0; i < sizeof k_shipped / sizeof k_shipped[0]; i++) {
        gf_recipe a, b;
        gf_status st;
        load_shipped(k_shipped[i], &a, &st);
        GF_CHECK(st == GF_OK, "%s: %s", k_shipped[i], gf_last_error());
        if (st != GF_OK) continue;
        char *text = NULL, *text2 = NULL;
        GF_REQUIRE_OK(gf_recipe_resolved_text(&a, &text));
        GF_CHECK(strstr(text, "[model]\nfamily = ") != NULL, "sections in text");
        GF_CHECK(strstr(text, "\nbase ") == NULL, "base is not written");
        memset(&b, 0x5a, sizeof b);
        GF_CHECK_OK(gf_recipe_parse_text(text, k_shipped[i], NULL, 0, &b));
        GF_CHECK(gf_recipe_equal(&a, &b), "%s: round trip differs", k_shipped[i]);
        GF_CHECK(memcmp(&a, &b, sizeof a) == 0, "%s: round trip differs bytewise", k_shipped[i]);
        GF_CHECK_OK(gf_recipe_resolved_text(&b, &text2));
        GF_CHECK(text2 && strcmp(text, text2) == 0, "%s: resolved text not a fixed point", k_shipped[i]);
        free(text);
        free(text2);
    }
    /* every key is written: a changed non-default float survives */
    gf_recipe a, b;
    gf_status st;
    load_shipped("quickstart.ini", &a, &st);
    GF_REQUIRE(st == GF_OK, "%s", gf_last_error());
    a.optim.beta2 = 0.1 + 0.2; /* not a short decimal */
    a.model.offset_schedule.n = 2;
    a.model.offset_schedule.v[0] = 3;
    a.model.offset_schedule.v[1] = 7;
    char *text;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&a, &text));
    GF_CHECK_OK(gf_recipe_parse_text(text, "ckpt", NULL, 0, &b));
    GF_CHECK(b.optim.beta2 == 0.1 + 0.2 && gf_recipe_equal(&a, &b), "exact float round trip");
    free(text);
    /* the struct is not trivially equal: equality can fail */
    b.model.r++;
    GF_CHECK(!gf_recipe_equal(&a, &b), "equal must see a changed key");
}

GF_TEST(unit, recipe_values_and_base_inheritance) {
    gf_recipe r;
    gf_status st;
    load_shipped("wikitext2.ini", &r, &st);
    GF_REQUIRE(st == GF_OK, "%s", gf_last_error());
    GF_CHECK(strcmp(r.run.name, "wikitext2-grassmann") == 0, "name %s", r.run.name);
    GF_CHECK(r.model.family == GF_FAMILY_GRASSMANN && r.model.n_layers == 6 && r.model.d_model == 256 &&
             r.model.r == 32 && r.model.d_ff == 1024, "paper sizes");
    GF_CHECK(r.model.offsets.n == 6 && r.model.offsets.v[4] == 12 && r.model.offset_schedule.n == 0, "offsets");
    GF_CHECK(r.data.seq_len == 128 && r.model.max_len == 128 && r.train.batch_size == 32 && r.train.epochs == 30,
             "L, Lmax, B, epochs");
    GF_CHECK(r.tokenizer.kind == GF_TOK_SPM && r.tokenizer.model_type == GF_SPM_BPE &&
             r.tokenizer.vocab_size == 30522, "tokenizer");
    GF_CHECK(r.optim.lr == 1e-3 && r.optim.weight_decay == 0.01 && r.optim.clip == 0 &&
             r.schedule.kind == GF_SCHED_EPOCH_COSINE && r.schedule.warmup_steps == 0 && r.model.dropout == 0.1,
             "R1");
    GF_CHECK(strcmp(r.data.train_file, "wikitext-2/wiki.train.tokens") == 0 &&
             strcmp(r.data.test_file, "wikitext-2/wiki.test.tokens") == 0, "dataset default files");
    GF_CHECK(r.eval.batch_size == 32 && r.eval.split == GF_SPLIT_VALID && r.model.classifier_hidden == 256,
             "derived defaults");

    /* two levels: 12l-transformer -> 12l -> base */
    load_shipped("wikitext2-12l-transformer.ini", &r, &st);
    GF_REQUIRE(st == GF_OK, "%s", gf_last_error());
    GF_CHECK(strcmp(r.run.name, "wikitext2-12l-transformer") == 0, "own name wins");
    GF_CHECK(r.model.family == GF_FAMILY_TRANSFORMER && r.model.n_layers == 12 && r.data.seq_len == 256 &&
             r.model.max_len == 256 && r.train.batch_size == 16 && r.optim.lr == 1e-3 && r.model.heads == 4,
             "inherited through two bases");

    /* the WordPiece variants: the paper's recipes with BERT's vocabulary, nothing else changed */
    static const char *const wp[][2] = {{"wikitext2-wp.ini", "wikitext2.ini"},
                                        {"wikitext2-wp-transformer.ini", "wikitext2-transformer.ini"},
                                        {"wikitext2-wp-12l.ini", "wikitext2-12l.ini"},
                                        {"wikitext2-wp-12l-transformer.ini", "wikitext2-12l-transformer.ini"}};
    for (int i = 0; i < 4; i++) {
        gf_recipe w, base;
        load_shipped(wp[i][0], &w, &st);
        GF_REQUIRE(st == GF_OK, "%s: %s", wp[i][0], gf_last_error());
        load_shipped(wp[i][1], &base, &st);
        GF_REQUIRE(st == GF_OK, "%s: %s", wp[i][1], gf_last_error());
        GF_CHECK(w.tokenizer.kind == GF_TOK_WORDPIECE && w.tokenizer.vocab_size == 30522 &&
                 strcmp(w.tokenizer.train_file, "bert-base-uncased/vocab.txt") == 0, "%s: tokenizer", wp[i][0]);
        GF_CHECK(memcmp(&w.model, &base.model, sizeof w.model) == 0 && memcmp(&w.optim, &base.optim, sizeof w.optim) == 0 &&
                 memcmp(&w.train, &base.train, sizeof w.train) == 0 && memcmp(&w.data, &base.data, sizeof w.data) == 0 &&
                     memcmp(&w.schedule, &base.schedule, sizeof w.schedule) == 0,
                 "%s: the model, data and training of %s", wp[i][0], wp[i][1]);
    }
    /* the study's WordPiece rows: the post-LN and pre-LN pairs over wikitext2-wp.ini */
    char ab[1024];
    snprintf(ab, sizeof ab, "%s/recipes/ablations/paper-wordpiece.ini", gf_test_source_root());
    gf_ablation a;
    GF_REQUIRE_OK(gf_ablation_load(ab, &a));
    GF_CHECK(a.n_variants == 4 && gf_ablation_find(&a, "pre-ln") > 0 && gf_ablation_find(&a, "transformer") > 0 &&
             gf_ablation_find(&a, "transformer-pre-ln") > 0 && strstr(a.base, "wikitext2-wp.ini"),
             "ablations/paper-wordpiece.ini: %lld variants, base %s", (long long)a.n_variants, a.base);
    gf_ablation_free(&a);

    /* relative base paths, override order, and a cycle */
    char dir[1024], p[1200];
    snprintf(dir, sizeof dir, "%s/inc", gf_test_tmpdir());
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/sub", dir);
    GF_REQUIRE(system(cmd) == 0, "mkdir");
    snprintf(p, sizeof p, "%s/sub/common.ini", dir);
    gf_test_write_text(p, "[model]\nd_model = 96\nr = 8\n[train]\nepochs = 3\n");
    snprintf(p, sizeof p, "%s/top.ini", dir);
    gf_test_write_text(p, "[model]\nr = 12    # overrides the base\n[run]\nbase = sub/common.ini\n");
    snprintf(p, sizeof p, "%s/run.ini", dir);
    char text[1024];
    snprintf(text, sizeof text, "%s[run]\nbase = top.ini\n", k_head);
    gf_test_write_text(p, text);
    GF_REQUIRE_OK(gf_recipe_load(p, NULL, 0, &r));
    /* head sets d_model = 64 after the bases; top's r = 12 beats common's 8; epochs from head (1) */
    GF_CHECK(r.model.d_model == 64 && r.model.r == 12 && r.train.epochs == 1, "d=%lld r=%lld e=%lld",
             (long long)r.model.d_model, (long long)r.model.r, (long long)r.train.epochs);
    snprintf(p, sizeof p, "%s/sub/common.ini", dir);
    gf_test_write_text(p, "[run]\nbase = ../top.ini\n");
    snprintf(p, sizeof p, "%s/run.ini", dir);
    GF_CHECK_ERR(gf_recipe_load(p, NULL, 0, &r), GF_E_INVALID, "cycle");
    /* a file naming itself */
    snprintf(p, sizeof p, "%s/self.ini", dir);
    gf_test_write_text(p, "[run]\nbase = self.ini\n");
    GF_CHECK_ERR(gf_recipe_load(p, NULL, 0, &r), GF_E_INVALID, "self.ini:2: [run] base: cycle");
}

GF_TEST(unit, recipe_set_overrides) {
    char path[1024];
    tmp_path(path, sizeof path, "s.ini");
    gf_test_write_text(path, k_head);
    gf_recipe r;
    const char *sets[] = {"model.offsets = 1, 3 ,9", "optim.lr=5e-4", "optim.lr=2e-4", "data.dataset=snli",
                          "model.block=pre_ln", "train.nonfinite=skip", "optim.decay_bias=yes"};
    GF_REQUIRE_OK(gf_recipe_load(path, sets, 7, &r));
    GF_CHECK(r.model.offsets.n == 3 && r.model.offsets.v[0] == 1 && r.model.offsets.v[1] == 3 &&
             r.model.offsets.v[2] == 9, "list override");
    GF_CHECK(r.optim.lr == 2e-4, "later --set wins (%g)", r.optim.lr);
    GF_CHECK(r.data.dataset == GF_DS_SNLI && strcmp(r.data.train_file, "snli_1.0/snli_1.0_train.txt") == 0 &&
             strcmp(r.data.valid_file, "snli_1.0/snli_1.0_dev.txt") == 0 && r.model.max_len == 48,
             "snli defaults follow the overridden dataset");
    GF_CHECK(r.model.block == GF_BLOCK_PRE_LN && r.train.nonfinite == GF_NONFINITE_SKIP && r.optim.decay_bias,
             "enum/bool overrides");
    /* snli: the block is what the NLI encoder runs (pre_ln), recorded so in place of the default
     * post_ln; post_ln set by the recipe is refused at its key, pre_ln set is accepted */
    gf_recipe rs;
    GF_REQUIRE_OK(gf_recipe_load(path, (const char *[]){"data.dataset=snli"}, 1, &rs));
    GF_CHECK(rs.model.block == GF_NLI_BLOCK && GF_NLI_BLOCK == GF_BLOCK_PRE_LN, "snli block recorded as %d",
             (int)rs.model.block);
    GF_REQUIRE_OK(gf_recipe_load(path, (const char *[]){"data.dataset=snli", "model.block=pre_ln"}, 2, &rs));
    GF_CHECK(rs.model.block == GF_BLOCK_PRE_LN, "snli block pre_ln set");
    GF_CHECK_ERR(gf_recipe_load(path, (const char *[]){"data.dataset=snli", "model.block=post_ln"}, 2, &rs),
                 GF_E_INVALID, "--set model.block=post_ln: [model] block: post_ln is a layout of the language model");
    gf_adamw_cfg ac;
    gf_schedule_cfg sc;
    gf_recipe_optim_cfg(&r, &ac, &sc);
    GF_CHECK(ac.decay[GF_PK_BIAS] == 1 && ac.decay[GF_PK_NORM] == 0 && ac.decay[GF_PK_EMBED] == 1 &&
             ac.weight_decay == 0.01 && sc.lr == 2e-4 && sc.kind == GF_SCHED_COSINE, "optim cfg mapping");
    /* --set also applies to text from a checkpoint */
    const char *s2[] = {"model.r=16"};
    char *text;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &text));
    gf_recipe r2;
    GF_CHECK_OK(gf_recipe_parse_text(text, "ckpt", s2, 1, &r2));
    GF_CHECK(r2.model.r == 16 && r2.optim.lr == 2e-4, "parse_text + set");
    free(text);
    /* a cross-key error on a key left at its default names the line of the key it conflicts with */
    const char *s3[] = {"model.d_model=16"};
    GF_CHECK_ERR(gf_recipe_load(path, s3, 1, &r), GF_E_INVALID, "--set model.d_model=16: [model] r (left at its default): must be <= d_model (16), got 32");
}

GF_TEST(unit, recipe_crlf_and_inline_comments) {
    char path[1024];
    tmp_path(path, sizeof path, "crlf.ini");
    gf_test_write_text(path,
               "\xEF\xBB\xBF# header comment\r\n"
               "; another\r\n"
               "[run]   # section comment\r\n"
               "name = crlf-run # trailing hash comment\r\n"
               "out_dir = out/dir ; trailing semicolon comment\r\n"
               "\r\n"
               "[data]\r\n"
               "  dataset = wikitext2\r\n"
               "[optim]\r\n"
               "lr = 1e-3\t# tab before comment\r\n"
               "[train]\r\n"
               "epochs = 1\r\n"
               "batch_size = 4\r\n"
               "[model]\r\n"
               "family = grassmann\r\n"
               "n_layers = 2\r\n"
               "d_model = 64\r\n"
               "d_ff = 128\r\n"
               "offsets = 1,2 # two offsets\r\n");
    gf_recipe r;
    GF_REQUIRE_OK(gf_recipe_load(path, NULL, 0, &r));
    GF_CHECK(strcmp(r.run.name, "crlf-run") == 0, "name '%s'", r.run.name);
    GF_CHECK(strcmp(r.run.out_dir, "out/dir") == 0, "out_dir '%s'", r.run.out_dir);
    GF_CHECK(r.optim.lr == 1e-3 && r.model.offsets.n == 2, "values after comments");
    /* line numbers still count CRLF lines */
    gf_test_write_text(path, "[run]\r\nname = t\r\n[model]\r\nr = x\r\n");
    GF_CHECK_ERR(gf_recipe_load(path, NULL, 0, &r), GF_E_INVALID, "crlf.ini:4: [model] r: not an integer");
}

GF_TEST(unit, recipe_keys_doc_up_to_date) {
    char *gen = NULL;
    size_t gen_len = 0;
    FILE *m = open_memstream(&gen, &gen_len);
    GF_REQUIRE(m != NULL, "open_memstream");
    gf_recipe_write_keys_md(m);
    fclose(m);
    GF_CHECK(strstr(gen, "| `offsets` | int list | `1,2,4,8,12,16` |") != NULL, "table row present");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/recipe-keys.md", gf_test_source_root());
    size_t have_len = 0;
    char *have = gf_test_slurp(path, &have_len);
    if (!have || have_len != gen_len || memcmp(have, gen, gen_len) != 0) {
        char out[1024];
        tmp_path(out, sizeof out, "recipe-keys.md");
        gf_test_write_text(out, gen);
        gf_test_fail(__FILE__, __LINE__, "%s is stale; regenerate: cp %s %s", path, out, path);
    }
    free(have);
    free(gen);
}

/* The test configs are the [model] section a recipe of those sizes resolves to: every other key
 * at the schema's default (src/recipe/model_cfg.c keeps no default of its own). */
GF_TEST(unit, recipe_model_cfg_defaults_are_the_schemas) {
    static const char *lm = "[run]\nname = t\n[data]\ndataset = wikitext2\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\n"
                            "batch_size = 4\n[model]\nfamily = grassmann\nn_layers = 6\nd_model = 256\nd_ff = 1024\n";
    gf_recipe r, d;
    gf_model_cfg c;
    GF_REQUIRE_OK(gf_recipe_parse_text(lm, "lm", NULL, 0, &r));
    gf_model_cfg_default(&c);
    d = r;
    d.model = c;
    GF_CHECK(gf_recipe_equal(&r, &d) && c.vocab == r.tokenizer.vocab_size && c.vocab == 30522,
             "gf_model_cfg_default is not the paper recipe's [model]");
    for (int t = 0; t < 2; t++) {
        char text[512];
        snprintf(text, sizeof text, "[run]\nname = t\n[data]\ndataset = snli\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\n"
                 "batch_size = 4\n[model]\nfamily = %s\nn_layers = 2\nd_model = 256\nd_ff = 512\nr = 64\n",
                 t ? "transformer" : "grassmann");
        GF_REQUIRE_OK(gf_recipe_parse_text(text, "nli", NULL, 0, &r));
        gf_nli_cfg_default(&c, t ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN);
        d = r;
        d.model = c;
        GF_CHECK(gf_recipe_equal(&r, &d) && c.vocab == r.tokenizer.vocab_size && c.max_len == 48 &&
                 c.classifier_hidden == 256 && c.block == GF_BLOCK_PRE_LN,
                 "gf_nli_cfg_default (%s) is not the SNLI recipe's [model]", t ? "transformer" : "grassmann");
    }
}
