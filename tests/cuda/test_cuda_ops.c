/* test_cuda_ops.c — suite cuda: every CUDA op's forward and backward against the CPU op.
 *
 * Each case builds the same inputs on both devices (random, awkward shapes: one row, D = 100,
 * widths that are not multiples of 32, row counts over a column-sum chunk), runs the op, and
 * compares the output; then it runs backward from the gradient checks' probe loss
 * S = Σ out ⊙ r (gf_tape_backward_from(out, r), the same random r on both devices) and compares
 * every input gradient. Input gradients start non-zero, so the CUDA backward must accumulate as
 * the CPU one does. Agreement is normwise: max|gpu - cpu| <= 1e-4 · max|cpu| per tensor (FP32).
 * Each GPU case then runs a second time from the same state and must give the same bits
 * (no floating-point atomics decide a sum). A chain of ops checks the tape's device paths:
 * activation gradients stored fresh or zeroed, a tensor used twice, the tied head.
 *
 * Without a visible GPU the suite's gate closes it: one line "SKIP cuda: ...", nothing counted.
 * In a build against the emulator (-Demulate_cuda=true) it opens, after one line saying so.
 */
#include "cuda_check.h"

#include <string.h>

GF_TEST_GATE(cuda) {
    static char why[300];
    gf_cuda_info info;
    gf_cuda_probe(&info);
    if (!gf_cuda_built()) return "built without CUDA";
    if (info.n_devices == 0) {
        snprintf(why, sizeof why, "no CUDA device visible: %s", info.why);
        return why;
    }
#ifdef GF_CUDA_EMULATOR /* said once per suite: what passes here was not run on a GPU */
    if (gf_test_require_gpu()) return "the CUDA emulator is not a GPU";
    printf("NOTE  cuda: on %s: the kernels' logic is checked, not a GPU (docs/cuda.md \"The emulator\")\n", info.name);
    fflush(stdout);
#endif
    return NULL;
}

#ifdef GF_HAVE_CUDA

/* ---- the ops ---- */

static gf_tensor *b_linear(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_linear(c, in[0], in[1], in[2]); }
static gf_tensor *b_linear_nob(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_linear(c, in[0], in[1], NULL); }

static void linear_cases(gf_precision prec) {
    /* x shape (ndim, dims), OUT, bias */
    static const struct { int32_t nd; int64_t s[3]; int64_t out; int bias; } k[] = {
        {2, {1, 100}, 37, 1},  {3, {3, 5, 100}, 100, 1}, {3, {2, 7, 33}, 65, 0},
        {2, {257, 100}, 300, 1}, {2, {1, 1}, 1, 1},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = prec ? "linear bf16" : "linear", .f = k[i].bias ? b_linear : b_linear_nob,
                     .precision = prec, .tol = prec ? BF16_TOL : 0,
                     .fwd_tol = TOL}; /* x and W are leaves: the same rounding on both */
        int64_t in_w = k[i].s[k[i].nd - 1], sw[2] = {k[i].out, in_w}, sb[1] = {k[i].out};
        add_input(&c, k[i].nd, k[i].s, 10 + i, 1.0f);
        add_input(&c, 2, sw, 20 + i, 0.3f);
        if (k[i].bias) add_input(&c, 1, sb, 30 + i, 0.5f);
        GF_CHECK(check_case(&c) == 0, "linear case %zu", i);
        case_free(&c);
    }
}

GF_TEST(cuda, linear) { linear_cases(GF_PREC_FP32); }
GF_TEST(cuda, linear_bf16) { linear_cases(GF_PREC_BF16); }

static gf_tensor *b_add(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_add(c, in[0], in[1]); }
static gf_tensor *b_add_self(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_add(c, in[0], in[0]); }

GF_TEST(cuda, add) {
    static const struct { int32_t na; int64_t a[3]; int32_t nb; int64_t b[3]; } k[] = {
        {2, {1, 100}, 2, {1, 100}}, {3, {3, 7, 100}, 2, {7, 100}}, {3, {3, 7, 100}, 1, {100}},
        {2, {200, 37}, 1, {37}}, {3, {2, 3, 5}, 3, {2, 3, 5}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "add", .f = b_add};
        add_input(&c, k[i].na, k[i].a, 40 + i, 1.0f);
        add_input(&c, k[i].nb, k[i].b, 50 + i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "add case %zu", i);
        case_free(&c);
    }
    /* a + a: both gradient contributions land in one buffer */
    op_case c = {.what = "add(x, x)", .f = b_add_self};
    int64_t s[2] = {3, 100};
    add_input(&c, 2, s, 60, 1.0f);
    GF_CHECK(check_case(&c) == 0, "add(x, x)");
    case_free(&c);
}

