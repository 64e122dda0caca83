/* gelu.c — exact GELU (PyTorch default, not the tanh form): y = x Φ(x) = 0.5 x (1 + erf(x/√2)).
 * Φ comes from gf_normal_cdf (op_util.h): a branch-free erfc fit with < 1.2e-7 relative error,
 * so the loops vectorise (libm's erff/expf are scalar calls and were ~1/3 of elementwise time).
 * The passes below are also the fused linear_gelu.c's, so both give the same bits. */
#include "op_util.h"

/* backward: dx += dy * (Φ(x) + x φ(x)),  φ(x) = exp(-x²/2) / √(2π), with Φ(v) = y / v from the
 * forward's output y = v Φ(v): one division where gf_normal_cdf is a division, ten FMAs and an
 * exponential (the backward pass 2.2 -> 1.0 ms per 4M elements, Zen 5). y / v is Φ within an ulp
 * or two (y's rounding and the quotient's); for |v| <= 2^-60 (0 and subnormals included, where
 * y / v loses its bits) Φ is 0.5 to fp32's precision (v φ(0) < 2^-61). Where Φ underflows
 * (v < -13.2) y is 0 and so is the slope, as exp(-v²/2) is. unit/gelu_backward_is_its_derivative. */
static inline float gelu_slope(float v, float y) {
    float pdf = 0.39894228040143268f * gf_expf_le88(-0.5f * v * v);
    const float ph = __builtin_fabsf(v) > 0x1p-60f ? y / v : 0.5f;
    return ph + v * pdf;
}

/* elementwise over spans of GELU_SPAN, so the vector kernels below can be multiversioned
 * (GF_KERNEL_CLONES) while OpenMP splits the spans across threads */
#define GELU_SPAN 4096

GF_KERNEL_CLONES void gf_gelu_backward_span(float *restrict dx, uint16_t *restrict d16, const float *restrict g,
                                            const float *restrict xd, const float *restrict yd, int64_t n, int fresh) {
    if (d16) { /* the bits in the same pass, where rounding dx after took another read of it */
        GF_ASSERT(fresh, "gelu backward: bf16 bits of a gradient added to");
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            dx[i] = g[i] * gelu_slope(xd[i], yd[i]);
            d16[i] = gf_bf16_of(dx[i]);
        }
    } else if (fresh) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) dx[i] = g[i] * gelu_slope(xd[i], yd[i]);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) dx[i] += g[i] * gelu_slope(xd[i], yd[i]);
    }
}

GF_KERNEL_CLONES static void gelu_forward_span(float *restrict yd, uint16_t *restrict y16, const float *restrict xd,
                                               int64_t n) {
    if (y16) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            yd[i] = xd[i] * gf_normal_cdf(xd[i]);
            y16[i] = gf_bf16_of(yd[i]);
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) yd[i] = xd[i] * gf_normal_cdf(xd[i]);
    }
}

void gf_gelu_backward_rows(float *dx, uint16_t *d16, const float *g, const float *xd, const float *yd, int64_t N,
                           int fresh) {
    int64_t nb = (N + GELU_SPAN - 1) / GELU_SPAN;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * GELU_SPAN, m = N - lo < GELU_SPAN ? N - lo : GELU_SPAN;
        gf_gelu_backward_span(dx + lo, d16 ? d16 + lo : NULL, g + lo, xd + lo, yd + lo, m, fresh);
    }
}

void gf_gelu_forward_rows(float *yd, uint16_t *y16, const float *xd, int64_t N) {
    int64_t nb = (N + GELU_SPAN - 1) / GELU_SPAN;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * GELU_SPAN;
        gelu_forward_span(yd + lo, y16 ? y16 + lo : NULL, xd + lo, N - lo < GELU_SPAN ? N - lo : GELU_SPAN);
    }
}

static void gelu_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    gf_gelu_backward_rows(x->grad, NULL, n->out->grad, x->data, n->out->data, gf_tensor_numel(x), gf_grad_fresh(x));
}

gf_tensor *gf_gelu(gf_ctx *ctx, gf_tensor *x) {
    double t0 = gf_prof_begin(ctx);
    gf_tensor *in[1] = {x};
    const gf_backend_ops *dev = gf_op_backend("gelu", 1, in);
    if (dev) return dev->gelu(ctx, x);
    gf_tensor *y = gf_tensor_like(ctx, x);
    gf_gelu_forward_rows(y->data, NULL, x->data, gf_tensor_numel(x));
    gf_tape_record(ctx, &gf_op_gelu, y, 1, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_gelu = {"gelu", GF_FAM_ELEMWISE, gelu_backward, 1};
