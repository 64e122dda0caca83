/* test_cuda_train.c — suite cuda: the GPU training path around the ops.
 *
 *  - AdamW over a device parameter block (one kernel) against gf_adamw_step on the host: a block
 *    with all four parameter kinds, sizes across chunk boundaries, eight steps with changing
 *    learning rates and gradients of mixed magnitudes (zeros included): the same bits (the
 *    kernel rounds every operation as the CPU does; see src/optim/cuda/adamw.cu);
 *  - the global gradient norm (a two-stage reduction in double) against the host's: relative
 *    1e-10 (both sum in double, in different orders; n <= 3e6 terms), the same bits on a second
 *    run; clipping: the same bits when both norms round to the same float coefficient, else
 *    within one float rounding (2.5e-7 relative); no change when the coefficient is >= 1 or
 *    max_norm <= 0; a NaN or an infinity in one gradient makes the norm non-finite and leaves
 *    the gradients alone;
 *  - the lowest index of a non-finite gradient (gf_cuda_first_nonfinite, two stages with a
 *    minimum) against a scan on the host, and nothing written while its flag is off;
 *  - the step queue (the clip, the non-finite check and AdamW decided on the device, records read
 *    back at a flush) against the old device path on a second block: the same bits, skipped steps,
 *    clipping and the sticky stop included (the test's comment says how);
 *  - sessions: a GPU session starts from the CPU session's bits; a checkpoint saved from either
 *    loads into the other with the same bits (weights, m, v), and exports the same safetensors;
 *    the block moves back to the host and again to the device unchanged; [run] tf32 sets cuBLAS's
 *    math mode;
 *  - training: 60 steps of the tiny recipe of tests/train (dropout 0.1, clip 1, cosine warm-up)
 *    on both devices, per family, through gf_train_step: the loss within 1e-4 relative for the
 *    first 20 steps and 1e-3 after, the gradient norm within 1e-3, evaluation within 1e-3, no
 *    cudaMalloc after the second step. Why these bounds: every GPU op differs from the CPU's by
 *    rounding only (cuBLAS and OpenBLAS sum in other orders; the dropout masks are the same hash),
 *    and the two-rank MPI run of this recipe, whose gradients differ from the single process's by
 *    the order of one addition, stays within ~1e-6 relative over 216 steps (tests/mpi/test_mpi.sh);
 *    a wrong kernel (a dropped mask, a wrong gradient) moves the loss by 1e-2 or more within a few
 *    steps. The measured maxima are printed (the first GPU run should put them in docs/cuda.md).
 *    The GPU's steps are deferred and flushed as the trainer does (a full ring of 16, then every
 *    7 steps, the last): the same steps applied. On the emulator also: from the third step on a
 *    deferred step never waits for the stream (not in the forward, not for the loss or the norm,
 *    not in the staging's turn), a flush waits once, and nothing is uploaded from pageable memory
 *    (every host array goes through the pinned staging);
 *  - the trainer: a run stopped on the GPU resumes on the CPU, and one stopped on the CPU resumes on
 *    the GPU; both finish on the CPU run's curve (metrics.tsv rows within 1e-3); [train] nonfinite
 *    = stop and = skip on both devices: the same failing step and tensor, the same rows.
 * Tests that train need every op of the model on the GPU (docs/cuda.md lists those that are).
 */
#include "cuda_check.h"
#include "gflow.h"
#include "gflow/session.h"
#include "gflow/train.h"
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA

/* ---- the parameter block ---- */

/* all four kinds; 37x100 and 5000x3 and 4097x2 cross chunks of GF_PARAM_CHUNK floats (12 chunks) */
static void make_block(gf_params *p, int64_t *n_chunks) {
    static const struct { const char *name; gf_param_kind kind; int32_t nd; int64_t s[2]; } k[] = {
        {"l.weight", GF_PK_WEIGHT, 2, {37, 100}}, {"l.bias", GF_PK_BIAS, 1, {37}},
        {"ln.weight", GF_PK_NORM, 1, {100}},      {"ln.bias", GF_PK_NORM, 1, {100}},
        {"emb.weight", GF_PK_EMBED, 2, {5000, 3}}, {"one.bias", GF_PK_BIAS, 1, {1}},
        {"w2.weight", GF_PK_WEIGHT, 2, {4097, 2}},
    };
    gf_params_init(p);
    int64_t nc = 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        gf_tensor *t = gf_params_add(p, k[i].name, k[i].kind, k[i].nd, k[i].s);
        nc += (gf_tensor_numel(t) + GF_PARAM_CHUNK - 1) / GF_PARAM_CHUNK;
    }
    GF_ASSERT(gf_params_alloc(p) == GF_OK, "alloc");
    if (n_chunks) *n_chunks = nc;
}

static void fill(float *x, int64_t n, uint64_t seed, float scale) {
    gf_rng r;
    gf_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)gf_rng_normal(&r) * scale;
}

/* gradients of mixed magnitudes (1e-8 .. 1e2), every 17th exactly zero */
static void fill_grads(float *g, int64_t n, uint64_t seed) {
    gf_rng r;
    gf_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        double mag = pow(10.0, -8.0 + 10.0 * gf_rng_uniform(&r));
        g[i] = i % 17 == 0 ? 0.0f : (float)(gf_rng_normal(&r) * mag);
    }
}

/* the device block holds the host block's bits in parts [lo, hi) */
static int same_parts(const char *what, const gf_params *dev, const gf_params *host, int lo, int hi) {
    static const char *names[GF_PP_COUNT] = {"data", "grad", "m", "v"};
    int fails = 0;
    for (int part = lo; part < hi; part++) {
        float *d = get_part(dev, (gf_params_part)part);
        const float *h = gf_params_part_ptr(host, (gf_params_part)part);
        int64_t first;
        int64_t bad = bits_differ(d, h, host->n, &first);
        if (bad) {
            gf_test_fail(__FILE__, __LINE__, "%s: %s: %lld of %lld floats differ, first [%lld]: %.9g vs %.9g (CPU)",
                         what, names[part], (long long)bad, (long long)host->n, (long long)first, d[first], h[first]);
            fails++;
        }
        free(d);
    }
    return fails;
}

