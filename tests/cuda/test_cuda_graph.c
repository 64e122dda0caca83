/* test_cuda_graph.c — suite cuda: the training step as a CUDA graph ([run] cuda_graph,
 * docs/cuda.md "CUDA graphs") against the same steps launched one by one: the same bits in the
 * records, weights, gradients and AdamW moments, over epochs whose last batch is partial, a step
 * skipped for a non-finite loss, and a step that needs more device memory and staging than any
 * before (its capture dropped, the step run again uncaptured). A step that synchronises cannot be
 * captured: it fails, naming the call. On the emulator also: no host wait in a captured step. */
#include "cuda_check.h"
#include "gflow.h"
#include "gflow/session.h"
#include "gflow/train.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA

/* the two blocks' four arrays hold the same bits */
static void same_blocks(const char *what, const gf_params *a, const gf_params *b) {
    static const char *names[GF_PP_COUNT] = {"data", "grad", "m", "v"};
    for (int part = 0; part < GF_PP_COUNT; part++) {
        float *x = get_part(a, (gf_params_part)part), *y = get_part(b, (gf_params_part)part);
        int64_t first;
        const int64_t bad = bits_differ(x, y, a->n, &first);
        GF_CHECK(!bad, "%s: %s: %lld of %lld floats differ, first [%lld]: %.9g (graph) vs %.9g", what, names[part],
                 (long long)bad, (long long)a->n, (long long)first, bad ? x[first] : 0.0, bad ? y[first] : 0.0);
        free(x);
        free(y);
    }
}

/* a GPU session of the tiny recipe, its training loader of B rows; *items its windows */
static void open_gpu(gf_session *s, int graph, int64_t B, int64_t *items) {
    gf_recipe r;
    GF_REQUIRE_OK(gf_test_tiny_recipe(&r, graph ? "graph" : "nograph", "grassmann", 40, "cuda"));
    r.run.cuda_graph = graph;
    r.data.train_fraction = 0.05; /* a few batches an epoch */
    GF_REQUIRE_OK(gf_session_open(s, &r, 0));
    GF_REQUIRE_OK(gf_session_train_loader(s, B, items, 0));
    s->ctx.training = 1;
}

/* the weights of the block's last parameter set to NaN (poison) or back (saved), on the host */
static void poison_last(gf_session *s, float *saved, int back) {
    const gf_param *q = s->params->items[s->params->n_items - 1];
    float *d = get_part(s->params, GF_PP_DATA);
    for (int64_t i = 0; i < gf_tensor_numel(&q->t); i++) {
        if (!back) saved[i] = d[q->offset + i];
        d[q->offset + i] = back ? saved[i] : NAN;
    }
    GF_CHECK_OK(gf_params_set(s->params, GF_PP_DATA, d));
    free(d);
}

/* the task's own table, and a forward that stages extra_bytes more (an outgrown step), counting
 * the graph session's forwards (host passes); its feed's signature bumped for such a step, so
 * that it is captured (a replay would not run the forward that stages more) */
static const gf_task_ops *inner_task;
static size_t extra_bytes;
static int64_t graph_forwards;
static int64_t feed_bumped(gf_session *s, int64_t lo, int64_t n) {
    return inner_task->feed_rows(s, lo, n) + (extra_bytes >= ((size_t)1 << 20) ? 1000000 : 0);
}
static gf_tensor *forward_staging_more(gf_session *s, int64_t lo, int64_t n) {
    graph_forwards += s->r.run.cuda_graph;
    if (extra_bytes) {
        void *h = calloc(1, extra_bytes);
        (void)gf_cuda_stage(s->ctx.cuda, h, extra_bytes);
        free(h);
    }
    return inner_task->forward_rows(s, lo, n);
}

/* K deferred steps in two sessions, [1] captured; flushed when the ring is full, around the
 * poisoned step and at the end; the records compared bit for bit at each flush */
