/* test_nli.c — the SNLI classifiers (include/gflow/nli.h).
 *
 *  - golden: both heads against the independent PyTorch reference (tools/torch_ref_nli.py,
 *    fixtures tests/fixtures/golden/nli_*.safetensors) through nn/golden.h's runner (logits,
 *    loss, every parameter gradient, AdamW steps), plus predictions and counts.
 *    The batch holds padding, a one-token premise (no Plücker partner) and an unused row.
 *  - unit: parameter counts at the recipe scale (printed; the two heads within 3 %, and equal
 *    to the PyTorch reference's counts), config validation, padding invariance.
 *  - smoke: each head overfits a few dozen synthetic pairs whose label is a function of the
 *    tokens (entailment: hypothesis ⊂ premise; contradiction: a negation token is present;
 *    neutral: a token not in the premise) to >= 95 % train accuracy with AdamW.
 */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/nli.h"
#include "gflow/optim.h"
#include "gflow/safetensors.h"
#include "nn/golden.h"
#include <stdio.h>
#include <string.h>

static void cfg_from_meta(const gf_safetensors_file *f, gf_model_cfg *c) {
    gf_family fam =
        !strcmp(gf_safetensors_meta(f, "family"), "transformer") ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN;
    gf_nli_cfg_default(c, fam);
    c->vocab = gf_golden_meta_i(f, "V");
    c->d_model = gf_golden_meta_i(f, "d");
    c->d_ff = gf_golden_meta_i(f, "dff");
    c->n_layers = gf_golden_meta_i(f, "n_layers");
    c->max_len = gf_golden_meta_i(f, "Lmax");
    c->r = gf_golden_meta_i(f, "r");
    c->window = gf_golden_meta_i(f, "window");
    c->stride = gf_golden_meta_i(f, "stride");
    c->mix_heads = gf_golden_meta_i(f, "mix_heads");
    c->heads = gf_golden_meta_i(f, "heads");
    c->classifier_hidden = gf_golden_meta_i(f, "classifier_hidden");
    c->eps = (float)gf_golden_meta_f(f, "eps");
    c->ln_eps = (float)gf_golden_meta_f(f, "ln_eps");
    c->normalize = !strcmp(gf_safetensors_meta(f, "normalize"), "true");
    c->dropout = 0.0f;
}

static gf_params *nli_open(void *self, const gf_safetensors_file *f) {
    gf_model_cfg c;
    cfg_from_meta(f, &c);
    gf_status st = gf_nli_init(self, &c);
    GF_CHECK_OK(st);
    return st ? NULL : &((gf_nli *)self)->params;
}

/* predictions against the reference logits' argmax, and the counted / correct rows */
static void check_predictions(const gf_safetensors_file *f, const gf_nli_out *out, const int32_t *pred,
                              const int32_t *lab, int64_t B) {
    const float *ref_logits = gf_safetensors_find(f, "out.logits")->data;
    int64_t counted = 0, correct = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *r = ref_logits + b * 3;
        int32_t k = r[1] > r[0] ? 1 : 0;
        if (r[2] > r[k]) k = 2;
        GF_CHECK(out->predictions[b] == k && pred[b] == k, "row %lld predicted %d, reference argmax %d", (long long)b,
                 out->predictions[b], k);
        if (lab[b] >= 0) { counted++; correct += k == lab[b]; }
    }
    GF_CHECK(out->n_counted == counted && out->n_correct == correct, "counted %lld/%lld correct %lld/%lld",
             (long long)out->n_counted, (long long)counted, (long long)out->n_correct, (long long)correct);
    double ref_loss = ((const float *)gf_safetensors_find(f, "out.loss")->data)[0];
    GF_CHECK_NEAR(out->nll_sum / (double)out->n_counted, ref_loss, 0, 1e-5);
}