GF_TEST(cuda, params_block_on_device) {
    gf_params c, g;
    int64_t nc = 0;
    make_block(&c, &nc);
    make_block(&g, NULL);
    for (int part = 0; part < GF_PP_COUNT; part++) {
        fill(gf_params_part_ptr(&c, (gf_params_part)part), c.n, 1 + (uint64_t)part, 0.5f);
        memcpy(gf_params_part_ptr(&g, (gf_params_part)part), gf_params_part_ptr(&c, (gf_params_part)part),
               (size_t)c.n * sizeof(float));
    }
    GF_REQUIRE_OK(gf_params_to_device(&g, GF_DEV_CUDA));
    GF_CHECK_OK(gf_params_to_device(&g, GF_DEV_CUDA)); /* already there */
    GF_CHECK(g.device == GF_DEV_CUDA && g.n_chunks == nc && g.chunks, "device %d, %lld chunks (want %lld)",
             (int)g.device, (long long)g.n_chunks, (long long)nc);
    for (int64_t i = 0; i < g.n_items; i++) {
        const gf_param *q = g.items[i];
        GF_CHECK(q->t.device == GF_DEV_CUDA && q->t.data == g.data + q->offset && q->t.grad == g.grad + q->offset,
                 "%s points into the device block", q->name);
    }
    same_parts("after the move", &g, &c, 0, GF_PP_COUNT);
    /* zero-grad: one memset; the other arrays untouched */
    gf_params_zero_grad(&g);
    gf_params_zero_grad(&c);
    same_parts("zero_grad", &g, &c, 0, GF_PP_COUNT);
    /* set and get whole arrays */
    fill(c.m, c.n, 9, 2.0f);
    GF_REQUIRE_OK(gf_params_set(&g, GF_PP_M, c.m));
    same_parts("set m", &g, &c, GF_PP_M, GF_PP_M + 1);
    /* back to the host and again to the device, unchanged */
    GF_REQUIRE_OK(gf_params_to_device(&g, GF_DEV_CPU));
    GF_CHECK(g.device == GF_DEV_CPU && g.chunks == NULL && g.items[0]->t.device == GF_DEV_CPU, "on the host");
    for (int part = 0; part < GF_PP_COUNT; part++)
        GF_CHECK(!memcmp(gf_params_part_ptr(&g, (gf_params_part)part), gf_params_part_ptr(&c, (gf_params_part)part),
                         (size_t)c.n * sizeof(float)), "part %d after the round trip", part);
    GF_REQUIRE_OK(gf_params_to_device(&g, GF_DEV_CUDA));
    same_parts("to the device again", &g, &c, 0, GF_PP_COUNT);
    gf_params_free(&g);
    gf_params_free(&c);
    GF_CHECK_OK(gf_cuda_sync());
}

/* two blocks (make_block) with the same weights, b on the device, a too when both_on_device; an
 * AdamW configuration with decayed biases, undecayed norms, decayed embeddings: all keep
 * factors; both optimizer states reset */
static void adamw_pair(gf_params *a, gf_params *b, int both_on_device, gf_adamw_cfg *cfg, gf_adamw_state *sa,
                       gf_adamw_state *sb) {
    make_block(a, NULL);
    make_block(b, NULL);
    fill(a->data, a->n, 3, 0.5f);
    memcpy(b->data, a->data, (size_t)a->n * sizeof(float));
    GF_ASSERT(gf_params_to_device(b, GF_DEV_CUDA) == GF_OK, "to device: %s", gf_last_error());
    if (both_on_device) GF_ASSERT(gf_params_to_device(a, GF_DEV_CUDA) == GF_OK, "to device: %s", gf_last_error());
    gf_adamw_cfg_default(cfg);
    cfg->weight_decay = 0.1;
    cfg->decay[GF_PK_BIAS] = 1;
    gf_adamw_reset(a, sa);
    gf_adamw_reset(b, sb);
}

GF_TEST(cuda, adamw_matches_cpu_bitwise) {
    gf_params c, g;
    gf_adamw_cfg cfg;
    gf_adamw_state sc, sg;
    adamw_pair(&c, &g, 0, &cfg, &sc, &sg);
    static const double lrs[] = {1e-3, 3e-3, 1e-2, 5e-4, 2e-3, 1e-3, 7e-3, 1e-4};
    for (int s = 0; s < 8; s++) {
        fill_grads(c.grad, c.n, 100 + (uint64_t)s);
        GF_REQUIRE_OK(gf_params_set(&g, GF_PP_GRAD, c.grad));
        gf_adamw_step(&c, &sc, &cfg, lrs[s]);
        gf_adamw_step(&g, &sg, &cfg, lrs[s]);
        GF_REQUIRE_OK(gf_cuda_sync());
        char what[64];
        snprintf(what, sizeof what, "AdamW step %d", s + 1);
        if (same_parts(what, &g, &c, 0, GF_PP_COUNT)) break; /* grad too: the step leaves it alone */
    }
    GF_CHECK(sc.step == 8 && sg.step == 8, "steps %lld %lld", (long long)sc.step, (long long)sg.step);
    gf_adamw_reset(&g, &sg);
    gf_adamw_reset(&c, &sc);
    same_parts("reset", &g, &c, GF_PP_M, GF_PP_COUNT);
    gf_params_free(&g);
    gf_params_free(&c);
}

/* one parameter of n floats on both devices, the same random gradients */
static void one_param_pair(gf_params *c, gf_params *g, int64_t n, uint64_t seed, float scale) {
    gf_params *ps[2] = {c, g};
    for (int k = 0; k < 2; k++) {
        gf_params_init(ps[k]);
        int64_t s[1] = {n};
        gf_params_add(ps[k], "w.weight", GF_PK_WEIGHT, 1, s);
        GF_ASSERT(gf_params_alloc(ps[k]) == GF_OK, "alloc");
    }
    fill(c->grad, n, seed, scale);
    memcpy(g->grad, c->grad, (size_t)n * sizeof(float));
    GF_ASSERT(gf_params_to_device(g, GF_DEV_CUDA) == GF_OK, "to device: %s", gf_last_error());
}

GF_TEST(cuda, grad_norm_and_clip_match_cpu) {
    /* one element, under a warp, one stage-1 block's share and one over it, over 1024 blocks' shares */
    static const int64_t sizes[] = {1, 31, 2048, 2049, 1048583, 3000001};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        gf_params c, g;
        one_param_pair(&c, &g, n, 40 + k, k % 2 ? 1e-3f : 3.0f);
        const double nc = gf_params_grad_norm(&c);
        double s1 = 0, s2 = 0;
        GF_REQUIRE_OK(gf_params_grad_sumsq(&g, &s1));
        GF_REQUIRE_OK(gf_params_grad_sumsq(&g, &s2));
        GF_CHECK(!memcmp(&s1, &s2, sizeof s1), "n %lld: the reduction is not deterministic (%.17g, %.17g)",
                 (long long)n, s1, s2);
        const double ng = sqrt(s1);
        GF_CHECK(fabs(ng - nc) <= 1e-10 * nc, "n %lld: norm %.17g, CPU %.17g", (long long)n, ng, nc);
        /* clipping to a third of the norm */
        float *before = get_part(&g, GF_PP_GRAD);
        const double max_norm = nc / 3.0;
        double rc = 0, rg = 0;
        GF_CHECK_OK(gf_clip_grad(&c, max_norm, &rc));
        GF_CHECK_OK(gf_clip_grad(&g, max_norm, &rg));
        GF_CHECK(rc == nc && rg == ng, "the pre-clip norms are returned");
        float *after = get_part(&g, GF_PP_GRAD);
        const float cc = (float)(max_norm / (nc + 1e-6)), cg = (float)(max_norm / (ng + 1e-6));
        int64_t first;
        if (cc == cg) {
            GF_CHECK(bits_differ(after, c.grad, n, &first) == 0, "n %lld: clipped gradient [%lld] %.9g vs %.9g",
                     (long long)n, (long long)first, first >= 0 ? after[first] : 0.0f, first >= 0 ? c.grad[first] : 0.0f);
        } else {
            double worst = 0;
            for (int64_t i = 0; i < n; i++)
                if (c.grad[i] != 0.0f) worst = fmax(worst, fabs((double)after[i] / c.grad[i] - 1.0));
            GF_CHECK(worst <= 2.5e-7, "n %lld: clip coefficients %.9g vs %.9g, worst relative %.3g", (long long)n,
                     (double)cg, (double)cc, worst);
        }
        /* no change: a coefficient >= 1, and clipping off */
        GF_CHECK_OK(gf_clip_grad(&g, 10.0 * nc, &rg));
        GF_CHECK_OK(gf_clip_grad(&g, 0.0, &rg));
        float *kept = get_part(&g, GF_PP_GRAD);
        GF_CHECK(bits_differ(kept, after, n, &first) == 0, "n %lld: gradient changed without clipping", (long long)n);
        free(before);
        free(after);
        free(kept);
        gf_params_free(&c);
        gf_params_free(&g);
    }
}

