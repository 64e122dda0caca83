/* cuda_check.c — the harness of suite cuda: one op case run on the CPU and on the GPU, compared.
 * See cuda_check.h. */
#include "cuda_check.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA
gf_tensor *dev_copy(const gf_tensor *h) {
    gf_tensor *t = calloc(1, sizeof *t);
    *t = *h;
    t->device = GF_DEV_CUDA;
    size_t bytes = (size_t)gf_tensor_numel(h) * sizeof(float);
    void *d = NULL, *g = NULL;
    if (gf_cuda_malloc(&d, bytes) || gf_cuda_malloc(&g, bytes) || gf_cuda_upload(d, h->data, bytes) ||
        gf_cuda_upload(g, h->grad, bytes))
        gf_test_fail(__FILE__, __LINE__, "device copy: %s", gf_last_error());
    t->data = d;
    t->grad = g;
    return t;
}

void dev_free(gf_tensor *t) {
    if (!t) return;
    gf_cuda_free(t->data);
    gf_cuda_free(t->grad);
    free(t);
}

/* a leaf on both devices: data N(0, scale), grad N(0, 0.5) (backward must add to it) */
void add_input(op_case *c, int32_t ndim, const int64_t *shape, uint64_t seed, float scale) {
    GF_ASSERT(c->n_in < MAX_IN, "%s: more than %d inputs", c->what, MAX_IN);
    gf_tensor *h = gc_leaf(ndim, shape, seed, scale);
    gf_rng r;
    gf_rng_seed(&r, seed ^ 0xA5A5);
    for (int64_t i = 0; i < gf_tensor_numel(h); i++) h->grad[i] = (float)gf_rng_normal(&r) * 0.5f;
    c->cpu[c->n_in] = h;
    c->gpu[c->n_in] = dev_copy(h);
    c->n_in++;
}

void case_free(op_case *c) {
    for (int i = 0; i < c->n_in; i++) {
        gc_leaf_free(c->cpu[i]);
        dev_free(c->gpu[i]);
    }
}

/* the device buffer's contents (malloc'd) */
float *download(const float *dev, int64_t n) {
    float *h = malloc((size_t)n * sizeof(float));
    if (gf_cuda_download(h, dev, (size_t)n * sizeof(float)))
        gf_test_fail(__FILE__, __LINE__, "download: %s", gf_last_error());
    return h;
}

/* normwise relative error of got against want (of got - base against want - base when base is
 * given); reports and counts a failure over TOL. A non-finite element on either side fails unless
 * both sides hold the same value (both NaN, or the same infinity): NaN compares false, and a
 * plain max would skip it. With a base, each side's accumulation into base was rounded once,
 * so FLT_EPSILON · (|got| + |want|) of an element's difference is rounding, not the op. */
int compare_from_tol(const char *what, const char *part, const float *got, const float *want, const float *base,
                     int64_t n, double tol) {
    double num = 0.0, den = 0.0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(want[i])) {
            if ((isnan(got[i]) && isnan(want[i])) || got[i] == want[i]) continue;
            num = INFINITY, worst = i;
            break;
        }
        double b0 = base ? (double)base[i] : 0.0, a = (double)got[i] - b0, b = (double)want[i] - b0;
        double slack = base ? FLT_EPSILON * (fabs((double)got[i]) + fabs((double)want[i])) : 0.0;
        double d = fmax(0.0, fabs(a - b) - slack);
        if (d > num) num = d, worst = i;
        if (fabs(b) > den) den = fabs(b);
    }
    double rel = den > 0 ? num / den : num;
    if (!(rel <= tol)) {
        gf_test_fail(__FILE__, __LINE__, "%s %s: relative error %.3g > %g (max |diff| %.3g at %lld: gpu %.9g, cpu %.9g)",
                     what, part, rel, tol, num, (long long)worst, got[worst], want[worst]);
        return 1;
    }
    return 0;
}

int compare_from(const char *what, const char *part, const float *got, const float *want, const float *base,
                 int64_t n) {
    return compare_from_tol(what, part, got, want, base, n, TOL);
}

int compare(const char *what, const char *part, const float *got, const float *want, int64_t n) {
    return compare_from(what, part, got, want, NULL, n);
}