static gf_tensor *nli_forward(void *self, gf_ctx *ctx, const gf_safetensors_file *f, const gf_tensor **logits) {
    const gf_safetensors_tensor *tp = gf_safetensors_find(f, "input.prem"), *th = gf_safetensors_find(f, "input.hyp"),
                                *mp = gf_safetensors_find(f, "input.prem_mask"),
                                *mh = gf_safetensors_find(f, "input.hyp_mask"),
                                *tl = gf_safetensors_find(f, "input.labels");
    int ok = tp && th && mp && mh && tl && tp->dtype == GF_SAFETENSORS_I32 && tl->dtype == GF_SAFETENSORS_I32;
    GF_CHECK(ok, "fixture tensors");
    if (!ok) return NULL;
    int64_t B = tp->shape[0], Ls = tp->shape[1];
    if (!logits) return gf_nli_forward(self, ctx, tp->data, mp->data, th->data, mh->data, tl->data, B, Ls, NULL);
    int32_t pred[16];
    gf_nli_out out = {.pred_buf = pred};
    gf_tensor *loss = gf_nli_forward(self, ctx, tp->data, mp->data, th->data, mh->data, tl->data, B, Ls, &out);
    check_predictions(f, &out, pred, tl->data, B);
    *logits = out.logits;
    return loss;
}

static void nli_close(void *self) { gf_nli_free(self); }

static const gf_golden_model nli_model = {nli_open, nli_forward, nli_close};

static void run_fixture_on(const char *variant, gf_device dev) {
    gf_nli m;
    gf_golden_run_on(variant, &nli_model, &m, dev);
}
static void run_fixture(const char *variant) { run_fixture_on(variant, GF_DEV_CPU); }

GF_TEST(golden, nli_grassmann) { run_fixture("nli_grassmann"); }
GF_TEST(golden, nli_grassmann_overlap) { run_fixture("nli_grassmann_overlap"); }
GF_TEST(golden, nli_transformer) { run_fixture("nli_transformer"); }

#ifdef GF_HAVE_CUDA
/* suite cuda: the same fixtures through the CUDA path (weights moved to the GPU, the step there) */
GF_TEST(cuda, golden_nli_grassmann) { run_fixture_on("nli_grassmann", GF_DEV_CUDA); }
GF_TEST(cuda, golden_nli_grassmann_overlap) { run_fixture_on("nli_grassmann_overlap", GF_DEV_CUDA); }
GF_TEST(cuda, golden_nli_transformer) { run_fixture_on("nli_transformer", GF_DEV_CUDA); }
#endif

GF_TEST(unit, nli_param_counts) {
    /* reference: python3 tools/torch_ref_nli.py --counts */
    static const int64_t V[2] = {8192, 30522}, want_g[2] = {3456131, 9172611}, want_t[2] = {3427331, 9143811};
    for (int i = 0; i < 2; i++) {
        gf_model_cfg cg, ct;
        gf_nli_cfg_default(&cg, GF_FAMILY_GRASSMANN);
        gf_nli_cfg_default(&ct, GF_FAMILY_TRANSFORMER);
        cg.vocab = ct.vocab = V[i];
        gf_nli mg, mt;
        GF_REQUIRE_OK(gf_nli_init(&mg, &cg));
        GF_REQUIRE_OK(gf_nli_init(&mt, &ct));
        double ratio = (double)mg.params.n / (double)mt.params.n;
        printf("    V=%-6lld grassmann %lld  transformer %lld  ratio %.4f\n", (long long)V[i], (long long)mg.params.n,
               (long long)mt.params.n, ratio);
        GF_CHECK(mg.params.n == want_g[i] && mt.params.n == want_t[i], "counts differ from the PyTorch reference");
        GF_CHECK(fabs(ratio - 1.0) < 0.03, "heads not size-matched: ratio %.4f", ratio);
        GF_CHECK(gf_params_find(&mg.params, "blocks.1.mix.w_plu.weight") &&
                     gf_params_find(&mg.params, "cls.fc2.bias") && gf_params_find(&mt.params, "blocks.0.attn.qkv.weight"),
                 "parameter names");
        gf_nli_free(&mg);
        gf_nli_free(&mt);
    }
}

