/* test_cuda_emu.c — suite cuda, emulator builds only (-Demulate_cuda=true): that gflow's CUDA
 * emulator (src/core/cuda/emu, docs/cuda.md "The emulator") finds the faults it is there to find.
 * A passing suite cuda under the emulator is only worth something if a missing barrier, a host
 * pointer handed to a kernel or to an atomic, threads waiting at different barriers, a shuffle in a partial warp,
 * launch configurations over a GPU's limits, pinned host memory written while a copy from it
 * is in flight, and (under AddressSanitizer) a read past a buffer of the device step arena do
 * not pass; and that its products sum in the order the process asked for (GF_CUDA_EMU_GEMM). The kernels are emu_kernels.cu; faults end the process, so
 * those cases run in a child and read its stderr.
 */
#include "cuda_check.h"
#include "ops/op_util.h"

#ifdef GF_CUDA_EMULATOR

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

cudaError_t gf_ek_neighbour(float *out, const float *in, int n, int sync);
cudaError_t gf_ek_warp_sum(float *out, const float *in, int n);
cudaError_t gf_ek_mixed_barriers(float *out);
cudaError_t gf_ek_dynamic(float *out, int n, size_t bytes, int optin);
cudaError_t gf_ek_too_many_threads(float *out);
cudaError_t gf_ek_read_past(float *out, const float *in, int n);
cudaError_t gf_ek_tickets(unsigned *out, unsigned *count, int blocks, int threads);
cudaError_t gf_ek_thread_index(float *out, int x, int y, int z);
cudaError_t gf_ek_exited_lanes(float *out, int live);
cudaError_t gf_ek_warp_exits(float *out, const float *in);

/* n floats on the device holding 0, 1, ..., n-1 */
static float *dev_iota(int n) {
    float *h = malloc((size_t)n * sizeof *h), *d = NULL;
    for (int i = 0; i < n; i++) h[i] = (float)i;
    GF_CHECK_OK(gf_cuda_malloc((void **)&d, (size_t)n * sizeof *d));
    GF_CHECK_OK(gf_cuda_upload(d, h, (size_t)n * sizeof *h));
    free(h);
    return d;
}

/* run fn(arg) in a child: 1 when it died (a signal, or a non-zero exit: AddressSanitizer exits 1
 * unless ASAN_OPTIONS has abort_on_error) with `want` in its stderr */
static int dies_with(void (*fn)(void *), void *arg, const char *want) {
    char path[] = "/tmp/gf_emu_XXXXXX";
    int fd = mkstemp(path);
    GF_CHECK(fd >= 0, "mkstemp");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fn(arg);
        _exit(0);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    char buf[2048] = {0};
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unlink(path);
    int died = WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    int ok = died && got > 0 && strstr(buf, want);
    if (!ok) printf("    child: %s %d, stderr: %s\n", WIFSIGNALED(ws) ? "signal" : "exit",
                    WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws), buf);
    return ok;
}

GF_TEST(cuda, emulator_is_named) {
    gf_cuda_info info;
    gf_cuda_probe(&info);
    GF_CHECK(strstr(info.name, "emulator") != NULL, "the device is %s", info.name);
}

GF_TEST(cuda, emulator_fresh_device_memory_is_nan) {
    float *d = NULL, h[4];
    GF_CHECK_OK(gf_cuda_malloc((void **)&d, sizeof h));
    GF_CHECK_OK(gf_cuda_download(h, d, sizeof h));
    for (int i = 0; i < 4; i++) GF_CHECK(isnan(h[i]), "fresh device memory [%d] = %g", i, h[i]);
    gf_cuda_free(d);
}

GF_TEST(cuda, emulator_exposes_a_missing_barrier) {
    const int n = 64;
    float *in = dev_iota(n), *out = NULL, h[64];
    GF_CHECK_OK(gf_cuda_malloc((void **)&out, sizeof h));
    GF_CHECK(gf_ek_neighbour(out, in, n, 1) == cudaSuccess, "launch");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    for (int t = 0; t < n; t++) {
        const int next = t + 1 < n ? t + 1 : 0;
        GF_CHECK(h[t] == (float)next, "with the barrier: out[%d] = %g", t, h[t]);
    }
    GF_CHECK(gf_ek_neighbour(out, in, n, 0) == cudaSuccess, "launch");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    int stale = 0; /* threads that read a neighbour's slot before it was written */
    for (int t = 0; t < n; t++) stale += isnan(h[t]);
    const char *o = getenv("GF_CUDA_EMU_ORDER");
    /* in index order thread t runs before t + 1 writes; last first, only thread n-1 reads late */
    GF_CHECK(stale == (o && !strcmp(o, "reverse") ? 1 : n - 1), "without the barrier %d of %d reads were stale", stale,
             n);
    gf_cuda_free(in);
    gf_cuda_free(out);
}

