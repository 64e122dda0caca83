/* golden.c — see golden.h. */
#include "nn/golden.h"
#include "gf_test.h"
#include "test_util.h"
#ifdef GF_CUDA_EMULATOR
#include <cuda_runtime_api.h> /* gf_emu_waits */
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int64_t gf_golden_meta_i(const gf_safetensors_file *f, const char *key) {
    const char *v = gf_safetensors_meta(f, key);
    return v ? strtoll(v, NULL, 10) : -1;
}

double gf_golden_meta_f(const gf_safetensors_file *f, const char *key) {
    const char *v = gf_safetensors_meta(f, key);
    return v ? strtod(v, NULL) : -1;
}

float gf_golden_scalar(const gf_tensor *t) {
    float v = NAN;
    GF_CHECK_OK(gf_tensor_to_host(t, &v, 1));
    return v;
}

/* adamw: the AdamW steps' losses and gradient norms. The first step moves every weight by about
 * lr * sign(g), so a gradient at rounding-noise level moves its weight by ±lr, and the next steps
 * carry it on: with the products summed in other orders (the CUDA emulator's GF_CUDA_EMU_GEMM=
 * reverse_k and 12 random orders of k, 2026-11-28) grassmann_post_B reached 1.44e-4, the others
 * 2.5e-5 at most (CPU here: 3.1e-5). A GPU's cuBLAS sums in its own order. */
const gf_golden_tol gf_golden_fp32_tol = {.logit_abs = 3e-5, .logit_rel = 1e-5, .loss = 1e-5, .grad = 1e-4,
                                           .adamw = 5e-4};

/* worst |Δ| over the logits; the first one out of tolerance is reported */
static double compare_logits(const gf_tensor *logits, const gf_safetensors_tensor *ref, const gf_golden_tol *tol) {
    const float *r = ref->data;
    double worst = 0;
    GF_CHECK(gf_tensor_numel(logits) == ref->numel, "%lld logits, reference %lld", (long long)gf_tensor_numel(logits),
             (long long)ref->numel);
    if (gf_tensor_numel(logits) != ref->numel) return NAN;
    float *got = malloc((size_t)ref->numel * sizeof(float));
    GF_CHECK_OK(gf_tensor_to_host(logits, got, ref->numel));
    for (int64_t i = 0; i < ref->numel; i++) {
        double d = fabs((double)got[i] - r[i]);
        worst = fmax(worst, d);
        if (d > tol->logit_abs + tol->logit_rel * fabs(r[i])) {
            GF_CHECK_NEAR(got[i], r[i], tol->logit_abs, tol->logit_rel);
            break;
        }
    }
    free(got);
    return worst;
}

/* worst max|Δ| / max|ref| over the parameter gradients */
static double compare_grads(const char *variant, const gf_safetensors_file *f, gf_params *p, const char *prefix,
                            const gf_golden_tol *tol) {
    float *ref = malloc((size_t)p->n * sizeof(float)), *grad = malloc((size_t)p->n * sizeof(float));
    GF_CHECK_OK(gf_safetensors_load_params_into(f, p, prefix, ref));
    GF_CHECK_OK(gf_params_get(p, GF_PP_GRAD, grad)); /* the block's gradients, from either device */
    double worst = 0;
    for (int64_t i = 0; ref && grad && i < p->n_items; i++) {
        gf_param *q = p->items[i];
        int64_t n = gf_tensor_numel(&q->t);
        const float *r = ref + q->offset, *g = grad + q->offset;
        double mx = 0, md = 0;
        for (int64_t j = 0; j < n; j++) { mx = fmax(mx, fabs(r[j])); md = fmax(md, fabs((double)g[j] - r[j])); }
        worst = fmax(worst, md / (mx + 1e-7));
        GF_CHECK(md <= tol->grad * mx + 1e-7, "%s: %s%s max |diff| %.3g vs max |ref| %.3g", variant, prefix, q->name,
                 md, mx);
    }
    free(ref);
    free(grad);
    return worst;
}

/* AdamW steps on the same batch: zero_grad, backward, clip, AdamW with the fixture's settings
 * (weight decay on everything); worst relative error of the losses and gradient norms */