GF_TEST(unit, nli_cfg_validate) {
    gf_model_cfg c;
    gf_nli_cfg_default(&c, GF_FAMILY_GRASSMANN);
    GF_CHECK_OK(gf_nli_cfg_validate(&c));
    c.mix_heads = 5; /* 2016 % 5 != 0 */
    GF_CHECK_ERR(gf_nli_cfg_validate(&c), GF_E_INVALID, "mix_heads");
    gf_nli_cfg_default(&c, GF_FAMILY_TRANSFORMER);
    c.heads = 3;
    GF_CHECK_ERR(gf_nli_cfg_validate(&c), GF_E_INVALID, "heads");
    gf_nli_cfg_default(&c, GF_FAMILY_GRASSMANN);
    c.window = 1;
    GF_CHECK_ERR(gf_nli_cfg_validate(&c), GF_E_INVALID, "window");
}

/* ---- synthetic task: label = f(tokens) ---- */

enum { SY_V = 24, SY_LS = 8, SY_N = 48, SY_PAD = 0, SY_NOT = 1 };

typedef struct {
    int32_t prem[SY_N * SY_LS], hyp[SY_N * SY_LS], label[SY_N];
    float pm[SY_N * SY_LS], hm[SY_N * SY_LS];
} sy_data;

static void sy_make(sy_data *d, uint64_t seed) {
    gf_rng r;
    gf_rng_seed(&r, seed);
    memset(d, 0, sizeof *d);
    for (int i = 0; i < SY_N; i++) {
        int lab = i % 3, lp = 4 + (int)gf_rng_below(&r, 5), lh = 3; /* premise 4..8 tokens */
        int32_t used[SY_V] = {0}, *p = d->prem + i * SY_LS, *h = d->hyp + i * SY_LS;
        for (int t = 0; t < lp; t++) {
            int32_t x;
            do x = 2 + (int32_t)gf_rng_below(&r, SY_V - 2); while (used[x]);
            used[x] = 1;
            p[t] = x;
            d->pm[i * SY_LS + t] = 1;
        }
        for (int t = 0; t < lh; t++) h[t] = p[gf_rng_below(&r, (uint64_t)lp)];
        int32_t slot = (int32_t)gf_rng_below(&r, (uint64_t)lh);
        if (lab == GF_SNLI_CONTRADICTION) h[slot] = SY_NOT;
        if (lab == GF_SNLI_NEUTRAL) {
            int32_t x;
            do x = 2 + (int32_t)gf_rng_below(&r, SY_V - 2); while (used[x]);
            h[slot] = x;
        }
        for (int t = 0; t < lh; t++) d->hm[i * SY_LS + t] = 1;
        d->label[i] = lab;
    }
}

