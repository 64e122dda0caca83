/* test_golden.c — both model families against the independent PyTorch reference.
 *
 * Each fixture in tests/fixtures/golden/ (written by tools/make_fixtures.py from
 * tools/torch_ref.py) holds weights, one batch, the logits, the loss, every parameter
 * gradient, and the losses / pre-clip gradient norms of 6 AdamW steps. We load the same
 * weights, run the same batch (dropout off) and compare. Tolerances (float32 throughout):
 *   logits  |Δ| <= 3e-5 + 1e-5 |ref|       loss   relative 1e-5
 *   grads   |Δ| <= 1e-4 * max|ref| of that tensor (+1e-7)
 *   AdamW   losses and grad norms relative 1e-4 over the 6 steps
 * The worst error per variant is printed so the margins stay visible.
 */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/model.h"
#include "gflow/optim.h"
#include "gflow/safetensors.h"
#include <stdio.h>
#include <string.h>

#ifndef GF_SOURCE_ROOT
#define GF_SOURCE_ROOT "."
#endif

static int64_t meta_i(const gf_safetensors_file *f, const char *k) {
    const char *v = gf_safetensors_meta(f, k);
    return v ? strtoll(v, NULL, 10) : -1;
}
static double meta_f(const gf_safetensors_file *f, const char *k) {
    const char *v = gf_safetensors_meta(f, k);
    return v ? strtod(v, NULL) : -1;
}
static int meta_b(const gf_safetensors_file *f, const char *k) {
    const char *v = gf_safetensors_meta(f, k);
    return v && !strcmp(v, "true");
}
static int32_t meta_list(const gf_safetensors_file *f, const char *k, int64_t *out, int32_t cap) {
    const char *v = gf_safetensors_meta(f, k);
    int32_t n = 0;
    while (v && *v && n < cap) {
        char *end;
        out[n++] = strtoll(v, &end, 10);
        v = *end == ',' ? end + 1 : end;
        if (end == v && *v) break;
    }
    return n;
}

static void cfg_from_meta(const gf_safetensors_file *f, gf_model_cfg *c) {
    gf_model_cfg_default(c);
    c->family = !strcmp(gf_safetensors_meta(f, "family"), "transformer") ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN;
    c->block = !strcmp(gf_safetensors_meta(f, "block"), "pre_ln") ? GF_BLOCK_PRE_LN : GF_BLOCK_POST_LN;
    c->vocab = meta_i(f, "V");
    c->d_model = meta_i(f, "d");
    c->r = meta_i(f, "r");
    c->d_ff = meta_i(f, "dff");
    c->heads = meta_i(f, "heads");
    c->n_layers = meta_i(f, "n_layers");
    c->max_len = meta_i(f, "Lmax");
    c->dropout = 0.0f;
    c->eps = (float)meta_f(f, "eps");
    c->ln_eps = (float)meta_f(f, "ln_eps");
    c->normalize = meta_b(f, "normalize");
    c->gate = meta_b(f, "gate");
    c->plucker = meta_b(f, "plucker");
    c->n_offsets = meta_list(f, "offsets", c->offsets, GF_MAX_OFFSETS);
    c->n_schedule = meta_list(f, "offset_schedule", c->offset_schedule, GF_MAX_LAYERS);
}

