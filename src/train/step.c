/* step.c — one optimizer step, shared by the trainer and `gflow bench`.
 *
 * Data parallel (gflow/dist.h): every rank computes its rows of the same global batch; the
 * gradients are summed in one allreduce before clipping, so the clip, the non-finite check and
 * AdamW see the global gradient on every rank and the weights stay equal.
 *
 * On the GPU (one process) the session's gf_gpu_step runs the step (gflow/gpu_step.h): the same
 * host pass, queued on the stream, captured as a CUDA graph or replayed, nothing read back.
 */
#include "gflow/session.h"
#include "gflow/device.h"
#include "gflow/dist.h"
#include "gflow/threads.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Name the first parameter whose gradient is not finite (a host block; runs only on a step that
 * is not applied) */
static const char *first_nonfinite_grad(const gf_params *p) {
    const float *g = p->grad; // (n)
    for (int64_t i = 0; i < p->n; i++)
        if (!isfinite(g[i])) return gf_params_name_at(p, i);
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

int gf_train_pending(const gf_session *s) { return gf_gpu_step_pending(s->gpu); }

gf_status gf_train_flush(gf_session *s, gf_adamw_state *opt, gf_step_out *outs, int *n) {
    return gf_gpu_step_flush(s->gpu, s->params, opt, outs, n);
}

/* The host's pass of a step on either device: the gradients zeroed, the forward of rows
 * [lo, lo+n) (*t_fwd: when it ended), the backward; the loss */
static gf_tensor *host_pass(void *self, int64_t lo, int64_t n, double *t_fwd) {
    gf_session *s = self;
    gf_params_zero_grad(s->params);
    gf_tensor *loss = gf_session_forward_rows(s, lo, n);
    *t_fwd = gf_time_now();
    gf_tape_backward(&s->ctx, loss);
    return loss;
}

/* A GPU step's feed: the task's, or none (-1: its forward stages the batch itself) */
static int64_t feed(void *self, int64_t lo, int64_t n) {
    gf_session *s = self;
    return s->task->feed_rows ? s->task->feed_rows(s, lo, n) : -1;
}

gf_status gf_train_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                        gf_step_out *out) {
    *out = (gf_step_out){0};
    if (s->gpu) {
        const gf_gpu_work w = {&s->ctx, s->params, s->r.run.cuda_graph, s, feed, host_pass};
        return gf_gpu_step_run(s->gpu, &w, opt, cfg, in, out);
    }
    double t0 = gf_time_now();
    double t1 = t0, t2 = t0;
    if (in->n == 0) gf_params_zero_grad(s->params);
    else {
        gf_tensor *loss = host_pass(s, in->lo, in->n, &t1);
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