GF_TEST(cuda, graph_steps_match_uncaptured_bitwise) {
    enum { K = 26, POISON = 9, MORE = 5, MORE_AGAIN = 13, ALLOC = 25 };
    int64_t replays_after_alloc = -1;
    /* a small extra copy staged inside a capture (the key unchanged): that graph holds a copy of
     * the step's, so the next step of the same key is captured again, and the one after replays */
    int64_t staged_at = -1, replays_after_staged[2] = {-1, -1}, prev_rows = 0;
    int alloc_set = 0;
    gf_session s[2];
    int64_t items[2], B = 8;
    open_gpu(&s[0], 0, B, &items[0]);
    if (items[0] % B == 0) B = 7; /* a partial last batch in every epoch */
    gf_session_close(&s[0]);
    open_gpu(&s[0], 0, B, &items[0]);
    open_gpu(&s[1], 1, B, &items[1]);
    const int shape_ok = items[0] == items[1] && items[0] % B != 0 && items[0] / B < 8; /* (the text is a format) */
    GF_REQUIRE(shape_ok, "%lld windows, batches of %lld",
               (long long)items[0], (long long)B);
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&s[0].r, &ac, &sch);
    gf_adamw_state st[2];
    gf_adamw_reset(s[0].params, &st[0]);
    gf_adamw_reset(s[1].params, &st[1]);
    const gf_param *last = s[0].params->items[s[0].params->n_items - 1];
    float *saved = malloc((size_t)gf_tensor_numel(&last->t) * sizeof(float));
    int partial = 0, skipped = 0;
    inner_task = s[0].task;
    gf_task_ops more = *inner_task;
    more.forward_rows = forward_staging_more;
    more.feed_rows = feed_bumped;
    graph_forwards = 0;
    s[0].task = s[1].task = &more;
#ifdef GF_CUDA_EMULATOR
    unsigned long launches = gf_emu_graph_launches();
