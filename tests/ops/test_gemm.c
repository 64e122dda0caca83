/* test_gemm.c — gf_gemm, the CPU ops' one matrix product, in fp32 and in bf16 ([run] precision):
 * the rounding to bfloat16 (nearest even, NaN kept), and each bf16 product against its definition:
 * cblas_sgemm here on inputs rounded by gf_bf16_round, for every transposition, beta 0 and 1, and
 * a C wider than N. The bf16 path (oneDNN's AMX or AVX512-BF16 kernels where the CPU has them,
 * else OpenBLAS on rounded inputs) accumulates in fp32 in its own order, so it agrees with the
 * definition to fp32 accumulation error (normwise 1e-5), not to the bit; against plain fp32 it
 * differs by the rounding of the inputs (normwise between 1e-4 and 1e-2 on random data: bf16
 * keeps 8 significant bits, relative error at most 2^-8 per input). */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gf_test.h"
#include "gradcheck.h"
#include "gflow.h"
#include "ops/op_util.h"

static float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

GF_TEST(unit, bf16_rounding_nearest_even) {
    GF_CHECK(gf_bf16_round(1.0f) == 1.0f, "1 is a bf16");
    /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even one, 1 */
    GF_CHECK(gf_bf16_round(1.0f + 0x1p-8f) == 1.0f, "%a", (double)gf_bf16_round(1.0f + 0x1p-8f));
    /* 1 + 3*2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even one */
    GF_CHECK(gf_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f, "%a", (double)gf_bf16_round(1.0f + 3 * 0x1p-8f));
    GF_CHECK(gf_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f, "just above half rounds up");
    GF_CHECK(gf_bf16_round(-1.0f - 0x1p-8f - 0x1p-20f) == -1.0f - 0x1p-7f, "negative values round by magnitude");
    GF_CHECK(isinf(gf_bf16_round(INFINITY)) && gf_bf16_round(-INFINITY) < 0, "infinities stay");
    GF_CHECK(isinf(gf_bf16_round(3.4e38f)), "past bf16's largest finite value: infinity");
    GF_CHECK(isnan(gf_bf16_round(NAN)), "NaN stays NaN");
    GF_CHECK(isnan(gf_bf16_round(bits_to_float(0x7f800001u))), "a NaN whose payload is in the low bits stays NaN");
    GF_CHECK(gf_bf16_round(0x1p-130f) == 0x1p-130f, "a subnormal with few bits is kept");
    for (float x = -3.0f; x < 3.0f; x += 0.01f) {
        float r = gf_bf16_round(x);
        uint32_t u;
        memcpy(&u, &r, sizeof u);
        GF_CHECK((u & 0xffffu) == 0 && fabsf(r - x) <= fabsf(x) * 0x1p-8f, "%a -> %a", (double)x, (double)r);
    }
}

static void fill(float *a, int64_t n, uint64_t seed) {
    gf_rng r;
    gf_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) a[i] = gf_rng_normal(&r);
}

static double rel_err(const float *got, const float *ref, int64_t M, int64_t N, int64_t ld) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            d = fmax(d, fabs((double)got[i * ld + j] - ref[i * ld + j]));
            s = fmax(s, fabs((double)ref[i * ld + j]));
        }
    return d / (s + 1e-30);
}

static void gemm_bf16_cases(void) {
    static const int64_t shapes[][3] = {{37, 53, 70}, {128, 256, 1024}, {1, 300, 64}, {200, 1, 33}, {64, 96, 16}};
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    printf("    bf16 path: %s\n", gf_gemm_bf16_path());
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++) {
                    const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 3;
                    const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1;
                    const int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb;
                    float *A = malloc((size_t)na * 4), *B = malloc((size_t)nb * 4), *Ar = malloc((size_t)na * 4),
                          *Br = malloc((size_t)nb * 4), *C0 = malloc((size_t)(M * ldc) * 4),
                          *Cb = malloc((size_t)(M * ldc) * 4), *Cf = malloc((size_t)(M * ldc) * 4),
                          *Cr = malloc((size_t)(M * ldc) * 4);
                    fill(A, na, 100 + s), fill(B, nb, 200 + s), fill(C0, M * ldc, 300 + s);
                    for (int64_t i = 0; i < na; i++) Ar[i] = gf_bf16_round(A[i]);
                    for (int64_t i = 0; i < nb; i++) Br[i] = gf_bf16_round(B[i]);
                    memcpy(Cb, C0, (size_t)(M * ldc) * 4), memcpy(Cf, C0, (size_t)(M * ldc) * 4),
                        memcpy(Cr, C0, (size_t)(M * ldc) * 4);
                    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                                (int)M, (int)N, (int)K, 1.0f, Ar, (int)lda, Br, (int)ldb, (float)beta, Cr, (int)ldc);
                    ctx.precision = GF_PREC_BF16;
                    gf_gemm(&ctx, ta, tb, M, N, K, A, lda, B, ldb, (float)beta, Cb, ldc);
                    ctx.precision = GF_PREC_FP32;
                    gf_gemm(&ctx, ta, tb, M, N, K, A, lda, B, ldb, (float)beta, Cf, ldc);
                    double e_def = rel_err(Cb, Cr, M, N, ldc), e_fp32 = rel_err(Cb, Cf, M, N, ldc);
                    GF_CHECK(e_def <= 1e-5, "M %lld N %lld K %lld ta %d tb %d beta %d: bf16 vs its definition %.3g",
                             (long long)M, (long long)N, (long long)K, ta, tb, beta, e_def);
                    GF_CHECK(e_fp32 >= 1e-5 && e_fp32 <= 1e-2,
                             "M %lld N %lld K %lld ta %d tb %d beta %d: bf16 vs fp32 %.3g (not rounded, or too far)",
                             (long long)M, (long long)N, (long long)K, ta, tb, beta, e_fp32);
                    int pad_ok = 1; /* the columns past N in each row of C are not touched */
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = N; j < ldc; j++) pad_ok &= Cb[i * ldc + j] == C0[i * ldc + j];
                    GF_CHECK(pad_ok, "bf16 wrote past column N");
                    free(A), free(B), free(Ar), free(Br), free(C0), free(Cb), free(Cf), free(Cr);
                    gf_ctx_reset(&ctx);
                }
    gf_ctx_free(&ctx);
}

