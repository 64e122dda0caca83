/* gpu_step.c — the training step on the GPU (gflow/gpu_step.h): the queue, the graph and its
 * key, the arena a replay holds, and the counters, in one owner. */
#include "gflow/gpu_step.h"
#include "gflow/device.h"
#include "gflow/dist.h"
#include "gflow/threads.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gf_gpu_step {
    gf_step_queue *queue;        /* the pushed steps, opened at the first */
    struct gf_cuda_graph *graph; /* the step as a CUDA graph ([run] cuda_graph), made at the first capture */
    int64_t steps;               /* steps so far: the first runs uncaptured (the arena's size) */
    int32_t keys;                /* dropout keys a training step draws (counted at the first) */
    /* graph holds the last captured step, and can be replayed on a step whose key is key: its
     * rows, the feed's signature, gf_cuda_allocs and the dropout keys drawn */
    int replayable;
    int64_t key[4];
    size_t arena;                /* device arena bytes its capture used (held again by a replay) */
};

gf_status gf_gpu_step_open(gf_gpu_step **g) {
    *g = calloc(1, sizeof **g);
    return *g ? GF_OK : gf_error_set(GF_E_NOMEM, "the GPU step: out of memory");
}

void gf_gpu_step_close(gf_gpu_step *g) {
    if (!g) return;
    gf_step_queue_close(g->queue);
    gf_cuda_graph_free(g->graph);
    free(g);
}

int gf_gpu_step_pending(const gf_gpu_step *g) { return g && g->queue ? gf_step_queue_count(g->queue) : 0; }

const struct gf_cuda_graph *gf_gpu_step_graph(const gf_gpu_step *g) { return g ? g->graph : NULL; }

gf_status gf_gpu_step_flush(gf_gpu_step *g, const gf_params *p, gf_adamw_state *opt, gf_step_out *outs, int *n) {
    *n = 0;
    if (!g || !g->queue) return GF_OK;
    gf_step_rec rec[GF_STEP_RING];
    int k = 0;
    GF_TRY(gf_step_queue_flush(g->queue, opt, rec, &k));
    for (int i = 0; i < k; i++) {
        gf_step_out *o = &outs[i];
        *o = (gf_step_out){.loss = rec[i].loss, .grad_norm = rec[i].grad_norm};
        if (!rec[i].skipped) continue;
        const char *bad = rec[i].bad >= 0 ? gf_params_name_at(p, rec[i].bad) : NULL;
        if (!isfinite(rec[i].loss)) bad = "the loss";
        else if (isfinite(rec[i].grad_norm)) bad = "no value of its own (an earlier step's was not finite)";
        o->nonfinite = bad ? bad : "a gradient";
    }
    *n = k;
    return GF_OK;
}

/* The step's inputs into device memory before its capture or replay (docs/cuda.md "Captured
 * once"): its scalars, the feed of the batch, the dropout keys (once their count is known).
 * key: what a replayed graph must have been captured with. */
static gf_status feed_step(gf_gpu_step *g, const gf_gpu_work *w, gf_adamw_state *opt, const gf_adamw_cfg *cfg,
                           const gf_step_in *in, int64_t key[4]) {
    GF_TRY(gf_step_queue_prepare(g->queue, opt, cfg, in->lr, in->clip, in->stop_nonfinite));
    key[0] = in->n;
    key[1] = w->feed(w->self, in->lo, in->n);
    if (g->steps > 0 && g->keys > 0 && w->ctx->training) gf_ctx_draw_keys(w->ctx, g->keys);
    key[2] = gf_cuda_allocs(); /* the arena's chunks among them */
    key[3] = w->ctx->n_keys;
    return GF_OK;
}

/* The step's work queued on the stream, or (graph) captured and launched as a CUDA graph, or that
 * graph replayed when the step matches it; *redo: the capture was dropped, nothing ran
 * (gf_cuda_graph_launch), and the step was taken back. The caller resets the step context. */