static double compare_adamw(const gf_golden_model *m, void *self, const gf_safetensors_file *f, gf_params *p,
                            gf_ctx *ctx, const gf_golden_tol *tol) {
    const gf_safetensors_tensor *al = gf_safetensors_find(f, "adamw.losses"), *an = gf_safetensors_find(f, "adamw.gnorm");
    GF_CHECK(al && an, "adamw tensors");
    if (!al || !an) return NAN;
    gf_adamw_cfg oc;
    gf_adamw_cfg_default(&oc);
    oc.beta1 = gf_golden_meta_f(f, "adamw_beta1");
    oc.beta2 = gf_golden_meta_f(f, "adamw_beta2");
    oc.eps = gf_golden_meta_f(f, "adamw_eps");
    oc.weight_decay = gf_golden_meta_f(f, "adamw_weight_decay");
    for (int k = 0; k < GF_PK_COUNT; k++) oc.decay[k] = 1;
    gf_adamw_state st;
    gf_adamw_reset(p, &st);
    double worst = 0;
    for (int64_t s = 0; s < al->numel; s++) {
        gf_ctx_reset(ctx);
        gf_params_zero_grad(p);
#ifdef GF_CUDA_EMULATOR /* a training forward (no outputs asked for) queues its work and never waits;
                        * from the second step on its uploads all come from the pinned staging */
        const unsigned long w0 = gf_emu_waits(), u0 = gf_emu_pageable_uploads();
#endif
        gf_tensor *l = m->forward(self, ctx, f, NULL);
#ifdef GF_CUDA_EMULATOR
        GF_CHECK(gf_emu_waits() == w0, "step %lld: the training forward waited for the GPU %lu times", (long long)s,
                 gf_emu_waits() - w0);
        if (s >= 1)
            GF_CHECK(gf_emu_pageable_uploads() == u0, "step %lld: %lu uploads from pageable memory in the forward",
                     (long long)s, gf_emu_pageable_uploads() - u0);
#endif
        gf_tape_backward(ctx, l);
        double gn = gf_clip_grad_norm(p, gf_golden_meta_f(f, "clip_max_norm"));
        double rl = ((const float *)al->data)[s], rn = ((const float *)an->data)[s], got = gf_golden_scalar(l);
        worst = fmax(worst, fmax(fabs(got - rl) / fabs(rl), fabs(gn - rn) / fabs(rn)));
        GF_CHECK_NEAR(got, rl, 0, tol->adamw);
        GF_CHECK_NEAR(gn, rn, 0, tol->adamw);
        gf_adamw_step(p, &st, &oc, gf_golden_meta_f(f, "adamw_lr"));
    }
    return worst;
}

void gf_golden_run(const char *variant, const gf_golden_model *m, void *self) {
    gf_golden_run_on(variant, m, self, GF_DEV_CPU);
}

/* the fixture's weights into a model on `dev` in `prec`; compare one forward/backward with the
 * references named `prefix`out.logits, `prefix`out.loss, `prefix`grad.*, then (tol_adamw non-NULL)
 * the AdamW steps */
static void run(const char *file, const gf_golden_model *m, void *self, gf_device dev, gf_precision prec,
                const char *prefix, const gf_golden_tol *tol, const gf_golden_tol *tol_adamw) {
    char path[1024], name[128];
    snprintf(path, sizeof path, "%s/tests/fixtures/golden/%s.safetensors", gf_test_source_root(), file);
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(path, &f));
    gf_params *p = m->open(self, f);
    if (!p) { gf_safetensors_free(f); return; }
    GF_CHECK(p->n == gf_golden_meta_i(f, "n_params"), "%s: %lld params, reference %lld", file, (long long)p->n,
             (long long)gf_golden_meta_i(f, "n_params"));
    snprintf(name, sizeof name, "%sout.logits", prefix);
    const gf_safetensors_tensor *lg = gf_safetensors_find(f, name);
    snprintf(name, sizeof name, "%sout.loss", prefix);
    const gf_safetensors_tensor *ls = gf_safetensors_find(f, name);
    gf_status st = gf_safetensors_load_params(f, p, "");
    GF_CHECK_OK(st);
    GF_CHECK(lg && ls, "fixture tensors %sout.logits, %sout.loss", prefix, prefix);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = prec;
    if (!st && dev != GF_DEV_CPU) { /* the weights loaded on the host, then moved: the trainer's way */
        st = gf_params_to_device(p, dev);
        if (!st) st = gf_ctx_use_cuda(&ctx, 0);
        GF_CHECK_OK(st);
    }
    if (!st && lg && ls) {
        gf_params_zero_grad(p);
        const gf_tensor *logits = NULL;
        gf_tensor *loss = m->forward(self, &ctx, f, &logits);
        GF_CHECK(!loss || !logits || (loss->device == dev && logits->device == dev), "%s: loss on %s, logits on %s",
                 file, gf_device_name(loss->device), gf_device_name(logits->device));
        if (loss && logits) {
            gf_tape_backward(&ctx, loss);
            double worst_logit = compare_logits(logits, lg, tol);
            double ref_loss = ((const float *)ls->data)[0], got_loss = gf_golden_scalar(loss);
            GF_CHECK_NEAR(got_loss, ref_loss, 0, tol->loss);
            snprintf(name, sizeof name, "%sgrad.", prefix);
            double worst_grad = compare_grads(file, f, p, name, tol);
            double worst_step = tol_adamw ? compare_adamw(m, self, f, p, &ctx, tol_adamw) : NAN;
            printf("    %-28s %s%s%s max|Δlogit| %.2e  Δloss/loss %.2e  max grad err/max|g| %.2e  adamw rel %.2e\n",
                   file, gf_device_name(dev), prec ? " bf16 vs " : "", prec ? (*prefix ? "autocast" : "exact") : "",
                   worst_logit, fabs(got_loss - ref_loss) / ref_loss, worst_grad, worst_step);
        }
    }
    gf_ctx_free(&ctx);
    m->close(self);
    gf_safetensors_free(f);
}

void gf_golden_run_on(const char *variant, const gf_golden_model *m, void *self, gf_device dev) {
    run(variant, m, self, dev, GF_PREC_FP32, "", &gf_golden_fp32_tol, &gf_golden_fp32_tol);
}

void gf_golden_run_bf16(const char *variant, const gf_golden_model *m, void *self, gf_device dev,
                        const gf_golden_tol *exact, const gf_golden_tol *autocast) {
    char file[128];
    snprintf(file, sizeof file, "%s.bf16", variant);
    run(file, m, self, dev, GF_PREC_BF16, "", exact, exact);
    run(file, m, self, dev, GF_PREC_BF16, "autocast.", autocast, NULL);
}