static void run_fixture(const char *variant) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/golden/%s.safetensors", GF_SOURCE_ROOT, variant);
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(path, &f));
    gf_model_cfg c;
    cfg_from_meta(f, &c);
    gf_lm m;
    GF_REQUIRE_OK(gf_lm_init(&m, &c));
    GF_CHECK(m.params.n == meta_i(f, "n_params"), "%s: %lld params, reference %lld", variant,
             (long long)m.params.n, (long long)meta_i(f, "n_params"));
    GF_REQUIRE_OK(gf_safetensors_load_params(f, &m.params, ""));
    const gf_safetensors_tensor *tok = gf_safetensors_find(f, "input.tokens"), *lg = gf_safetensors_find(f, "out.logits"),
                       *ls = gf_safetensors_find(f, "out.loss");
    GF_REQUIRE(tok && lg && ls && tok->dtype == GF_SAFETENSORS_I32, "fixture tensors");
    int64_t B = tok->shape[0], L = tok->shape[1] - 1;

    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    /* logits through the plain head (no grad), loss and grads through the fused chunked head;
     * both heads' losses must agree with the reference */
    gf_lm_out out = {.want_logits = 1};
    gf_ctx_set_grad(&ctx, 0);
    gf_tensor *loss_plain = gf_lm_forward(&m, &ctx, tok->data, B, L, &out);
    gf_ctx_set_grad(&ctx, 1);
    gf_params_zero_grad(&m.params);
    gf_tensor *loss = gf_lm_forward(&m, &ctx, tok->data, B, L, NULL);
    gf_tape_backward(&ctx, loss);
    GF_CHECK_NEAR(loss_plain->data[0], ((const float *)ls->data)[0], 0, 1e-5);

    const float *ref_logits = lg->data;
    double worst_logit = 0;
    for (int64_t i = 0; i < lg->numel; i++) {
        double d = fabs((double)out.logits->data[i] - ref_logits[i]);
        worst_logit = fmax(worst_logit, d);
        if (d > 3e-5 + 1e-5 * fabs(ref_logits[i])) {
            GF_CHECK_NEAR(out.logits->data[i], ref_logits[i], 3e-5, 1e-5);
            break;
        }
    }
    double ref_loss = ((const float *)ls->data)[0], got_loss = loss->data[0];
    GF_CHECK_NEAR(got_loss, ref_loss, 0, 1e-5);

    float *ref_grad = malloc((size_t)m.params.n * sizeof(float));
    GF_REQUIRE_OK(gf_safetensors_load_params_into(f, &m.params, "grad.", ref_grad));
    double worst_grad = 0;
    for (int64_t i = 0; i < m.params.n_items; i++) {
        gf_param *p = m.params.items[i];
        int64_t n = gf_tensor_numel(&p->t);
        const float *r = ref_grad + p->offset, *g = p->t.grad;
        double mx = 0, md = 0;
        for (int64_t j = 0; j < n; j++) { mx = fmax(mx, fabs(r[j])); md = fmax(md, fabs((double)g[j] - r[j])); }
        double rel = md / (mx + 1e-7);
        worst_grad = fmax(worst_grad, rel);
        GF_CHECK(md <= 1e-4 * mx + 1e-7, "%s: grad %s max |diff| %.3g vs max |ref| %.3g", variant, p->name, md, mx);
    }

    /* 6 AdamW steps on the same batch: zero_grad, backward, clip 1.0, AdamW(1e-2, wd 0.1 on everything) */
    const gf_safetensors_tensor *al = gf_safetensors_find(f, "adamw.losses"), *an = gf_safetensors_find(f, "adamw.gnorm");
    GF_REQUIRE(al && an, "adamw tensors");
    gf_adamw_cfg oc;
    gf_adamw_cfg_default(&oc);
    oc.beta1 = meta_f(f, "adamw_beta1");
    oc.beta2 = meta_f(f, "adamw_beta2");
    oc.eps = meta_f(f, "adamw_eps");
    oc.weight_decay = meta_f(f, "adamw_weight_decay");
    for (int k = 0; k < GF_PK_COUNT; k++) oc.decay[k] = 1;
    gf_adamw_state st;
    gf_adamw_reset(&m.params, &st);
    double worst_step = 0;
    for (int64_t s = 0; s < al->numel; s++) {
        gf_ctx_reset(&ctx);
        gf_params_zero_grad(&m.params);
        gf_tensor *l = gf_lm_forward(&m, &ctx, tok->data, B, L, NULL);
        gf_tape_backward(&ctx, l);
        double gn = gf_clip_grad_norm(&m.params, meta_f(f, "clip_max_norm"));
        double rl = ((const float *)al->data)[s], rn = ((const float *)an->data)[s];
        worst_step = fmax(worst_step, fmax(fabs(l->data[0] - rl) / fabs(rl), fabs(gn - rn) / fabs(rn)));
        GF_CHECK_NEAR(l->data[0], rl, 0, 1e-4);
        GF_CHECK_NEAR(gn, rn, 0, 1e-4);
        gf_adamw_step(&m.params, &st, &oc, meta_f(f, "adamw_lr"));
    }
    printf("    %-28s max|Δlogit| %.2e  Δloss/loss %.2e  max grad err/max|g| %.2e  adamw rel %.2e\n", variant,
           worst_logit, fabs(got_loss - ref_loss) / ref_loss, worst_grad, worst_step);
    free(ref_grad);
    gf_ctx_free(&ctx);
    gf_lm_free(&m);
    gf_safetensors_free(f);
}

GF_TEST(golden, grassmann_post_A) { run_fixture("grassmann_post_A"); }
GF_TEST(golden, grassmann_pre_A) { run_fixture("grassmann_pre_A"); }
GF_TEST(golden, grassmann_post_B) { run_fixture("grassmann_post_B"); }
GF_TEST(golden, grassmann_pre_B) { run_fixture("grassmann_pre_B"); }
GF_TEST(golden, transformer_post) { run_fixture("transformer_post"); }
GF_TEST(golden, transformer_pre) { run_fixture("transformer_pre"); }
GF_TEST(golden, grassmann_post_A_nonorm) { run_fixture("grassmann_post_A_nonorm"); }
GF_TEST(golden, grassmann_post_A_nogate) { run_fixture("grassmann_post_A_nogate"); }
GF_TEST(golden, grassmann_post_A_noplucker) { run_fixture("grassmann_post_A_noplucker"); }
