/* test_cuda_colsum.c — suite cuda: the CUDA ops' column sums (cu_colsums, src/ops/cuda/cu_util.cuh)
 * in their one launch give the bits of the two-stage order they promise (docs/cuda.md,
 * "Determinism"): 64-row chunks whose 8 thread-row partials are added in order, then the chunks'
 * sums in chunk order, whichever block finishes last. Checked against that order on the host for
 * a row, rows not a multiple of 64, many chunks, columns not a multiple of 32, storing and
 * adding, one sum and two at once; a second run (the blocks' counters back at 0) gives the same
 * bits, and so do a captured CUDA graph and its replay. The emulator runs the blocks in index
 * order and then last first (tools/test_cuda_emu.sh), so the last block to finish is the
 * highest of its strip in one run and the lowest in the other. */
#include "cuda_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA

void gf_ck_colsums(gf_ctx *ctx, float *da, const float *a, int store_a, float *db, const float *b, int store_b,
                   int64_t N, int64_t C);

/* dst[c] (= when store, else +=) Σ_r x[r, c] in cu_colsums' order (N below 65535 chunks) */
static void colsum_order(float *dst, const float *x, int64_t N, int64_t C, int store) {
    for (int64_t c = 0; c < C; c++) {
        float total = 0.0f;
        for (int64_t r0 = 0; r0 < N; r0 += 64) {
            const int64_t r1 = r0 + 64 < N ? r0 + 64 : N;
            float p[8], t;
            for (int y = 0; y < 8; y++) {
                p[y] = 0.0f;
                for (int64_t r = r0 + y; r < r1; r += 8) p[y] += x[r * C + c];
            }
            t = p[0];
            for (int y = 1; y < 8; y++) t += p[y];
            total = r0 == 0 ? t : total + t;
        }
        dst[c] = store ? total : dst[c] + total;
    }
}

static float *dev_floats(const float *h, int64_t n) {
    float *d = NULL;
    GF_CHECK_OK(gf_cuda_malloc((void **)&d, (size_t)n * sizeof *d));
    GF_CHECK_OK(gf_cuda_upload(d, h, (size_t)n * sizeof *h));
    return d;
}

/* n values of mixed signs and magnitudes (2^-8 .. 2^8), so that another order of the additions
 * gives other bits */
static float *values(int64_t n, uint64_t seed) {
    gf_rng rng;
    gf_rng_seed(&rng, seed);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)gf_rng_normal(&rng) * ldexpf(1.0f, (int)gf_rng_below(&rng, 17) - 8);
    return v;
}

/* the device's sums (dst_dev, C) have the bits of want (C) */
static int same_bits(const char *what, const float *dst_dev, const float *want, int64_t C, int64_t N, int run) {
    float *got = download(dst_dev, C);
    int64_t first;
    const int64_t bad = bits_differ(got, want, C, &first);
    GF_CHECK(!bad, "%s, N %lld, C %lld, run %d: %lld of %lld sums differ, first [%lld]: %.9g, want %.9g", what,
             (long long)N, (long long)C, run, (long long)bad, (long long)C, (long long)first,
             bad ? got[first] : 0.0, bad ? want[first] : 0.0);
    free(got);
    return bad == 0;
}

