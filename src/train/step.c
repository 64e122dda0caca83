/* step.c — one optimizer step, shared by the trainer and `gflow bench`.
 *
 * Data parallel (gflow/dist.h): every rank computes its rows of the same global batch; the
 * gradients are summed in one allreduce before clipping, so the clip, the non-finite check and
 * AdamW see the global gradient on every rank and the weights stay equal.
 */
#include "gflow/session.h"
#include "gflow/device.h"
#include "gflow/dist.h"
#include "gflow/threads.h"
#include <math.h>
#include <stdlib.h>

/* Name the first parameter whose gradient is not finite (a device block's gradients are read
 * back for it: this runs only on a step that is not applied). */
static const char *first_nonfinite_grad(const gf_params *p) {
    const float *g = p->grad; // (n)
    float *host = NULL;
    if (p->device != GF_DEV_CPU) {
        host = malloc((size_t)(p->n ? p->n : 1) * sizeof(float));
        if (!host || gf_params_get(p, GF_PP_GRAD, host)) { free(host); return NULL; }
        g = host;
    }
    const char *bad = NULL;
    for (int64_t i = 0; i < p->n_items && !bad; i++) {
        const gf_param *q = p->items[i];
        int64_t n = gf_tensor_numel(&q->t);
        for (int64_t j = 0; j < n && !bad; j++)
            if (!isfinite(g[q->offset + j])) bad = q->name;
    }
    free(host);
    return bad;
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

gf_status gf_train_step(gf_session *s, gf_adamw_state *opt, const gf_adamw_cfg *cfg, const gf_step_in *in,
                        gf_step_out *out) {
    *out = (gf_step_out){0};
    double t0 = gf_time_now();
    gf_params_zero_grad(s->params);
    double t1 = t0, t2 = t0;
    if (in->n > 0) {
        gf_tensor *loss = gf_session_forward_rows(s, in->lo, in->n);
        t1 = gf_time_now();
        gf_tape_backward(&s->ctx, loss);
        /* after backward: on the GPU the copy waits for the stream, so forward and backward are
         * queued back to back (the tape saved nothing in place, so the loss is unchanged) */
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