GF_TEST(cuda, emulator_warp_shuffles) {
    float *in = dev_iota(64), *out = NULL, h[64];
    GF_CHECK_OK(gf_cuda_malloc((void **)&out, sizeof h));
    GF_CHECK(gf_ek_warp_sum(out, in, 64) == cudaSuccess, "launch");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    for (int t = 0; t < 64; t++) {
        const float want = t < 32 ? 496.0f : 1520.0f; /* 0+...+31, 32+...+63 */
        GF_CHECK(h[t] == want, "warp sum at lane %d: %g, want %g", t, h[t], want);
    }
    gf_cuda_free(in);
    gf_cuda_free(out);
}

static float *g_out, *g_in;
static void host_pointer_arg(void *u) {
    (void)u;
    static float host[64];
    gf_ek_neighbour(host, g_in, 64, 1);
}
static void mixed_barriers(void *u) {
    (void)u;
    gf_ek_mixed_barriers(g_out);
}
static void partial_warp(void *u) {
    (void)u;
    gf_ek_warp_sum(g_out, g_in, 48);
}

GF_TEST(cuda, emulator_faults_abort) {
    g_in = dev_iota(64);
    GF_CHECK_OK(gf_cuda_malloc((void **)&g_out, 64 * sizeof(float)));
    GF_CHECK(dies_with(host_pointer_arg, NULL, "argument 0"), "a host pointer as a kernel argument");
    GF_CHECK(dies_with(host_pointer_arg, NULL, "is not device memory"), "a host pointer as a kernel argument");
    GF_CHECK(dies_with(mixed_barriers, NULL, "deadlocks"), "threads at different barriers");
    GF_CHECK(dies_with(partial_warp, NULL, "partial warp"), "a shuffle in a partial warp");
    gf_cuda_free(g_in);
    gf_cuda_free(g_out);
}

/* The scheduler's bookkeeping: threadIdx of each thread for block shapes that change from launch
 * to launch, a warp that exits whole beside one that shuffles, and lanes that exit before the
 * others' shuffle (a GPU gives those undefined values: the emulator aborts) */
static void exited_lanes(void *u) {
    (void)u;
    gf_ek_exited_lanes(g_out, 16);
}

GF_TEST(cuda, emulator_thread_indices_and_exits) {
    static const int shapes[][3] = {{8, 4, 2}, {64, 1, 1}, {4, 16, 1}, {1, 2, 32}, {8, 4, 2}}; /* 64 threads each */
    float *out = NULL, h[64];
    GF_CHECK_OK(gf_cuda_malloc((void **)&out, sizeof h));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int X = shapes[s][0], Y = shapes[s][1], Z = shapes[s][2];
        GF_CHECK(gf_ek_thread_index(out, X, Y, Z) == cudaSuccess, "launch (%d, %d, %d)", X, Y, Z);
        GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
        for (int t = 0; t < 64; t++) {
            const int x = t % X, y = t / X % Y, z = t / (X * Y);
            GF_CHECK(h[t] == (float)(x + 100 * y + 10000 * z), "block (%d, %d, %d), thread %d: %g, want (%d, %d, %d)",
                     X, Y, Z, t, h[t], x, y, z);
        }
    }
    g_in = dev_iota(64);
    g_out = out;
    GF_CHECK(gf_ek_warp_exits(out, g_in) == cudaSuccess, "launch");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    for (int t = 0; t < 32; t++) GF_CHECK(h[t] == 496.0f, "warp 0 beside an exited warp, lane %d: %g, want 496", t, h[t]);
    GF_CHECK(dies_with(exited_lanes, NULL, "exited lanes"), "a shuffle that 16 exited lanes miss");
    gf_cuda_free(g_in);
    gf_cuda_free(out);
}

/* atomicAdd on an unsigned: every thread of every block gets its own old value, the count ends at
 * their number; the blocks run one after another, in index order or (GF_CUDA_EMU_ORDER=reverse)
 * last first, which the column sums' "last block" (cu_colsums) must not depend on. An atomic on
 * a misaligned address aborts, as a GPU faults. */
