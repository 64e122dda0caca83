/* gflow/threads.h — one place that sets the thread count for OpenMP and OpenBLAS. */
#ifndef GFLOW_THREADS_H
#define GFLOW_THREADS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* n <= 0: keep the OpenMP default (OMP_NUM_THREADS or the core count). */
void gf_threads_set(int n);
int gf_threads_get(void);
/* wall-clock seconds (monotonic) */
double gf_time_now(void);
/* A duration for an ETA: "1h05m", "3m07s"; "?" when negative or not finite. */
void gf_fmt_eta(char *buf, size_t cap, double seconds);
/* sum of squares in double, parallel but in a fixed order (per-thread partials over
 * static blocks, each in 16 running sums of every 16th element added in lane order, the
 * partials added in thread order), so the result is bitwise reproducible for a given
 * thread count, on any CPU. */
double gf_sumsq_f32(const float *x, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
