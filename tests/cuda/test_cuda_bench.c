/* test_cuda_bench.c — `gflow bench --set run.device=cuda` (src/cli/bench_cuda.c) and the cuBLAS
 * GEMM rate it divides by (src/core/cuda/gemm_peak.c).
 *
 * Suite unit (every build and machine): --tf32 without device = cuda is a usage error; with it,
 * where the GPU path cannot run, bench ends with the session's one-line device error before
 * measuring anything (as `gflow bench --set run.device=cuda` does in test_cuda_device.c).
 * Suite cuda (a visible GPU): the GEMM rate on awkward and model shapes, in FP32 and TF32, and
 * its argument checks; after a TF32 measurement the handle computes in FP32 again (a linear op
 * agrees with the CPU's to 1e-4, which TF32's 10-bit mantissa does not reach at K = 512); and,
 * once the GPU training path is complete, a short bench on the GPU prints its fields: the GPU,
 * phases timed by CUDA events (each > 0), the cuBLAS peaks, device memory, no cudaMalloc of
 * the device step arena in the timed steps, and the queued steps' rate, each launched as a graph. Until then the same bench must end with the
 * session's one-line error.
 */
#include "cuda_check.h"
#include "gflow.h"
#include "gflow/session.h"
#include "reliability/rel_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* 0 when [run] device = cuda can run here (a GPU and the whole GPU training path) */
static gf_status cuda_bench_possible(void) {
    gf_recipe r;
    const char *set[1] = {"run.device=cuda"};
    gf_status st = gf_recipe_load(rel_base_recipe(), set, 1, &r);
    return st ? st : gf_session_device_check(&r);
}

GF_TEST(unit, cuda_bench_tf32_option) {
    const char *cpu[] = {"bench", rel_base_recipe(), "--tf32", "--steps", "1", "--warmup", "0", "--peak-n", "0", NULL};
    rel_result res;
    rel_gflow(&res, 0, cpu);
    GF_CHECK(res.exit_code == 2 && strstr(res.err, "--tf32") && strstr(res.err, "run.device=cuda"),
             "--tf32 on the CPU: exit %d: %s", res.exit_code, res.err);
    const char *gpu[] = {"bench", rel_base_recipe(), "--tf32", "--set", "run.device=cuda", "--steps", "1",
                         "--warmup", "0", "--peak-n", "0", NULL};
    rel_gflow(&res, 0, gpu);
    if (cuda_bench_possible()) { /* no GPU path here: the session's one line, nothing measured */
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "[run] device") && strstr(res.err, "cuda"),
                 "exit %d, %d stderr lines: %s", res.exit_code, res.err_lines, res.err);
    } else {
        GF_CHECK(res.exit_code == 0, "bench --tf32 on the GPU: exit %d: %s", res.exit_code, res.err);
    }
}

#ifdef GF_HAVE_CUDA

static gf_tensor *b_linear(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_linear(c, in[0], in[1], in[2]); }

GF_TEST(cuda, bench_gemm_rate) {
    static const int64_t shapes[][3] = {{1, 1, 1}, {100, 37, 65}, {257, 300, 100}, {4096, 1024, 256}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        for (int tf32 = 0; tf32 < 2; tf32++) {
            double g = -1;
            GF_CHECK_OK(gf_cuda_sgemm_gflops(shapes[i][0], shapes[i][1], shapes[i][2], tf32, 2, &g));
            GF_CHECK(g > 0 && isfinite(g), "shape %zu tf32 %d: %g GFLOP/s", i, tf32, g);
        }
    }
    double g = -1;
    GF_CHECK_ERR(gf_cuda_sgemm_gflops(0, 1, 1, 0, 1, &g), GF_E_INVALID, "gemm peak: shape 0 x 1 x 1");
    GF_CHECK(g == 0, "rate of a refused shape: %g", g);
    GF_CHECK_ERR(gf_cuda_sgemm_gflops(1, 1, (int64_t)1 << 32, 0, 1, &g), GF_E_INVALID, "gemm peak");
    GF_CHECK_ERR(gf_cuda_sgemm_gflops(1, 1, 1, 0, 0, &g), GF_E_INVALID, "0 reps");
    /* the handle is back in FP32 after a TF32 measurement */
    GF_CHECK_OK(gf_cuda_sgemm_gflops(64, 64, 512, 1, 1, &g));
    op_case c = {.what = "linear after a TF32 GEMM rate", .f = b_linear};
    int64_t sx[2] = {33, 512}, sw[2] = {70, 512}, sb[1] = {70};
    add_input(&c, 2, sx, 51, 1.0f);
    add_input(&c, 2, sw, 52, 1.0f);
    add_input(&c, 1, sb, 53, 0.5f);
    GF_CHECK(check_case(&c) == 0, "linear after gf_cuda_sgemm_gflops(tf32)");
    case_free(&c);
}

