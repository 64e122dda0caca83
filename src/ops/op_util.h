/* op_util.h — helpers shared by op files (internal). */
#ifndef GF_OP_UTIL_H
#define GF_OP_UTIL_H

#include "gflow/device.h"
#include "gflow/ops.h"
#include "gflow/threads.h"
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef __cplusplus
#include "backend_ops.h"
#endif

/* The device an op runs on: that of its inputs (NULL ones skipped), which must all agree, so a
 * CPU tensor never reaches a CUDA kernel nor the reverse. */
static inline gf_device gf_op_device(const char *op, int n, gf_tensor *const *in) {
    gf_device d = GF_DEV_CPU;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        if (!seen) d = in[i]->device, seen = 1;
        else GF_ASSERT(in[i]->device == d, "%s: input %d is on %s, an earlier input on %s", op, i,
                       gf_device_name(in[i]->device), gf_device_name(d));
    }
#ifndef GF_HAVE_CUDA
    GF_ASSERT(d == GF_DEV_CPU, "%s: a GPU tensor in a build without CUDA", op);
#endif
    return d;
}

#ifndef __cplusplus
/* The ops of the backend an op's inputs are on (gf_op_device), NULL when they are on the host.
 * The entry of an op checks shapes, then
 *     const gf_backend_ops *dev = gf_op_backend("<op>", n, in);
 *     if (dev) return dev->op(...);
 * and runs its host code (src/ops/backend_ops.h). */
static inline const gf_backend_ops *gf_op_backend(const char *op, int n, gf_tensor *const *in) {
    const gf_device d = gf_op_device(op, n, in);
    return d == GF_DEV_CPU ? NULL : gf_backend_of(d)->ops;
}
#endif

/* Forward-time profiling for `gflow bench` (no cost when ctx->profile is 0). */
static inline double gf_prof_begin(const gf_ctx *ctx) { return ctx->profile ? gf_time_now() : 0.0; }
static inline void gf_prof_end(gf_ctx *ctx, gf_op_family fam, double t0) {
    if (ctx->profile) {
        const double t1 = gf_time_now();
        ctx->prof.fwd_s[fam] += t1 - t0;
        ctx->prof.calls[fam]++;
        gf_prof_op_fwd(ctx, t0, t1);
    }
}
/* In a backward whose op spans two families: the time since t0 counted as fam, not as the op's
 * own family op_fam (the tape charges the whole backward to op_fam). */
static inline void gf_prof_bwd_as(gf_ctx *ctx, gf_op_family op_fam, gf_op_family fam, double t0) {
    if (ctx->profile) {
        double t = gf_time_now() - t0;
        ctx->prof.bwd_s[fam] += t;
        ctx->prof.bwd_s[op_fam] -= t;
    }
}

/* Record g's node (in: its n_in inputs) with the op's saved buffers, n_ip integer parameters and
 * one real one, as a CPU op and its CUDA twin both do. NULL where the tape keeps no node. */
static inline gf_node *gf_record_op(gf_ctx *ctx, const gf_op_def *def, gf_tensor *g, int n_in, gf_tensor **in,
                                    void *saved, int n_ip, const int64_t *ip, float fp0) {
    gf_node *n = gf_tape_record(ctx, def, g, n_in, in);
    if (n) {
        n->saved = saved;
        for (int i = 0; i < n_ip; i++) n->ip[i] = ip[i];
        n->fp[0] = fp0;
    }
    return n;
}

/* New tensor with x's shape but last dim `cols`. */
gf_tensor *gf_tensor_like_cols(gf_ctx *ctx, const gf_tensor *x, int64_t cols);
gf_tensor *gf_tensor_like(gf_ctx *ctx, const gf_tensor *x);

/* dst[c] += sum_r x[r, c] * (w ? w[r, c] : 1) for r < N, c < C.
 * The one broadcast-reduction helper (bias grads, LayerNorm gain/shift, broadcast add/mul).
 * Parallel over row blocks with per-thread partials added in thread order: reproducible
 * for a fixed thread count. Scratch comes from the step arena. */