static gf_tensor *b_ln(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_layernorm(c, in[0], in[1], in[2], 1e-5f); }

GF_TEST(cuda, layernorm) {
    static const struct { int32_t nd; int64_t s[3]; } k[] = {
        {2, {1, 100}}, {2, {5, 33}}, {2, {130, 100}}, {3, {3, 1, 1030}}, {2, {2, 1}}, {3, {2, 3, 256}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "layernorm", .f = b_ln};
        int64_t D = k[i].s[k[i].nd - 1], sg[1] = {D};
        add_input(&c, k[i].nd, k[i].s, 70 + i, 2.0f);
        add_input(&c, 1, sg, 80 + i, 0.2f);
        add_input(&c, 1, sg, 90 + i, 0.5f);
        for (int64_t j = 0; j < D; j++) c.cpu[1]->data[j] += 1.0f; /* gains near 1 */
        dev_free(c.gpu[1]);
        c.gpu[1] = dev_copy(c.cpu[1]);
        GF_CHECK(check_case(&c) == 0, "layernorm case %zu", i);
        case_free(&c);
    }
}

static gf_tensor *b_gelu(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_gelu(c, in[0]); }

GF_TEST(cuda, gelu) {
    static const struct { int32_t nd; int64_t s[3]; float scale; } k[] = {
        {2, {1, 100}, 1.0f}, {3, {3, 7, 100}, 4.0f}, {1, {1}, 1.0f}, {2, {3, 33337}, 2.0f},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "gelu", .f = b_gelu};
        add_input(&c, k[i].nd, k[i].s, 100 + i, k[i].scale);
        GF_CHECK(check_case(&c) == 0, "gelu case %zu", i);
        case_free(&c);
    }
}

typedef struct emb_user {
    const int32_t *ids;
    int32_t nd;
    int64_t shape[2];
} emb_user;

static gf_tensor *b_emb(gf_ctx *c, gf_tensor **in, void *u) {
    const emb_user *e = u;
    return gf_embedding(c, in[0], e->ids, e->nd, e->shape);
}