/* the whole file after a newline (so that every "key: " line follows one), or NULL */
static char *slurp_nl(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 1, cap = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (n + 2 > cap) {
            char *nb = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        buf[n++] = (char)ch;
    }
    fclose(f);
    if (!buf && !(buf = malloc(2))) return NULL;
    buf[0] = '\n';
    buf[n] = 0;
    return buf;
}

/* the value of "KEY: value" in text, or -1 */
static double field(const char *text, const char *key) {
    char k[128];
    snprintf(k, sizeof k, "\n%s: ", key);
    const char *p = strstr(text, k);
    return p ? strtod(p + strlen(k), NULL) : -1.0;
}

GF_TEST(cuda, bench_on_gpu) {
    char log[1024];
    snprintf(log, sizeof log, "%s/bench_cuda.log", gf_test_tmpdir());
    remove(log);
    const char *args[] = {"bench", rel_base_recipe(), "--set", "run.device=cuda", "--steps", "3", "--warmup", "2",
                          "--peak-n", "256", "--tf32", NULL};
    pid_t pid = rel_gflow_spawn(log, args);
    int wst = 0;
    GF_REQUIRE(pid > 0 && waitpid(pid, &wst, 0) == pid, "spawn gflow bench");
    char *out = slurp_nl(log);
    GF_REQUIRE(out, "no output in %s", log);
    const char *text = out + 1;
    int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
    if (cuda_bench_possible()) { /* the GPU training path is not complete: the session's one line */
        GF_CHECK(code == 1 && strstr(out, "[run] device") && !strstr(out, "\ntokens_per_s: "),
                 "exit %d: %s", code, text);
    } else {
        GF_CHECK(code == 0, "gflow bench on the GPU: exit %d:\n%s", code, text);
        static const char *lines[] = {"\ngpu: ", "\nms_by_family: not measured on cuda",
                                      "(256^3 cublasSgemm fp32)", "(256^3 cublasSgemm tf32)", "\nsgemm_head_gflops: ",
                                      "\nsgemm_ffn_gflops: ", "\nhost_ms_per_step: ", "\ndevice_used_mb: "};
        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
            GF_CHECK(strstr(out, lines[i]) != NULL, "no '%s' in:\n%s", lines[i] + (lines[i][0] == '\n'), text);
        static const char *positive[] = {"tokens_per_s", "ms_per_step", "ms_forward", "ms_backward", "ms_optimizer",
                                         "sgemm_peak_gflops", "sgemm_peak_tf32_gflops", "mfu_pct", "device_taken_mb",
                                         "device_arena_mb", "queued_tokens_per_s", "queued_ms_per_step"};
        for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
            GF_CHECK(field(out, positive[i]) > 0, "%s: %g", positive[i], field(out, positive[i]));
        /* the phases add up to the step (each printed to 3 decimals) */
        double sum = field(out, "ms_forward") + field(out, "ms_backward") + field(out, "ms_optimizer");
        GF_CHECK(fabs(sum - field(out, "ms_per_step")) <= 0.002, "phases %g ms, step %g ms", sum,
                 field(out, "ms_per_step"));
        GF_CHECK(field(out, "device_arena_mallocs_timed") == 0, "device arena grew in the timed steps:\n%s", text);
        /* the 3 queued steps, after 5 that sized the arena and the staging: each one graph, the
         * first captured, the next two replaying it (the LM's inputs are fed) */
        GF_CHECK(strstr(out, "\ncuda_graphs: 3 launched, 1 instantiated, 0 updated in place, 2 replayed without ") &&
                     strstr(out, ", 0 captures dropped"),
                 "queued steps not launched as graphs, or not replayed:\n%s", text);
        /* the host's share of the queued steps: part of their wall time */
        const double qh = field(out, "queued_host_ms_per_step"), qw = field(out, "queued_ms_per_step");
        GF_CHECK(qh > 0 && qh <= qw, "queued_host_ms_per_step %g, queued_ms_per_step %g", qh, qw);
        GF_CHECK(field(out, "kernel_launches_per_step") > 0, "kernel_launches_per_step: %g",
                 field(out, "kernel_launches_per_step"));
        /* the true peak holds at least the arena's high-water mark */
        GF_CHECK(field(out, "peak_device_mb") >= field(out, "device_arena_mb") && field(out, "peak_device_mb") > 0,
                 "peak_device_mb %g, device_arena_mb %g", field(out, "peak_device_mb"), field(out, "device_arena_mb"));
    }
    free(out);
}

