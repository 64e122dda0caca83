/* gemm_libs.c — the matrix products of one step of the paper's GrassmannLM (4,096 tokens: batch
 * 32 x L 128, d 256, d_ff 1024, r 32, V 30,522), timed on each library this build reaches:
 * gflow's gf_gemm in fp32 (OpenBLAS) and in bf16 (its path on this CPU: oneDNN with AMX or on
 * AMD's AVX512-BF16, else OpenBLAS on rounded inputs; each call rounds, and without AMX reorders,
 * its operands anew, where a step does so once for the head's chunks), oneDNN's dnnl_sgemm
 * (fp32), and libxsmm's OpenMP gemm in fp32
 * and with bf16 inputs (fp32 output) where built with libxsmm (Debian libxsmm-dev).
 * Issue 49: "measure libxsmm against oneDNN on the model's shapes, bf16 and fp32".
 *
 * Per product: GFLOP/s, best of --reps after one warm-up; "!" after a figure when that library
 * gave other bits at 1 thread than at the run's thread count (gflow promises the same bits for a
 * given thread count only, and OpenBLAS itself moves some: a note, not a fault); "x" when its
 * result is off the fp32 reference on the same inputs (normwise relative error above 1e-5 in
 * fp32, 1e-2 with bf16 inputs) or was not written at all (the output starts as NaN): "x" in
 * place of its figure. Last, each library's seconds for the whole step's products (each layer's
 * products x 6 layers, the head's x its 16 chunks of 256 rows).
 *
 *   tools/gemm_libs.sh [BUILD_DIR] [--reps R] [--threads N] [--quick]
 * --quick: the first layer's three products only (the test's run).
 */
#include "ops/op_util.h"
#include "gflow/threads.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#ifdef GF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef GF_HAVE_XSMM
#include <libxsmm.h>
#endif

enum { T = 4096, D = 256, DFF = 1024, R = 32, PAIRS = R * (R - 1) / 2, V = 30522, CH = 256 };

typedef struct prod {
    const char *name;
    int M, N, K, ta, tb;
    int times; /* in one step */
} prod;

/* a linear layer (in -> out) over T rows: forward x W^T, dX = dY W, dW = dY^T x */
#define LINEAR(nm, in, out, n)                                                                                        \
    {nm " fwd", T, out, in, 0, 1, n}, {nm " dX", T, in, out, 0, 0, n}, {nm " dW", out, in, T, 1, 0, n}
static const prod prods[] = {
    LINEAR("w_red", D, R, 6),
    LINEAR("plucker proj", PAIRS, D, 6),
    LINEAR("gate", 2 * D, D, 6),
    LINEAR("fc1", D, DFF, 6),
    LINEAR("fc2", DFF, D, 6),
    {"head logits", CH, V, D, 0, 1, T / CH},
    {"head dH", CH, D, V, 0, 0, T / CH},
    {"head dE", V, D, CH, 1, 0, T / CH},
};
#define NPROD ((int)(sizeof prods / sizeof prods[0]))

enum { L_GF32, L_DNNL32, L_XSMM32, L_GF16, L_XSMM16, NLIB };
static const char *lib_name[NLIB] = {"gflow fp32", "oneDNN fp32", "libxsmm fp32", "gflow bf16", "libxsmm bf16"};
static int lib_on[NLIB];

static gf_ctx ctx32, ctx16;
#ifdef GF_HAVE_XSMM
static libxsmm_bfloat16 *A16, *B16;
#endif

