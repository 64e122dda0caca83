/* test_vec_math.c — the vectorisable exp and normal CDF of op_util.h (GELU, the softmaxes,
 * cross-entropy): their selects are bit masks so that GCC vectorises the loops around them
 * (a `?:` kept them scalar under -ftrapping-math); these check that they are the same function,
 * bit for bit, as the branching definitions they replaced, called one by one and in an
 * `omp simd` loop (gf_expf_le88 too, for x <= 88), and that gf_expf stays within 2 ulp of libm;
 * and that gf_expf_neg and gf_sigmoidf give libm's bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gf_test.h"
#include "ops/op_util.h"

/* the definitions with `?:` selects (op_util.h before the bit masks) */
static float def_expf(float x) {
    float xc = x > 88.0f ? 88.0f : x;
    xc = xc < -87.3f ? -87.3f : xc;
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
    sc.i = (int32_t)(((uint32_t)kf.i - 0x4B400000u + 127u) << 23);
    y *= sc.f;
    return x < -87.3f ? 0.0f : y;
}

static float def_erfc_pos(float z) {
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
    return t * def_expf(q - z * z);
}

static float def_normal_cdf(float x) {
    float c = 0.5f * def_erfc_pos(__builtin_fabsf(x) * 0.70710678118654752f);
    return x < 0.0f ? c : 1.0f - c;
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#define VM_N 70000
static float vm_x[VM_N], vm_e[VM_N], vm_c[VM_N];

/* every 65,537th bit pattern (both signs, NaNs, infinities, subnormals) and the edges */
static int vm_inputs(void) {
    int n = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 65537u) vm_x[n++] = of_bits((uint32_t)u);
    const float edge[] = {0.0f, -0.0f, 88.0f, 88.5f, -87.3f, nextafterf(-87.3f, 0.0f), nextafterf(-87.3f, -100.0f),
                          -87.4f, -1e30f, 1e30f, INFINITY, -INFINITY, NAN, -NAN, 1e-30f, -1e-30f, 0.5f, -0.5f, 9.0f, -9.0f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) vm_x[n++] = edge[i];
    return n;
}

/* a NaN matches a NaN (its payload is not part of the definition) */
static int same(float got, float ref) { return isnan(ref) ? isnan(got) : bits(got) == bits(ref); }

GF_TEST(unit, vec_math_is_its_branching_definition) {
    int n = vm_inputs();
    GF_REQUIRE(n <= VM_N, "%d inputs", n);
#pragma omp simd
    for (int i = 0; i < n; i++) vm_e[i] = gf_expf(vm_x[i]);
#pragma omp simd
    for (int i = 0; i < n; i++) vm_c[i] = gf_normal_cdf(vm_x[i]);
    int bad_e = 0, bad_c = 0;
    for (int i = 0; i < n; i++) {
        float x = vm_x[i], e = def_expf(x), c = def_normal_cdf(x);
        if (!same(vm_e[i], e) || !same(gf_expf(x), e)) {
            if (bad_e++ < 3) GF_CHECK(0, "gf_expf(%a) = %a, the definition %a", x, vm_e[i], e);
        }
        if (!same(vm_c[i], c) || !same(gf_normal_cdf(x), c)) {
            if (bad_c++ < 3) GF_CHECK(0, "gf_normal_cdf(%a) = %a, the definition %a", x, vm_c[i], c);
        }
    }
    GF_CHECK(bad_e == 0 && bad_c == 0, "%d exp and %d cdf values differ of %d", bad_e, bad_c, n);
}

/* gf_expf_le88 over vm_x[0..n) in an `omp simd` loop, as its callers run it, against gf_expf's
 * definition: the number that differ */
static int le88_differ(int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) vm_e[i] = gf_expf_le88(vm_x[i]);
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (!same(vm_e[i], def_expf(vm_x[i])) && bad++ < 3)
            GF_CHECK(0, "gf_expf_le88(%a) = %a, gf_expf %a", vm_x[i], vm_e[i], def_expf(vm_x[i]));
    return bad;
}

/* gf_expf_le88 is gf_expf for every x <= 88 and NaN: the inputs above, then every 251st float of
 * [-inf, -0] and of [+0, 88] */
GF_TEST(unit, expf_le88_is_expf) {
    int n = 0, bad = 0;
    for (int i = 0, m = vm_inputs(); i < m; i++)
        if (!(vm_x[i] > 88.0f)) vm_x[n++] = vm_x[i];
    bad += le88_differ(n);
    int64_t nd = n;
    const uint32_t span[2][2] = {{0x80000000u, 0xFF800000u}, {0x00000000u, 0x42B00000u}}; /* -0..-inf, +0..88 */
    for (int s = 0; s < 2; s++)
        for (uint32_t u = span[s][0]; u <= span[s][1]; nd += n) {
            for (n = 0; n < VM_N && u <= span[s][1]; u += 251u) vm_x[n++] = of_bits(u);
            bad += le88_differ(n);
        }
    GF_CHECK(bad == 0 && nd > 10000000, "%d of %lld values differ", bad, (long long)nd);
}