GF_TEST(unit, gemm_bf16_matches_its_definition) { gemm_bf16_cases(); }

/* the path a CPU without bf16 arithmetic (or a build without oneDNN) takes, on this one */
GF_TEST(unit, gemm_bf16_blas_fallback_matches_its_definition) {
    setenv("GF_GEMM_BF16", "blas", 1);
    GF_CHECK(strstr(gf_gemm_bf16_path(), "GF_GEMM_BF16=blas") != NULL, "path: %s", gf_gemm_bf16_path());
    gemm_bf16_cases();
    unsetenv("GF_GEMM_BF16");
}

/* who computes the bf16 products: oneDNN with AMX or on AMD; on Intel's AVX512-BF16 alone
 * OpenBLAS, which was faster there, unless GF_GEMM_BF16=dnnl; never without bf16 arithmetic or with =blas */
GF_TEST(unit, gemm_bf16_takes_onednn_with_amx_or_on_amd) {
    for (int amd = 0; amd <= 1; amd++) {
        GF_CHECK(gf_gemm_bf16_uses_dnnl(1, 1, amd, NULL), "AMX: oneDNN (amd %d)", amd);
        GF_CHECK(gf_gemm_bf16_uses_dnnl(1, 0, amd, "dnnl"), "AVX512-BF16, GF_GEMM_BF16=dnnl: oneDNN (amd %d)", amd);
        GF_CHECK(!gf_gemm_bf16_uses_dnnl(0, 0, amd, NULL) && !gf_gemm_bf16_uses_dnnl(0, 0, amd, "dnnl"),
                 "no bf16: OpenBLAS (amd %d)", amd);
        GF_CHECK(!gf_gemm_bf16_uses_dnnl(1, 1, amd, "blas") && !gf_gemm_bf16_uses_dnnl(1, 0, amd, "blas"),
                 "=blas: OpenBLAS (amd %d)", amd);
    }
    GF_CHECK(!gf_gemm_bf16_uses_dnnl(1, 0, 0, NULL), "Intel AVX512-BF16 without AMX: OpenBLAS");
    GF_CHECK(gf_gemm_bf16_uses_dnnl(1, 0, 1, NULL), "AMD AVX512-BF16 (Zen 4, Zen 5): oneDNN");
}

/* B's rounded copy is made once a step (gf_ctx.bf16_packs) and made again after a reset: a
 * weight that AdamW changed between steps is rounded anew */
GF_TEST(unit, gemm_bf16_rounds_b_again_after_reset) {
    enum { M = 8, N = 24, K = 40 };
    float A[M * K], B[K * N], C[M * N], R[M * N], Ar[M * K], Br[K * N];
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = GF_PREC_BF16;
    fill(A, M * K, 11);
    for (int step = 0; step < 2; step++) {
        fill(B, K * N, 20 + (uint64_t)step); /* the "weight" changes between the steps */
        for (int rep = 0; rep < 2; rep++) gf_gemm(&ctx, 0, 0, M, N, K, A, K, B, N, 0.0f, C, N);
        GF_CHECK(ctx.n_bf16_packs == 1, "step %d: %d copies of B for two products", step, ctx.n_bf16_packs);
        for (int i = 0; i < M * K; i++) Ar[i] = gf_bf16_round(A[i]);
        for (int i = 0; i < K * N; i++) Br[i] = gf_bf16_round(B[i]);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, Ar, K, Br, N, 0.0f, R, N);
        GF_CHECK(rel_err(C, R, M, N, N) <= 1e-5, "step %d: %.3g from the definition", step, rel_err(C, R, M, N, N));
        gf_ctx_reset(&ctx);
        GF_CHECK(ctx.n_bf16_packs == 0, "the reset kept B's copies");
    }
    gf_ctx_free(&ctx);
}