static void overfit(gf_family fam) {
    static sy_data d;
    sy_make(&d, 7);
    gf_model_cfg c;
    gf_nli_cfg_default(&c, fam);
    c.vocab = SY_V;
    c.d_model = 32;
    c.d_ff = 64;
    c.max_len = SY_LS;
    c.r = 8; /* 28 coordinates, 4 heads of 7 */
    c.window = 4;
    c.stride = 4;
    c.classifier_hidden = 32;
    c.dropout = 0.0f;
    gf_nli m;
    GF_REQUIRE_OK(gf_nli_init(&m, &c));
    gf_rng rng;
    gf_rng_seed(&rng, 11);
    gf_nli_init_weights(&m, &rng);
    gf_adamw_cfg oc;
    gf_adamw_cfg_default(&oc);
    gf_adamw_state st;
    gf_adamw_reset(&m.params, &st);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, &rng);
    ctx.training = 1;
    double acc = 0, first_loss = -1, last_loss = 0;
    int step;
    for (step = 0; step < 400; step++) {
        gf_ctx_reset(&ctx);
        gf_params_zero_grad(&m.params);
        gf_nli_out out = {0};
        gf_tensor *loss = gf_nli_forward(&m, &ctx, d.prem, d.pm, d.hyp, d.hm, d.label, SY_N, SY_LS, &out);
        acc = (double)out.n_correct / (double)out.n_counted;
        last_loss = loss->data[0];
        if (first_loss < 0) first_loss = last_loss;
        if (acc >= 0.95 && step >= 10) break;
        gf_tape_backward(&ctx, loss);
        gf_clip_grad_norm(&m.params, 1.0);
        gf_adamw_step(&m.params, &st, &oc, 3e-3);
    }
    printf("    %-11s %lld params: train accuracy %.3f after %d steps (loss %.3f -> %.3f)\n", gf_family_name(fam),
           (long long)m.params.n, acc, step, first_loss, last_loss);
    GF_CHECK(acc >= 0.95, "%s head reached only %.3f train accuracy", gf_family_name(fam), acc);
    gf_ctx_free(&ctx);
    gf_nli_free(&m);
}

GF_TEST(smoke, nli_overfit_grassmann) { overfit(GF_FAMILY_GRASSMANN); }
GF_TEST(smoke, nli_overfit_transformer) { overfit(GF_FAMILY_TRANSFORMER); }

GF_TEST(unit, nli_padding_invariance) {
    /* padded ids, and the content of unused rows, never change the logits of the other rows */
    static sy_data d;
    sy_make(&d, 3);
    for (int fam = 0; fam < 2; fam++) {
        gf_model_cfg c;
        gf_nli_cfg_default(&c, fam ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN);
        c.vocab = SY_V;
        c.d_model = 16;
        c.d_ff = 16;
        c.max_len = SY_LS;
        c.r = 8;
        c.window = 3;
        c.stride = 2;
        c.classifier_hidden = 8;
        gf_nli m;
        GF_REQUIRE_OK(gf_nli_init(&m, &c));
        gf_rng rng;
        gf_rng_seed(&rng, 5);
        c.init_std = 0.3f;
        m.cfg.init_std = 0.3f;
        gf_nli_init_weights(&m, &rng);
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        gf_ctx_set_grad(&ctx, 0);
        int64_t B = 6;
        gf_nli_out o1 = {0}, o2 = {0};
        gf_nli_forward(&m, &ctx, d.prem, d.pm, d.hyp, d.hm, d.label, B, SY_LS, &o1);
        static int32_t p2[SY_N * SY_LS], h2[SY_N * SY_LS];
        memcpy(p2, d.prem, sizeof p2);
        memcpy(h2, d.hyp, sizeof h2);
        for (int64_t i = 0; i < B * SY_LS; i++) {
            if (d.pm[i] == 0) p2[i] = (p2[i] + 5) % SY_V;
            if (d.hm[i] == 0) h2[i] = (h2[i] + 7) % SY_V;
        }
        gf_nli_forward(&m, &ctx, p2, d.pm, h2, d.hm, d.label, B, SY_LS, &o2);
        GF_CHECK(memcmp(o1.logits->data, o2.logits->data, (size_t)(B * 3) * sizeof(float)) == 0,
                 "%s: padding changed the logits", gf_family_name(c.family));
        int diff = 0; /* and a real token does change them */
        p2[0] = (p2[0] + 1) % SY_V;
        if (p2[0] < 2) p2[0] = 2;
        gf_nli_out o3 = {0};
        gf_nli_forward(&m, &ctx, p2, d.pm, h2, d.hm, d.label, B, SY_LS, &o3);
        for (int i = 0; i < 3; i++) diff |= o3.logits->data[i] != o1.logits->data[i];
        GF_CHECK(diff, "%s: a real token did not change the logits", gf_family_name(c.family));
        gf_ctx_free(&ctx);
        gf_nli_free(&m);
    }
}