/* row-major C (M, N) = op(A) op(B) on library l; A (ta ? K x M : M x K), B (tb ? N x K : K x N) dense */
static void run(int l, const prod *p, const float *A, const float *B, float *C) {
    const int lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N;
    switch (l) {
    case L_GF32:
        gf_gemm(&ctx32, p->ta, p->tb, p->M, p->N, p->K, A, lda, B, ldb, 0.0f, C, p->N);
        gf_ctx_reset(&ctx32);
        break;
    case L_GF16:
        gf_gemm(&ctx16, p->ta, p->tb, p->M, p->N, p->K, A, lda, B, ldb, 0.0f, C, p->N);
        gf_ctx_reset(&ctx16);
        break;
#ifdef GF_HAVE_DNNL
    case L_DNNL32:
        dnnl_sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->M, p->N, p->K, 1.0f, A, lda, B, ldb, 0.0f, C, p->N);
        break;
#endif
#ifdef GF_HAVE_XSMM
    case L_XSMM32:
    case L_XSMM16: { /* column-major: C^T (N, M) = op(B)^T op(A)^T */
        const libxsmm_blasint m = p->N, n = p->M, k = p->K, la = ldb, lb = lda, lc = p->N;
        const float one = 1.0f, zero = 0.0f;
        const char tra = p->tb ? 'T' : 'N', trb = p->ta ? 'T' : 'N';
        const int bf = l == L_XSMM16;
        libxsmm_xgemm_omp(bf ? LIBXSMM_GEMM_PRECISION_BF16 : LIBXSMM_GEMM_PRECISION_F32, LIBXSMM_GEMM_PRECISION_F32,
                          &tra, &trb, &m, &n, &k, &one, bf ? (const void *)B16 : (const void *)B, &la,
                          bf ? (const void *)A16 : (const void *)A, &lb, &zero, C, &lc);
        break;
    }
#endif
    default:
        abort();
    }
}

static double normwise(const float *x, const float *ref, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    return sqrt(d / (r > 0 ? r : 1));
}