#endif
    for (int64_t step = 0; step < K; step++) {
        int64_t rows[2];
        for (int i = 0; i < 2; i++) {
            GF_REQUIRE_OK(gf_session_next(&s[i], &rows[i]));
            if (rows[i] == 0) GF_REQUIRE_OK(gf_session_next(&s[i], &rows[i]));
            gf_rng_seed(&s[i].rng, 0x5DEECE66Dull ^ (uint64_t)(step + 1)); /* dropout's keys */
            if (step == POISON) poison_last(&s[i], saved, 0);
        }
        GF_REQUIRE(rows[0] == rows[1], "step %lld: %lld rows vs %lld", (long long)step + 1, (long long)rows[0],
                   (long long)rows[1]);
        partial += rows[0] < B;
        gf_step_in in = {.rows = rows[0], .lo = 0, .n = rows[0], .clip = s[0].r.optim.clip, .defer = 1};
        in.lr = gf_schedule_lr(&sch, step, (items[0] + B - 1) / B, K);
        gf_step_out out;
        /* 1 MiB more: the arena grows, the staging overflows (dropped, run again); later it fits */
        extra_bytes = step == MORE || step == MORE_AGAIN ? (size_t)1 << 20 : 0;
        /* step ALLOC: the second full batch in a row, which would replay the graph */
        if (step == ALLOC) alloc_set = rows[0] == B && prev_rows == B;
        /* the first full batch after a partial one past step 16: captured (its key is new) */
        if (staged_at < 0 && step > 16 && rows[0] == B && prev_rows < B) {
            staged_at = step;
            extra_bytes = 64;
        }
        prev_rows = rows[0];
        GF_REQUIRE_OK(gf_train_step(&s[0], &st[0], &ac, &in, &out));
#ifdef GF_CUDA_EMULATOR
        const unsigned long waits0 = gf_emu_waits();
#endif
        /* device memory allocated (and freed) between two steps: a buffer the graph holds may have
         * moved, so the step is captured again, not replayed */
        const gf_cuda_graph *g1 = gf_gpu_step_graph(s[1].gpu);
        const int64_t replays = g1 ? g1->n_replayed : 0;
        if (step == ALLOC) {
            void *p = NULL;
            GF_REQUIRE_OK(gf_cuda_malloc(&p, 4096));
            gf_cuda_free(p);
        }
        GF_REQUIRE_OK(gf_train_step(&s[1], &st[1], &ac, &in, &out));
        g1 = gf_gpu_step_graph(s[1].gpu);
        if (step == ALLOC) replays_after_alloc = g1 ? g1->n_replayed - replays : -1;
        if (staged_at >= 0 && (step == staged_at + 1 || step == staged_at + 2) && rows[0] == B)
            replays_after_staged[step - staged_at - 1] = g1 ? g1->n_replayed - replays : -1;
#ifdef GF_CUDA_EMULATOR /* a captured step: one graph launch, no wait */
        const unsigned long waits = gf_emu_waits() - waits0;
        if (step >= 2 && step != MORE) /* (the step that grows the arena waits for the stream to free it) */
            GF_CHECK(waits == 0, "step %lld: the host waited %lu times (0)", (long long)step + 1, waits);
        const unsigned long want = step > 0 && step != MORE;
        GF_CHECK(gf_emu_graph_launches() - launches == want, "step %lld: %lu graph launches (%lu)",
                 (long long)step + 1, gf_emu_graph_launches() - launches, want);
        launches = gf_emu_graph_launches();
#endif
        const int pend = gf_train_pending(&s[1]);
        if (!(pend == GF_STEP_RING || step == POISON - 1 || step == POISON || step == K - 1)) continue;
        gf_step_out done[2][GF_STEP_RING];
        int n[2];
        for (int i = 0; i < 2; i++) GF_REQUIRE_OK(gf_train_flush(&s[i], &st[i], done[i], &n[i]));
        GF_REQUIRE(n[0] == pend && n[1] == pend, "%d and %d records for %d steps", n[0], n[1], pend);
        for (int k = 0; k < pend; k++) {
            const gf_step_out *a = &done[1][k], *b = &done[0][k];
            GF_CHECK(!memcmp(&a->loss, &b->loss, sizeof a->loss) && !memcmp(&a->grad_norm, &b->grad_norm,
                                                                             sizeof a->grad_norm) &&
                         !a->nonfinite == !b->nonfinite && (!a->nonfinite || !strcmp(a->nonfinite, b->nonfinite)),
                     "step %lld: loss %.9g, norm %.17g, %s (graph); %.9g, %.17g, %s", (long long)(step - pend + k + 2),
                     (double)a->loss, a->grad_norm, a->nonfinite ? a->nonfinite : "applied", (double)b->loss,
                     b->grad_norm, b->nonfinite ? b->nonfinite : "applied");
            skipped += a->nonfinite != NULL;
        }
        GF_CHECK(st[0].step == st[1].step, "%lld and %lld AdamW steps", (long long)st[0].step, (long long)st[1].step);
        if (step == POISON)
            for (int i = 0; i < 2; i++) poison_last(&s[i], saved, 1);
        same_blocks("after a flush", s[1].params, s[0].params);
        if (gf_test_failed_now()) break;
    }
    const gf_cuda_graph *g = gf_gpu_step_graph(s[1].gpu);
    GF_CHECK(skipped == 1 && partial >= 2, "%d skipped steps (1), %d partial batches (2 or more)", skipped, partial);
    /* GF_CUDA_SYNC=1 (tools/gpu_check.sh's rerun of a failed test) waits after every call: no capture */
    if (gf_cuda_sync_mode()) GF_CHECK(!g, "a graph under GF_CUDA_SYNC=1");
    else GF_CHECK(g && g->n_launched == K - 2 && g->n_instantiated + g->n_updated + g->n_replayed == K - 2 &&
                      g->n_redone == 1 && g->n_replayed >= 6,
                  "graphs: %lld launched (%d), %lld instantiated, %lld updated, %lld replayed (6 or more), %lld "
                  "redone (1)", g ? (long long)g->n_launched : -1LL, K - 2, g ? (long long)g->n_instantiated : -1LL,
                  g ? (long long)g->n_updated : -1LL, g ? (long long)g->n_replayed : -1LL,
                  g ? (long long)g->n_redone : -1LL);
    /* a replayed step runs no forward on the host: the first step, each capture, and the step run
     * again (twice: its dropped capture, then uncaptured) did */
    if (g) GF_CHECK(graph_forwards == 1 + g->n_instantiated + g->n_updated + 2 * g->n_redone,
                    "%lld host forwards (%lld: the first step, %lld captures, %lld run again)", (long long)graph_forwards,
                    (long long)(1 + g->n_instantiated + g->n_updated + 2 * g->n_redone),
                    (long long)(g->n_instantiated + g->n_updated), (long long)g->n_redone);
    if (!gf_cuda_sync_mode()) {
        GF_CHECK(alloc_set && replays_after_alloc == 0,
                 "step %d: %s; %lld replays after a cudaMalloc (0)", ALLOC + 1,
                 alloc_set ? "the second full batch in a row" : "not the second full batch in a row (the data moved)",
                 (long long)replays_after_alloc);
        GF_CHECK(staged_at >= 0 && replays_after_staged[0] == 0 && replays_after_staged[1] == 1,
                 "after step %lld, whose capture staged a copy: %lld and %lld replays in the next two full steps "
                 "(0, 1)", (long long)staged_at + 1, (long long)replays_after_staged[0],
                 (long long)replays_after_staged[1]);
    }