GF_TEST(cuda, nonfinite_gradient_detected) {
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        gf_params c, g;
        make_block(&c, NULL);
        make_block(&g, NULL);
        fill_grads(c.grad, c.n, 7);
        c.grad[c.items[4]->offset + 4321] = bad[k]; /* inside emb.weight, its second chunk */
        memcpy(g.grad, c.grad, (size_t)c.n * sizeof(float));
        GF_REQUIRE_OK(gf_params_to_device(&g, GF_DEV_CUDA));
        double norm = 0;
        GF_CHECK_OK(gf_clip_grad(&g, 1.0, &norm));
        GF_CHECK(!isfinite(norm) && (k ? isinf(norm) : isnan(norm)), "case %d: norm %g", k, norm);
        same_parts("a non-finite norm leaves the gradients alone", &g, &c, GF_PP_GRAD, GF_PP_GRAD + 1);
        gf_params_free(&c);
        gf_params_free(&g);
    }
    /* the largest float's square does not overflow the double sum (and is exact in it) */
    gf_params h;
    gf_params_init(&h);
    int64_t s[1] = {5};
    gf_params_add(&h, "w.weight", GF_PK_WEIGHT, 1, s);
    GF_REQUIRE_OK(gf_params_alloc(&h));
    h.grad[2] = FLT_MAX;
    GF_REQUIRE_OK(gf_params_to_device(&h, GF_DEV_CUDA));
    double norm = 0;
    GF_CHECK_OK(gf_clip_grad(&h, 0.0, &norm));
    GF_CHECK(norm == (double)FLT_MAX, "norm %.17g", norm);
    gf_params_free(&h);
}

/* gf_cuda_first_nonfinite against a scan on the host: sizes under a warp, over one stage-1 block's
 * share and over 1024 blocks' shares; non-finite values (NaN, ±inf) at the start, the end, in
 * several blocks at once (the lowest wins), none (-1); a zero flag leaves the output alone. */
GF_TEST(cuda, first_nonfinite_matches_host_scan) {
    static const int64_t sizes[] = {1, 31, 2049, 1048583};
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    int32_t *flag = NULL;
    int64_t *out = NULL;
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&flag, sizeof *flag));
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&out, sizeof *out));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        float *h = malloc((size_t)n * sizeof *h), *d = NULL;
        GF_REQUIRE_OK(gf_cuda_malloc((void **)&d, (size_t)n * sizeof *d));
        /* the positions set in each case (-1: unused; taken mod n, for the smallest n) */
        const int64_t cases[5][3] = {{-1, -1, -1}, {0, n - 1, -1}, {n - 1, -1, -1}, {n / 2, n / 3, n - 1},
                                     {n * 7 / 8, n / 5 + 1, n / 5 + 2}};
        for (int c = 0; c < 5; c++) {
            fill(h, n, 40 + (uint64_t)c, 100.0f);
            for (int j = 0; j < 3; j++)
                if (cases[c][j] >= 0) h[cases[c][j] % n] = bad[(c + j) % 3];
            int64_t want = -1;
            for (int64_t i = 0; i < n && want < 0; i++)
                if (!isfinite(h[i])) want = i;
            GF_REQUIRE_OK(gf_cuda_upload(d, h, (size_t)n * sizeof *h));
            const int32_t on = 1, off = 0;
            const int64_t mark = -7;
            int64_t got = 0;
            GF_REQUIRE_OK(gf_cuda_upload(out, &mark, sizeof mark));
            GF_REQUIRE_OK(gf_cuda_upload(flag, &off, sizeof off));
            GF_REQUIRE_OK(gf_cuda_first_nonfinite(d, n, flag, out));
            GF_REQUIRE_OK(gf_cuda_download(&got, out, sizeof got));
            GF_CHECK(got == mark, "n %lld case %d: the flag off, yet %lld written", (long long)n, c, (long long)got);
            GF_REQUIRE_OK(gf_cuda_upload(flag, &on, sizeof on));
            GF_REQUIRE_OK(gf_cuda_first_nonfinite(d, n, flag, out));
            GF_REQUIRE_OK(gf_cuda_download(&got, out, sizeof got));
            GF_CHECK(got == want, "n %lld case %d: first non-finite at %lld, the host's %lld", (long long)n, c,
                     (long long)got, (long long)want);
        }
        gf_cuda_free(d);
        free(h);
    }
    gf_cuda_free(flag);
    gf_cuda_free(out);
}

/* one step of the old device path (gf_clip_grad, the non-finite check, gf_adamw_step) and its
 * record, as gf_step_queue_push decides it */
static gf_step_rec old_step(gf_params *a, gf_adamw_state *sa, const gf_adamw_cfg *cfg, double lr, double max_norm,
                            float loss, int stopped) {
    gf_step_rec r = {.loss = loss, .bad = -1};
    if (gf_clip_grad(a, max_norm, &r.grad_norm)) gf_test_fail(__FILE__, __LINE__, "clip: %s", gf_last_error());
    r.skipped = stopped || !isfinite(loss) || !isfinite(r.grad_norm);
    if (!r.skipped) gf_adamw_step(a, sa, cfg, lr);
    return r;
}

/* the queue's records against the old path's; the blocks' four arrays the same bits */
static void same_records(const char *what, const gf_step_rec *got, const gf_step_rec *want, int n, gf_params *q,
                         gf_params *a) {
    for (int i = 0; i < n; i++)
        GF_CHECK(!memcmp(&got[i].grad_norm, &want[i].grad_norm, sizeof(double)) &&
                     !memcmp(&got[i].loss, &want[i].loss, sizeof(float)) && got[i].skipped == want[i].skipped &&
                     got[i].bad == want[i].bad,
                 "%s, record %d: norm %.17g loss %g skipped %d bad %lld; the old path: %.17g %g %d %lld", what, i,
                 got[i].grad_norm, (double)got[i].loss, got[i].skipped, (long long)got[i].bad, want[i].grad_norm,
                 (double)want[i].loss, want[i].skipped, (long long)want[i].bad);
    same_parts(what, q, a, 0, GF_PP_COUNT);
}