GF_TEST(cuda, embedding) {
    static const int32_t rep[21] = {3, 0, 3, 49, 1, 3, 7, 7, 7, 0, 12, 3, 49, 2, 2, 3, 9, 8, 3, 3, 1};
    static const int32_t same[5] = {4, 4, 4, 4, 4}, one[1] = {0};
    int32_t many[300];
    for (int i = 0; i < 300; i++) many[i] = (i * 7919 + 13) % 1000 % (i % 3 ? 1000 : 17); /* repeats, spread */
    struct { int64_t V, D; emb_user u; } k[] = {
        {50, 100, {rep, 2, {3, 7}}}, {10, 33, {same, 1, {5}}}, {1, 100, {one, 2, {1, 1}}}, {1000, 33, {many, 2, {3, 100}}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        op_case c = {.what = "embedding", .f = b_emb, .user = &k[i].u};
        int64_t st[2] = {k[i].V, k[i].D};
        add_input(&c, 2, st, 110 + i, 1.0f);
        GF_CHECK(check_case(&c) == 0, "embedding case %zu", i);
        case_free(&c);
    }
}

/* A language-model-like chain: embedding + positions, linear, GELU, residual add, LayerNorm,
 * tied head. Activations get fresh or zeroed device gradients from the tape, h feeds two ops
 * and the table two (lookup and head), so gradients meet in one buffer from several ops. */
typedef struct chain_user {
    const int32_t *ids;
    int64_t B, L;
} chain_user;

static gf_tensor *b_chain(gf_ctx *c, gf_tensor **in, void *u) {
    const chain_user *cu = u;
    gf_tensor *table = in[0], *pos = in[1], *w = in[2], *ln = in[3];
    int64_t s[2] = {cu->B, cu->L};
    gf_tensor *h = gf_add(c, gf_embedding(c, table, cu->ids, 2, s), pos);
    gf_tensor *f = gf_gelu(c, gf_linear(c, h, w, NULL));
    gf_tensor *y = gf_layernorm(c, gf_add(c, f, h), ln, ln, 1e-5f);
    return gf_linear(c, y, table, NULL);
}

GF_TEST(cuda, chain_of_ops) {
    int32_t ids[3 * 7];
    for (int i = 0; i < 21; i++) ids[i] = (i * 5 + 1) % 11;
    chain_user u = {ids, 3, 7};
    op_case c = {.what = "chain", .f = b_chain, .user = &u};
    int64_t st[2] = {11, 100}, sp[2] = {7, 100}, sw[2] = {100, 100}, sl[1] = {100};
    add_input(&c, 2, st, 120, 1.0f);
    add_input(&c, 2, sp, 121, 0.5f);
    add_input(&c, 2, sw, 122, 0.1f);
    add_input(&c, 1, sl, 123, 1.0f);
    GF_CHECK(check_case(&c) == 0, "chain");
    case_free(&c);
}

/* the chain's inputs for B × L ids of a 97-token vocabulary and width D: token table, positions,
 * a weight, the layer norm's vector (seeds seed..seed+3) */
static void chain_inputs(op_case *c, int32_t *ids, int64_t B, int64_t L, int64_t D, uint64_t seed) {
    for (int64_t i = 0; i < B * L; i++) ids[i] = (int32_t)((i * 31 + 3) % 97);
    int64_t st[2] = {97, D}, sp[2] = {L, D}, sw[2] = {D, D}, sl[1] = {D};
    add_input(c, 2, st, seed, 1.0f);
    add_input(c, 2, sp, seed + 1, 0.5f);
    add_input(c, 2, sw, seed + 2, 0.1f);
    add_input(c, 1, sl, seed + 3, 1.0f);
}

/* The device step arena: growth chains chunks in the first step, reset coalesces them, and
 * from then on a step calls no cudaMalloc — also when later batches hold more distinct ids than
 * the first (the embedding's backward index must not size itself by them). */
GF_TEST(cuda, device_arena_steady_state) {
    int32_t ids[8 * 128];
    chain_user u = {ids, 8, 128};
    op_case c = {.what = "chain (large)", .f = b_chain, .user = &u};
    chain_inputs(&c, ids, 8, 128, 256, 130);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    int64_t nout = 8 * 128 * 97, mallocs[4];
    float *r = malloc((size_t)nout * sizeof(float));
    for (int64_t i = 0; i < nout; i++) r[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < 8 * 128; i++) ids[i] = (i * 31 + 3) % (step == 0 ? 5 : 97 - step); /* 5, then 96..94 ids */
        gf_tensor *y = b_chain(&ctx, c.gpu, &u);
        gf_tape_backward_from(&ctx, y, r);
        GF_CHECK_OK(gf_cuda_sync());
        gf_ctx_reset(&ctx);
        mallocs[step] = ctx.cuda->n_mallocs;
    }
    GF_CHECK(mallocs[0] > 1, "the first step should have grown the arena (%lld cudaMalloc)", (long long)mallocs[0]);
    GF_CHECK(mallocs[1] == mallocs[0] && mallocs[3] == mallocs[0] && !ctx.cuda->first->next,
             "cudaMalloc calls after steps 1..4: %lld %lld %lld %lld", (long long)mallocs[0], (long long)mallocs[1],
             (long long)mallocs[2], (long long)mallocs[3]);
    GF_CHECK(gf_cuda_arena_capacity(ctx.cuda) >= ctx.cuda->high_water, "one chunk of the high-water mark");
    free(r);
    gf_ctx_free(&ctx);
    case_free(&c);
}

/* GF_CUDA_ARENA_DEBUG=1 (the compute-sanitizer runs): every request of a step is its own
 * cudaMalloc, all freed at the reset, and the step computes the same bits as in the bump arena. */
/* A later step a little larger than the first (a timed bench step's marker node, 512 bytes) fits
 * the coalesced chunk: reset sizes it to the high-water mark and a sixteenth more (and 1 MiB), so
 * it calls no cudaMalloc (device_arena_mallocs_timed was 2 on the bf16 quickstart when the chunk
 * was the high-water mark exactly). */
