/* pair_match.c — sentence-pair matching features for the siamese NLI classifier.
 *
 * x (2B, D) holds the pooled premise vectors u in rows 0..B-1 and the hypothesis vectors v in
 * rows B..2B-1 (the encoder runs both halves as one batch). Output (B, 4D):
 *   y_b = [u_b ; v_b ; |u_b - v_b| ; u_b ⊙ v_b]
 * Backward, with dy = [g1; g2; g3; g4] and s = sign(u - v) (0 where u == v, as torch.abs):
 *   du += g1 + s g3 + v g4 ;  dv += g2 - s g3 + u g4
 */
#include "op_util.h"
#include <math.h>

static void pair_match_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    int64_t B = x->shape[0] / 2, D = x->shape[1];
    const float *dy = n->out->grad; // (B, 4D)
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        const float *u = x->data + b * D, *v = x->data + (B + b) * D, *g = dy + b * 4 * D;
        float *du = x->grad + b * D, *dv = x->grad + (B + b) * D;
        for (int64_t d = 0; d < D; d++) {
            float diff = u[d] - v[d];
            float s3 = diff > 0.0f ? g[2 * D + d] : (diff < 0.0f ? -g[2 * D + d] : 0.0f);
            du[d] += g[d] + s3 + v[d] * g[3 * D + d];
            dv[d] += g[D + d] - s3 + u[d] * g[3 * D + d];
        }
    }
}

gf_tensor *gf_pair_match(gf_ctx *ctx, gf_tensor *x) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(x->ndim == 2 && x->shape[0] % 2 == 0, "pair_match: x must be (2B, D)");
    gf_tensor *in[1] = {x};
    const gf_backend_ops *dev = gf_op_backend("pair_match", 1, in);
    if (dev) return dev->pair_match(ctx, x);
    int64_t B = x->shape[0] / 2, D = x->shape[1];
    gf_tensor *y = gf_tensor_new2(ctx, B, 4 * D); // (B, 4D)
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        const float *u = x->data + b * D, *v = x->data + (B + b) * D;
        float *yb = y->data + b * 4 * D;
        for (int64_t d = 0; d < D; d++) {
            yb[d] = u[d];
            yb[D + d] = v[d];
            yb[2 * D + d] = fabsf(u[d] - v[d]);
            yb[3 * D + d] = u[d] * v[d];
        }
    }
    gf_tape_record(ctx, &gf_op_pair_match, y, 1, in);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_pair_match = {"pair_match", GF_FAM_ELEMWISE, pair_match_backward, 0};