static void misaligned_atomic(void *u) {
    unsigned *d = u;
    gf_ek_tickets(d, (unsigned *)((char *)d + 2), 1, 32);
}

GF_TEST(cuda, emulator_atomics_and_block_order) {
    enum { B = 4, T = 64 };
    unsigned *d = NULL, h[B * T + 1], zero = 0;
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&d, sizeof h));
    GF_REQUIRE_OK(gf_cuda_upload(d + B * T, &zero, sizeof zero));
    GF_CHECK(gf_ek_tickets(d, d + B * T, B, T) == cudaSuccess, "launch");
    GF_REQUIRE_OK(gf_cuda_download(h, d, sizeof h));
    GF_CHECK(h[B * T] == B * T, "the count: %u (%d)", h[B * T], B * T);
    const char *o = getenv("GF_CUDA_EMU_ORDER");
    const int reverse = o && !strcmp(o, "reverse");
    int seen[B * T] = {0}, in_order = 1;
    for (int i = 0; i < B * T; i++) {
        if (h[i] < B * T) seen[h[i]]++;
        const int b = i / T, first = (reverse ? B - 1 - b : b) * T; /* the block's tickets start here */
        in_order &= h[i] >= (unsigned)first && h[i] < (unsigned)(first + T);
    }
    int once = 1;
    for (int i = 0; i < B * T; i++) once &= seen[i] == 1;
    GF_CHECK(once, "every ticket taken once");
    GF_CHECK(in_order, "the blocks ran %s", reverse ? "last first" : "in index order");
    GF_CHECK(dies_with(misaligned_atomic, d, "not 4-byte aligned device memory"), "a misaligned atomic");
    gf_cuda_free(d);
}

#if defined(__SANITIZE_ADDRESS__)
/* one float past a buffer of the device step arena lands in its fence (src/core/cuda/arena.c) */
static void read_past_arena(void *u) {
    gf_ctx *ctx = u;
    float *in = gf_cuda_zeros(ctx, 64), *out = gf_cuda_floats(ctx, 64);
    gf_ek_read_past(out, in, 63); /* in bounds */
    fprintf(stderr, "in bounds: no report\n");
    gf_ek_read_past(out, in, 64);
}

GF_TEST(cuda, emulator_fences_arena_allocations) {
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    GF_CHECK(dies_with(read_past_arena, &ctx, "in bounds: no report"), "63 reads within the buffer");
    GF_CHECK(dies_with(read_past_arena, &ctx, "use-after-poison"), "a read past an arena buffer under ASan");
    gf_ctx_free(&ctx);
}
#endif

/* pinned host memory written after a copy from it was queued: legal once a synchronisation
 * that waits for the copy has returned (an event recorded after it, or the stream), a race
 * before (on a GPU the copy may read the new bytes) */