void gf_colsum_acc(gf_ctx *ctx, float *dst, const float *x, const float *w, int64_t N, int64_t C);
/* gf_colsum_acc(dst, x, NULL) with row r of x written by fill(arg, r) before it is summed (a
 * block of eight rows filled, then summed), by the thread that sums it: one pass produces x and its column sums, the same bits as the two
 * passes (linear_gelu.c's GELU gradient and bias gradient). */
void gf_colsum_fill(gf_ctx *ctx, float *dst, float *x, int64_t N, int64_t C, void (*fill)(void *arg, int64_t r),
                    void *arg);

/* linear.c's parts, shared with the fused linear_gelu.c and concat_linear.c so they give linear's
 * bits: its shape checks (op names the op); y (N, OUT) = x W^T + b (the bias written first, the
 * GEMM adding to it; b may be NULL); dX and dW from G = dL/dY (N, OUT), each stored where fresh. */
void gf_linear_check(const char *op, const gf_tensor *x, const gf_tensor *w, const gf_tensor *b);
void gf_linear_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, const gf_tensor *b, float *y);
void gf_linear_grads(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, const float *G);
/* The same with W_c = columns [c0, c0 + cols(x)) of w (OUT, IN_w), read in place through w's row
 * stride IN_w (no copy):
 *   y (N, OUT) = x W_c^T + b (b may be NULL), or with add (and no b) y += x W_c^T;
 *   dx: x's gradient (= where fresh, else +=) G · W_c, when x needs one;
 *   dw: w's columns c0.. (= when fresh, else +=) G^T · x (fresh: w's flag, read once by the caller
 *   for all of its column blocks). */
void gf_linear_cols_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, int64_t c0, const gf_tensor *b,
                         int add, float *y);
void gf_linear_dx_cols(gf_ctx *ctx, gf_tensor *x, const gf_tensor *w, int64_t c0, const float *G);
void gf_linear_dw_cols(gf_ctx *ctx, const gf_tensor *x, gf_tensor *w, int64_t c0, int fresh, const float *G);
/* concat_linear.c's parts, shared with gated_lerp.c: its shape checks (op names the op), and its
 * input and weight gradients from G = dL/du (N, OUT) (the bias's is the caller's). */
void gf_concat_linear_check(const char *op, const gf_tensor *a, const gf_tensor *b, const gf_tensor *w,
                            const gf_tensor *bias);
void gf_concat_linear_grads(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, const float *G);

/* gelu.c's passes over n floats, shared with linear_gelu.c: y = GELU(x) (threaded); dx (= when
 * fresh, else +=) dy ⊙ GELU'(x), threaded (_rows) or one thread's piece (_span), from x and the
 * forward's y. y16 / d16, where not NULL, get the bf16 bits of what y / dx get
 * (gf_gemm_round_into's copies; with fresh only). */
void gf_gelu_forward_rows(float *y, uint16_t *y16, const float *x, int64_t n);
void gf_gelu_backward_rows(float *dx, uint16_t *d16, const float *dy, const float *x, const float *y, int64_t n,
                           int fresh);
void gf_gelu_backward_span(float *dx, uint16_t *d16, const float *dy, const float *x, const float *y, int64_t n,
                           int fresh);

/* sigmoid_lerp.c's passes over n floats, shared with gated_lerp.c: y = σ(u) ⊙ a + (1 − σ(u)) ⊙ b
 * (threaded); its gradients added to du, da, db (each NULL: not needed; da and db may be one
 * buffer, the first of them fresh at most) by the calling thread alone (_piece, any n), or stored
 * as 0 + the term where their GF_SLERP_FRESH_* bit is set in fresh (the bits of adding to zeros). */
#define GF_SLERP_FRESH_DU 1u
#define GF_SLERP_FRESH_DA 2u
#define GF_SLERP_FRESH_DB 4u
void gf_sigmoid_lerp_rows(float *y, const float *u, const float *a, const float *b, int64_t n);
void gf_sigmoid_lerp_backward_piece(float *du, float *da, float *db, const float *g, const float *u, const float *a,
                                    const float *b, int64_t n, unsigned fresh);

/* check that b broadcasts onto a: same shape, or b's shape equals a's trailing dims */
int gf_broadcastable(const gf_tensor *a, const gf_tensor *b);