/* One square B read both ways in one step (a tied weight: logits = h·Eᵀ, dh = dlogits·E): where
 * oneDNN reads B in a layout of its own (no AMX), each orientation has its own reordered copy,
 * kept for the step and made anew after a reset; reading one orientation's copy for the other
 * gives the wrong product */
GF_TEST(unit, gemm_bf16_b_copies_kept_per_orientation) {
    enum { M = 48, N = 64 };
    float A[M * N], B[N * N], C[M * N], R[M * N], Ar[M * N], Br[N * N];
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = GF_PREC_BF16;
    fill(A, M * N, 40);
    for (int i = 0; i < M * N; i++) Ar[i] = gf_bf16_round(A[i]);
    for (int step = 0; step < 2; step++) {
        fill(B, N * N, 41 + (uint64_t)step); /* the weight changes between the steps */
        for (int i = 0; i < N * N; i++) Br[i] = gf_bf16_round(B[i]);
        for (int rep = 0; rep < 2; rep++)
            for (int tb = 0; tb < 2; tb++) {
                gf_gemm(&ctx, 0, tb, M, N, N, A, N, B, N, 0.0f, C, N);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, N, 1.0f, Ar, N, Br, N,
                            0.0f, R, N);
                GF_CHECK(rel_err(C, R, M, N, N) <= 1e-5, "step %d rep %d tb %d: %.3g from the definition (%d copies of B)",
                         step, rep, tb, rel_err(C, R, M, N, N), ctx.n_bf16_packs);
            }
        GF_CHECK(ctx.n_bf16_packs <= 2, "step %d: %d copies of one B for two orientations", step, ctx.n_bf16_packs);
        gf_ctx_reset(&ctx);
    }
    gf_ctx_free(&ctx);
}

/* Where oneDNN reads B in a layout of its own (no AMX), B's fp32 values are reordered into it by
 * oneDNN, which rounds on the way (gemm.c, pack_b_for): to nearest even as gf_bf16_round, ties
 * included, so B and B already rounded give the same bits (both orientations of B). fp32
 * subnormals become zeros there, as oneDNN's bf16 products treat subnormal inputs as zeros in any
 * layout (AVX512-BF16's and AMX's dot products): a product of one subnormal term is 0 on oneDNN's
 * path, 1e-39 x a on OpenBLAS's. */
GF_TEST(unit, gemm_bf16_blocked_b_rounds_as_gflow) {
    enum { M = 16, N = 48, K = 64 };
    float A[M * K], B[K * N], Br[K * N], C0[M * N], C1[M * N];
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = GF_PREC_BF16;
    fill(A, M * K, 50);
    for (int tb = 0; tb < 2; tb++) {
        fill(B, K * N, 51 + (uint64_t)tb);
        /* ties: halfway between two bf16 values, even and odd below */
        for (int i = 0; i < K * N; i += 7) B[i] = bits_to_float(0x3f808000u + (uint32_t)(i % 3) * 0x10000u);
        for (int i = 0; i < K * N; i++) Br[i] = gf_bf16_round(B[i]);
        gf_gemm(&ctx, 0, tb, M, N, K, A, K, B, tb ? K : N, 0.0f, C0, N);
        gf_gemm(&ctx, 0, tb, M, N, K, A, K, Br, tb ? K : N, 0.0f, C1, N);
        GF_CHECK(!memcmp(C0, C1, sizeof C0), "tb %d: B and B rounded by gf_bf16_round give other bits", tb);
        gf_ctx_reset(&ctx);
    }
    /* one subnormal term: C = A[0, 0] B[0, 0] alone */
    memset(B, 0, sizeof B);
    B[0] = 1e-39f;
    float a1[M * K];
    for (int i = 0; i < M * K; i++) a1[i] = 1.0f;
    gf_gemm(&ctx, 0, 0, M, N, K, a1, K, B, N, 0.0f, C0, N);
    const char *path = gf_gemm_bf16_path();
    const int dnnl = !strncmp(path, "oneDNN", 6);
    GF_CHECK(dnnl ? C0[0] == 0.0f : C0[0] != 0.0f, "%s: a subnormal B term gave %g", path, (double)C0[0]);
    gf_ctx_free(&ctx);
}

/* A's rounded copy is reused by the next product of the same A in the same pack epoch (a linear's
 * dX and dW) and made anew after a reset, or when another context rounded an A meanwhile: an
 * activation buffer refilled at the same address is never read stale */