#ifdef GF_CUDA_EMULATOR /* updated in place but for the steps with an extra copy and the ones after */
    GF_CHECK(g && g->n_instantiated == 5, "%lld graphs instantiated (5)", g ? (long long)g->n_instantiated : -1LL);
#endif
    GF_CHECK(!gf_gpu_step_graph(s[0].gpu), "cuda_graph = false made a graph");
    printf("  %d steps (%d partial, 1 skipped, 1 run again): %lld graphs instantiated, %lld updated in place, %lld "
           "replayed\n", K, partial, g ? (long long)g->n_instantiated : -1LL, g ? (long long)g->n_updated : -1LL,
           g ? (long long)g->n_replayed : -1LL);
    s[0].task = s[1].task = inner_task;
    free(saved);
    gf_session_close(&s[1]);
    gf_session_close(&s[0]);
}

/* A first step without dropout (ctx->training off: no keys counted), then steps with it: their
 * dropout draws its keys itself, inside the capture, as kernel arguments, so no graph of them may
 * be replayed (it would repeat the captured step's masks). Every step is captured, and the losses
 * and weights are those of the same steps without graphs. */
GF_TEST(cuda, graph_with_keys_drawn_inside_is_not_replayed) {
    enum { K = 6 };
    gf_session s[2];
    int64_t items[2], B = 4;
    open_gpu(&s[0], 0, B, &items[0]);
    open_gpu(&s[1], 1, B, &items[1]);
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&s[0].r, &ac, &sch);
    gf_adamw_state st[2];
    for (int i = 0; i < 2; i++) gf_adamw_reset(s[i].params, &st[i]);
    float loss[2][K];
    for (int64_t step = 0; step < K; step++) {
        for (int i = 0; i < 2; i++) {
            int64_t rows = 0;
            GF_REQUIRE_OK(gf_session_next(&s[i], &rows));
            if (rows == 0) GF_REQUIRE_OK(gf_session_next(&s[i], &rows));
            GF_REQUIRE(rows == B, "step %lld: %lld rows (%lld)", (long long)step + 1, (long long)rows, (long long)B);
            s[i].ctx.training = step > 0;
            gf_step_in in = {.rows = rows, .lo = 0, .n = rows, .clip = s[i].r.optim.clip, .lr = 1e-3};
            gf_step_out out;
            GF_REQUIRE_OK(gf_train_step(&s[i], &st[i], &ac, &in, &out));
            loss[i][step] = out.loss;
        }
        GF_CHECK(!memcmp(&loss[0][step], &loss[1][step], sizeof(float)), "step %lld: loss %.9g (graph), %.9g",
                 (long long)step + 1, (double)loss[1][step], (double)loss[0][step]);
    }
    same_blocks("after the steps", s[1].params, s[0].params);
    const gf_cuda_graph *g = gf_gpu_step_graph(s[1].gpu);
    if (!gf_cuda_sync_mode())
        GF_CHECK(g && g->n_launched == K - 1 && g->n_replayed == 0, "graphs: %lld launched (%d), %lld replayed (0)",
                 g ? (long long)g->n_launched : -1LL, K - 1, g ? (long long)g->n_replayed : -1LL);
    gf_session_close(&s[1]);
    gf_session_close(&s[0]);
}

/* gflow's device memory (gf_cuda_mem_held, gf_cuda_mem_peak: gflow bench's peak_device_mb) is
 * counted at every cudaMalloc and cudaFree it makes: with a GPU session open and trained for a
 * few steps (parameters, the queue, the step arena, scratch, constants), the bytes it holds have
 * grown by what the emulator's device memory has; a buffer allocated and freed raises the peak by
 * its size, which the held bytes then do not show; a reset brings the peak to the held bytes. */
