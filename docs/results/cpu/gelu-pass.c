/* gelu-pass.c — GELU's backward and forward passes alone (src/ops/gelu.c), 2 threads, on arrays of
 * 32 K to 2 M floats: ns an element (docs/performance.md, "AMD EPYC Zen 5": bound by arithmetic,
 * not memory, when an element costs the same in L2 as out of it). From the repository root:
 *   gcc -O3 -march=native -fopenmp -Iinclude -Isrc -Ibuild docs/results/cpu/gelu-pass.c src/ops/gelu.c -lm
 *   OMP_NUM_THREADS=2 ./a.out
 * (the op's tape and profiling calls, which the passes do not reach, are stubbed below) */
#include "ops/op_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void gf_abort(const char *f, int l, const char *fmt, ...) { (void)fmt; fprintf(stderr, "abort %s:%d\n", f, l); exit(1); }
int64_t gf_tensor_numel(const gf_tensor *t) { (void)t; abort(); }
gf_tensor *gf_tensor_like(gf_ctx *c, const gf_tensor *t) { (void)c, (void)t; abort(); }
gf_node *gf_tape_record(gf_ctx *c, const gf_op_def *d, gf_tensor *o, int32_t n, gf_tensor *const *in) { (void)c, (void)d, (void)o, (void)n, (void)in; abort(); }
const gf_backend *gf_backend_of(gf_device d) { (void)d; abort(); }
double gf_time_now(void) { return 0.0; }
void gf_prof_op_fwd(struct gf_ctx *c, double t0, double t1) { (void)c, (void)t0, (void)t1; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
    const int64_t big = 4096L * 1024 / 2;
    float *dx = aligned_alloc(64, big * 4), *g = aligned_alloc(64, big * 4), *x = aligned_alloc(64, big * 4),
          *y = aligned_alloc(64, big * 4);
    uint16_t *d16 = aligned_alloc(64, big * 2);
    for (int64_t i = 0; i < big; i++) g[i] = (float)((i * 7) % 13) * 0.1f - 0.6f, x[i] = (float)((i * 11) % 17) * 0.3f - 2.4f;
    for (int rep = 0; rep < 3; rep++)
        for (int64_t n = 1 << 15; n <= big; n *= 8) {
            int iters = (int)(big * 8 / n);
            double t0 = now();
            for (int it = 0; it < iters; it++) gf_gelu_backward_rows(dx, NULL, g, x, n, 1);
            double tb = (now() - t0) / iters / n * 1e9;
            t0 = now();
            for (int it = 0; it < iters; it++) gf_gelu_backward_rows(dx, d16, g, x, n, 1);
            double tb16 = (now() - t0) / iters / n * 1e9;
            t0 = now();
            for (int it = 0; it < iters; it++) gf_gelu_forward_rows(y, NULL, x, n);
            double tf = (now() - t0) / iters / n * 1e9;
            printf("%8ld floats (%5.0f KB an array): backward %.3f ns an element, with the bf16 bits %.3f, forward %.3f\n",
                   (long)n, n * 4 / 1024.0, tb, tb16, tf);
        }
    return 0;
}