static int gemm_a_case(gf_ctx *ctx, const float *A, const float *B, float *C) {
    enum { M = 8, N = 24, K = 40 };
    float R[M * N], Ar[M * K], Br[K * N];
    gf_gemm(ctx, 0, 0, M, N, K, A, K, B, N, 0.0f, C, N);
    for (int i = 0; i < M * K; i++) Ar[i] = gf_bf16_round(A[i]);
    for (int i = 0; i < K * N; i++) Br[i] = gf_bf16_round(B[i]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, Ar, K, Br, N, 0.0f, R, N);
    return rel_err(C, R, M, N, N) <= 1e-5;
}

GF_TEST(unit, gemm_bf16_rounds_a_again_after_reset) {
    enum { M = 8, N = 24, K = 40 };
    float A[M * K], B[K * N], C[M * N];
    gf_ctx c1, c2;
    gf_ctx_init(&c1, 0, NULL);
    gf_ctx_init(&c2, 0, NULL);
    c1.precision = c2.precision = GF_PREC_BF16;
    fill(B, K * N, 30);
    fill(A, M * K, 31);
    GF_CHECK(gemm_a_case(&c1, A, B, C) && gemm_a_case(&c1, A, B, C), "two products of one A");
    gf_ctx_reset(&c1);
    fill(A, M * K, 32); /* refilled in place, as the arena does after a reset */
    GF_CHECK(gemm_a_case(&c1, A, B, C), "after a reset: the stale copy of A was used");
    fill(A, M * K, 33);
    GF_CHECK(gemm_a_case(&c2, A, B, C), "another context: the stale copy of A was used");
    gf_ctx_free(&c2);
    gf_ctx_init(&c2, 0, NULL); /* a new context, maybe at the old one's address */
    c2.precision = GF_PREC_BF16;
    fill(A, M * K, 34);
    GF_CHECK(gemm_a_case(&c2, A, B, C), "a new context: the stale copy of A was used");
    gf_ctx_free(&c1);
    gf_ctx_free(&c2);
}

/* An A operand rounded by its caller gives gf_gemm's bits for the same values: as bf16 bits
 * (gf_gemm_a16, dense) and as fp32 values (gf_gemm_rounded_a, here with a row stride wider than
 * its columns); A rewritten in place between two products (the head's chunks) gives the new
 * product, not a kept copy of the old A */
GF_TEST(unit, gemm_a16_and_rounded_a_are_gf_gemm_on_rounded_a) {
    enum { M = 40, N = 72, K = 300, LDA = 310 };
    static float A[M * K], Aw[K * LDA], B[K * N], C0[M * N], C1[M * N], C2[M * N];
    static uint16_t A16[M * K];
    fill(A, M * K, 51), fill(B, K * N, 52), fill(Aw, K * LDA, 54);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = GF_PREC_BF16;
    for (int ta = 0; ta < 2; ta++) {
        const int64_t ar = ta ? K : M, ac = ta ? M : K; /* A's stored matrix */
        for (int64_t i = 0; i < ar * ac; i++) A16[i] = gf_bf16_of(A[i]), Aw[i / ac * LDA + i % ac] = gf_bf16_round(A[i]);
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                fill(C0, M * N, 53), fill(C1, M * N, 53), fill(C2, M * N, 53);
                gf_gemm(&ctx, ta, tb, M, N, K, A, ac, B, tb ? K : N, (float)beta, C0, N);
                gf_gemm_a16(&ctx, ta, tb, M, N, K, A16, ac, B, tb ? K : N, (float)beta, C1, N);
                gf_gemm_rounded_a(&ctx, ta, tb, M, N, K, Aw, LDA, B, tb ? K : N, (float)beta, C2, N);
                GF_CHECK(memcmp(C0, C1, sizeof C0) == 0, "ta %d tb %d beta %d: gf_gemm_a16 differs from gf_gemm", ta,
                         tb, beta);
                GF_CHECK(memcmp(C0, C2, sizeof C0) == 0, "ta %d tb %d beta %d: gf_gemm_rounded_a differs from gf_gemm",
                         ta, tb, beta);
            }
    }
    for (int i = 0; i < K * LDA; i++) Aw[i] = -2.0f * Aw[i]; /* still bf16 values: times a power of two */
    gf_gemm_rounded_a(&ctx, 1, 0, M, N, K, Aw, LDA, B, N, 0.0f, C2, N);
    gf_ctx_reset(&ctx);
    gf_gemm(&ctx, 1, 0, M, N, K, Aw, LDA, B, N, 0.0f, C0, N);
    GF_CHECK(memcmp(C0, C2, sizeof C0) == 0, "A rewritten in place: gf_gemm_rounded_a used the old A");
    gf_ctx_free(&ctx);
}

/* gf_gemm_bias is gf_gemm's product added to the bias written into C first: to the bit in fp32
 * and on OpenBLAS's bf16 path, which do just that; on oneDNN's (its bias in the epilogue, where the
 * sum post-op folded C into the first block of K) the same fp32 terms summed in another order:
 * normwise 1e-6. The columns of C past N are not touched. */