#ifdef __cplusplus
extern "C" {
#endif
/* masked_mean's normalised weights w_bt = m_bt / Σ_t m_bt (Σ in double; 0 for a row of zero
 * weights), (B, L) in the host arena; asserts that no weight is negative. The CPU op and its
 * CUDA twin (src/ops/cuda/masked_mean.cu) share it, so both use the same weights. */
float *gf_masked_mean_weights(gf_ctx *ctx, const float *mask, int64_t B, int64_t L);
#ifdef __cplusplus
}
#endif

/* The one matrix product of the CPU ops (gemm.c): row-major C (M, N) = op(A) · op(B) + beta C,
 * beta 0 or 1, ta/tb 1 for a transposed operand, ld* the stored matrices' row strides (as
 * cblas_sgemm). In ctx->precision bf16 the inputs are rounded to bfloat16 and the products
 * accumulated in fp32 (oneDNN where the CPU has bf16 arithmetic); scratch from ctx's arena. */
void gf_gemm(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
             const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* gf_gemm with beta 0 and the row vector bias (N) added to every row of C: by oneDNN's matmul
 * in its epilogue (where the bias written into C first made the product read C back, 10-30 %
 * slower on Zen 5's shapes), else written into C first and the product added to it. Each element
 * is the same fp32 sum, product + bias, on both paths. */
void gf_gemm_bias(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                  const float *B, int64_t ldb, const float *bias, float *C, int64_t ldc);

/* A weight's gradient: dW (OUT, IN; row stride ldw) = Gᵀ X + beta dW, with G (N, OUT) and X
 * (N, IN) (row strides ldg, ldx). In bf16 with IN > OUT it is the transposed product, dWᵀ (IN,
 * OUT) = Xᵀ G, written into arena scratch and then written or added into dW: its B operand,
 * which oneDNN reorders into its own layout each call, is then the narrower G (the FFN's fc2:
 * 4,096 x 256 where X is 4,096 x 1,024; the Plücker projection's: G, where pbar's 496 columns
 * padded to 512 cost 2.5 ms a call). Otherwise gf_gemm(1, 0, OUT, IN, N, ...). */
void gf_gemm_dw(gf_ctx *ctx, int64_t N, int64_t OUT, int64_t IN, const float *G, int64_t ldg, const float *X,
                int64_t ldx, float beta, float *dW, int64_t ldw);
/* Called by an op's forward, before its product X Wᵀ, on the X (N, IN) its backward will pass to
 * gf_gemm_dw with this OUT: where that product is transposed (X then its A), X is rounded once
 * into the step's copies, which the forward's product and the backward's both take. */
void gf_gemm_dw_hold_x(gf_ctx *ctx, int64_t N, int64_t OUT, int64_t IN, const float *X, int64_t ldx);
/* For an op that writes X (rows, cols; dense) which a later bf16 product of this step reads: the
 * buffer (rows, cols) for X's bf16 bits, gf_bf16_of of each value, which the op fills in the pass
 * that writes X (before any product reads X), and which the step's products then take as their A
 * (either orientation) and as a B, in its stored layout or reordered from these bits into
 * oneDNN's, instead of rounding X again (unit/gemm_round_into_is_the_step_copy). NULL
 * where the products would not take it (fp32, OpenBLAS's path) or the step's copies are full: the
 * op writes X alone. X must not change until ctx is reset. */
uint16_t *gf_gemm_round_into(gf_ctx *ctx, const float *X, int64_t rows, int64_t cols);

/* In bf16 (gemm.c) a product whose A operand an op has already rounded: A16 holds the bf16 bits
 * of op(A)'s stored matrix, dense (lda its column count), exactly gf_bf16_of of each fp32 value,
 * so the product is the one gf_gemm makes of those values (the head's dlogits, rounded by their
 * row kernel once instead of once per product). ctx->precision must be GF_PREC_BF16. */
void gf_gemm_a16(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const uint16_t *A16, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The same for an A operand given as fp32 values that are bf16 already (each its own
 * gf_bf16_round; row stride lda): on OpenBLAS's path the product reads A as it is, with no copy,
 * and gives gf_gemm's bits for those values; on oneDNN's it takes their bits. A is not kept
 * between products (it may change between calls). ctx->precision must be GF_PREC_BF16. */
void gf_gemm_rounded_a(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* 1 where gf_gemm's bf16 products with an N-column output of row stride ldc run on oneDNN (their
 * operands as bf16 bits: gf_gemm_a16 fits them), 0 where on OpenBLAS (fp32 values:
 * gf_gemm_rounded_a) */
int gf_gemm_bf16_dnnl(int64_t N, int64_t ldc);

/* fp32 -> bf16 bits, round to nearest even; a NaN stays a (quiet) NaN. Branch-free arithmetic
 * on the bits, so `omp simd` loops around it vectorise. */
static inline uint16_t gf_bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* d (n) = gf_bf16_of of each of s (n), in one vector pass (gemm.c: its rounded copies' rows) */
void gf_bf16_row(uint16_t *d, const float *s, int64_t n);

static inline float gf_bf16_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline int gf_blas_int(int64_t v) {
    GF_ASSERT(v >= 0 && v <= INT_MAX, "GEMM dimension %lld exceeds the BLAS int range", (long long)v);
    return (int)v;
}

/* GF_KERNEL_CLONES before a hot vector kernel (a function without OpenMP threading inside: call
 * it from the parallel loop): in a portable build (-Dcpu=x86-64 or x86-64-v3, meson.build sets
 * GF_KERNEL_CLONES_ON) GCC compiles it also for x86-64-v4 (AVX-512) and x86-64-v3 (AVX2, FMA)
 * and picks the best the CPU has at load time. A native build (-Dcpu=native) needs no clones:
 * it is compiled for the build machine, and its code and results are what they were. */
#ifdef GF_KERNEL_CLONES_ON
#define GF_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GF_KERNEL_CLONES
#endif

/* Vectorisable exp and erfc for the hot elementwise loops (GELU, softmax in head_ce,
 * cross_entropy and attention). Plain C on floats with no calls and no branches, so
 * `#pragma omp simd` loops around them vectorise; IEEE semantics are kept (no fast-math).
 *
 * gf_expf: Cephes' expf — x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), a
 *   degree-6 polynomial for e^r, then 2^n by exponent arithmetic. Within 2 ulp of libm's expf
 *   on [-87.3, 88]; below -87.3 (where libm goes subnormal) it returns 0, so exp(-inf) = 0
 *   (masked attention scores); above 88 it saturates at e^88 (callers only pass x <= 0 or
 *   small arguments). NaN propagates.
 * gf_expf_le88: gf_expf's bits for x <= 88 (or NaN), without the clamp to 88, which changes
 *   nothing there: a compare and a blend fewer a lane, and the clamp to -87.3 and the mask at the
 *   end share one compare. For arguments that cannot pass 88: GELU's -v²/2, erfc's q - z²
 *   (q <= 3e-8), a softmax's l - max.
 * gf_expf_at is the body both share; gf_expf clamps inline (as gf_expf_le88 of its clamped
 *   argument, GCC compiled attention's loops around it worse: 2-3x their samples). */
static inline float gf_expf_at(float x, float xc) { /* xc: x clamped to [-87.3, 88] */
    /* round x/ln2 to an integer with the 1.5·2^23 trick: the integer n sits in the low
     * mantissa bits of kf (no float->int conversion, which keeps the loop vectorisable) */
    union { float f; int32_t i; } kf, sc;
    kf.f = __builtin_fmaf(xc, 1.44269504088896341f, 12582912.0f);
    float n = kf.f - 12582912.0f;
    float r = __builtin_fmaf(n, -0.693359375f, xc);
    r = __builtin_fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = __builtin_fmaf(p, r, 1.3981999507e-3f);
    p = __builtin_fmaf(p, r, 8.3334519073e-3f);
    p = __builtin_fmaf(p, r, 4.1665795894e-2f);
    p = __builtin_fmaf(p, r, 1.6666665459e-1f);
    p = __builtin_fmaf(p, r, 5.0000001201e-1f);
    float y = __builtin_fmaf(p, r * r, r) + 1.0f;
    /* 2^n, n in [-126, 127]: a normal power of two; unsigned, so that a NaN x (its bits in kf,
     * the result NaN all the same) shifts no bit into an int's sign: UB, which UBSan reports */
    sc.i = (int32_t)(((uint32_t)kf.i - 0x4B400000u + 127u) << 23);
    y *= sc.f;
    /* x < -87.3 gives +0 (NaN stays NaN through the polynomial), selected by a bit mask: a
     * `?:` here lets GCC thread the branch back over the clamp above, and under -ftrapping-math
     * it then cannot if-convert the loop: the loops around gf_expf stayed scalar */
    union { float f; uint32_t u; } out;
    out.f = y;
    out.u &= 0u - (uint32_t)!(x < -87.3f);
    return out.f;
}

static inline float gf_expf(float x) {
    float xc = x > 88.0f ? 88.0f : x;
    return gf_expf_at(x, xc < -87.3f ? -87.3f : xc);
}

static inline float gf_expf_le88(float x) { return gf_expf_at(x, x < -87.3f ? -87.3f : x); }

/* erfc(z) for z >= 0 (Numerical Recipes' erfcc, Chebyshev fit of t·exp(-z² + poly(t)),
 * t = 1/(1 + z/2)): fractional error < 1.2e-7 for every z >= 0, so the tail stays accurate in
 * relative terms (Φ(x) = erfc(-x/√2)/2 for x < 0), unlike 1 - erf. */
static inline float gf_erfc_pos(float z) {
    float t = 1.0f / __builtin_fmaf(0.5f, z, 1.0f);
    float q = 0.17087277f;
    q = __builtin_fmaf(q, t, -0.82215223f);
    q = __builtin_fmaf(q, t, 1.48851587f);
    q = __builtin_fmaf(q, t, -1.13520398f);
    q = __builtin_fmaf(q, t, 0.27886807f);
    q = __builtin_fmaf(q, t, -0.18628806f);
    q = __builtin_fmaf(q, t, 0.09678418f);
    q = __builtin_fmaf(q, t, 0.37409196f);
    q = __builtin_fmaf(q, t, 1.00002368f);
    q = __builtin_fmaf(q, t, -1.26551223f);
    return t * gf_expf_le88(q - z * z); /* q <= 3e-8 for t in (0, 1] */
}

/* Φ(x) = P(N(0,1) <= x) = erfc(-x/√2)/2, accurate in relative terms on both tails */
static inline float gf_normal_cdf(float x) {
    union { float f; uint32_t u; } lo, hi;
    lo.f = 0.5f * gf_erfc_pos(__builtin_fabsf(x) * 0.70710678118654752f); /* Φ(-|x|) */
    hi.f = 1.0f - lo.f;
    /* bit select, not `?:`: a conditional 1 - c may not be speculated under -ftrapping-math,
     * which kept every loop calling this scalar */
    uint32_t neg = 0u - (uint32_t)(x < 0.0f);
    lo.u = (lo.u & neg) | (hi.u & ~neg);
    return lo.f;
}

/* 2^(i/32) - (i << 47) as double bits, i < 32: glibc's __exp2f_data.tab, for gf_expf_neg */
static const uint64_t gf_exp2f_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

/* e^x for x <= 0 (or NaN), bit for bit glibc's expf (2.28 on, its FMA variant; 0.502 ulp) with
 * no calls and no branches, so `omp simd` loops around it vectorise: x·32/ln2 = k + r in double,
 * 2^(k/32) from the table and the exponent, a cubic for 2^(r/32), the same FMAs in the same
 * order as glibc's e_expf.c compiled for FMA. Below log(2^-150) (and -inf) +0, as glibc; NaN
 * propagates. Every non-positive float agrees with libm's expf (unit/expf_neg_is_libm). */
static inline float gf_expf_neg(float x) {
    const float lo = -0x1.9fe368p6f; /* log(2^-150): below it e^x rounds to +0 */
    /* x below lo is not clamped: what the steps make of it is masked off at the end. A clamp
     * (`?:`) let GCC thread it with the mask's test into a branch that made the conversion,
     * which may trap, conditional: the loops stayed scalar */
    double xd = (double)x;
    union { double d; uint64_t u; } kd, s;
    kd.d = __builtin_fma(0x1.71547652b82fep+5, xd, 0x1.8p+52); /* k in kd's low mantissa bits */
    double k = kd.d - 0x1.8p+52;
    double r = __builtin_fma(0x1.71547652b82fep+5, xd, -k);
    s.u = gf_exp2f_tab[kd.u & 31] + (kd.u << 47);
    double z = __builtin_fma(0x1.c6af84b912394p-20, r, 0x1.ebfce50fac4f3p-13);
    double y = __builtin_fma(0x1.62e42ff0c52d6p-6, r, 1.0);
    y = __builtin_fma(z, r * r, y);
    union { float f; uint32_t u; } out;
    out.f = (float)(y * s.d);
    out.u &= 0u - (uint32_t)!(x < lo); /* a bit mask, not `?:` (gf_expf says why) */
    return out.f;
}

/* σ(v) = 1 / (1 + e^-v) without overflow: exp of -|v| only, 1 / (1 + e) for v >= 0 and
 * e / (1 + e) below, both computed and one selected by a bit mask (as gf_normal_cdf), so the
 * loops vectorise (sigmoid.c and the fused sigmoid_lerp.c, so both give the same bits). With
 * gf_expf_neg these are the bits of the same formula over libm's expf, which the CUDA
 * emulator's cu_sigmoid computes. */
static inline float gf_sigmoidf(float v) {
    float e = gf_expf_neg(-__builtin_fabsf(v)), d = 1.0f + e;
    union { float f; uint32_t u; } pos, neg;
    pos.f = 1.0f / d;
    neg.f = e / d;
    uint32_t m = 0u - (uint32_t)(v >= 0.0f);
    pos.u = (pos.u & m) | (neg.u & ~m);
    return pos.f;
}

#ifndef __cplusplus
/* One row of LayerNorm (layernorm.c and the fused dropout_add_layernorm.c, so both give the
 * same bits): yr = (xr - mean) * rstd * gm + bt, mean and biased variance in double over two
 * passes, rstd = 1 / sqrt(var + eps); stat = {mean, rstd}. */
static inline void gf_layernorm_row(const float *restrict xr, const float *restrict gm, const float *restrict bt,
                                    int64_t D, float eps, float *restrict yr, float *restrict stat) {
    double s = 0.0, ss = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < D; c++) s += xr[c];
    double mean = s / (double)D;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < D; c++) { double d = xr[c] - mean; ss += d * d; }
    float m = (float)mean, rstd = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
#pragma omp simd
    for (int64_t c = 0; c < D; c++) yr[c] = (xr[c] - m) * rstd * gm[c] + bt[c];
    stat[0] = m;
    stat[1] = rstd;
}
#endif

/* Where the LayerNorm backward (gf_layernorm_backward_rows) puts a row's input gradient
 * dxr = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat ⊙ xhat)):
 *   dx (+)= dxr                               (NULL: not needed; = when dx_fresh)
 *   df (+)= keep ? dxr * scale : 0            (keep NULL: dxr; NULL: not needed; = when df_fresh)
 *   df16 = df's bf16 bits, in the pass that stores df (NULL: none; gf_gemm_round_into)
 * LayerNorm alone uses dx; LN(x + dropout(f)) both (dropout_add_layernorm.c). */
typedef struct gf_ln_dx {
    float *dx, *df;
    uint16_t *df16;
    int dx_fresh, df_fresh;
    const uint8_t *keep;
    float scale;
} gf_ln_dx;

/* The LayerNorm backward (layernorm.c) over x (N, D) with the forward's stats (N, 2: mean,
 * rstd) and dy g (N, D): gamma's and beta's gradients added to (when they need one), the input
 * gradient written as `o` says. */
void gf_layernorm_backward_rows(gf_ctx *ctx, const float *x, const float *g, const float *stats, gf_tensor *gamma,
                                gf_tensor *beta, int64_t N, int64_t D, const gf_ln_dx *o);

/* dropout_add_layernorm.c's parts, shared with linear_dropout_add_layernorm.c: the checks of the
 * gain, the shift and p (op names the op; the mask is keyed on x's rows, the branch's shape);
 * y = LN(x + dropout(f, p)) from the branch's floats fd (x's shape), recorded as def's node with
 * its n_in inputs (s, the stats and the mask saved; NULL where the tape keeps no node); and its
 * backward, the input gradients where o says (o's mask and scale filled in from the node). */
void gf_dal_check(const char *op, gf_ctx *ctx, const gf_tensor *x, float p, const gf_tensor *gamma,
                  const gf_tensor *beta);
gf_node *gf_dal_forward(gf_ctx *ctx, const gf_op_def *def, gf_tensor *x, const float *fd, float p, gf_tensor *gamma,
                        gf_tensor *beta, float eps, int n_in, gf_tensor **in, gf_tensor **out);
void gf_dal_backward(gf_ctx *ctx, const gf_node *n, gf_ln_dx *o, gf_tensor *gamma, gf_tensor *beta, int64_t N,
                     int64_t D);

/* The mask of inverted dropout on x (R, ...) for p in (0, 1) (dropout.c, which documents the
 * hashing): one key drawn from ctx->rng, keep (uint8, numel(x)) in the step arena, *scale =
 * 1 / (1 - p). The CPU dropout and the fused ops that drop share it, so their masks agree. */
uint8_t *gf_dropout_mask(gf_ctx *ctx, const gf_tensor *x, float p, float *scale);
/* gf_dropout_mask in parts, for an op that makes the mask row by row where it uses it: the draw
 * (the key from ctx->rng, x's row keying, the threshold, the scale), then the keep bytes of
 * elements [i0, i0 + n) of x (flat index), any span, the bits gf_dropout_mask gives them. */
typedef struct gf_drop_key {
    uint64_t key, thr;
    int64_t per, nb, row0; /* elements a row of x, batch rows, the first one's global index */
    float scale;           /* 1 / (1 - p) */
} gf_drop_key;
gf_drop_key gf_dropout_draw(gf_ctx *ctx, const gf_tensor *x, float p);
void gf_dropout_mask_span(const gf_drop_key *d, int64_t i0, int64_t n, uint8_t *keep);
/* v where kept, else +0, selected by a bit mask: a `?:` over the product keeps the loop scalar
 * under -ftrapping-math (tests/arch/check_simd_loops.py) */
static inline float gf_dropout_kept(float v, uint8_t kept) {
    union { float f; uint32_t u; } b = {v};
    b.u &= 0u - (uint32_t)kept;
    return b.f;
}
/* x's leading rows must be copies of the batch rows the forward computes (ctx->batch_rows) */
static inline void gf_dropout_check_rows(const gf_ctx *ctx, const gf_tensor *x, const char *op) {
    int64_t R = x->shape[0], nb = ctx->batch_rows > 0 ? ctx->batch_rows : R;
    GF_ASSERT(nb == 0 || R % nb == 0, "%s: %lld leading rows are not copies of the batch's %lld rows", op,
              (long long)R, (long long)nb);
}

/* For a backward that stores fresh gradients (gf_op_def.stores_fresh): 1 when x's gradient buffer
 * is uninitialised and must be written, not added to; clears the flag (the caller writes it now). */
static inline int gf_grad_fresh(gf_tensor *x) {
    int f = (x->flags & GF_T_GRAD_FRESH) != 0;
    x->flags &= ~GF_T_GRAD_FRESH;
    return f;
}

/* For a LayerNorm node (inputs x, gain, shift): dx into x's gradient, stored where it is fresh;
 * a fresh gain's or shift's gradient zeroed, as their sums are added to */
static inline gf_ln_dx gf_ln_dx_of(gf_node *n) {
    gf_tensor *x = n->in[0];
    gf_ln_dx o;
    memset(&o, 0, sizeof o);
    o.scale = 1.0f;
    if (gf_needs_grad(x)) o.dx = x->grad, o.dx_fresh = gf_grad_fresh(x);
    for (int i = 1; i < 3; i++)
        if (gf_needs_grad(n->in[i]) && gf_grad_fresh(n->in[i]))
            memset(n->in[i]->grad, 0, (size_t)gf_tensor_cols(x) * sizeof(float));
    return o;
}

#endif