/* kernels, cuBLAS calls and gflow's kernels' bytes a step of an n-layer GrassmannLM launches and
 * moves (bench's counts), with up to two more recipe settings (or NULL); -1 on failure */
static int launches_of2(int layers, const char *more, const char *more2, double *kernels, double *blas,
                        double *bytes) {
    char log[1024], set[64];
    snprintf(log, sizeof log, "%s/bench_launches_%d_%s_%s.log", gf_test_tmpdir(), layers, more ? more : "base",
             more2 ? more2 : "-");
    snprintf(set, sizeof set, "model.n_layers=%d", layers);
    remove(log); /* the spawn appends: a second bench of the same settings reads its own output */
    /* a 512-token vocabulary: the head's kernels are counted all the same, and the emulator's
     * products of the default 30,522-token head took most of the test's time */
    const char *args[] = {"bench", rel_base_recipe(), "--set", "run.device=cuda", "--set", set, "--set",
                          "tokenizer.vocab_size=512", "--steps", "2", "--warmup", "1", "--peak-n", "0",
                          more ? "--set" : NULL, more, more2 ? "--set" : NULL, more2, NULL};
    pid_t pid = rel_gflow_spawn(log, args);
    int wst = 0;
    if (pid <= 0 || waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) || WEXITSTATUS(wst)) return -1;
    char *out = slurp_nl(log);
    if (!out) return -1;
    const char *p = strstr(out, "\nkernel_launches_per_step: ");
    int ok = p && sscanf(p, "\nkernel_launches_per_step: %*f (gflow's kernels %lf, cuBLAS calls %lf", kernels, blas) == 2;
    p = strstr(out, "\nelementwise_bytes_per_step: ");
    ok = ok && p && sscanf(p, "\nelementwise_bytes_per_step: %lf (", bytes) == 1;
    free(out);
    return ok ? 0 : -1;
}

static int launches_of(int layers, const char *more, double *kernels, double *blas, double *bytes) {
    return launches_of2(layers, more, NULL, kernels, blas, bytes);
}

/* The launch count is the step's: each layer adds the same number of kernels and cuBLAS calls
 * (what a fused kernel lowers), and the same bytes, and the rest of the step launches some too.
 * A GrassmannLM layer (post-LN, Plücker mixing, the gate) launches 16 of gflow's kernels and 18
 * cuBLAS calls, a Transformer layer 16 and 12 (docs/performance.md, "On the GPU"; the
 * GrassmannLM's listed in docs/cuda.md, "Kernels a layer launches"), where 23 and 22 while each
 * column sum took two launches, and 32 and 29 before the Plücker bias, linear_gelu's bias,
 * LayerNorm's two column sums, the gate's bias (gated_lerp) and the post-LN branches' bias
 * (linear_dropout_add_layernorm) were folded. */