static void pinned_written_in_flight(void *u) {
    float *d = u, *h = NULL;
    cudaEvent_t e;
    cudaStream_t s = gf_cuda_stream();
    if (cudaHostAlloc((void **)&h, 16 * sizeof(float), cudaHostAllocDefault) || cudaEventCreate(&e)) abort();
    cudaMemcpyAsync(d, h, 16 * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaEventRecord(e, s);
    cudaEventSynchronize(e);
    h[0] = 1.0f; /* the event came after the copy: done */
    cudaMemcpyAsync(d, h, 16 * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    h[0] = 2.0f;
    cudaEventRecord(e, s); /* an event recorded before the next copy does not wait for it */
    cudaMemcpyAsync(d, h, 16 * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaEventSynchronize(e);
    fprintf(stderr, "synchronised writes: no report\n");
    h[0] = 3.0f;
    cudaStreamSynchronize(s);
}
static void pinned_freed_in_flight(void *u) {
    float *d = u, *h = NULL;
    if (cudaHostAlloc((void **)&h, 16 * sizeof(float), cudaHostAllocDefault)) abort();
    cudaMemcpyAsync(d, h, 16 * sizeof(float), cudaMemcpyHostToDevice, gf_cuda_stream());
    cudaFreeHost(h);
}

GF_TEST(cuda, emulator_checks_pinned_copies_in_flight) {
    float *d = NULL;
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&d, 16 * sizeof(float)));
    GF_CHECK(dies_with(pinned_written_in_flight, d, "synchronised writes: no report"), "writes after the waits");
    GF_CHECK(dies_with(pinned_written_in_flight, d, "while a copy from it was in flight"),
             "a write to pinned memory before the stream was synchronised");
    GF_CHECK(dies_with(pinned_freed_in_flight, d, "cudaFreeHost"), "pinned memory freed under a copy");
    gf_cuda_free(d);
}

/* a GEMM whose C (4 x 4, ldc 4) starts 8 floats before the end of its 16-float allocation */
static void gemm_past_end(void *u) {
    float *d = u;
    const float one = 1.0f, zero = 0.0f;
    gf_cublas.sgemm(gf_cuda_blas(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, d, 4, d, 4, &zero, d + 8, 4);
}

GF_TEST(cuda, emulator_checks_copies_and_gemm_operands) {
    float *d = NULL, h[32] = {0};
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&d, 16 * sizeof(float)));
    cudaStream_t s = gf_cuda_stream();
    GF_CHECK(cudaMemcpyAsync(d, h, 16 * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess, "a whole upload");
    GF_CHECK(cudaMemcpyAsync(d, h, 17 * sizeof(float), cudaMemcpyHostToDevice, s) == cudaErrorInvalidValue,
             "an upload one float past the allocation");
    GF_CHECK(cudaMemcpyAsync(h, d, 16 * sizeof(float), cudaMemcpyHostToDevice, s) == cudaErrorInvalidValue,
             "an upload whose destination is host memory");
    GF_CHECK(cudaMemcpyAsync(h, d + 4, 16 * sizeof(float), cudaMemcpyDeviceToHost, s) == cudaErrorInvalidValue,
             "a download reaching past the allocation");
    GF_CHECK(cudaMemsetAsync(d + 1, 0, 16 * sizeof(float), s) == cudaErrorInvalidValue, "a memset past the end");
    GF_CHECK(cudaMemsetAsync(h, 0, sizeof h, s) == cudaErrorInvalidValue, "a memset of host memory");
    const float one = 1.0f, zero = 0.0f; /* C = A B on the 4 x 4 at the start: inside */
    GF_CHECK(gf_cublas.sgemm(gf_cuda_blas(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, d, 4, d, 4, &zero, d, 4) ==
                 CUBLAS_STATUS_SUCCESS, "a GEMM inside its allocation");
    GF_CHECK(dies_with(gemm_past_end, d, "not (wholly) in device memory"), "a GEMM operand past its allocation");
    gf_cuda_free(d);
}

/* The emulator's products sum their k terms first to last (OpenBLAS, the CPU's bits), or last first
 * under GF_CUDA_EMU_GEMM=reverse_k (tools/test_cuda_emu.sh runs the suite's second pass so): both
 * cuBLAS calls, every transposition, against the host's sum in the order the process runs.
 * op(A) rows [1, 2^24, -2^24] and [-2^24, 2^24, 1], op(B) = [1, 1, 2]: every term exact in bf16,
 * and the first row sums to -2^24 one way and 1 - 2^24 the other. */
GF_TEST(cuda, emulator_gemm_summation_order) {
    const char *g = getenv("GF_CUDA_EMU_GEMM");
    const int reverse = g && !strcmp(g, "reverse_k");
    const float p24 = 16777216.0f, a[2][3] = {{1, p24, -p24}, {-p24, p24, 1}}, b[3] = {1, 1, 2};
    float want[2], other[2];
    for (int i = 0; i < 2; i++) {
        float f = 0, r = 0;
        for (int j = 0; j < 3; j++) f = fmaf(a[i][j], b[j], f);
        for (int j = 2; j >= 0; j--) r = fmaf(a[i][j], b[j], r);
        want[i] = reverse ? r : f;
        other[i] = reverse ? f : r;
    }
    GF_CHECK(want[0] != other[0], "the two orders give the same sum: the test could not fail");
    float *d = NULL;
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&d, 16 * sizeof(float)));
    const float one = 1.0f, zero = 0.0f;
    for (int bf = 0; bf < 2; bf++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                /* column-major storage: op N, A is 2 x 3 (lda 2); op T, A is 3 x 2 (lda 3); B 3 x 1 or 1 x 3 */
                float ha[6], hb[3];
                uint16_t ha16[6], hb16[3];
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 3; j++) ha[ta ? j + 3 * i : i + 2 * j] = a[i][j];
                for (int j = 0; j < 3; j++) hb[j] = b[j];
                for (int i = 0; i < 6; i++) ha16[i] = gf_bf16_of(ha[i]);
                for (int i = 0; i < 3; i++) hb16[i] = gf_bf16_of(hb[i]);
                float *A = d, *B = d + 6, *C = d + 12, got[2] = {0};
                GF_CHECK_OK(gf_cuda_upload(A, bf ? (void *)ha16 : (void *)ha, bf ? sizeof ha16 : sizeof ha));
                GF_CHECK_OK(gf_cuda_upload(B, bf ? (void *)hb16 : (void *)hb, bf ? sizeof hb16 : sizeof hb));
                const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
                const int lda = ta ? 3 : 2, ldb = tb ? 1 : 3;
                cublasStatus_t st =
                    bf ? gf_cublas.gemm_ex(gf_cuda_blas(), oa, ob, 2, 1, 3, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF,
                                           ldb, &zero, C, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                       : gf_cublas.sgemm(gf_cuda_blas(), oa, ob, 2, 1, 3, &one, A, lda, B, ldb, &zero, C, 2);
                GF_CHECK(st == CUBLAS_STATUS_SUCCESS, "%s (op %c, %c): status %d", bf ? "GemmEx" : "Sgemm",
                         ta ? 'T' : 'N', tb ? 'T' : 'N', (int)st);
                GF_CHECK_OK(gf_cuda_download(got, C, sizeof got));
                for (int i = 0; i < 2; i++)
                    GF_CHECK(got[i] == want[i], "%s (op %c, %c), row %d: %.1f, want %.1f (summed %s)",
                             bf ? "GemmEx" : "Sgemm", ta ? 'T' : 'N', tb ? 'T' : 'N', i, got[i], want[i],
                             reverse ? "last first" : "first to last");
            }
    gf_cuda_free(d);
}

