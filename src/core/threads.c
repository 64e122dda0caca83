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
            double s = 0.0;
            for (int64_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
            part[t] = s;
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