GF_TEST(cuda, device_arena_fits_a_slightly_larger_step) {
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0)); /* a 1 MiB first chunk */
    for (int i = 0; i < 6; i++) gf_cuda_arena_alloc(ctx.cuda, (size_t)1 << 20); /* a first step of 6 MiB: chained */
    gf_ctx_reset(&ctx);
    const int64_t mallocs = ctx.cuda->n_mallocs;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 6; i++) gf_cuda_arena_alloc(ctx.cuda, (size_t)1 << 20);
        gf_cuda_arena_alloc(ctx.cuda, 512 + 4096 * (size_t)step); /* a little more each step */
        gf_ctx_reset(&ctx);
    }
    GF_CHECK(ctx.cuda->n_mallocs == mallocs, "cudaMalloc in later steps a little larger than the first: %lld, then %lld",
             (long long)mallocs, (long long)ctx.cuda->n_mallocs);
    GF_CHECK_OK(gf_cuda_sync());
    gf_ctx_free(&ctx);
}

GF_TEST(cuda, device_arena_debug_mode) {
    int32_t ids[4 * 64];
    chain_user u = {ids, 4, 64};
    op_case c = {.what = "chain", .f = b_chain, .user = &u};
    chain_inputs(&c, ids, 4, 64, 64, 140);
    int64_t nout = 4 * 64 * 97;
    float *r = malloc((size_t)nout * sizeof(float)), *out[2];
    for (int64_t i = 0; i < nout; i++) r[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    int64_t grown[2][3];
    for (int debug = 0; debug < 2; debug++) {
        if (debug) setenv("GF_CUDA_ARENA_DEBUG", "1", 1);
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
        GF_CHECK(ctx.cuda->debug == debug, "debug mode %d, asked %d", ctx.cuda->debug, debug);
        out[debug] = malloc((size_t)nout * sizeof(float));
        for (int step = 0; step < 3; step++) {
            int64_t before = ctx.cuda->n_mallocs;
            gf_tensor *y = b_chain(&ctx, c.gpu, &u);
            gf_tape_backward_from(&ctx, y, r);
            GF_CHECK_OK(gf_cuda_download(out[debug], y->data, (size_t)nout * sizeof(float)));
            GF_CHECK(!debug || ctx.cuda->n_dbg == (size_t)(ctx.cuda->n_mallocs - before),
                     "step %d: %zu live allocations, %lld cudaMalloc", step, ctx.cuda->n_dbg,
                     (long long)(ctx.cuda->n_mallocs - before));
            gf_ctx_reset(&ctx);
            GF_CHECK(ctx.cuda->n_dbg == 0, "step %d: %zu allocations left after the reset", step, ctx.cuda->n_dbg);
            grown[debug][step] = ctx.cuda->n_mallocs - before;
        }
        gf_ctx_free(&ctx);
        unsetenv("GF_CUDA_ARENA_DEBUG");
    }
    GF_CHECK(grown[1][1] >= 8 && grown[1][2] == grown[1][1], "debug mode: %lld, %lld cudaMalloc in steps 2, 3",
             (long long)grown[1][1], (long long)grown[1][2]);
    GF_CHECK(grown[0][1] == 0 && grown[0][2] == 0, "bump arena: %lld, %lld cudaMalloc in steps 2, 3",
             (long long)grown[0][1], (long long)grown[0][2]);
    GF_CHECK(!memcmp(out[0], out[1], (size_t)nout * sizeof(float)), "the debug arena changed the step's output");
    free(out[0]);
    free(out[1]);
    free(r);
    case_free(&c);
}

/* The pinned staging of host arrays (gf_cuda_stage, src/core/cuda/arena.c): steps that read
 * nothing back (the only waits are the resets' own, each for the step GF_CUDA_STAGES - 1 before),
 * each staging arrays the host overwrites at once, the third step larger than the first two.
 * Every staged array must arrive whole (copied on the stream into a buffer that outlives the
 * steps); the copies of the first step, and of the step that outgrew the buffers, are pageable;
 * once every buffer has held a large step none is reallocated. On the emulator: the first
 * GF_CUDA_STAGES - 1 resets do not wait at all (GF_STEP_RING deferred training steps queue
 * without a wait), and a buffer reused before the copies of its last step were waited for stops
 * the test (pinned memory written while a copy is in flight). */
GF_TEST(cuda, staging_pinned_buffers_in_turn) {
    enum { NS = GF_CUDA_STAGES, STEPS = 3 * NS, PER = 3, MAXN = 3000 };
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_REQUIRE_OK(gf_ctx_use_cuda(&ctx, 0));
    gf_cuda_arena *a = ctx.cuda;
    int32_t *out = NULL, host[MAXN];
    int64_t want_n = 0, sizes[STEPS][PER], allocs[STEPS], pageable[STEPS];
    for (int st = 0; st < STEPS; st++)
        for (int k = 0; k < PER; k++) {
            sizes[st][k] = (st < 2 ? 500 : MAXN) - 7 * k; /* the third step stages more */
            want_n += sizes[st][k];
        }
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&out, (size_t)want_n * sizeof *out));
    GF_REQUIRE_OK(gf_cuda_sync());