/* forward and backward of one device; out and grads downloaded into *out, grads[i] */
static gf_status run_gpu(op_case *c, const float *r, int64_t nout, float **out, float **grads,
                         float *const *grad0) {
    gf_ctx ctx;
    gf_rng rng; /* the CPU run's stream: dropout draws the same keys */
    gf_rng_seed(&rng, 4242);
    gf_ctx_init(&ctx, 0, &rng);
    ctx.training = c->training;
    ctx.precision = c->precision;
    gf_status st = gf_ctx_use_cuda(&ctx, 0);
    for (int i = 0; st == GF_OK && i < c->n_in; i++) /* the same starting gradients each run */
        st = gf_cuda_upload(c->gpu[i]->grad, grad0[i], (size_t)gf_tensor_numel(c->gpu[i]) * sizeof(float));
    if (st == GF_OK) {
        gf_tensor *y = c->f(&ctx, c->gpu, c->user);
        if (y->device != GF_DEV_CUDA || gf_tensor_numel(y) != nout)
            gf_test_fail(__FILE__, __LINE__, "%s: GPU output on %s with %lld elements", c->what,
                         gf_device_name(y->device), (long long)gf_tensor_numel(y));
        gf_tape_backward_from(&ctx, y, r);
        st = gf_cuda_sync();
        if (st == GF_OK) {
            *out = download(y->data, nout);
            for (int i = 0; i < c->n_in; i++) grads[i] = download(c->gpu[i]->grad, gf_tensor_numel(c->gpu[i]));
        }
    }
    gf_ctx_free(&ctx);
    return st;
}

/* Run a case on the CPU and (twice) on the GPU and compare; returns the failure count. */
int check_case(op_case *c) {
    int bad = 0;
    float *grad0[MAX_IN];
    for (int i = 0; i < c->n_in; i++) {
        size_t bytes = (size_t)gf_tensor_numel(c->cpu[i]) * sizeof(float);
        grad0[i] = malloc(bytes);
        memcpy(grad0[i], c->cpu[i]->grad, bytes);
    }
    gf_rng rng;
    gf_rng_seed(&rng, 4242);
    gf_ctx cctx;
    gf_ctx_init(&cctx, 0, &rng);
    cctx.training = c->training;
    cctx.precision = c->precision;
    gf_tensor *yc = c->f(&cctx, c->cpu, c->user);
    int64_t nout = gf_tensor_numel(yc);
    float *r = malloc((size_t)nout * sizeof(float));
    for (int64_t i = 0; i < nout; i++) r[i] = (float)gf_rng_normal(&rng);
    float *yc_data = malloc((size_t)nout * sizeof(float));
    memcpy(yc_data, yc->data, (size_t)nout * sizeof(float));
    gf_tape_backward_from(&cctx, yc, r);

    float *out[2] = {NULL, NULL}, *grads[2][MAX_IN] = {{NULL}};
    for (int run = 0; run < 2; run++) {
        gf_status st = run_gpu(c, r, nout, &out[run], grads[run], grad0);
        if (st) {
            gf_test_fail(__FILE__, __LINE__, "%s: %s", c->what, gf_last_error());
            bad++;
            break;
        }
    }
    if (!bad) {
        const double gtol = c->tol > 0 ? c->tol : TOL, ftol = c->fwd_tol > 0 ? c->fwd_tol : gtol;
        bad += compare_from_tol(c->what, "forward", out[0], yc_data, NULL, nout, ftol);
        for (int i = 0; i < c->n_in; i++) {
            char part[64];
            snprintf(part, sizeof part, "grad of input %d", i);
            bad += compare_from_tol(c->what, part, grads[0][i], c->cpu[i]->grad, NULL, gf_tensor_numel(c->cpu[i]), gtol);
            /* and what backward added, on its own scale: the N(0, 0.5) start would hide an error in
             * a small contribution (attention's dq at large L, Plücker dz) */
            snprintf(part, sizeof part, "grad contribution of input %d", i);
            bad += compare_from_tol(c->what, part, grads[0][i], c->cpu[i]->grad, grad0[i], gf_tensor_numel(c->cpu[i]),
                                    gtol);
        }
        int same = !memcmp(out[0], out[1], (size_t)nout * sizeof(float));
        for (int i = 0; i < c->n_in; i++)
            same &= !memcmp(grads[0][i], grads[1][i], (size_t)gf_tensor_numel(c->cpu[i]) * sizeof(float));
        if (!same) {
            gf_test_fail(__FILE__, __LINE__, "%s: a second GPU run gave different bits", c->what);
            bad++;
        }
    }
    for (int run = 0; run < 2; run++) {
        free(out[run]);
        for (int i = 0; i < c->n_in; i++) free(grads[run][i]);
    }
    for (int i = 0; i < c->n_in; i++) free(grad0[i]);
    free(r);
    free(yc_data);
    gf_ctx_free(&cctx);
    return bad;
}

/* elements whose bits differ; *first the first one */
int64_t bits_differ(const float *a, const float *b, int64_t n, int64_t *first) {
    int64_t bad = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            if (!bad) *first = i;
            bad++;
        }
    return bad;
}

/* the block's array `part` (malloc'd host copy) */
float *get_part(const gf_params *p, gf_params_part part) {
    float *h = malloc((size_t)(p->n ? p->n : 1) * sizeof(float));
    if (gf_params_get(p, part, h)) gf_test_fail(__FILE__, __LINE__, "gf_params_get: %s", gf_last_error());
    return h;
}

#endif