GF_TEST(cuda, device_memory_counted_at_every_malloc) {
    const size_t held0 = gf_cuda_mem_held();
#ifdef GF_CUDA_EMULATOR
    const size_t emu0 = gf_emu_device_bytes();
#endif
    gf_session s;
    int64_t items, B = 4;
    open_gpu(&s, 1, B, &items);
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&s.r, &ac, &sch);
    gf_adamw_state st;
    gf_adamw_reset(s.params, &st);
    for (int step = 0; step < 3; step++) {
        int64_t rows = 0;
        GF_REQUIRE_OK(gf_session_next(&s, &rows));
        if (rows == 0) GF_REQUIRE_OK(gf_session_next(&s, &rows));
        gf_step_in in = {.rows = rows, .lo = 0, .n = rows, .clip = s.r.optim.clip, .lr = 1e-3};
        gf_step_out out;
        GF_REQUIRE_OK(gf_train_step(&s, &st, &ac, &in, &out));
    }
    const size_t grew = gf_cuda_mem_held() - held0;
    const size_t floor = (size_t)s.params->n * 4 * sizeof(float) + s.ctx.cuda->high_water;
    GF_CHECK(grew >= floor, "held %zu bytes more with the session open, less than parameters x 4 and the arena (%zu)",
             grew, floor);
#ifdef GF_CUDA_EMULATOR
    GF_CHECK(gf_emu_device_bytes() - emu0 == grew, "the emulator holds %zu bytes more, gflow counted %zu",
             gf_emu_device_bytes() - emu0, grew);
#endif
    gf_cuda_mem_peak_reset();
    const size_t held = gf_cuda_mem_held(), big = (size_t)8 << 20;
    void *p = NULL;
    GF_REQUIRE_OK(gf_cuda_malloc(&p, big));
    gf_cuda_free(p);
    GF_CHECK(gf_cuda_mem_held() == held && gf_cuda_mem_peak() == held + big,
             "after 8 MiB allocated and freed: held %zu (%zu), peak %zu (%zu)", gf_cuda_mem_held(), held,
             gf_cuda_mem_peak(), held + big);
    gf_cuda_mem_peak_reset();
    GF_CHECK(gf_cuda_mem_peak() == held, "peak %zu after a reset, held %zu", gf_cuda_mem_peak(), held);
    gf_session_close(&s);
}

/* a forward that reads its loss back: a host wait inside the step */
static gf_tensor *syncing_forward(gf_session *s, int64_t lo, int64_t n) {
    gf_tensor *loss = inner_task->forward_rows(s, lo, n);
    float l;
    (void)gf_tensor_to_host(loss, &l, 1); /* its failure spoils the capture, which reports it */
    return loss;
}

GF_TEST(cuda, graph_capture_names_a_host_sync) {
    gf_session s;
    int64_t items;
    open_gpu(&s, 1, 4, &items);
    gf_adamw_cfg ac;
    gf_schedule_cfg sch;
    gf_recipe_optim_cfg(&s.r, &ac, &sch);
    gf_adamw_state st;
    gf_adamw_reset(s.params, &st);
    inner_task = s.task;
    gf_task_ops wrapped = *s.task;
    wrapped.forward_rows = syncing_forward;
    s.task = &wrapped;
    gf_status rc[2];
    for (int step = 0; step < 2; step++) { /* the first runs uncaptured, the second is captured */
        int64_t rows;
        GF_REQUIRE_OK(gf_session_next(&s, &rows));
        gf_step_in in = {.rows = rows, .lo = 0, .n = rows, .lr = 1e-3, .clip = 1.0};
        gf_step_out out;
        rc[step] = gf_train_step(&s, &st, &ac, &in, &out);
    }
    const char *msg = gf_last_error();
    GF_CHECK(!rc[0], "the uncaptured step failed");
    GF_CHECK(rc[1] == GF_E_EXTERNAL && strstr(msg, "captured as a CUDA graph did not run") &&
                 strstr(msg, "cudaMemcpyAsync(dst_host") && strstr(msg, "src/core/cuda/runtime.c") &&
                 strstr(msg, "cudaErrorStreamCaptureUnsupported") && strstr(msg, "cuda_graph = false"),
             "status %d: %s", (int)rc[1], msg);
    s.task = inner_task;
    gf_session_close(&s);
}

#endif