GF_TEST(cuda, emulator_launch_limits) {
    float *out = NULL, h[256];
    GF_CHECK_OK(gf_cuda_malloc((void **)&out, 2048 * sizeof(float)));
    GF_CHECK(gf_ek_too_many_threads(out) == cudaErrorInvalidConfiguration, "2048 threads per block");
    /* 64 KiB of dynamic shared memory: over the 48 KiB every kernel has, until it opts in */
    GF_CHECK(gf_ek_dynamic(out, 256, 65536, 0) == cudaErrorInvalidValue, "64 KiB without the opt-in");
    GF_CHECK(gf_ek_dynamic(out, 256, 65536, 1) == cudaSuccess, "64 KiB after the opt-in");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    for (int t = 0; t < 256; t++) GF_CHECK(h[t] == (float)t, "dynamic shared memory: out[%d] = %g", t, h[t]);
    GF_CHECK(gf_ek_dynamic(out, 256, 300000, 1) == cudaErrorInvalidValue, "over the opt-in maximum");
    GF_CHECK(cudaGetLastError() == cudaSuccess, "cudaGetLastError clears the error");
    gf_cuda_free(out);
}

/* stream capture: launches, copies and GEMMs recorded, not run, until the graph is launched (each
 * launch runs them again, with the arguments they were captured with); an update keeps the nodes
 * and takes new arguments, and refuses another kernel; what may synchronise or allocate fails
 * with the toolkit's error and invalidates the capture */