static void gemm_bias_cases(gf_precision prec) {
    static const int64_t shapes[][3] = {{37, 53, 70}, {256, 96, 1024}, {64, 1, 33}, {130, 40, 3000}};
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = prec;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 3;
                const int64_t lda = ta ? M : K, ldb = tb ? K : N;
                float *A = malloc((size_t)(M * K) * 4), *B = malloc((size_t)(K * N) * 4), *bias = malloc((size_t)N * 4),
                      *C0 = malloc((size_t)(M * ldc) * 4), *C1 = malloc((size_t)(M * ldc) * 4);
                fill(A, M * K, 400 + s), fill(B, K * N, 500 + s), fill(bias, N, 600 + s);
                fill(C0, M * ldc, 700 + s), memcpy(C1, C0, (size_t)(M * ldc) * 4);
                for (int64_t i = 0; i < M; i++) memcpy(C0 + i * ldc, bias, (size_t)N * 4);
                gf_gemm(&ctx, ta, tb, M, N, K, A, lda, B, ldb, 1.0f, C0, ldc);
                gf_gemm_bias(&ctx, ta, tb, M, N, K, A, lda, B, ldb, bias, C1, ldc);
                const int exact = prec == GF_PREC_FP32 || !gf_gemm_bf16_dnnl(N, ldc);
                const double e = rel_err(C1, C0, M, N, ldc);
                GF_CHECK(exact ? memcmp(C0, C1, (size_t)(M * ldc) * 4) == 0 : e <= 1e-6,
                         "%s M %lld N %lld K %lld ta %d tb %d: gf_gemm_bias differs from the bias then gf_gemm += "
                         "(normwise %.3g)", prec == GF_PREC_BF16 ? gf_gemm_bf16_path() : "fp32", (long long)M,
                         (long long)N, (long long)K, ta, tb, e);
                int pad_ok = 1;
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = N; j < ldc; j++) pad_ok &= C1[i * ldc + j] == C0[i * ldc + j];
                GF_CHECK(pad_ok, "gf_gemm_bias wrote past column N");
                free(A), free(B), free(bias), free(C0), free(C1);
                gf_ctx_reset(&ctx);
            }
    gf_ctx_free(&ctx);
}

GF_TEST(unit, gemm_bias_is_the_product_plus_bias) {
    gemm_bias_cases(GF_PREC_FP32);
    gemm_bias_cases(GF_PREC_BF16);
    setenv("GF_GEMM_BF16", "blas", 1);
    gemm_bias_cases(GF_PREC_BF16);
    unsetenv("GF_GEMM_BF16");
}

/* gf_gemm_dw, a weight's gradient dW (OUT, IN) = Gᵀ X + beta dW, against gf_gemm(1, 0, ...): the
 * same call in fp32 and where IN <= OUT (bitwise); in bf16 with IN > OUT the transposed product
 * written or added into dW, the same fp32 terms summed in another order (normwise 1e-6). Columns
 * of dW past IN untouched. gf_gemm_dw_hold_x: the forward's product X Wᵀ and the backward's take
 * the held copy (the same bits as without it; X rewritten after the hold, both still see the
 * old X: the copy is the step's). */
