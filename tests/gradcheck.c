/* gradcheck.c — see gradcheck.h. */
#include "gradcheck.h"
#include "gf_test.h"
#include <string.h>

gf_tensor *gc_leaf(int32_t ndim, const int64_t *shape, uint64_t seed, float scale) {
    gf_tensor *t = calloc(1, sizeof *t);
    t->ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) t->shape[i] = shape[i];
    int64_t n = gf_tensor_numel(t);
    t->data = malloc((size_t)n * sizeof(float));
    t->grad = calloc((size_t)n, sizeof(float));
    t->flags = GF_T_REQ_GRAD | GF_T_PARAM; /* PARAM: grad buffer is ours, never re-allocated */
    t->name = "leaf";
    gf_rng r;
    gf_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) t->data[i] = (float)gf_rng_normal(&r) * scale;
    return t;
}

void gc_leaf_free(gf_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t->grad);
    free(t);
}

void gc_arena_fill(gf_ctx *ctx, int64_t n, float v) {
    for (int pass = 0; pass < 2; pass++) {
        float *p = gf_arena_floats(&ctx->arena, n);
        for (int64_t i = 0; i < n; i++) p[i] = v;
        gf_ctx_reset(ctx);
    }
}

static double probe(gf_ctx *ctx, gc_build_fn f, gf_tensor **in, void *user, const float *r, int64_t *nout) {
    gf_ctx_reset(ctx);
    int old = gf_ctx_set_grad(ctx, 0);
    gf_tensor *out = f(ctx, in, user);
    gf_ctx_set_grad(ctx, old);
    int64_t n = gf_tensor_numel(out);
    if (nout) *nout = n;
    double s = 0.0;
    if (r) for (int64_t i = 0; i < n; i++) s += (double)out->data[i] * (double)r[i];
    return s;
}

double gc_max_abs_diff(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) { double d = fabs((double)a[i] - (double)b[i]); if (d > m) m = d; }
    return m;
}

int gc_check(const char *what, gc_build_fn f, gf_tensor **in, int n_in, void *user, gc_opts o) {
    if (o.h == 0) o.h = 1e-2;
    if (o.atol == 0) o.atol = 2e-3;
    if (o.rtol == 0) o.rtol = 2e-2;
    gf_rng rng;
    gf_rng_seed(&rng, o.seed ? o.seed : 12345);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 1 << 20, &rng);

    /* analytic */
    for (int i = 0; i < n_in; i++)
        if (in[i]) memset(in[i]->grad, 0, (size_t)gf_tensor_numel(in[i]) * sizeof(float));
    gf_tensor *out = f(&ctx, in, user);
    int64_t nout = gf_tensor_numel(out);
    float *r = malloc((size_t)nout * sizeof(float));
    for (int64_t i = 0; i < nout; i++) r[i] = (float)gf_rng_normal(&rng);
    gf_tape_backward_from(&ctx, out, r);

    int bad = 0;
    double worst = 0.0;
    for (int i = 0; i < n_in; i++) {
        gf_tensor *t = in[i];
        if (!t || !(t->flags & GF_T_REQ_GRAD)) continue;
        int64_t n = gf_tensor_numel(t);
        int64_t stride = (o.max_elems && n > o.max_elems) ? (n + o.max_elems - 1) / o.max_elems : 1;
        for (int64_t j = 0; j < n; j += stride) {
            float x0 = t->data[j];
            t->data[j] = (float)(x0 + o.h);
            double sp = probe(&ctx, f, in, user, r, NULL);
            t->data[j] = (float)(x0 - o.h);
            double sm = probe(&ctx, f, in, user, r, NULL);
            t->data[j] = x0;
            /* the step actually taken in float32, not the nominal one */
            double hh = ((double)(float)(x0 + o.h) - (double)(float)(x0 - o.h));
            double num = (sp - sm) / hh, ana = t->grad[j];
            double err = fabs(num - ana), tol = o.atol + o.rtol * fmax(fabs(num), fabs(ana));
            if (err / tol > worst) worst = err / tol;
            if (err > tol) {
                if (bad < 5)
                    gf_test_fail(__FILE__, __LINE__, "%s: input %d elem %lld: numeric %.6g analytic %.6g",
                                 what, i, (long long)j, num, ana);
                bad++;
            }
        }
    }
    free(r);
    gf_ctx_free(&ctx);
    if (getenv("GC_VERBOSE")) printf("    %s: worst err/tol %.3f\n", what, worst);
    return bad;
}

gf_tensor *gc_forward_vs_ref(gf_ctx *ctx, gc_build_fn f, gf_tensor **in, void *user, gc_ref_fn ref) {
    gf_tensor *g = f(ctx, in, user);
    int64_t n = gf_tensor_numel(g);
    double *r = malloc((size_t)n * sizeof(double));
    ref(in, user, r);
    for (int64_t i = 0; i < n; i++) GF_CHECK_NEAR(g->data[i], r[i], 1e-5, 1e-4);
    free(r);
    return g;
}

int gc_plucker_case(const char *what, gc_build_fn f, gc_ref_fn ref, void *user, const int64_t zs[3], int64_t D,
                    int64_t Pw, uint64_t seed) {
    int64_t sw[2] = {D, Pw}, sb[1] = {D};
    gf_tensor *in[3] = {gc_leaf(3, zs, seed, 1.0f), gc_leaf(2, sw, seed + 1, 0.5f), gc_leaf(1, sb, seed + 2, 0.5f)};
    int bad = gc_check(what, f, in, 3, user, (gc_opts){.h = 1e-3, .atol = 1e-3, .rtol = 1e-2});
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gc_forward_vs_ref(&ctx, f, in, user, ref);
    gf_ctx_free(&ctx);
    for (int i = 0; i < 3; i++) gc_leaf_free(in[i]);
    return bad;
}

double gc_plucker_p(const float *x, const float *y, int64_t R, double *p, float eps, int normalize) {
    int64_t k = 0;
    double nn = 0;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = i + 1; j < R; j++, k++) { p[k] = (double)x[i] * y[j] - (double)x[j] * y[i]; nn += p[k] * p[k]; }
    nn = sqrt(nn);
    return normalize ? 1.0 / (nn > eps ? nn : eps) : 1.0;
}