/* The step queue (gflow/optim.h: the clip, the non-finite check and AdamW decided on the device)
 * against the old device path on a second block (whose AdamW adamw_matches_cpu_bitwise holds to
 * the CPU's bits, and whose norm is the same reduction): 12 steps in sequences of 5, 4 and 3,
 * the learning rate and max_norm varying (none, a coefficient >= 1, clips), a NaN gradient at step
 * 4 and an infinite loss at step 7, both skipped (so the device's step count, and the bias
 * corrections after them, are checked). After each flush: the same bits in data, grad, m, v; the
 * records the same (norm bits, loss, skipped, the NaN's index); the applied steps counted. Then
 * stop_sticky: a NaN at the second step of a sequence of four skips the last three; the next
 * sequence applies again. */
GF_TEST(cuda, step_queue_matches_device_step_bitwise) {
    gf_params a, q;
    gf_adamw_cfg cfg;
    gf_adamw_state sa, sq;
    adamw_pair(&a, &q, 1, &cfg, &sa, &sq);
    gf_step_queue *queue = NULL;
    GF_REQUIRE_OK(gf_step_queue_open(&queue));
    enum { S = 12 };
    float *loss_dev = NULL, *g = malloc((size_t)a.n * sizeof *g);
    GF_REQUIRE_OK(gf_cuda_malloc((void **)&loss_dev, (S + 6) * sizeof(float)));
    static const double lrs[S] = {1e-3, 3e-3, 1e-2, 5e-4, 2e-3, 1e-3, 7e-3, 1e-4, 2e-3, 5e-3, 1e-3, 3e-4};
    static const double maxn[S] = {0, 1e9, 1.0, 1.0, 0.5, 0, 2.0, 1.0, 1e9, 0.3, 1.0, 0};
    const int64_t nan_at = a.items[2]->offset + 17; /* in ln.weight */
    gf_step_rec want[GF_STEP_RING], got[GF_STEP_RING];
    int queued = 0, n = 0, clipped = 0;
    for (int s = 0; s < S; s++) {
        fill_grads(g, a.n, 200 + (uint64_t)s);
        if (s == 3) g[nan_at] = NAN;
        const float loss = s == 6 ? INFINITY : 2.5f + 0.125f * (float)s;
        GF_REQUIRE_OK(gf_params_set(&a, GF_PP_GRAD, g));
        GF_REQUIRE_OK(gf_params_set(&q, GF_PP_GRAD, g));
        want[queued] = old_step(&a, &sa, &cfg, lrs[s], maxn[s], loss, 0);
        if (s == 3) want[queued].bad = nan_at;
        clipped += maxn[s] > 0 && isfinite(want[queued].grad_norm) && maxn[s] / (want[queued].grad_norm + 1e-6) < 1;
        queued++;
        GF_REQUIRE_OK(gf_cuda_upload(loss_dev + s, &loss, sizeof loss));
        GF_REQUIRE_OK(gf_step_queue_prepare(queue, &sq, &cfg, lrs[s], maxn[s], 0));
        GF_REQUIRE_OK(gf_step_queue_push(queue, &q, loss_dev + s));
        GF_CHECK(gf_step_queue_count(queue) == queued, "step %d: %d queued", s + 1, gf_step_queue_count(queue));
        if (s != 4 && s != 8 && s != S - 1) continue;
        GF_REQUIRE_OK(gf_step_queue_flush(queue, &sq, got, &n));
        GF_REQUIRE(n == queued, "flush after step %d: %d records for %d steps", s + 1, n, queued);
        char what[64];
        snprintf(what, sizeof what, "the flush after step %d", s + 1);
        same_records(what, got, want, n, &q, &a);
        GF_CHECK(sq.step == sa.step && gf_step_queue_count(queue) == 0, "%s: %lld steps applied, the old path %lld",
                 what, (long long)sq.step, (long long)sa.step);
        queued = 0;
        if (gf_test_failed_now()) break;
    }
    GF_CHECK(sa.step == S - 2 && clipped >= 3, "%lld steps applied (10), %d clipped (the cases changed)",
             (long long)sa.step, clipped);
    /* [train] nonfinite = stop: the sequence stops at its first skip */
    for (int s = 0; s < 6; s++) {
        fill_grads(g, a.n, 300 + (uint64_t)s);
        if (s == 1) g[nan_at + 5] = INFINITY;
        const float loss = 1.5f;
        GF_REQUIRE_OK(gf_params_set(&a, GF_PP_GRAD, g));
        GF_REQUIRE_OK(gf_params_set(&q, GF_PP_GRAD, g));
        want[queued] = old_step(&a, &sa, &cfg, 1e-3, 1.0, loss, s >= 1 && s < 4);
        if (s == 1) want[queued].bad = nan_at + 5;
        queued++;
        GF_REQUIRE_OK(gf_cuda_upload(loss_dev + S + s, &loss, sizeof loss));
        GF_REQUIRE_OK(gf_step_queue_prepare(queue, &sq, &cfg, 1e-3, 1.0, 1));
        GF_REQUIRE_OK(gf_step_queue_push(queue, &q, loss_dev + S + s));
        if (s != 3 && s != 5) continue;
        GF_REQUIRE_OK(gf_step_queue_flush(queue, &sq, got, &n));
        GF_REQUIRE(n == queued, "stop: %d records for %d steps", n, queued);
        same_records(s == 3 ? "a sequence stopped at its second step" : "the sequence after it", got, want, n, &q,
                     &a);
        GF_CHECK(sq.step == sa.step, "stop: %lld steps applied, the old path %lld", (long long)sq.step,
                 (long long)sa.step);
        queued = 0;
    }
    GF_CHECK(sa.step == S - 2 + 3, "the old path applied %lld steps (13)", (long long)sa.step);
    gf_step_queue_close(queue);
    gf_cuda_free(loss_dev);
    free(g);
    gf_params_free(&a);
    gf_params_free(&q);
}

/* ---- sessions ---- */

/* the training tests' tiny recipe (test_util.h), on `device` */
static gf_status tiny_recipe(gf_recipe *r, const char *name, const char *family, int64_t steps, gf_device device) {
    return gf_test_tiny_recipe(r, name, family, (long long)steps, gf_device_name(device));
}