static gf_status queue_step(gf_gpu_step *g, const gf_gpu_work *w, gf_adamw_state *opt, const gf_adamw_cfg *cfg,
                            const gf_step_in *in, int graph, double *t_fwd, int *redo) {
    *redo = 0;
    int64_t key[4];
    GF_TRY(feed_step(g, w, opt, cfg, in, key));
    if (graph && g->replayable && key[1] >= 0 && !memcmp(key, g->key, sizeof key)) {
        /* captured once: the same kernels on this step's inputs, without the host's pass */
        *t_fwd = gf_time_now();
        gf_ctx_device_hold(w->ctx, g->arena);
        GF_TRY(gf_cuda_graph_replay(g->graph));
        gf_step_queue_push_replayed(g->queue);
        return GF_OK;
    }
    gf_ctx *ctx = w->ctx;
    const int64_t staged = gf_ctx_captured_stages(ctx);
    if (graph) GF_TRY(gf_cuda_graph_begin());
    gf_tensor *loss = w->pass(w->self, in->lo, in->n, t_fwd);
    GF_ASSERT(ctx->key_next == ctx->n_keys, "a training step took %d of the %d dropout keys drawn for it",
              ctx->key_next, ctx->n_keys);
    const int32_t keys = ctx->keys_drawn;
    /* pushed before the reset: stream order keeps the loss readable until step_decide has read it */
    gf_status st = gf_step_queue_push(g->queue, w->params, loss->data);
    if (graph) { /* launched before the reset, whose staging event must follow the graph's copies */
        const gf_status gs = gf_cuda_graph_launch(&g->graph, redo);
        if (!st) st = gs;
        if (!st && *redo) gf_step_queue_unpush(g->queue);
    }
    if (!st && !*redo) {
        if (g->steps == 0) g->keys = keys;
        /* nothing of the batch staged inside the capture: all of it came from the feed, and every
         * dropout key (none drawn inside it, where it would be a kernel argument) */
        g->replayable = graph && key[1] >= 0 && gf_ctx_captured_stages(ctx) == staged && keys == ctx->n_keys;
        memcpy(g->key, key, sizeof key);
        g->arena = gf_ctx_device_used(ctx);
    }
    return st;
}

gf_status gf_gpu_step_run(gf_gpu_step *g, const gf_gpu_work *w, gf_adamw_state *opt, const gf_adamw_cfg *cfg,
                          const gf_step_in *in, gf_step_out *out) {
    GF_ASSERT(gf_dist_size() == 1 && in->lo == 0 && in->n == in->rows && in->n > 0,
              "gf_train_step: a GPU step of rows %lld.. (%lld of %lld)", (long long)in->lo, (long long)in->n,
              (long long)in->rows);
    GF_ASSERT(in->defer || gf_gpu_step_pending(g) == 0, "gf_train_step: %d deferred steps not flushed",
              gf_gpu_step_pending(g));
    if (!g->queue) GF_TRY(gf_step_queue_open(&g->queue));
    const int graph = w->capture && g->steps > 0 && !gf_cuda_sync_mode();
    gf_rng *rng = w->ctx->rng;
    const gf_rng drawn = rng ? *rng : (gf_rng){0}; /* the dropout stream, for a step run again */
    double t0 = gf_time_now(), t1;
    int redo;
    gf_status st = queue_step(g, w, opt, cfg, in, graph, &t1, &redo);
    gf_ctx_reset(w->ctx);
    if (!st && redo) { /* it outgrew the pinned staging: again, uncaptured, with the same dropout draws */
        if (rng) *rng = drawn;
        st = queue_step(g, w, opt, cfg, in, 0, &t1, &redo);
        gf_ctx_reset(w->ctx);
    }
    GF_TRY(st);
    g->steps++;
    out->s_forward = t1 - t0;
    out->s_backward = gf_time_now() - t1;
    out->queued = 1;
    out->loss = NAN;
    out->grad_norm = NAN;
    if (in->defer) return GF_OK;
    gf_step_out done;
    int n = 0;
    double t2 = gf_time_now();
    GF_TRY(gf_gpu_step_flush(g, w->params, opt, &done, &n));
    out->s_update = gf_time_now() - t2; /* the wait: the device's forward, backward and update */
    out->queued = 0;
    out->loss = done.loss;
    out->grad_norm = done.grad_norm;
    out->nonfinite = done.nonfinite;
    return GF_OK;
}