GF_TEST(cuda, bench_counts_launches_per_layer) {
    if (cuda_bench_possible()) { gf_error_clear(); return; } /* bench_on_gpu checks the refusal */
    double k[3], b[3], m[3];
    for (int l = 0; l < 3; l++)
        GF_REQUIRE(launches_of(l + 1, NULL, &k[l], &b[l], &m[l]) == 0, "bench of %d layers", l + 1);
    GF_CHECK(k[1] - k[0] > 0 && k[2] - k[1] == k[1] - k[0], "gflow's kernels by layers 1, 2, 3: %g %g %g", k[0], k[1],
             k[2]);
    GF_CHECK(b[1] - b[0] > 0 && b[2] - b[1] == b[1] - b[0], "cuBLAS calls by layers 1, 2, 3: %g %g %g", b[0], b[1], b[2]);
    /* the bytes alike but for the norm's and the finiteness check's partial sums over the whole
     * gradient, one per block of 2,048 floats: a few times 8 bytes either way */
    GF_CHECK(m[1] - m[0] > 0 && fabs((m[2] - m[1]) - (m[1] - m[0])) <= 1e-4 * (m[1] - m[0]),
             "bytes by layers 1, 2, 3: %.0f %.0f %.0f", m[0], m[1], m[2]);
    GF_CHECK(k[0] > k[1] - k[0] && b[0] >= b[1] - b[0], "the step outside the layers: %g kernels, %g cuBLAS calls",
             k[0] - (k[1] - k[0]), b[0] - (b[1] - b[0]));
    GF_CHECK(k[1] - k[0] == 16 && b[1] - b[0] == 18, "a GrassmannLM layer: %g kernels, %g cuBLAS calls (want 16, 18)",
             k[1] - k[0], b[1] - b[0]);
    double tk[2], tb[2], tm[2];
    for (int l = 0; l < 2; l++)
        GF_REQUIRE(launches_of(l + 1, "model.family=transformer", &tk[l], &tb[l], &tm[l]) == 0,
                   "bench of a %d-layer Transformer", l + 1);
    GF_CHECK(tk[1] - tk[0] == 16 && tb[1] - tb[0] == 12, "a Transformer layer: %g kernels, %g cuBLAS calls (want 16, 12)",
             tk[1] - tk[0], tb[1] - tb[0]);
    printf("  a GrassmannLM step launches %g kernels and %g cuBLAS calls per layer, %g and %g besides; its kernels "
           "move %.0f bytes per layer, %.0f besides; a Transformer layer %g kernels, %.0f bytes\n",
           k[1] - k[0], b[1] - b[0], k[0] - (k[1] - k[0]), b[0] - (b[1] - b[0]), m[1] - m[0], m[0] - (m[1] - m[0]),
           tk[1] - tk[0], tm[1] - tm[0]);
}

/* A layer's bytes (two layers' less one's) against the model's size, with the kernels unchanged:
 * twice the sequence doubles every activation a kernel moves but not the layer's parameters
 * (the optimizer's pass, bias reads, column sums' outputs): between 1.5 and 2 times; twice
 * d_model (d_ff and r kept) doubles the D-wide activations but not the r- or d_ff-wide ones, and
 * the gate's 2D x D weight quadruples in the optimizer's pass: between 1.5 and 2.5 times. A count
 * that ignored the shapes would stay put. */
GF_TEST(cuda, bench_bytes_grow_with_the_model) {
    if (cuda_bench_possible()) { gf_error_clear(); return; }
    static const char *more[3] = {NULL, "data.seq_len=32", "model.d_model=64"};
    double layer[3], k[2][3], b[2][3], m[2][3];
    for (int v = 0; v < 3; v++) {
        for (int l = 0; l < 2; l++)
            GF_REQUIRE(launches_of(l + 1, more[v], &k[l][v], &b[l][v], &m[l][v]) == 0, "bench of %d layers, %s", l + 1,
                       more[v] ? more[v] : "base");
        layer[v] = m[1][v] - m[0][v];
        GF_CHECK(k[1][v] - k[0][v] == k[1][0] - k[0][0], "%s: %g kernels a layer, base %g", more[v] ? more[v] : "base",
                 k[1][v] - k[0][v], k[1][0] - k[0][0]);
    }
    const double seq = layer[1] / layer[0], width = layer[2] / layer[0];
    GF_CHECK(seq >= 1.5 && seq <= 2.0, "twice the sequence: %.0f -> %.0f bytes a layer (%.3fx)", layer[0], layer[1],
             seq);
    GF_CHECK(width >= 1.5 && width <= 2.5, "twice the width: %.0f -> %.0f bytes a layer (%.3fx)", layer[0],
             layer[2], width);
    printf("  bytes a layer: %.0f; twice the sequence %.3fx, twice the width %.3fx\n", layer[0], seq, width);
}