GF_TEST(cuda, session_checkpoints_cross_devices) {
    gf_recipe rc, rg;
    GF_REQUIRE_OK(tiny_recipe(&rc, "ck", "grassmann", 10, GF_DEV_CPU));
    GF_REQUIRE_OK(tiny_recipe(&rg, "ck", "grassmann", 10, GF_DEV_CUDA));
    gf_session c, g;
    GF_REQUIRE_OK(gf_session_open_model(&c, &rc, 53, 1));
    GF_REQUIRE_OK(gf_session_open_model(&g, &rg, 53, 1));
    GF_CHECK(g.params->device == GF_DEV_CUDA && g.ctx.cuda, "the GPU session's block and arena on the device");
    GF_CHECK(c.params->device == GF_DEV_CPU && !c.ctx.cuda, "the CPU session on the host");
    /* the same rng draws on the host, then uploaded: the same starting bits */
    same_parts("initial weights", g.params, c.params, GF_PP_DATA, GF_PP_DATA + 1);
    char path[1024], path2[1024], ex1[1024], ex2[1024];
    snprintf(path, sizeof path, "%s/gpu.ckpt", gf_test_tmpdir());
    snprintf(path2, sizeof path2, "%s/cpu.ckpt", gf_test_tmpdir());
    snprintf(ex1, sizeof ex1, "%s/gpu.safetensors", gf_test_tmpdir());
    snprintf(ex2, sizeof ex2, "%s/cpu.safetensors", gf_test_tmpdir());
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    /* GPU -> CPU: new weights and moments on the device, saved, loaded on the host */
    gf_params *P = c.params;
    fill(P->data, P->n, 11, 0.1f);
    fill(P->m, P->n, 12, 0.01f);
    fill(P->v, P->n, 13, 0.001f);
    GF_REQUIRE_OK(gf_params_set(g.params, GF_PP_DATA, P->data));
    GF_REQUIRE_OK(gf_params_set(g.params, GF_PP_M, P->m));
    GF_REQUIRE_OK(gf_params_set(g.params, GF_PP_V, P->v));
    GF_REQUIRE_OK(gf_ckpt_save(path, g.params, &m));
    float *keep[3] = {get_part(P, GF_PP_DATA), get_part(P, GF_PP_M), get_part(P, GF_PP_V)};
    memset(P->data, 0, (size_t)P->n * sizeof(float));
    memset(P->m, 0, (size_t)P->n * sizeof(float));
    memset(P->v, 0, (size_t)P->n * sizeof(float));
    GF_REQUIRE_OK(gf_ckpt_load(path, P, NULL));
    int64_t first;
    GF_CHECK(bits_differ(P->data, keep[0], P->n, &first) == 0 && bits_differ(P->m, keep[1], P->n, &first) == 0 &&
                 bits_differ(P->v, keep[2], P->n, &first) == 0, "a GPU checkpoint loads on the CPU with its bits");
    /* the same weights export the same bytes from either device (the recipes in the metadata
     * made alike: they differ in [run] device) */
    c.r.run.device = g.r.run.device;
    GF_CHECK_OK(gf_session_export(&g, ex1));
    GF_CHECK_OK(gf_session_export(&c, ex2));
    size_t n1 = 0, n2 = 0;
    char *a = gf_test_slurp(ex1, &n1), *b = gf_test_slurp(ex2, &n2);
    GF_CHECK(a && b && n1 == n2 && !memcmp(a, b, n1), "exports differ (%zu, %zu bytes)", n1, n2);
    free(a);
    free(b);
    /* CPU -> GPU */
    fill(P->data, P->n, 21, 0.1f);
    fill(P->m, P->n, 22, 0.01f);
    fill(P->v, P->n, 23, 0.001f);
    GF_REQUIRE_OK(gf_ckpt_save(path2, P, &m));
    GF_REQUIRE_OK(gf_ckpt_load(path2, g.params, NULL));
    same_parts("a CPU checkpoint loaded on the GPU", g.params, P, GF_PP_DATA, GF_PP_COUNT);
    /* and the GPU's save of it is the CPU's file, byte for byte */
    GF_REQUIRE_OK(gf_ckpt_save(path, g.params, &m));
    a = gf_test_slurp(path, &n1);
    b = gf_test_slurp(path2, &n2);
    GF_CHECK(a && b && n1 == n2 && !memcmp(a, b, n1), "checkpoints of the same state differ by device");
    free(a);
    free(b);
    for (int i = 0; i < 3; i++) free(keep[i]);
    gf_session_close(&g);
    gf_session_close(&c);
    GF_CHECK_OK(gf_cuda_sync());
}

GF_TEST(cuda, tf32_recipe_key_sets_math_mode) {
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "tf", "grassmann", 10, GF_DEV_CUDA));
    r.run.tf32 = true;
    gf_session s;
    GF_REQUIRE_OK(gf_session_open_model(&s, &r, 53, 1));
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
    GF_CHECK(gf_cublas.get_math_mode(gf_cuda_blas(), &mode) == CUBLAS_STATUS_SUCCESS &&
                 mode == CUBLAS_TF32_TENSOR_OP_MATH, "tf32 = true: math mode %d", (int)mode);
    gf_session_close(&s);
    GF_REQUIRE_OK(gf_cuda_tf32(0));
    GF_CHECK(gf_cublas.get_math_mode(gf_cuda_blas(), &mode) == CUBLAS_STATUS_SUCCESS && mode == CUBLAS_DEFAULT_MATH,
             "tf32 off: math mode %d", (int)mode);
}

/* ---- training ---- */

/* K steps on both devices through gf_train_step, as the trainer drives it */
/* tol: the loss's relative bound for steps 1-20 (10x after: the runs drift apart) and the
 * validation loss's 10x; gn_tol the gradient norm's */