static void gemm_dw_cases(gf_precision prec) {
    static const int64_t shapes[][3] = {{300, 24, 70}, {300, 70, 24}, {1000, 16, 496}, {64, 33, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int beta = 0; beta < 2; beta++) {
            const int64_t N = shapes[s][0], OUT = shapes[s][1], IN = shapes[s][2];
            const int64_t ldg = OUT + 2, ldx = IN + 3, ldw = IN + 5;
            float *G = malloc((size_t)(N * ldg) * 4), *X = malloc((size_t)(N * ldx) * 4),
                  *W = malloc((size_t)(OUT * IN) * 4), *d0 = malloc((size_t)(OUT * ldw) * 4),
                  *d1 = malloc((size_t)(OUT * ldw) * 4), *d2 = malloc((size_t)(OUT * ldw) * 4),
                  *y0 = malloc((size_t)(N * OUT) * 4), *y1 = malloc((size_t)(N * OUT) * 4);
            fill(G, N * ldg, 800 + s), fill(X, N * ldx, 900 + s), fill(W, OUT * IN, 950 + s);
            fill(d0, OUT * ldw, 990 + s), memcpy(d1, d0, (size_t)(OUT * ldw) * 4), memcpy(d2, d0, (size_t)(OUT * ldw) * 4);
            gf_ctx ctx;
            gf_ctx_init(&ctx, 0, NULL);
            ctx.precision = prec;
            gf_gemm(&ctx, 1, 0, OUT, IN, N, G, ldg, X, ldx, (float)beta, d0, ldw);
            gf_gemm(&ctx, 0, 1, N, OUT, IN, X, ldx, W, IN, 0.0f, y0, OUT);
            gf_ctx_reset(&ctx);
            gf_gemm_dw(&ctx, N, OUT, IN, G, ldg, X, ldx, (float)beta, d1, ldw);
            gf_ctx_reset(&ctx);
            const int transposed = prec == GF_PREC_BF16 && IN > OUT;
            const double e = rel_err(d1, d0, OUT, IN, ldw);
            GF_CHECK(transposed ? e <= 1e-6 : memcmp(d0, d1, (size_t)(OUT * ldw) * 4) == 0,
                     "%s N %lld OUT %lld IN %lld beta %d: gf_gemm_dw differs from Gᵀ X (normwise %.3g)",
                     prec == GF_PREC_BF16 ? gf_gemm_bf16_path() : "fp32", (long long)N, (long long)OUT, (long long)IN,
                     beta, e);
            int pad_ok = 1;
            for (int64_t o = 0; o < OUT; o++)
                for (int64_t i = IN; i < ldw; i++) pad_ok &= d1[o * ldw + i] == d0[o * ldw + i];
            GF_CHECK(pad_ok, "gf_gemm_dw wrote past column IN");
            /* held: the forward's product, then X rewritten (bf16 values stay bf16 values: x -2) */
            gf_gemm_dw_hold_x(&ctx, N, OUT, IN, X, ldx);
            gf_gemm(&ctx, 0, 1, N, OUT, IN, X, ldx, W, IN, 0.0f, y1, OUT);
            GF_CHECK(memcmp(y0, y1, (size_t)(N * OUT) * 4) == 0, "N %lld OUT %lld IN %lld: the forward differs held",
                     (long long)N, (long long)OUT, (long long)IN);
            for (int64_t i = 0; i < N * ldx; i++) X[i] *= -2.0f;
            float *dx = malloc((size_t)(N * IN) * 4); /* the backward's dX = G W first: another A */
            gf_gemm(&ctx, 0, 0, N, IN, OUT, G, ldg, W, IN, 0.0f, dx, IN);
            free(dx);
            gf_gemm_dw(&ctx, N, OUT, IN, G, ldg, X, ldx, (float)beta, d2, ldw);
            double e2 = rel_err(d2, d1, OUT, IN, ldw);
            if (transposed)
                GF_CHECK(memcmp(d1, d2, (size_t)(OUT * ldw) * 4) == 0,
                         "N %lld OUT %lld IN %lld: the held X was not the one gf_gemm_dw took (normwise %.3g)",
                         (long long)N, (long long)OUT, (long long)IN, e2);
            else
                GF_CHECK(e2 > 0.5, "not transposed, nothing is held: X's new values (normwise %.3g)", e2);
            gf_ctx_free(&ctx);
            free(G), free(X), free(W), free(d0), free(d1), free(d2), free(y0), free(y1);
        }
}

GF_TEST(unit, gemm_dw_is_the_weight_gradient) {
    gemm_dw_cases(GF_PREC_FP32);
    gemm_dw_cases(GF_PREC_BF16);
    setenv("GF_GEMM_BF16", "blas", 1);
    gemm_dw_cases(GF_PREC_BF16);
    unsetenv("GF_GEMM_BF16");
}

/* gf_gemm_round_into: on oneDNN's path the buffer it gives is what the step's products read for X
 * as their A, in either orientation, and as their B, in either orientation, also where oneDNN
 * reads B in a layout of its own (no AMX: the reorder into it starts from these bits, not from X's
 * fp32 values, half the bytes; gemm.c, pack_b_for): filled with X's bits, each product is the one
 * gf_gemm makes rounding X itself (bitwise); filled with zeros, each is 0. In fp32 and on OpenBLAS's
 * path there is none (NULL). */
enum { RI_M = 37, RI_K = 24, RI_N = 19, RI_P = 11 };
static const int64_t ri_n[4] = {RI_M * RI_N, RI_K * RI_N, RI_P * RI_K, RI_P * RI_M};
static void round_into_products(gf_ctx *ctx, const float *X, const float *W, const float *G, const float *Ha,
                                const float *Hb, float *const *y) {
    enum { M = RI_M, K = RI_K, N = RI_N, P = RI_P };
    gf_gemm(ctx, 0, 1, M, N, K, X, K, W, K, 0.0f, y[0], N); /* X Wᵀ (M, N) */
    gf_gemm(ctx, 1, 0, K, N, M, X, K, G, N, 0.0f, y[1], N); /* Xᵀ G (K, N) */
    gf_gemm(ctx, 0, 0, P, K, M, Ha, M, X, K, 0.0f, y[2], K); /* Ha X (P, K) */
    gf_gemm(ctx, 0, 1, P, M, K, Hb, K, X, K, 0.0f, y[3], M); /* Hb Xᵀ (P, M) */
}

GF_TEST(unit, gemm_round_into_is_the_step_copy) {
    enum { M = RI_M, K = RI_K, N = RI_N, P = RI_P };
    int64_t sx[2] = {M, K}, sw[2] = {N, K}, sg[2] = {M, N}, sa[2] = {P, M}, sb[2] = {P, K};
    gf_tensor *X = gc_leaf(2, sx, 71, 1.0f), *W = gc_leaf(2, sw, 72, 1.0f), *G = gc_leaf(2, sg, 73, 1.0f);
    gf_tensor *Ha = gc_leaf(2, sa, 74, 1.0f), *Hb = gc_leaf(2, sb, 75, 1.0f);
    static float r[4][M * N], y[4][M * N]; /* each product's (at most M N floats) */
    float *const rp[4] = {r[0], r[1], r[2], r[3]}, *const yp[4] = {y[0], y[1], y[2], y[3]};
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_CHECK(!gf_gemm_round_into(&ctx, X->data, M, K), "fp32: a copy");
    ctx.precision = GF_PREC_BF16;
    round_into_products(&ctx, X->data, W->data, G->data, Ha->data, Hb->data, rp);
    gf_ctx_reset(&ctx);
    uint16_t *d = gf_gemm_round_into(&ctx, X->data, M, K);
    if (!gf_gemm_bf16_dnnl(K, K)) {
        GF_CHECK(!d, "OpenBLAS's path (%s): a copy", gf_gemm_bf16_path());
    } else {
        GF_REQUIRE(d, "oneDNN's path: no copy");
        for (int i = 0; i < M * K; i++) d[i] = gf_bf16_of(X->data[i]);
        round_into_products(&ctx, X->data, W->data, G->data, Ha->data, Hb->data, yp);
        for (int k = 0; k < 4; k++)
            GF_CHECK(!memcmp(y[k], r[k], (size_t)ri_n[k] * sizeof(float)), "X's bits given: product %d not gf_gemm's",
                     k);
        /* a new step (B's reordered copies are kept for the step), X's copy zeros */
        gf_ctx_reset(&ctx);
        d = gf_gemm_round_into(&ctx, X->data, M, K);
        GF_REQUIRE(d, "oneDNN's path: no copy after a reset");
        memset(d, 0, (size_t)(M * K) * sizeof(uint16_t));
        round_into_products(&ctx, X->data, W->data, G->data, Ha->data, Hb->data, yp);
        for (int k = 0; k < 4; k++) {
            int zero = 1;
            for (int64_t i = 0; i < ri_n[k]; i++) zero &= y[k][i] == 0.0f;
            GF_CHECK(zero, "zeros given: product %d (X as %s) rounded X's fp32 values itself (%s)", k, k < 2 ? "A" : "B",
                     gf_gemm_bf16_path());
        }
        /* a range of X's rows as A (the head's chunks of h) takes those rows of the copy */
        enum { R0 = 5, RM = 20 };
        static float s1[RM * N], s2[RM * N];
        gf_ctx_reset(&ctx);
        gf_gemm(&ctx, 0, 1, RM, N, K, X->data + R0 * K, K, W->data, K, 0.0f, s1, N);
        gf_ctx_reset(&ctx);
        d = gf_gemm_round_into(&ctx, X->data, M, K);
        GF_REQUIRE(d, "oneDNN's path: no copy after a reset");
        for (int i = 0; i < M * K; i++) d[i] = gf_bf16_of(X->data[i]);
        gf_gemm(&ctx, 0, 1, RM, N, K, X->data + R0 * K, K, W->data, K, 0.0f, s2, N);
        GF_CHECK(!memcmp(s1, s2, sizeof s1), "rows %d..%d given X's bits: not gf_gemm's product of them", R0, R0 + RM - 1);
        memset(d + R0 * K, 0, (size_t)(RM * K) * sizeof(uint16_t));
        gf_gemm(&ctx, 0, 1, RM, N, K, X->data + R0 * K, K, W->data, K, 0.0f, s2, N);
        int zero = 1;
        for (int i = 0; i < RM * N; i++) zero &= s2[i] == 0.0f;
        GF_CHECK(zero, "rows %d..%d zeroed in the copy: the product rounded them itself", R0, R0 + RM - 1);
    }
    setenv("GF_GEMM_BF16", "blas", 1);
    gf_ctx_reset(&ctx);
    GF_CHECK(!gf_gemm_round_into(&ctx, X->data, M, K), "GF_GEMM_BF16=blas: a copy");
    unsetenv("GF_GEMM_BF16");
    gf_ctx_free(&ctx);
    gc_leaf_free(X), gc_leaf_free(W), gc_leaf_free(G), gc_leaf_free(Ha), gc_leaf_free(Hb);
}

/* gf_gemm_bf16_dnnl, which head_ce asks for the operand form, names the path gf_gemm_bf16_path
 * reports (an (M, 1) output of row stride > 1 goes to OpenBLAS under oneDNN 3, the product's rule) */
GF_TEST(unit, gemm_bf16_dnnl_is_the_reported_path) {
    int dnnl = strncmp(gf_gemm_bf16_path(), "oneDNN", 6) == 0;
    GF_CHECK(gf_gemm_bf16_dnnl(72, 72) == dnnl, "gf_gemm_bf16_dnnl %d, the path: %s", gf_gemm_bf16_dnnl(72, 72),
             gf_gemm_bf16_path());
    GF_CHECK(gf_gemm_bf16_dnnl(1, 1) == dnnl, "a dense (M, 1) output: %d", gf_gemm_bf16_dnnl(1, 1));
    setenv("GF_GEMM_BF16", "blas", 1);
    GF_CHECK(!gf_gemm_bf16_dnnl(72, 72), "GF_GEMM_BF16=blas: OpenBLAS's path");
    unsetenv("GF_GEMM_BF16");
}

/* The tied head in bf16 (head_ce.c: chunks of 512 rows, the vocabulary padded with zero rows of E
 * to a multiple of 256, the dlogits rounded once by the row kernel for both backward products)
 * against its definition, in double on the rounded inputs: logits = bf16(h) bf16(E)ᵀ, dl = (p - 1_t)
 * / counted, dh = bf16(dl) bf16(E), dE = bf16(dl)ᵀ bf16(h). 1,100 rows: three chunks, the last
 * short; V = 300 pads to 512; every 9th row ignored. The reference rounds dl from double, the op
 * from fp32, so a value can round the other way (a target's dl: 2^-8 of it); dh and dE within
 * 1e-4 normwise (measured: 3.4e-6 and 1.1e-6 on oneDNN's AMX path, 1.8e-5 and 9e-6 on OpenBLAS's;
 * the dlogits left unrounded: 1.4e-3 and 6.4e-4; a wrong pad, stride or chunk is off by O(1)),
 * the loss within 1e-5. */
GF_TEST(unit, head_ce_bf16_matches_its_definition) {
    enum { N = 1100, D = 24, V = 300 };
    static int32_t tg[N];
    int64_t cnt = 0;
    for (int i = 0; i < N; i++) {
        tg[i] = i % 9 == 4 ? -1 : (i * 7 + 3) % V;
        cnt += tg[i] >= 0;
    }
    int64_t sh[2] = {N, D}, se[2] = {V, D};
    gf_tensor *h = gc_leaf(2, sh, 41, 1.0f), *E = gc_leaf(2, se, 42, 0.5f);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    ctx.precision = GF_PREC_BF16;
    gf_tensor *y = gf_head_ce(&ctx, h, E, tg, -1, NULL, NULL);
    gf_tape_backward(&ctx, y);
    double *dh = calloc(N * D, sizeof(double)), *dE = calloc(V * D, sizeof(double)), loss = 0.0, l[V];
    for (int i = 0; i < N; i++) {
        if (tg[i] < 0) continue;
        double m = -INFINITY, s = 0.0;
        for (int j = 0; j < V; j++) {
            l[j] = 0.0;
            for (int k = 0; k < D; k++) l[j] += (double)gf_bf16_round(h->data[i * D + k]) * gf_bf16_round(E->data[j * D + k]);
            m = fmax(m, l[j]);
        }
        for (int j = 0; j < V; j++) s += exp(l[j] - m);
        loss += m + log(s) - l[tg[i]];
        for (int j = 0; j < V; j++) {
            double dl = gf_bf16_round((float)((exp(l[j] - m) / s - (j == tg[i])) / (double)cnt));
            for (int k = 0; k < D; k++) {
                dh[i * D + k] += dl * gf_bf16_round(E->data[j * D + k]);
                dE[j * D + k] += dl * gf_bf16_round(h->data[i * D + k]);
            }
        }
    }
    loss /= (double)cnt;
    GF_CHECK(fabs(y->data[0] - loss) <= 1e-5 * loss, "loss %.8g, its definition %.8g", (double)y->data[0], loss);
    double e[2] = {0, 0}, s[2] = {0, 0};
    for (int i = 0; i < N * D; i++) e[0] = fmax(e[0], fabs(h->grad[i] - dh[i])), s[0] = fmax(s[0], fabs(dh[i]));
    for (int i = 0; i < V * D; i++) e[1] = fmax(e[1], fabs(E->grad[i] - dE[i])), s[1] = fmax(s[1], fabs(dE[i]));
    GF_CHECK(e[0] <= 1e-4 * s[0], "dh: %.3g of its largest value from its definition", e[0] / s[0]);
    GF_CHECK(e[1] <= 1e-4 * s[1], "dE: %.3g of its largest value from its definition", e[1] / s[1]);
    printf("    head_ce bf16: dh %.2g, dE %.2g normwise from the definition\n", e[0] / s[0], e[1] / s[1]);
    free(dh), free(dE);
    gf_ctx_free(&ctx);
    gc_leaf_free(h), gc_leaf_free(E);
}