int main(int argc, char **argv) {
    int reps = 5, threads = omp_get_max_threads(), nprod = NPROD;
    static const struct option opts[] = {
        {"reps", 1, 0, 'r'}, {"threads", 1, 0, 't'}, {"quick", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        char *end = NULL;
        if (c == 'q') {
            nprod = 3;
        } else if (c == 'r' || c == 't') {
            const long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > (c == 'r' ? 1000 : 1024)) {
                fprintf(stderr, "gemm_libs: --%s needs an integer in [1, %d], got '%s'\n", c == 'r' ? "reps" : "threads",
                        c == 'r' ? 1000 : 1024, optarg);
                return 2;
            }
            if (c == 'r') reps = (int)v;
            else threads = (int)v;
        } else {
            fprintf(stderr, "usage: gemm_libs [--reps R] [--threads N] [--quick]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    gf_ctx_init(&ctx32, (size_t)64 << 20, NULL);
    gf_ctx_init(&ctx16, (size_t)256 << 20, NULL);
    ctx16.precision = GF_PREC_BF16;
    lib_on[L_GF32] = lib_on[L_GF16] = 1;
#ifdef GF_HAVE_DNNL
    lib_on[L_DNNL32] = 1;
#endif
#ifdef GF_HAVE_XSMM
    libxsmm_init();
    lib_on[L_XSMM32] = lib_on[L_XSMM16] = 1;
#endif
    size_t amax = 0, cmax = 0;
    for (int i = 0; i < NPROD; i++) {
        const size_t a = (size_t)prods[i].M * prods[i].K, b = (size_t)prods[i].K * prods[i].N;
        amax = a > amax ? a : amax;
        amax = b > amax ? b : amax;
        const size_t c = (size_t)prods[i].M * prods[i].N;
        cmax = c > cmax ? c : cmax;
    }
    float *A = malloc(amax * sizeof *A), *B = malloc(amax * sizeof *B), *C = malloc(cmax * sizeof *C),
          *C1 = malloc(cmax * sizeof *C), *ref = malloc(cmax * sizeof *C), *ref16 = malloc(cmax * sizeof *C), *Ar = malloc(amax * sizeof *A),
          *Br = malloc(amax * sizeof *B);
    if (!A || !B || !C || !C1 || !ref || !ref16 || !Ar || !Br) {
        fprintf(stderr, "gemm_libs: out of memory\n");
        return 1;
    }
    gf_rng rng;
    gf_rng_seed(&rng, 49);
    for (size_t i = 0; i < amax; i++) {
        A[i] = (float)gf_rng_normal(&rng);
        B[i] = (float)gf_rng_normal(&rng);
        Ar[i] = gf_bf16_round(A[i]); /* the bf16 libraries' inputs, as fp32 values for the reference */
        Br[i] = gf_bf16_round(B[i]);
    }
#ifdef GF_HAVE_XSMM
    A16 = malloc(amax * sizeof *A16);
    B16 = malloc(amax * sizeof *B16);
    for (size_t i = 0; i < amax; i++) {
        A16[i] = gf_bf16_of(A[i]);
        B16[i] = gf_bf16_of(B[i]);
    }
#endif
    printf("# gemm_libs: %d threads, best of %d; bf16: %s\n", threads, reps, gf_gemm_bf16_path());
    printf("%-18s %5s %5s %5s %2s", "product", "M", "N", "K", "t");
    for (int l = 0; l < NLIB; l++)
        if (lib_on[l]) printf(" %14s", lib_name[l]);
    printf("\n");
    double step[NLIB] = {0};
    int wrong[NLIB] = {0};
    for (int i = 0; i < nprod; i++) {
        const prod *p = &prods[i];
        const double flop = 2.0 * p->M * p->N * p->K;
        printf("%-18s %5d %5d %5d %c%c", p->name, p->M, p->N, p->K, p->ta ? 'T' : 'N', p->tb ? 'T' : 'N');
        gf_threads_set(threads);
        for (int k = 0; k < 2; k++) { /* the references: fp32 products of the fp32 and of the rounded inputs */
            gf_gemm(&ctx32, p->ta, p->tb, p->M, p->N, p->K, k ? Ar : A, p->ta ? p->M : p->K, k ? Br : B,
                    p->tb ? p->K : p->N, 0.0f, k ? ref16 : ref, p->N);
            gf_ctx_reset(&ctx32);
        }
        for (int l = 0; l < NLIB; l++) {
            if (!lib_on[l]) continue;
            const int bf = l == L_GF16 || l == L_XSMM16;
            gf_threads_set(threads);
            const size_t n = (size_t)p->M * p->N;
            memset(C, 0xff, n * sizeof *C); /* NaN: a library that writes nothing shows as wrong */
            run(l, p, A, B, C); /* warm-up */
            double best = 1e30;
            for (int k = 0; k < reps; k++) {
                const double t0 = gf_time_now();
                run(l, p, A, B, C);
                const double t = gf_time_now() - t0;
                best = t < best ? t : best;
            }
            gf_threads_set(1);
            memset(C1, 0xff, n * sizeof *C1);
            run(l, p, A, B, C1);
            const int same = memcmp(C, C1, n * sizeof *C) == 0;
            const double err = normwise(C, bf ? ref16 : ref, n);
            const int off = !(err <= (bf ? 1e-2 : 1e-5)); /* NaN included */
            if (off) printf(" %14s", "x");
            else printf(" %13.1f%c", flop / best * 1e-9, same ? ' ' : '!');
            step[l] += best * p->times;
            wrong[l] |= off;
        }
        printf("\n");
    }
    printf("%-32s", nprod == NPROD ? "seconds a step (all products)" : "seconds a step (these products)");
    for (int l = 0; l < NLIB; l++)
        if (lib_on[l] && wrong[l]) printf(" %14s", "x");
        else if (lib_on[l]) printf(" %14.4f", step[l]);
    printf("\n");
    free(A), free(B), free(C), free(C1), free(ref), free(ref16), free(Ar), free(Br);
#ifdef GF_HAVE_XSMM
    free(A16), free(B16);
    libxsmm_finalize();
#endif
    gf_ctx_free(&ctx32);
    gf_ctx_free(&ctx16);
    return 0;
}