/* [run] precision = bf16: the products read rounded copies of their operands, and each is rounded
 * once a step (docs/cuda.md "bf16 operands"): the weights not at all (their mirror, which AdamW
 * writes), what gflow's kernels write by those kernels as they write it (the LayerNorms' and
 * GELU's outputs, the Plücker features, fc2's, fc1's and the gate's upstream gradients, the head's
 * dlogits), the rest once for all its products (cu_bf16_keep, cu_bf16_hold). So a GrassmannLM
 * layer launches 3 rounding kernels more than in fp32 (19: the Plücker branch g, its gradient and
 * w_red's; 52 when every product rounded both operands, 26 before the producers rounded), a
 * Transformer layer 2 (18; 40, 24), the same cuBLAS calls, and the rest of the step 1 more (the
 * embeddings' sum, the first layer's input). */
GF_TEST(cuda, bench_counts_bf16_roundings) {
    if (cuda_bench_possible()) { gf_error_clear(); return; }
    double k[2], b[2], m[2], tk[2], tb[2], tm[2];
    for (int l = 0; l < 2; l++) {
        GF_REQUIRE(launches_of2(l + 1, "run.precision=bf16", NULL, &k[l], &b[l], &m[l]) == 0, "bf16, %d layers", l + 1);
        GF_REQUIRE(launches_of2(l + 1, "model.family=transformer", "run.precision=bf16", &tk[l], &tb[l], &tm[l]) == 0,
                   "bf16 Transformer, %d layers", l + 1);
    }
    /* fp32: 16 kernels and 18 cuBLAS calls a GrassmannLM layer, 21 besides, 16 a Transformer layer
     * (bench_counts_launches_per_layer) */
    const double layer = k[1] - k[0], rest = k[0] - layer;
    GF_CHECK(layer == 16 + 3 && b[1] - b[0] == 18, "a bf16 GrassmannLM layer: %g kernels, %g cuBLAS calls (want 19, "
             "18)", layer, b[1] - b[0]);
    GF_CHECK(rest == 21 + 1, "the bf16 step outside the layers: %g kernels (want 22)", rest);
    GF_CHECK(tk[1] - tk[0] == 16 + 2, "a bf16 Transformer layer: %g kernels (want 18)", tk[1] - tk[0]);
    /* GF_CUDA_BF16_REUSE=0: each product rounds both its operands (2 × 18 kernels a layer more than
     * fp32, and the head's per product), as before the copies were reused; a bad value is refused */
    double ok[2], ob[2], om[2];
    setenv("GF_CUDA_BF16_REUSE", "0", 1);
    for (int l = 0; l < 2; l++)
        GF_REQUIRE(launches_of2(l + 1, "run.precision=bf16", NULL, &ok[l], &ob[l], &om[l]) == 0,
                   "bf16 without reuse, %d layers", l + 1);
    setenv("GF_CUDA_BF16_REUSE", "yes", 1);
    GF_CHECK(launches_of2(1, "run.precision=bf16", NULL, &ok[0], &ob[0], &om[0]) != 0,
             "GF_CUDA_BF16_REUSE=yes: the bench ran");
    unsetenv("GF_CUDA_BF16_REUSE");
    GF_CHECK(ok[1] - ok[0] == 16 + 2 * 18, "a bf16 GrassmannLM layer without reuse: %g kernels (want 52)",
             ok[1] - ok[0]);
    printf("  bf16: a GrassmannLM layer %g kernels, %.0f bytes; the rest of the step %g kernels, %.0f bytes; a "
           "Transformer layer %g kernels, %.0f bytes\n", layer, m[1] - m[0], rest, m[0] - (m[1] - m[0]), tk[1] - tk[0],
           tm[1] - tm[0]);
}
#endif
