/* step.c — one optimizer step, shared by the trainer and `gflow bench`.
 *
 * Data parallel (gflow/dist.h): every rank computes its rows of the same global batch; the
 * gradients are summed in one allreduce before clipping, so the clip, the non-finite check and
 * AdamW see the global gradient on every rank and the weights stay equal.
 *
 * On the GPU (one process) the step waits for nothing: after backward the clip, the non-finite
 * check and AdamW are pushed to the device (gf_step_queue_push), the loss stays there, and
 * gf_train_flush reads the records of the pushed steps back, one wait for all of them. With
 * [run] cuda_graph every step after the first (which sizes the device arena and the staging) is
 * captured from the stream and launched as one CUDA graph (docs/cuda.md "CUDA graphs"); a step
 * whose inputs were all fed before the capture (the LM's) is captured once and its graph replayed
 * on the next steps of the same shape, without the host's pass (docs/cuda.md "Captured once").
 */
#include "gflow/session.h"
#include "gflow/device.h"
#include "gflow/dist.h"
#include "gflow/threads.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The parameter holding block index i (parameters lie in table order, gflow/params.h) */
static const char *param_at(const gf_params *p, int64_t i) {
    for (int64_t k = 0; k < p->n_items; k++) {
        const gf_param *q = p->items[k];
        if (i >= q->offset && i < q->offset + gf_tensor_numel(&q->t)) return q->name;
    }
    return NULL;
}

/* Name the first parameter whose gradient is not finite (a host block; runs only on a step that
 * is not applied) */
static const char *first_nonfinite_grad(const gf_params *p) {
    const float *g = p->grad; // (n)
    for (int64_t i = 0; i < p->n; i++)
        if (!isfinite(g[i])) return param_at(p, i);
    return NULL;
}

/* The global loss is the row-weighted mean of the ranks' means: pre-scale, then sum. */
static gf_status allreduce(gf_session *s, const gf_step_in *in, gf_step_out *out) {
    double c0 = gf_dist_comm_seconds();
    float share = (float)in->n / (float)in->rows;
    GF_TRY(gf_dist_sum_scaled_f32(s->params->grad, s->params->n, share));
    double red[2] = {(double)out->loss * (double)share, in->stop_flag && *in->stop_flag ? 1.0 : 0.0};
    GF_TRY(gf_dist_sum_f64(red, 2));
    out->loss = (float)red[0];
    out->stop_all = red[1] > 0;
    out->s_comm = gf_dist_comm_seconds() - c0;
    return GF_OK;
}

int gf_train_pending(const gf_session *s) { return s->queue ? gf_step_queue_count(s->queue) : 0; }

gf_status gf_train_flush(gf_session *s, gf_adamw_state *opt, gf_step_out *outs, int *n) {
    *n = 0;
    if (!s->queue) return GF_OK;
    gf_step_rec rec[GF_STEP_RING];
    int k = 0;
    GF_TRY(gf_step_queue_flush(s->queue, opt, rec, &k));
    for (int i = 0; i < k; i++) {
        gf_step_out *o = &outs[i];
        *o = (gf_step_out){.loss = rec[i].loss, .grad_norm = rec[i].grad_norm};
        if (!rec[i].skipped) continue;
        const char *bad = rec[i].bad >= 0 ? param_at(s->params, rec[i].bad) : NULL;
        if (!isfinite(rec[i].loss)) bad = "the loss";
        else if (isfinite(rec[i].grad_norm)) bad = "no value of its own (an earlier step's was not finite)";
        o->nonfinite = bad ? bad : "a gradient";
    }
    *n = k;
    return GF_OK;
}

/* The step's inputs into device memory before its capture or replay (docs/cuda.md "Captured
 * once"): its scalars, the task's feed of the batch, the dropout keys (once their count is known).
 * key: what a replayed graph must have been captured with. */
static gf_status feed_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                           int64_t key[4]) {
    GF_TRY(gf_step_queue_prepare(s->queue, opt, cfg, in->lr, in->clip, in->stop_nonfinite));
    key[0] = in->n;
    key[1] = s->task->feed_rows ? s->task->feed_rows(s, in->lo, in->n) : -1;
    if (s->device_steps > 0 && s->step_keys > 0 && s->ctx.training) gf_ctx_draw_keys(&s->ctx, s->step_keys);
    key[2] = gf_cuda_allocs(); /* the arena's chunks among them */
    key[3] = s->ctx.n_keys;
    return GF_OK;
}

/* The step's work queued on the stream, or (graph) captured and launched as a CUDA graph, or that
 * graph replayed when the step matches it; *redo: the capture was dropped, nothing ran
 * (gf_cuda_graph_launch), and the step was taken back */
