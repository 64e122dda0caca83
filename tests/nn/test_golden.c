/* test_golden.c — both model families against the independent PyTorch reference.
 *
 * Fixtures tests/fixtures/golden/<variant>.safetensors are written by tools/make_fixtures.py
 * from tools/torch_ref.py; the comparison and its tolerances are nn/golden.h's runner.
 */
#include "gf_test.h"
#include "gflow.h"
#include "nn/golden.h"
#include <stdio.h>
#include <string.h>

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
    c->vocab = gf_golden_meta_i(f, "V");
    c->d_model = gf_golden_meta_i(f, "d");
    c->r = gf_golden_meta_i(f, "r");
    c->d_ff = gf_golden_meta_i(f, "dff");
    c->heads = gf_golden_meta_i(f, "heads");
    c->n_layers = gf_golden_meta_i(f, "n_layers");
    c->max_len = gf_golden_meta_i(f, "Lmax");
    c->dropout = 0.0f;
    c->eps = (float)gf_golden_meta_f(f, "eps");
    c->ln_eps = (float)gf_golden_meta_f(f, "ln_eps");
    c->normalize = meta_b(f, "normalize");
    c->gate = meta_b(f, "gate");
    c->plucker = meta_b(f, "plucker");
    c->offsets.n = meta_list(f, "offsets", c->offsets.v, GF_MAX_OFFSETS);
    c->offset_schedule.n = meta_list(f, "offset_schedule", c->offset_schedule.v, GF_MAX_LAYERS);
}

static gf_params *lm_open(void *self, const gf_safetensors_file *f) {
    gf_model_cfg c;
    cfg_from_meta(f, &c);
    gf_status st = gf_lm_init(self, &c);
    GF_CHECK_OK(st);
    return st ? NULL : &((gf_lm *)self)->params;
}

/* logits through the plain head (no grad), loss and grads through the fused chunked head;
 * both heads' losses must agree with the reference */
static gf_tensor *lm_forward(void *self, gf_ctx *ctx, const gf_safetensors_file *f, const gf_tensor **logits) {
    const gf_safetensors_tensor *tok = gf_safetensors_find(f, "input.tokens");
    GF_CHECK(tok && tok->dtype == GF_SAFETENSORS_I32, "fixture tensors");
    if (!tok || tok->dtype != GF_SAFETENSORS_I32) return NULL;
    int64_t B = tok->shape[0], L = tok->shape[1] - 1;
    gf_lm *m = self;
    if (logits) {
        gf_lm_out out = {.want_logits = 1};
        gf_ctx_set_grad(ctx, 0);
        gf_tensor *loss_plain = gf_lm_forward(m, ctx, tok->data, B, L, &out);
        gf_ctx_set_grad(ctx, 1);
        gf_params_zero_grad(&m->params);
        GF_CHECK_NEAR(gf_golden_scalar(loss_plain), ((const float *)gf_safetensors_find(f, "out.loss")->data)[0], 0,
                      ctx->precision == GF_PREC_BF16 ? 1e-4 : 1e-5);
        *logits = out.logits;
    }
    return gf_lm_forward(m, ctx, tok->data, B, L, NULL);
}

static void lm_close(void *self) { gf_lm_free(self); }

static const gf_golden_model lm_model = {lm_open, lm_forward, lm_close};

static void run_fixture_on(const char *variant, gf_device dev) {
    gf_lm m;
    gf_golden_run_on(variant, &lm_model, &m, dev);
}
static void run_fixture(const char *variant) { run_fixture_on(variant, GF_DEV_CPU); }

GF_TEST(golden, grassmann_post_A) { run_fixture("grassmann_post_A"); }
GF_TEST(golden, grassmann_pre_A) { run_fixture("grassmann_pre_A"); }
GF_TEST(golden, grassmann_post_B) { run_fixture("grassmann_post_B"); }
GF_TEST(golden, grassmann_pre_B) { run_fixture("grassmann_pre_B"); }
GF_TEST(golden, transformer_post) { run_fixture("transformer_post"); }
GF_TEST(golden, transformer_pre) { run_fixture("transformer_pre"); }
GF_TEST(golden, grassmann_post_A_nonorm) { run_fixture("grassmann_post_A_nonorm"); }
GF_TEST(golden, grassmann_post_A_nogate) { run_fixture("grassmann_post_A_nogate"); }
GF_TEST(golden, grassmann_post_A_noplucker) { run_fixture("grassmann_post_A_noplucker"); }

/* [run] precision = bf16 against PyTorch computing the same way (tools/make_fixtures.py
 * _gflow_bf16_: the inputs of every product rounded to bf16, fp32 accumulation) and against
 * torch.autocast(bfloat16), whose products return bf16. Measured on a Xeon with AMX (oneDNN):
 * exact logits 7e-7, grads 2.7e-3 of the tensor's max (Transformer), AdamW steps 2.0e-3 (an input
 * computed in fp32 on both sides in another order now and then rounds to the neighbouring bf16
 * value, 2^-8 relative, and the steps carry it on); autocast logits 4.8e-2, loss 8.3e-4, grads
 * 2.2e-2. The bounds leave 3-5x of that. */
static const gf_golden_tol bf16_exact = {.logit_abs = 1e-3, .logit_rel = 1e-3, .loss = 1e-4, .grad = 1e-2,
                                         .adamw = 1e-2};
static const gf_golden_tol bf16_autocast = {.logit_abs = 5e-2, .logit_rel = 3e-2, .loss = 5e-3, .grad = 8e-2,
                                            .adamw = 0};
static void run_bf16_on(const char *variant, gf_device dev) {
    gf_lm m;
    gf_golden_run_bf16(variant, &lm_model, &m, dev, &bf16_exact, &bf16_autocast);
}
GF_TEST(golden, grassmann_post_A_bf16) { run_bf16_on("grassmann_post_A", GF_DEV_CPU); }
GF_TEST(golden, transformer_post_bf16) { run_bf16_on("transformer_post", GF_DEV_CPU); }

#ifdef GF_HAVE_CUDA
/* suite cuda: the same fixtures through the CUDA path (weights moved to the GPU, the step there) */
GF_TEST(cuda, golden_grassmann_post_A) { run_fixture_on("grassmann_post_A", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_pre_A) { run_fixture_on("grassmann_pre_A", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_post_B) { run_fixture_on("grassmann_post_B", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_pre_B) { run_fixture_on("grassmann_pre_B", GF_DEV_CUDA); }
GF_TEST(cuda, golden_transformer_post) { run_fixture_on("transformer_post", GF_DEV_CUDA); }
GF_TEST(cuda, golden_transformer_pre) { run_fixture_on("transformer_pre", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_post_A_nonorm) { run_fixture_on("grassmann_post_A_nonorm", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_post_A_nogate) { run_fixture_on("grassmann_post_A_nogate", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_post_A_noplucker) { run_fixture_on("grassmann_post_A_noplucker", GF_DEV_CUDA); }
GF_TEST(cuda, golden_grassmann_post_A_bf16) { run_bf16_on("grassmann_post_A", GF_DEV_CUDA); }
GF_TEST(cuda, golden_transformer_post_bf16) { run_bf16_on("transformer_post", GF_DEV_CUDA); }
#endif