static void steps_match_in(const char *family, gf_precision prec, double tol, double gn_tol) {
    enum { K = 60, B = 8 };
    gf_recipe rc, rg;
    GF_REQUIRE_OK(tiny_recipe(&rc, "steps", family, K, GF_DEV_CPU));
    GF_REQUIRE_OK(tiny_recipe(&rg, "steps", family, K, GF_DEV_CUDA));
    rc.run.precision = rg.run.precision = prec;
    gf_session c, g;
    GF_REQUIRE_OK(gf_session_open(&c, &rc, 0));
    GF_REQUIRE_OK(gf_session_open(&g, &rg, 0));
    int64_t items = 0, items_g = 0;
    GF_REQUIRE_OK(gf_session_train_loader(&c, B, &items, 0));
    GF_REQUIRE_OK(gf_session_train_loader(&g, B, &items_g, 0));
    GF_REQUIRE(items == items_g && items >= B, "training windows %lld, %lld", (long long)items, (long long)items_g);
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&rc, &ac, &sch);
    gf_adamw_state oc, og;
    gf_adamw_reset(c.params, &oc);
    gf_adamw_reset(g.params, &og);
    c.ctx.training = g.ctx.training = 1;
    const int64_t spe = (items + B - 1) / B;
    double worst_early = 0, worst_late = 0, worst_gn = 0;
    int64_t mallocs = -1;
    gf_step_out out_c[K], done[GF_STEP_RING];
    int flushes = 0;
    for (int64_t step = 0; step < K; step++) {
        int64_t rows = 0, rows_g = 0;
        GF_REQUIRE_OK(gf_session_next(&c, &rows));
        if (rows == 0) GF_REQUIRE_OK(gf_session_next(&c, &rows));
        GF_REQUIRE_OK(gf_session_next(&g, &rows_g));
        if (rows_g == 0) GF_REQUIRE_OK(gf_session_next(&g, &rows_g));
        GF_REQUIRE(rows == rows_g, "step %lld: %lld rows vs %lld", (long long)step, (long long)rows, (long long)rows_g);
        /* the trainer's dropout keys for this step (src/train/trainer.c train_one) */
        uint64_t key = (uint64_t)rc.run.seed ^ 0x5DEECE66Dull ^ ((uint64_t)(step + 1) * 0x9E3779B97F4A7C15ull);
        gf_rng_seed(&c.rng, key);
        gf_rng_seed(&g.rng, key);
        gf_step_in in = {.rows = rows, .lo = 0, .n = rows, .clip = rc.optim.clip, .defer = 1};
        in.lr = gf_schedule_lr(&sch, step, spe, K);
        gf_step_out out_g;
        GF_REQUIRE_OK(gf_train_step(&c, &oc, &ac, &in, &out_c[step]));
        GF_REQUIRE(!out_c[step].queued, "a CPU step queued");
#ifdef GF_CUDA_EMULATOR
        unsigned long waits0 = gf_emu_waits(), pageable0 = gf_emu_pageable_uploads();
#endif
        GF_REQUIRE_OK(gf_train_step(&g, &og, &ac, &in, &out_g));
#ifdef GF_CUDA_EMULATOR /* a deferred step waits for nothing (the staging's turn included) */
        unsigned long waits = gf_emu_waits() - waits0;
        if (step >= 2) GF_CHECK(waits == 0, "%s step %lld: the host waited for the stream %lu times (0)", family,
                                (long long)step + 1, waits);
        const unsigned long pageable = gf_emu_pageable_uploads() - pageable0; /* all through the pinned staging */
        if (step >= 2) GF_CHECK(pageable == 0, "%s step %lld: %lu uploads from pageable memory", family,
                                (long long)step + 1, pageable);
#endif
        GF_REQUIRE(out_g.queued && gf_train_pending(&g) >= 1, "%s step %lld: not queued", family, (long long)step + 1);
        if (step == 1) mallocs = g.ctx.cuda->n_mallocs;
        /* flushed as the trainer does: when the ring is full (steps 1-16), every 7 steps after, at the end */
        const int pend = gf_train_pending(&g);
        if (!(pend == GF_STEP_RING || (step >= GF_STEP_RING && pend == 7) || step == K - 1)) continue;
#ifdef GF_CUDA_EMULATOR
        waits0 = gf_emu_waits();
#endif
        int n = 0;
        GF_REQUIRE_OK(gf_train_flush(&g, &og, done, &n));
        flushes++;
#ifdef GF_CUDA_EMULATOR /* one wait for the records of all of them */
        waits = gf_emu_waits() - waits0;
        GF_CHECK(waits == 1, "%s: the flush after step %lld waited %lu times (1)", family, (long long)step + 1, waits);
#endif
        GF_REQUIRE(n == pend && gf_train_pending(&g) == 0, "%s: %d records for %d steps", family, n, pend);
        GF_CHECK(og.step == oc.step, "%s step %lld: %lld steps applied on the GPU, %lld on the CPU", family,
                 (long long)step + 1, (long long)og.step, (long long)oc.step);
        for (int i = 0; i < n; i++) {
            const int64_t k = step - n + 1 + i;
            const gf_step_out *oc_k = &out_c[k], *og_k = &done[i];
            GF_REQUIRE(!oc_k->nonfinite && !og_k->nonfinite, "step %lld: non-finite (%s, %s)", (long long)k + 1,
                       oc_k->nonfinite ? oc_k->nonfinite : "-", og_k->nonfinite ? og_k->nonfinite : "-");
            const double dl = fabs((double)og_k->loss - oc_k->loss) / fabs((double)oc_k->loss);
            const double dg = fabs(og_k->grad_norm - oc_k->grad_norm) / oc_k->grad_norm;
            if (k < 20) worst_early = fmax(worst_early, dl);
            else worst_late = fmax(worst_late, dl);
            worst_gn = fmax(worst_gn, dg);
            GF_CHECK(dl <= (k < 20 ? tol : 10 * tol), "%s step %lld: loss %.9g on the GPU, %.9g on the CPU (rel %.3g)",
                     family, (long long)k + 1, (double)og_k->loss, (double)oc_k->loss, dl);
            GF_CHECK(dg <= gn_tol, "%s step %lld: gradient norm %.9g on the GPU, %.9g on the CPU (rel %.3g)", family,
                     (long long)k + 1, og_k->grad_norm, oc_k->grad_norm, dg);
        }
        if (gf_test_failed_now()) break;
    }
    GF_CHECK(flushes == 8, "%s: %d flushes (8: after steps 16, 23, ..., 58, 60)", family, flushes);
    GF_CHECK(g.ctx.cuda->n_mallocs == mallocs, "%s: cudaMalloc in the steady state (%lld after step 2, %lld at the end)",
             family, (long long)mallocs, (long long)g.ctx.cuda->n_mallocs);
    gf_eval_result ec, eg;
    GF_REQUIRE_OK(gf_session_eval(&c, GF_SPLIT_VALID, 3, &ec));
    GF_REQUIRE_OK(gf_session_eval(&g, GF_SPLIT_VALID, 3, &eg));
    GF_CHECK(ec.n_tokens == eg.n_tokens && fabs(eg.loss - ec.loss) <= 10 * tol * ec.loss,
             "%s: validation loss %.9g on the GPU, %.9g on the CPU (%lld, %lld tokens)", family, eg.loss, ec.loss,
             (long long)eg.n_tokens, (long long)ec.n_tokens);
    printf("  %s%s, %d steps: max relative loss difference %.3g (steps 1-20), %.3g (21-%d); gradient norm %.3g; "
           "validation loss %.3g\n", family, prec ? " bf16" : "", K, worst_early, worst_late, K, worst_gn, fabs(eg.loss - ec.loss) / ec.loss);
    gf_session_close(&g);
    gf_session_close(&c);
}

GF_TEST(cuda, train_steps_match_cpu_grassmann) { steps_match_in("grassmann", GF_PREC_FP32, 1e-4, 1e-3); }
GF_TEST(cuda, train_steps_match_cpu_transformer) { steps_match_in("transformer", GF_PREC_FP32, 1e-4, 1e-3); }
/* [run] precision = bf16 on both devices: the same rounded products; a GEMM input computed on each
 * device flips its bf16 rounding now and then (cuda_check.h, BF16_TOL), so the loss's bound is 30x
 * fp32's (measured on the emulator: loss 1.2e-4 to 4.7e-4 in steps 1-20, 5.3e-4 to 7.3e-4 after).
 * The gradient norm moves more, one step at a time: 1.2e-2 with the CPU's products, 1.7e-2 with
 * them summed last first (GF_CUDA_EMU_GEMM=reverse_k), 1.3e-2 under ASan, and 3.1e-2 at one step
 * (45; its loss 4.4e-4 off) with the kernels' multiply-adds contracted, as a GPU's libm and
 * cuBLAS differ from the CPU's in the last bits too (2026-11-28): bound 0.1 */
GF_TEST(cuda, train_steps_match_cpu_grassmann_bf16) { steps_match_in("grassmann", GF_PREC_BF16, 3e-3, 0.1); }

