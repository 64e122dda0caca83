/* threads.c — OpenMP and OpenBLAS thread counts set together; monotonic clock; ETAs. */
#include "gflow/threads.h"
#include <cblas.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

void gf_threads_set(int n) {
    if (n <= 0) n = omp_get_max_threads();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int gf_threads_get(void) { return omp_get_max_threads(); }

double gf_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Σ x² of one thread's span in double, in GF_SUMSQ_LANES running sums: sum k takes the elements
 * k, k + LANES, ... from the span's start, and the sums are added in lane order at the end. The
 * order is the code's, not the compiler's (no reassociation), so every vector width gives the same
 * bits; one chain of additions took ~4 cycles an element (6 ms a step for the paper's 12.6M
 * gradients, Zen 5). Each square is exact in double (24-bit mantissas). Clones as op_util.h's
 * GF_KERNEL_CLONES (core does not include the ops' header). */
#define GF_SUMSQ_LANES 16
#ifdef GF_KERNEL_CLONES_ON
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
static double sumsq_span(const float *restrict x, int64_t n) {
    double acc[GF_SUMSQ_LANES] = {0};
    int64_t i = 0;
    for (; i + GF_SUMSQ_LANES <= n; i += GF_SUMSQ_LANES)
#pragma omp simd
        for (int k = 0; k < GF_SUMSQ_LANES; k++) acc[k] += (double)x[i + k] * (double)x[i + k];
    for (int k = 0; i + k < n; k++) acc[k] += (double)x[i + k] * (double)x[i + k];
    double s = 0.0;
    for (int k = 0; k < GF_SUMSQ_LANES; k++) s += acc[k];
    return s;
}

double gf_sumsq_f32(const float *x, int64_t n) {
    double part[256] = {0};
    int nt = 1;
#pragma omp parallel
    {
        int t = omp_get_thread_num();
#pragma omp single
        nt = omp_get_num_threads();
        if (t < 256) {
            int64_t T = omp_get_num_threads();
            int64_t lo = n * t / T, hi = n * (t + 1) / T;
            part[t] = sumsq_span(x + lo, hi - lo);
        }
    }
    double s = 0.0;
    for (int t = 0; t < nt && t < 256; t++) s += part[t];
    return s;
}

void gf_fmt_eta(char *buf, size_t cap, double s) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, cap, "?");
        return;
    }
    long h = (long)(s / 3600), m = (long)(fmod(s, 3600) / 60), sec = (long)fmod(s, 60);
    if (h) snprintf(buf, cap, "%ldh%02ldm", h, m);
    else snprintf(buf, cap, "%ldm%02lds", m, sec);
}