GF_TEST(cuda, emulator_captures_and_replays_graphs) {
    enum { N = 64 };
    float *in = dev_iota(N), *out = NULL, *pin = NULL, h[N];
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&out, N * sizeof(float)));
    GF_REQUIRE(cudaHostAlloc((void **)&pin, N * sizeof(float), cudaHostAllocDefault) == cudaSuccess, "pinned");
    cudaStream_t s = gf_cuda_stream();
    GF_CHECK(cudaMemsetAsync(out, 0, N * sizeof(float), s) == cudaSuccess, "memset");
    for (int i = 0; i < N; i++) pin[i] = -1.0f;
    GF_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin");
    enum cudaStreamCaptureStatus cs;
    GF_CHECK(cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive, "capturing");
    GF_CHECK(cudaMemcpyAsync(in, pin, sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess, "a pinned upload");
    GF_CHECK(gf_ek_neighbour(out, in, N, 1) == cudaSuccess, "a launch");
    const unsigned long waits0 = gf_emu_waits();
    cudaGraph_t g = NULL;
    GF_REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess && g, "end");
    GF_CHECK(gf_emu_graph_nodes() == 2, "%lu nodes (2)", gf_emu_graph_nodes());
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    GF_CHECK(h[N - 1] == 0.0f, "captured work ran before its launch: out[%d] = %g", N - 1, h[N - 1]);
    cudaGraphExec_t x = NULL;
    GF_REQUIRE(cudaGraphInstantiate(&x, g, 0) == cudaSuccess, "instantiate");
    pin[0] = 41.0f; /* read at the launch, not at the capture */
    GF_CHECK(cudaGraphLaunch(x, s) == cudaSuccess, "launch");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    GF_CHECK(h[N - 1] == 41.0f && h[0] == 1.0f, "replayed: out[0] %g (1), out[%d] %g (41)", h[0], N - 1, h[N - 1]);
    /* the same nodes with new arguments: updated in place */
    GF_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin 2");
    GF_CHECK(cudaMemcpyAsync(in + 1, pin, sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess, "upload 2");
    GF_CHECK(gf_ek_neighbour(out, in, N, 1) == cudaSuccess, "launch 2");
    cudaGraph_t g2 = NULL;
    GF_REQUIRE(cudaStreamEndCapture(s, &g2) == cudaSuccess, "end 2");
    cudaGraphExecUpdateResultInfo info;
    GF_CHECK(cudaGraphExecUpdate(x, g2, &info) == cudaSuccess, "update: result %d", (int)info.result);
    GF_CHECK(cudaGraphLaunch(x, s) == cudaSuccess, "launch 2");
    GF_CHECK_OK(gf_cuda_download(h, out, sizeof h));
    GF_CHECK(h[0] == 41.0f, "updated: out[0] %g (41)", h[0]);
    GF_CHECK(gf_emu_waits() - waits0 == 3, "%lu waits: the three downloads only", gf_emu_waits() - waits0);
    /* another kernel: the update is refused */
    GF_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin 3");
    GF_CHECK(cudaMemcpyAsync(in + 1, pin, sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess, "upload 3");
    GF_CHECK(gf_ek_warp_sum(out, in, 32) == cudaSuccess, "launch 3");
    cudaGraph_t g3 = NULL;
    GF_REQUIRE(cudaStreamEndCapture(s, &g3) == cudaSuccess, "end 3");
    GF_CHECK(cudaGraphExecUpdate(x, g3, &info) == cudaErrorGraphExecUpdateFailure &&
                 info.result == cudaGraphExecUpdateErrorFunctionChanged, "an update to another kernel: result %d",
             (int)info.result);
    /* refused during a capture: a synchronisation, an allocation, a pageable download, a captured event */
    cudaEvent_t ev;
    GF_REQUIRE(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess, "event");
    GF_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin 4");
    GF_CHECK(cudaEventRecord(ev, s) == cudaSuccess, "an event recorded in a capture");
    GF_CHECK(cudaEventSynchronize(ev) == cudaErrorCapturedEvent, "waiting for a captured event");
    GF_CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize");
    GF_CHECK(cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusInvalidated, "invalidated");
    void *p = NULL;
    GF_CHECK(cudaMalloc(&p, 16) == cudaErrorStreamCaptureUnsupported && !p, "cudaMalloc");
    GF_CHECK(cudaMemcpyAsync(h, out, sizeof h, cudaMemcpyDeviceToHost, s) == cudaErrorStreamCaptureUnsupported,
             "a download to pageable memory");
    GF_CHECK(gf_ek_neighbour(out, in, N, 1) == cudaErrorStreamCaptureInvalidated, "a launch after them");
    cudaGraph_t g4 = NULL;
    GF_CHECK(cudaStreamEndCapture(s, &g4) == cudaErrorStreamCaptureInvalidated && !g4, "end 4: invalidated");
    GF_CHECK(cudaMalloc(&p, 16) == cudaSuccess, "cudaMalloc after the capture");
    GF_CHECK(cudaFree(p) == cudaSuccess && cudaEventDestroy(ev) == cudaSuccess, "free");
    cudaGraphDestroy(g);
    cudaGraphDestroy(g2);
    cudaGraphDestroy(g3);
    cudaGraphExecDestroy(x);
    cudaFreeHost(pin);
    gf_cuda_free(in);
    gf_cuda_free(out);
}

#endif
