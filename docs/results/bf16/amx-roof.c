/* amx-roof.c — what bf16 products can reach on this CPU (docs/performance.md, "The AMX roof"):
 *   1. the AMX unit alone: TDPBF16PS on four tile accumulators, no memory traffic, on 1 thread,
 *      then on both threads at once (each thread its own loop);
 *   2. oneDNN 2.6's bf16 matmul (fp32 output, gflow's layouts) at the paper model's shapes and a
 *      square 2048^3, with OMP_NUM_THREADS threads (run it with 1 and with 2).
 * gcc -O2 -fopenmp -mamx-tile -mamx-bf16 amx-roof.c -ldnnl -o amx-roof && OMP_NUM_THREADS=2 ./amx-roof */
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define T(c) do { dnnl_status_t s_ = (c); if (s_) { printf("fail %s: %d\n", #c, (int)s_); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

typedef struct { uint8_t palette, start; uint8_t r[14]; uint16_t colsb[16]; uint8_t rows[16]; } tilecfg;

/* GFLOP/s of n rounds of 4 TDPBF16PS (16x16 fp32 += 16x32 bf16 . 32x16 bf16: 16,384 FLOP each) */
static double amx_loop(long n) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.rows[i] = 16, c.colsb[i] = 64;
    _tile_loadconfig(&c);
    static __thread uint16_t a[16 * 32] __attribute__((aligned(64)));
    for (int i = 0; i < 512; i++) a[i] = 0x3c00;
    _tile_loadd(4, a, 64); _tile_loadd(5, a, 64); _tile_loadd(6, a, 64); _tile_loadd(7, a, 64);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    double t = now() - t0;
    _tile_release();
    return 4.0 * (double)n * 16384.0 / t / 1e9;
}

static dnnl_engine_t eng;
static dnnl_stream_t st;

/* C (M, N) f32 (+)= A (M, K) bf16 . B (K, N) bf16, A or B transposed as gflow stores them: best of reps */
static void matmul(const char *what, int64_t M, int64_t N, int64_t K, int ta, int tb, int acc, int reps) {
    dnnl_memory_desc_t ma, mb, mc;
    dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N};
    dnnl_dims_t sa = {ta ? 1 : K, ta ? M : 1}, sb = {tb ? 1 : N, tb ? K : 1}, sc = {N, 1};
    T(dnnl_memory_desc_init_by_strides(&ma, 2, da, dnnl_bf16, sa));
    T(dnnl_memory_desc_init_by_strides(&mb, 2, db, dnnl_bf16, sb));
    T(dnnl_memory_desc_init_by_strides(&mc, 2, dc, dnnl_f32, sc));
    dnnl_matmul_desc_t md;
    T(dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc));
    dnnl_primitive_attr_t attr;
    T(dnnl_primitive_attr_create(&attr));
    if (acc) {
        dnnl_post_ops_t po;
        T(dnnl_post_ops_create(&po));
        T(dnnl_post_ops_append_sum(po, 1.0f));
        T(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_primitive_desc_t pd;
    T(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
    const char *impl;
    T(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    dnnl_primitive_t p;
    T(dnnl_primitive_create(&p, pd));
    uint16_t *a = aligned_alloc(64, (size_t)(M * K) * 2), *b = aligned_alloc(64, (size_t)(K * N) * 2);
    float *c = aligned_alloc(64, (size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * K; i++) a[i] = (uint16_t)(0x3c00 + (i & 63));
    for (int64_t i = 0; i < K * N; i++) b[i] = (uint16_t)(0x3c00 + (i & 31));
    memset(c, 0, (size_t)(M * N) * 4);
    dnnl_memory_t A, B, C;
    T(dnnl_memory_create(&A, &ma, eng, a));
    T(dnnl_memory_create(&B, &mb, eng, b));
    T(dnnl_memory_create(&C, &mc, eng, c));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}};
    T(dnnl_primitive_execute(p, st, 3, args));
    T(dnnl_stream_wait(st));
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        T(dnnl_primitive_execute(p, st, 3, args));
        T(dnnl_stream_wait(st));
        double t = now() - t0;
        if (t < best) best = t;
    }
    printf("  %-22s %5lldx%5lldx%5lld  %-26s %8.2f ms %6.0f GFLOP/s\n", what, (long long)M, (long long)N,
           (long long)K, impl, best * 1e3, 2.0 * (double)(M * N * K) / best / 1e9);
    free(a), free(b), free(c);
    dnnl_primitive_destroy(p), dnnl_primitive_desc_destroy(pd), dnnl_primitive_attr_destroy(attr);
    dnnl_memory_destroy(A), dnnl_memory_destroy(B), dnnl_memory_destroy(C);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    /* Linux hands out the AMX tile state on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) */
    if (syscall(SYS_arch_prctl, 0x1023, 18)) { perror("arch_prctl(ARCH_REQ_XCOMP_PERM)"); return 1; }
    long n = 40000000;
    printf("AMX TDPBF16PS, registers only: 1 thread %.0f GFLOP/s\n", amx_loop(n));
    double g[2] = {0};
#pragma omp parallel num_threads(2)
    {
        syscall(SYS_arch_prctl, 0x1023, 18);
        g[omp_get_thread_num()] = amx_loop(n);
    }
    printf("AMX TDPBF16PS, registers only: 2 threads at once %.0f + %.0f = %.0f GFLOP/s\n", g[0], g[1], g[0] + g[1]);
    T(dnnl_engine_create(&eng, dnnl_cpu, 0));
    T(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    printf("oneDNN %d.%d.%d matmul, %d threads (best of the reps):\n", dnnl_version()->major, dnnl_version()->minor,
           dnnl_version()->patch, omp_get_max_threads());
    matmul("square", 2048, 2048, 2048, 0, 0, 0, 5);
    matmul("head logits", 512, 30720, 256, 0, 1, 0, 6);
    matmul("head dh", 512, 256, 30720, 0, 0, 0, 6);
    matmul("head dE (+=)", 30720, 256, 512, 1, 0, 1, 6);
    matmul("ffn up", 4096, 1024, 256, 0, 1, 0, 10);
    matmul("ffn down", 4096, 256, 1024, 0, 1, 0, 10);
    matmul("ffn up dX (+=)", 4096, 256, 1024, 0, 0, 1, 10);
    matmul("ffn up dW (+=)", 1024, 256, 4096, 1, 0, 1, 10);
    matmul("qkv", 4096, 768, 256, 0, 1, 0, 10);
    return 0;
}