GF_TEST(cuda, colsum_one_launch_keeps_the_two_stage_order) {
    static const int64_t shape[][2] = {{1, 5}, {63, 40}, {64, 33}, {65, 100}, {200, 1}, {1000, 70}, {3001, 35}};
    gf_ctx ctx;
    gf_rng rng;
    gf_rng_seed(&rng, 7);
    gf_ctx_init(&ctx, 0, &rng);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        const int64_t N = shape[i][0], C = shape[i][1];
        float *a = values(N * C, 100 + i), *b = values(N * C, 200 + i), *start = values(C, 300 + i);
        float *da = dev_floats(a, N * C), *db = dev_floats(b, N * C), *sa = dev_floats(start, C),
              *sb = dev_floats(start, C);
        float *wa = malloc((size_t)C * sizeof *wa), *wb = malloc((size_t)C * sizeof *wb);
        for (int run = 0; run < 2; run++) { /* the second: every counter was left at 0 */
            /* one sum, stored */
            colsum_order(wa, a, N, C, 1);
            gf_ck_colsums(&ctx, sa, da, 1, NULL, NULL, 0, N, C);
            GF_REQUIRE_OK(gf_cuda_sync());
            same_bits("one sum, stored", sa, wa, C, N, run);
            /* two at once: a added onto the sum just made, b stored */
            colsum_order(wa, a, N, C, 0);
            colsum_order(wb, b, N, C, 1);
            gf_ck_colsums(&ctx, sa, da, 0, sb, db, 1, N, C);
            GF_REQUIRE_OK(gf_cuda_sync());
            same_bits("two sums, a added", sa, wa, C, N, run);
            same_bits("two sums, b stored", sb, wb, C, N, run);
            gf_ctx_reset(&ctx);
        }
        gf_cuda_free(da);
        gf_cuda_free(db);
        gf_cuda_free(sa);
        gf_cuda_free(sb);
        free(a), free(b), free(start), free(wa), free(wb);
        if (gf_test_failed_now()) break;
    }
    /* the counters every launch starts from are 0 after them all */
    unsigned z[GF_CUDA_COUNTERS];
    GF_REQUIRE_OK(gf_cuda_download(z, gf_cuda_counters(1), sizeof z));
    int64_t nonzero = 0;
    for (int i = 0; i < GF_CUDA_COUNTERS; i++) nonzero += z[i] != 0;
    GF_CHECK(nonzero == 0, "%lld of %d counters are not 0 after the sums", (long long)nonzero, GF_CUDA_COUNTERS);
    gf_ctx_free(&ctx);
}

/* Captured once, launched, replayed: each launch of the graph gives the sums' bits (a counter
 * left at anything but 0 would leave a strip without a last block, and its sums unwritten). */
GF_TEST(cuda, colsum_in_a_replayed_graph) {
    const int64_t N = 500, C = 70;
    gf_ctx ctx;
    gf_rng rng;
    gf_rng_seed(&rng, 8);
    gf_ctx_init(&ctx, 0, &rng);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    float *a = values(N * C, 11), *b = values(N * C, 12), *wa = malloc((size_t)C * sizeof *wa),
          *wb = malloc((size_t)C * sizeof *wb), *nan = malloc((size_t)C * sizeof *nan);
    for (int64_t c = 0; c < C; c++) nan[c] = NAN;
    colsum_order(wa, a, N, C, 1);
    colsum_order(wb, b, N, C, 1);
    float *da = dev_floats(a, N * C), *db = dev_floats(b, N * C), *sa = dev_floats(nan, C), *sb = dev_floats(nan, C);
    gf_ck_colsums(&ctx, sa, da, 1, sb, db, 1, N, C); /* the arena grows here, not in the capture */
    GF_REQUIRE_OK(gf_cuda_sync());
    gf_ctx_reset(&ctx);
    gf_cuda_graph *g = NULL;
    int redo = 0;
    GF_REQUIRE_OK(gf_cuda_graph_begin());
    gf_ck_colsums(&ctx, sa, da, 1, sb, db, 1, N, C);
    GF_REQUIRE_OK(gf_cuda_graph_launch(&g, &redo));
    GF_REQUIRE(!redo && g, "the capture was dropped");
    for (int run = 0; run < 3; run++) {
        if (run) GF_REQUIRE_OK(gf_cuda_upload(sa, nan, (size_t)C * sizeof *nan));
        if (run) GF_REQUIRE_OK(gf_cuda_upload(sb, nan, (size_t)C * sizeof *nan));
        if (run) GF_REQUIRE_OK(gf_cuda_graph_replay(g));
        GF_REQUIRE_OK(gf_cuda_sync());
        same_bits("graph, a", sa, wa, C, N, run);
        same_bits("graph, b", sb, wb, C, N, run);
    }
    gf_cuda_graph_free(g);
    gf_ctx_reset(&ctx);
    gf_ctx_free(&ctx);
    gf_cuda_free(da);
    gf_cuda_free(db);
    gf_cuda_free(sa);
    gf_cuda_free(sb);
    free(a), free(b), free(wa), free(wb), free(nan);
}

#endif
