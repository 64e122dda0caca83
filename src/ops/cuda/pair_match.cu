/* pair_match.cu — sentence-pair features on the GPU; the CPU op is src/ops/pair_match.c.
 * x (2B, D): premises u in rows 0..B-1, hypotheses v in rows B..2B-1. Output (B, 4D):
 *   y_b = [u_b ; v_b ; |u_b - v_b| ; u_b ⊙ v_b]
 * Backward with dy = [g1; g2; g3; g4], s = sign(u - v) (0 where u == v):
 *   du += g1 + s g3 + v g4 ;  dv += g2 - s g3 + u g4
 * One thread per (b, d), forward and backward: it reads u and v once and owns du[b, d] and
 * dv[b, d] (distinct rows of x->grad), so no two threads write one element. */
#include "cu_util.cuh"

__global__ static void pair_fwd(float *y, const float *x, int64_t B, int64_t D) {
    CU_FOR(i, B * D) {
        const int64_t b = i / D, d = i % D;
        const float u = x[i], v = x[B * D + i]; /* x[b, d], x[B + b, d] */
        float *yb = y + b * 4 * D;
        yb[d] = u;
        yb[D + d] = v;
        yb[2 * D + d] = fabsf(u - v);
        yb[3 * D + d] = u * v;
    }
}

__global__ static void pair_bwd(float *dx, const float *g, const float *x, int64_t B, int64_t D) {
    CU_FOR(i, B * D) {
        const int64_t b = i / D, d = i % D;
        const float u = x[i], v = x[B * D + i];
        const float *gb = g + b * 4 * D;
        const float diff = u - v, g3 = gb[2 * D + d], g4 = gb[3 * D + d];
        const float s3 = diff > 0.0f ? g3 : (diff < 0.0f ? -g3 : 0.0f);
        dx[i] += gb[d] + s3 + v * g4;
        dx[B * D + i] += gb[D + d] - s3 + u * g4;
    }
}

static void pair_match_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    int64_t B = x->shape[0] / 2, D = x->shape[1];
    pair_bwd<<<cu_blocks(B * D, 256), 256, 0, gf_cuda_stream()>>>(x->grad, n->out->grad, x->data, B, D);
    GF_CUDA_LAUNCHED("pair_bwd", 4 * 10 * B * D);
}

static const gf_op_def pair_match_cuda = {"pair_match", GF_FAM_ELEMWISE, pair_match_backward_cuda, 0};

gf_tensor *gf_pair_match_cuda(gf_ctx *ctx, gf_tensor *x) {
    int64_t B = x->shape[0] / 2, D = x->shape[1], s[2] = {B, 4 * D};
    gf_tensor *y = gf_cuda_tensor_new(ctx, 2, s); // (B, 4D)
    pair_fwd<<<cu_blocks(B * D, 256), 256, 0, gf_cuda_stream()>>>(y->data, x->data, B, D);
    GF_CUDA_LAUNCHED("pair_fwd", 4 * 6 * B * D);
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, &pair_match_cuda, y, 1, in);
    return y;
}
