/* golden.c — see golden.h. */
#include "nn/golden.h"
#include "gf_test.h"
#include <stdio.h>
#include <string.h>

#ifndef GF_SOURCE_ROOT
#define GF_SOURCE_ROOT "."
#endif

int64_t gf_golden_meta_i(const gf_safetensors_file *f, const char *key) {
    const char *v = gf_safetensors_meta(f, key);
    return v ? strtoll(v, NULL, 10) : -1;
}

double gf_golden_meta_f(const gf_safetensors_file *f, const char *key) {
    const char *v = gf_safetensors_meta(f, key);
    return v ? strtod(v, NULL) : -1;
}

static float ref_scalar(const gf_safetensors_file *f, const char *name, int64_t i) {
    return ((const float *)gf_safetensors_find(f, name)->data)[i];
}

/* worst |Δ| over the logits; the first one out of tolerance is reported */
static double compare_logits(const float *got, const gf_safetensors_tensor *ref) {
    const float *r = ref->data;
    double worst = 0;
    for (int64_t i = 0; i < ref->numel; i++) {
        double d = fabs((double)got[i] - r[i]);
        worst = fmax(worst, d);
        if (d > 3e-5 + 1e-5 * fabs(r[i])) {
            GF_CHECK_NEAR(got[i], r[i], 3e-5, 1e-5);
            break;
        }
    }
    return worst;
}

/* worst max|Δ| / max|ref| over the parameter gradients */
static double compare_grads(const char *variant, const gf_safetensors_file *f, gf_params *p) {
    float *ref = malloc((size_t)p->n * sizeof(float));
    GF_CHECK_OK(gf_safetensors_load_params_into(f, p, "grad.", ref));
    double worst = 0;
    for (int64_t i = 0; ref && i < p->n_items; i++) {
        gf_param *q = p->items[i];
        int64_t n = gf_tensor_numel(&q->t);
        const float *r = ref + q->offset, *g = q->t.grad;
        double mx = 0, md = 0;
        for (int64_t j = 0; j < n; j++) { mx = fmax(mx, fabs(r[j])); md = fmax(md, fabs((double)g[j] - r[j])); }
        worst = fmax(worst, md / (mx + 1e-7));
        GF_CHECK(md <= 1e-4 * mx + 1e-7, "%s: grad %s max |diff| %.3g vs max |ref| %.3g", variant, q->name, md, mx);
    }
    free(ref);
    return worst;
}

/* AdamW steps on the same batch: zero_grad, backward, clip, AdamW with the fixture's settings
 * (weight decay on everything); worst relative error of the losses and gradient norms */
static double compare_adamw(const gf_golden_model *m, void *self, const gf_safetensors_file *f, gf_params *p,
                            gf_ctx *ctx) {
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
        gf_tensor *l = m->forward(self, ctx, f, NULL);
        gf_tape_backward(ctx, l);
        double gn = gf_clip_grad_norm(p, gf_golden_meta_f(f, "clip_max_norm"));
        double rl = ((const float *)al->data)[s], rn = ((const float *)an->data)[s];
        worst = fmax(worst, fmax(fabs(l->data[0] - rl) / fabs(rl), fabs(gn - rn) / fabs(rn)));
        GF_CHECK_NEAR(l->data[0], rl, 0, 1e-4);
        GF_CHECK_NEAR(gn, rn, 0, 1e-4);
        gf_adamw_step(p, &st, &oc, gf_golden_meta_f(f, "adamw_lr"));
    }
    return worst;
}

void gf_golden_run(const char *variant, const gf_golden_model *m, void *self) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/golden/%s.safetensors", GF_SOURCE_ROOT, variant);
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(path, &f));
    gf_params *p = m->open(self, f);
    if (!p) { gf_safetensors_free(f); return; }
    GF_CHECK(p->n == gf_golden_meta_i(f, "n_params"), "%s: %lld params, reference %lld", variant, (long long)p->n,
             (long long)gf_golden_meta_i(f, "n_params"));
    const gf_safetensors_tensor *lg = gf_safetensors_find(f, "out.logits"), *ls = gf_safetensors_find(f, "out.loss");
    gf_status st = gf_safetensors_load_params(f, p, "");
    GF_CHECK_OK(st);
    GF_CHECK(lg && ls, "fixture tensors");
    if (!st && lg && ls) {
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        gf_params_zero_grad(p);
        const float *logits = NULL;
        gf_tensor *loss = m->forward(self, &ctx, f, &logits);
        if (loss && logits) {
            gf_tape_backward(&ctx, loss);
            double worst_logit = compare_logits(logits, lg);
            double ref_loss = ref_scalar(f, "out.loss", 0), got_loss = loss->data[0];
            GF_CHECK_NEAR(got_loss, ref_loss, 0, 1e-5);
            double worst_grad = compare_grads(variant, f, p);
            double worst_step = compare_adamw(m, self, f, p, &ctx);
            printf("    %-28s max|Δlogit| %.2e  Δloss/loss %.2e  max grad err/max|g| %.2e  adamw rel %.2e\n", variant,
                   worst_logit, fabs(got_loss - ref_loss) / ref_loss, worst_grad, worst_step);
        }
        gf_ctx_free(&ctx);
    }
    m->close(self);
    gf_safetensors_free(f);
}