/* [run] precision = bf16 reads each product's operands from rounded copies made once (the weights'
 * mirror, the copies ops keep for the step or hold for their products, the head's rounded
 * dlogits: docs/cuda.md "bf16 operands"). They must be what rounding at each product gave: three
 * sessions of one recipe, one rounding every operand at its product (gf_cuda_bf16_reuse(0)), two
 * reusing the copies with each reuse checked against a fresh rounding (mode 2; a captured step is
 * not checked, so the third runs without CUDA graphs), give the same losses, gradient norms and
 * weights bit for bit, steps deferred as the trainer runs them; the mirror is bf16(weights) after
 * the steps and after gf_params_set. */
/* the bf16 bits of f rounded (gf_bf16_round, the CPU's rounding) */
static uint16_t bf16_bits(float f) {
    const float r = gf_bf16_round(f);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}

static void bf16_reuse_in(const char *family) {
    enum { K = 6, B = 8 };
    gf_recipe r;
    GF_REQUIRE_OK(tiny_recipe(&r, "reuse", family, K, GF_DEV_CUDA));
    r.run.precision = GF_PREC_BF16;
    gf_session s[3];
    for (int i = 0; i < 3; i++) {
        r.run.cuda_graph = i < 2;
        GF_REQUIRE_OK(gf_session_open(&s[i], &r, 0));
        GF_REQUIRE(s[i].params->data16, "a bf16 session keeps no bf16 weights");
    }
    int64_t items = 0;
    for (int i = 0; i < 3; i++) GF_REQUIRE_OK(gf_session_train_loader(&s[i], B, &items, 0));
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&r, &ac, &sch);
    gf_adamw_state st[3];
    int64_t checked0 = gf_cuda_bf16_checked(NULL), stale = 0;
    const int mode0 = gf_cuda_bf16_reuse(-1);
    gf_step_out out[3][K];
    for (int i = 0; i < 3; i++) {
        gf_adamw_reset(s[i].params, &st[i]);
        s[i].ctx.training = 1;
        gf_cuda_bf16_reuse(i == 0 ? 0 : 2);
        for (int64_t step = 0; step < K; step++) {
            int64_t rows = 0;
            GF_REQUIRE_OK(gf_session_next(&s[i], &rows));
            if (rows == 0) GF_REQUIRE_OK(gf_session_next(&s[i], &rows));
            gf_rng_seed(&s[i].rng, (uint64_t)r.run.seed ^ ((uint64_t)(step + 1) * 0x9E3779B97F4A7C15ull));
            gf_step_in in = {.rows = rows, .lo = 0, .n = rows, .clip = r.optim.clip, .defer = 1,
                             .lr = gf_schedule_lr(&sch, step, (items + B - 1) / B, K)};
            gf_step_out o;
            GF_REQUIRE_OK(gf_train_step(&s[i], &st[i], &ac, &in, &o));
        }
        int n = 0;
        GF_REQUIRE_OK(gf_train_flush(&s[i], &st[i], out[i], &n));
        GF_REQUIRE(n == K, "%s: %d records of %d steps", family, n, K);
    }
    gf_cuda_bf16_reuse(mode0);
    const int64_t checked = gf_cuda_bf16_checked(&stale) - checked0;
    for (int i = 1; i < 3; i++)
        for (int k = 0; k < K; k++)
            GF_CHECK(memcmp(&out[0][k].loss, &out[i][k].loss, sizeof(float)) == 0 &&
                         out[0][k].grad_norm == out[i][k].grad_norm,
                     "%s step %d: loss %.9g, gradient norm %.17g rounding at each product; %.9g, %.17g reusing copies "
                     "(%s)", family, k + 1, (double)out[0][k].loss, out[0][k].grad_norm, (double)out[i][k].loss,
                     out[i][k].grad_norm, i == 1 ? "CUDA graphs" : "no graphs");
    GF_CHECK(checked > 0 && stale == 0, "%s: %lld reused copies checked, %lld not their source's rounding", family,
             (long long)checked, (long long)stale);
    const int64_t n = s[0].params->n;
    float *w[2] = {malloc((size_t)n * sizeof(float)), malloc((size_t)n * sizeof(float))};
    uint16_t *m16 = malloc((size_t)n * sizeof(uint16_t));
    GF_REQUIRE(w[0] && w[1] && m16, "out of memory");
    for (int i = 0; i < 2; i++) GF_REQUIRE_OK(gf_params_get(s[i].params, GF_PP_DATA, w[i]));
    GF_CHECK(memcmp(w[0], w[1], (size_t)n * sizeof(float)) == 0, "%s: the weights differ after %d steps", family, K);
    /* the mirror, after AdamW's steps, then after the weights are set from the host (a resume) */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int64_t j = 0; j < n; j++) w[1][j] = (float)((j * 7919) % 1009) / 1009.0f - 0.5f;
            GF_REQUIRE_OK(gf_params_set(s[1].params, GF_PP_DATA, w[1]));
        }
        GF_REQUIRE_OK(gf_cuda_download(m16, s[1].params->data16, (size_t)n * sizeof(uint16_t)));
        int64_t bad = 0;
        for (int64_t j = 0; j < n; j++) bad += m16[j] != bf16_bits(w[1][j]);
        GF_CHECK(bad == 0, "%s: %lld of %lld mirrored weights are not their weight's rounding (%s)", family,
                 (long long)bad, (long long)n, pass ? "after gf_params_set" : "after AdamW");
    }
    printf("  %s bf16, %d steps: the same bits with every operand rounded at its product; %lld reused copies checked\n",
           family, K, (long long)checked);
    free(m16);
    free(w[0]);
    free(w[1]);
    for (int i = 2; i >= 0; i--) gf_session_close(&s[i]);
}

GF_TEST(cuda, bf16_reuse_keeps_the_bits_grassmann) { bf16_reuse_in("grassmann"); }
GF_TEST(cuda, bf16_reuse_keeps_the_bits_transformer) { bf16_reuse_in("transformer"); }

/* metrics.tsv row by row: the same rows (step, epoch, split), the same missing perplexities (a
 * skipped step's), losses within tol (non-finite ones alike); at least min_rows of them */
static void metrics_close(const char *a_dir, const char *b_dir, double tol, int min_rows) {
    char pa[800], pb[800];
    snprintf(pa, sizeof pa, "%s/metrics.tsv", a_dir);
    snprintf(pb, sizeof pb, "%s/metrics.tsv", b_dir);
    char *a = gf_test_slurp(pa, NULL), *b = gf_test_slurp(pb, NULL);
    GF_REQUIRE(a && b, "%s, %s", pa, pb);
    char *sa = NULL, *sb = NULL;
    char *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb);
    int rows = 0;
    for (; la && lb; la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb)) {
        long long s1, s2, e1, e2;
        char p1[16], p2[16], x1[32], x2[32];
        double l1, l2;
        if (sscanf(la, "%lld\t%lld\t%15s\t%lf\t%31s", &s1, &e1, p1, &l1, x1) != 5) continue; /* the header */
        const int got = sscanf(lb, "%lld\t%lld\t%15s\t%lf\t%31s", &s2, &e2, p2, &l2, x2);
        GF_REQUIRE(got == 5, "row '%s'", lb);
        GF_CHECK(s1 == s2 && e1 == e2 && !strcmp(p1, p2) && !strcmp(x1, "-") == !strcmp(x2, "-"),
                 "rows differ: '%s' vs '%s'", la, lb);
        GF_CHECK(isfinite(l1) ? fabs(l1 - l2) <= tol * fabs(l1) : isnan(l1) == isnan(l2) && l1 == l2,
                 "%s: '%s' vs '%s'", b_dir, lb, la);
        rows++;
    }
    GF_CHECK(!la && !lb && rows >= min_rows, "%s has %d rows like %s, and no more", b_dir, rows, a_dir);
    free(a);
    free(b);
}