#ifdef GF_CUDA_EMULATOR
    const unsigned long waits0 = gf_emu_waits();
#endif
    int64_t at = 0;
    for (int st = 0; st < STEPS; st++) {
        for (int k = 0; k < PER; k++) {
            int64_t n = sizes[st][k];
            for (int64_t i = 0; i < n; i++) host[i] = (int32_t)(st * 1000003 + k * 7919 + i);
            const void *d = gf_cuda_stage(a, host, (size_t)n * sizeof *host);
            memset(host, 0xA5, sizeof host); /* the caller may reuse its array at once */
            GF_CHECK(cudaMemcpyAsync(out + at, d, (size_t)n * sizeof *out, cudaMemcpyDeviceToDevice,
                                     gf_cuda_stream()) == cudaSuccess, "copy out");
            at += n;
        }
        gf_ctx_reset(&ctx); /* no synchronisation: the next step is queued behind this one */
        /* the reset waited for an older step only: the event of the step just queued is still
         * to be waited for */
        const int ended = (a->cur + NS - 1) % NS; /* the buffer of the step just queued */
        if (st >= 3) GF_CHECK(a->stage[ended].pending, "step %d: the reset waited for the step it ended", st + 1);
#ifdef GF_CUDA_EMULATOR
        if (st == NS - 2)
            GF_CHECK(gf_emu_waits() == waits0, "the first %d resets waited for the stream %lu times (0)", NS - 1,
                     gf_emu_waits() - waits0);
#endif
        allocs[st] = a->n_host_allocs;
        pageable[st] = a->n_pageable;
    }
    GF_CHECK_OK(gf_cuda_sync());
    int32_t *got = malloc((size_t)want_n * sizeof *got);
    GF_REQUIRE_OK(gf_cuda_download(got, out, (size_t)want_n * sizeof *got));
    int64_t bad = 0;
    at = 0;
    for (int st = 0; st < STEPS; st++)
        for (int k = 0; k < PER; k++)
            for (int64_t i = 0; i < sizes[st][k]; i++, at++)
                bad += got[at] != (int32_t)(st * 1000003 + k * 7919 + i);
    GF_CHECK(bad == 0, "%lld of %lld staged values did not arrive", (long long)bad, (long long)want_n);
    /* step 1 has no buffer yet, step 3 outgrows the one sized after step 2 */
    GF_CHECK(pageable[0] == PER && pageable[1] == PER && pageable[2] == 2 * PER, "pageable copies in the first "
             "three steps: %lld %lld %lld", (long long)pageable[0], (long long)pageable[1] - pageable[0],
             (long long)pageable[2] - pageable[1]);
    GF_CHECK(pageable[STEPS - 1] == pageable[2], "no pageable copy after the third step (%lld, then %lld)",
             (long long)pageable[2], (long long)pageable[STEPS - 1]);
    /* each buffer is grown at its first use, and the three sized before the large steps once more */
    GF_CHECK(allocs[NS + 2] >= NS && allocs[STEPS - 1] == allocs[NS + 2], "pinned allocations after steps %d and %d: "
             "%lld %lld", NS + 3, STEPS, (long long)allocs[NS + 2], (long long)allocs[STEPS - 1]);
    for (int i = 0; i < NS; i++)
        GF_CHECK(a->stage[i].cap >= 3 * MAXN * sizeof(int32_t), "staging buffer %d holds %zu bytes, not a step", i,
                 a->stage[i].cap);
    free(got);
    gf_cuda_free(out);
    gf_ctx_free(&ctx);
}
#endif