static gf_status queue_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                            int graph, double *t_fwd, int *redo) {
    *redo = 0;
    int64_t key[4];
    gf_status st = feed_step(s, opt, cfg, in, key);
    if (st) {
        gf_ctx_reset(&s->ctx);
        return st;
    }
    if (graph && s->replayable && key[1] >= 0 && !memcmp(key, s->graph_key, sizeof key)) {
        /* captured once: the same kernels on this step's inputs, without the host's pass */
        *t_fwd = gf_time_now();
        gf_ctx_device_hold(&s->ctx, s->graph_arena);
        st = gf_cuda_graph_replay(s->graph);
        if (!st) gf_step_queue_push_replayed(s->queue);
        gf_ctx_reset(&s->ctx);
        return st;
    }
    const int64_t staged = gf_ctx_captured_stages(&s->ctx);
    if (graph && (st = gf_cuda_graph_begin())) {
        gf_ctx_reset(&s->ctx);
        return st;
    }
    gf_params_zero_grad(s->params);
    gf_tensor *loss = gf_session_forward_rows(s, in->lo, in->n);
    *t_fwd = gf_time_now();
    gf_tape_backward(&s->ctx, loss);
    GF_ASSERT(s->ctx.key_next == s->ctx.n_keys, "a training step took %d of the %d dropout keys drawn for it",
              s->ctx.key_next, s->ctx.n_keys);
    const int32_t keys = s->ctx.keys_drawn;
    /* pushed before the reset: stream order keeps the loss readable until step_decide has read it */
    st = gf_step_queue_push(s->queue, s->params, loss->data);
    if (graph) { /* launched before the reset, whose staging event must follow the graph's copies */
        const gf_status gs = gf_cuda_graph_launch(&s->graph, redo);
        if (!st) st = gs;
        if (!st && *redo) gf_step_queue_unpush(s->queue);
    }
    if (!st && !*redo) {
        if (s->device_steps == 0) s->step_keys = keys;
        /* nothing of the batch staged inside the capture: all of it came from the feed, and every
         * dropout key (none drawn inside it, where it would be a kernel argument) */
        s->replayable = graph && key[1] >= 0 && gf_ctx_captured_stages(&s->ctx) == staged && keys == s->ctx.n_keys;
        memcpy(s->graph_key, key, sizeof key);
        s->graph_arena = gf_ctx_device_used(&s->ctx);
    }
    gf_ctx_reset(&s->ctx);
    return st;
}

/* The GPU step: queued, nothing read back (gf_train_step's comment) */
static gf_status device_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                             gf_step_out *out) {
    GF_ASSERT(gf_dist_size() == 1 && in->lo == 0 && in->n == in->rows && in->n > 0,
              "gf_train_step: a GPU step of rows %lld.. (%lld of %lld)", (long long)in->lo, (long long)in->n,
              (long long)in->rows);
    GF_ASSERT(in->defer || gf_train_pending(s) == 0, "gf_train_step: %d deferred steps not flushed",
              gf_train_pending(s));
    if (!s->queue) GF_TRY(gf_step_queue_open(&s->queue));
    const int graph = s->r.run.cuda_graph && s->device_steps > 0 && !gf_cuda_sync_mode();
    const gf_rng drawn = s->ctx.rng ? *s->ctx.rng : (gf_rng){0}; /* the dropout stream, for a step run again */
    double t0 = gf_time_now(), t1;
    int redo;
    GF_TRY(queue_step(s, opt, cfg, in, graph, &t1, &redo));
    if (redo) { /* it outgrew the pinned staging: again, uncaptured, with the same dropout draws */
        if (s->ctx.rng) *s->ctx.rng = drawn;
        GF_TRY(queue_step(s, opt, cfg, in, 0, &t1, &redo));
    }
    s->device_steps++;
    out->s_forward = t1 - t0;
    out->s_backward = gf_time_now() - t1;
    out->queued = 1;
    out->loss = NAN;
    out->grad_norm = NAN;
    if (in->defer) return GF_OK;
    gf_step_out done;
    int n = 0;
    double t2 = gf_time_now();
    GF_TRY(gf_train_flush(s, opt, &done, &n));
    out->s_update = gf_time_now() - t2; /* the wait: the device's forward, backward and update */
    out->queued = 0;
    out->loss = done.loss;
    out->grad_norm = done.grad_norm;
    out->nonfinite = done.nonfinite;
    return GF_OK;
}

gf_status gf_train_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                        gf_step_out *out) {
    *out = (gf_step_out){0};
    if (s->params->device != GF_DEV_CPU) return device_step(s, opt, cfg, in, out);
    double t0 = gf_time_now();
    gf_params_zero_grad(s->params);
    double t1 = t0, t2 = t0;
    if (in->n > 0) {
        gf_tensor *loss = gf_session_forward_rows(s, in->lo, in->n);
        t1 = gf_time_now();
        gf_tape_backward(&s->ctx, loss);
        gf_status st = gf_tensor_to_host(loss, &out->loss, 1);
        gf_ctx_reset(&s->ctx);
        GF_TRY(st);
        t2 = gf_time_now();
    }
    out->s_forward = t1 - t0;
    out->s_backward = t2 - t1;
    if (gf_dist_size() > 1) GF_TRY(allreduce(s, in, out));
    double t3 = gf_time_now();
    GF_TRY(gf_clip_grad(s->params, in->clip, &out->grad_norm));
    if (!isfinite(out->loss) || !isfinite(out->grad_norm)) {
        const char *bad = !isfinite(out->loss) ? "the loss" : first_nonfinite_grad(s->params);
        out->nonfinite = bad ? bad : "a gradient";
    } else {
        gf_adamw_step(s->params, opt, cfg, in->lr);
    }
    out->s_update = gf_time_now() - t3;
    return GF_OK;
}