/* within 2 ulp of libm on [-87.3, 88]; 0 below it */
GF_TEST(unit, vec_expf_within_2_ulp_of_libm) {
    int worst = 0;
    for (float x = -87.3f; x <= 88.0f; x += 0.0137f) {
        float got = gf_expf(x), ref = expf(x);
        int ulp = abs((int)(bits(got) - bits(ref)));
        if (ulp > worst) worst = ulp;
    }
    GF_CHECK(worst <= 2, "gf_expf is %d ulp from expf", worst);
    GF_CHECK(gf_expf(-87.31f) == 0.0f && !signbit(gf_expf(-INFINITY)) && gf_expf(-INFINITY) == 0.0f, "below -87.3");
    GF_CHECK(isnan(gf_expf(NAN)) && isnan(gf_normal_cdf(NAN)), "NaN propagates");
    GF_CHECK(gf_normal_cdf(-INFINITY) == 0.0f && gf_normal_cdf(INFINITY) == 1.0f, "tails");
}

/* σ over libm's expf, as gf_sigmoidf was before gf_expf_neg (and as the CUDA emulator's cu_sigmoid is) */
static float def_sigmoidf(float v) {
    if (v >= 0) return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}

/* |bits(a) - bits(b)| in 64 bits: values of opposite signs (a NaN's bits too) are 2^31 or more
 * apart, whose negation an int cannot hold */
static int64_t ulps(float a, float b) {
    int64_t d = (int64_t)bits(a) - (int64_t)bits(b);
    return d < 0 ? -d : d;
}

/* gf_expf_neg is glibc's expf as compiled for FMA: bit for bit where that is the libm (glibc
 * 2.28 on, a CPU with FMA), else within 1 ulp; so is gf_sigmoidf against the libm formula */
GF_TEST(unit, expf_neg_is_libm) {
    int n = vm_inputs();
    static float vm_s[VM_N];
    GF_REQUIRE(n <= VM_N, "%d inputs", n);
#pragma omp simd
    for (int i = 0; i < n; i++) vm_e[i] = gf_expf_neg(-__builtin_fabsf(vm_x[i]));
#pragma omp simd
    for (int i = 0; i < n; i++) vm_s[i] = gf_sigmoidf(vm_x[i]);
    int exact = 0;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 28) && defined(__x86_64__)
    exact = __builtin_cpu_supports("fma") != 0;
#endif
    int bad_e = 0, bad_s = 0;
    for (int i = 0; i < n; i++) {
        float x = -fabsf(vm_x[i]), e = expf(x), s = def_sigmoidf(vm_x[i]);
        int64_t de = ulps(vm_e[i], e), ds = ulps(vm_s[i], s);
        int ok_e = isnan(e) ? isnan(vm_e[i]) && isnan(gf_expf_neg(x)) : de <= !exact && same(gf_expf_neg(x), vm_e[i]);
        int ok_s = isnan(s) ? isnan(vm_s[i]) && isnan(gf_sigmoidf(vm_x[i]))
                            : ds <= !exact && same(gf_sigmoidf(vm_x[i]), vm_s[i]);
        if (!ok_e && bad_e++ < 3) GF_CHECK(0, "gf_expf_neg(%a) = %a, expf %a", x, vm_e[i], e);
        if (!ok_s && bad_s++ < 3) GF_CHECK(0, "gf_sigmoidf(%a) = %a, libm's formula %a", vm_x[i], vm_s[i], s);
    }
    GF_CHECK(bad_e == 0 && bad_s == 0, "%d exp and %d sigmoid values differ of %d (exact: %d)", bad_e, bad_s, n, exact);
    /* densely where e^x is neither 1 nor 0: every 61st float of [-104, 0], both signs of σ (tools
     * can check all 2^32 inputs; this catches an FMA or constant that moves a last bit) */
    int64_t bad_d = 0, nd = 0;
    for (uint32_t u0 = 0x80000000u; u0 < 0xC2D00000u; u0 += 61u * VM_N) {
        int m = 0;
        for (uint32_t u = u0; m < VM_N && u < 0xC2D00000u; u += 61u) vm_x[m++] = of_bits(u);
#pragma omp simd
        for (int i = 0; i < m; i++) vm_e[i] = gf_expf_neg(vm_x[i]);
#pragma omp simd
        for (int i = 0; i < m; i++) vm_s[i] = gf_sigmoidf(-vm_x[i]);
        for (int i = 0; i < m; i++, nd++) {
            int64_t de = ulps(vm_e[i], expf(vm_x[i])), ds = ulps(vm_s[i], def_sigmoidf(-vm_x[i]));
            if ((de > !exact || ds > !exact) && bad_d++ < 3)
                GF_CHECK(0, "x = %a: gf_expf_neg %a, expf %a; gf_sigmoidf(-x) %a", vm_x[i], vm_e[i], expf(vm_x[i]),
                         vm_s[i]);
        }
    }
    GF_CHECK(bad_d == 0, "%lld of %lld dense values differ", (long long)bad_d, (long long)nd);
    GF_CHECK(gf_expf_neg(-INFINITY) == 0.0f && !signbit(gf_expf_neg(-INFINITY)) && gf_expf_neg(-1e30f) == 0.0f &&
                 gf_expf_neg(-0.0f) == 1.0f && gf_expf_neg(-103.0f) > 0.0f,
             "the edges");
    GF_CHECK(gf_sigmoidf(-INFINITY) == 0.0f && gf_sigmoidf(INFINITY) == 1.0f && gf_sigmoidf(-0.0f) == 0.5f &&
                 isnan(gf_sigmoidf(NAN)),
             "sigmoid's edges");
}