GF_TEST(cuda, train_run_resumes_across_devices) {
    enum { STEPS = 30 };
    gf_recipe cpu, gpu;
    int intr = 0;
    char ref[700], g2c[700], c2g[700];
    snprintf(ref, sizeof ref, "%s/runs/xd-ref", gf_test_tmpdir());
    snprintf(g2c, sizeof g2c, "%s/runs/xd-g2c", gf_test_tmpdir());
    snprintf(c2g, sizeof c2g, "%s/runs/xd-c2g", gf_test_tmpdir());
    GF_REQUIRE_OK(tiny_recipe(&cpu, "xd-ref", "grassmann", STEPS, GF_DEV_CPU));
    gf_train_opts o = {.quiet = 1};
    GF_REQUIRE_OK(gf_train_run(&cpu, &o, &intr));
    /* stopped on the GPU at step 15 (mid-way between evaluations), finished on the CPU */
    GF_REQUIRE_OK(tiny_recipe(&gpu, "xd-g2c", "grassmann", STEPS, GF_DEV_CUDA));
    GF_REQUIRE_OK(tiny_recipe(&cpu, "xd-g2c", "grassmann", STEPS, GF_DEV_CPU));
    gf_train_opts stop = {.quiet = 1, .stop_after = 15};
    GF_REQUIRE_OK(gf_train_run(&gpu, &stop, &intr));
    GF_CHECK(intr, "stopped");
    gf_train_opts res = {.quiet = 1, .resume_dir = g2c};
    GF_REQUIRE_OK(gf_train_run(&cpu, &res, &intr)); /* the recipe's device, as --resume --set run.device=cpu */
    GF_CHECK(!intr, "finished");
    metrics_close(ref, g2c, 1e-3, 31);
    /* and the other way */
    GF_REQUIRE_OK(tiny_recipe(&cpu, "xd-c2g", "grassmann", STEPS, GF_DEV_CPU));
    GF_REQUIRE_OK(tiny_recipe(&gpu, "xd-c2g", "grassmann", STEPS, GF_DEV_CUDA));
    GF_REQUIRE_OK(gf_train_run(&cpu, &stop, &intr));
    res.resume_dir = c2g;
    GF_REQUIRE_OK(gf_train_run(&gpu, &res, &intr));
    GF_CHECK(!intr, "finished");
    metrics_close(ref, c2g, 1e-3, 31);
    /* gflow eval of the run that finished on the GPU runs on the CPU and agrees with the CPU run's */
    gf_eval_result er, eg;
    GF_REQUIRE_OK(gf_eval_run_dir(ref, "best", NULL, &er));
    GF_REQUIRE_OK(gf_eval_run_dir(c2g, "best", NULL, &eg));
    GF_CHECK(fabs(eg.loss - er.loss) <= 1e-3 * fabs(er.loss), "eval of the GPU-finished run: loss %.6f, CPU run %.6f",
             eg.loss, er.loss);
}

/* [train] nonfinite on the GPU, whose steps are decided on the device and read back at flushes:
 * the reliability tests' blow-up (tests/reliability/test_failures.c: weight decay 1e6 under a
 * warm-up of 10^6 steps makes the weights overflow after ~18 steps) on both devices, no evaluation
 * before the epoch's end, so the GPU flushes after steps 1, 17 and 30 (a full ring, the run's
 * end): the first bad step lies inside a flush, with later steps queued behind it. stop: both
 * fail at the same step naming the same tensor, and leave the same metrics.tsv rows (none after
 * the failing step); skip: both finish with the same rows, the same skipped steps (rows without
 * a perplexity) and the same count in summary.tsv. */
GF_TEST(cuda, train_nonfinite_policies_match_cpu) {
    static const char *base[] = {"optim.lr=1", "schedule.warmup_steps=1000000", "schedule.min_lr=0",
                                 "optim.weight_decay=1e6", "train.eval_every=0", NULL};
    static const char *const policy[2] = {"train.nonfinite=stop", "train.nonfinite=skip"};
    for (int k = 0; k < 2; k++) {
        char dir[2][700], msg[2][2000];
        int intr = 0;
        gf_status st[2];
        const char *sets[9];
        int ns = 0;
        for (int i = 0; base[i]; i++) sets[ns++] = base[i];
        sets[ns++] = policy[k];
        if (k) sets[ns++] = "train.max_skip_frac=1";
        for (int d = 0; d < 2; d++) {
            char name[64];
            snprintf(name, sizeof name, "nf-%s-%s", k ? "skip" : "stop", d ? "gpu" : "cpu");
            snprintf(dir[d], sizeof dir[d], "%s/runs/%s", gf_test_tmpdir(), name);
            gf_recipe r;
            GF_REQUIRE_OK(gf_test_tiny_recipe_sets(&r, name, 30, sets, ns));
            r.run.device = d ? GF_DEV_CUDA : GF_DEV_CPU;
            gf_train_opts o = {.quiet = 1};
            st[d] = gf_train_run(&r, &o, &intr);
            snprintf(msg[d], sizeof msg[d], "%s", st[d] ? gf_last_error() : "");
        }
        if (k == 0) {
            GF_CHECK(st[0] == GF_E_NONFINITE && st[1] == GF_E_NONFINITE, "stop: status %d (CPU), %d (GPU): %s | %s",
                     (int)st[0], (int)st[1], msg[0], msg[1]);
            /* "step N: non-finite value in TENSOR (loss L, grad norm G); stopped, ...": step and tensor */
            char *c0 = strstr(msg[0], " (loss "), *c1 = strstr(msg[1], " (loss ");
            GF_CHECK(c0 && c1 && c0 - msg[0] == c1 - msg[1] && !strncmp(msg[0], msg[1], (size_t)(c0 - msg[0])) &&
                         strstr(msg[1], ".weight"),
                     "stop: the GPU's message names another step or tensor:\n  CPU: %s\n  GPU: %s", msg[0], msg[1]);
        } else {
            GF_CHECK(!st[0] && !st[1], "skip: %s | %s", msg[0], msg[1]);
            const double s0 = gf_test_summary_value(dir[0], "skipped_steps"),
                         s1 = gf_test_summary_value(dir[1], "skipped_steps");
            GF_CHECK(s0 > 2 && s0 == s1, "skipped steps: %g on the CPU, %g on the GPU", s0, s1);
        }
        metrics_close(dir[0], dir[1], 1e-3, k ? 30 : 10);
    }
}
#endif
