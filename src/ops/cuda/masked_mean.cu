/* masked_mean.cu — masked mean pooling on the GPU: x (B, L, D), host mask (B, L) -> (B, D); the
 * CPU op is src/ops/masked_mean.c.
 *   y_b = Σ_t w_bt x_bt,  w_bt = m_bt / Σ_t m_bt (0 for a row of zero weights);  dx_bt += w_bt dy_b.
 * The weights are computed on the host by the CPU op's own function (gf_masked_mean_weights:
 * the same bits) and staged into the device arena (cu_stage), where backward finds them.
 * Forward: one thread per (b, d), adding over t = 0..L-1 in order (a fixed order; no
 * cross-thread reduction, no atomics), skipping zero weights as the CPU loop does (a padded
 * position's x never enters the sum). A warp reads 32 consecutive d of one position: coalesced.
 * Backward: one thread per element of x. */
#include "cu_util.cuh"

__global__ static void mmean_fwd(float *y, const float *x, const float *wt, int64_t B, int64_t L, int64_t D) {
    CU_FOR(i, B * D) {
        const int64_t b = i / D, d = i % D;
        const float *xb = x + b * L * D + d, *wb = wt + b * L;
        float acc = 0.0f;
        for (int64_t t = 0; t < L; t++) {
            const float s = wb[t];
            if (s != 0.0f) acc += s * xb[t * D];
        }
        y[i] = acc;
    }
}

/* dx[b, t, d] += w[b, t] * dy[b, d] where w[b, t] != 0 */
__global__ static void mmean_bwd(float *dx, const float *g, const float *wt, int64_t L, int64_t D, int64_t n) {
    CU_FOR(i, n) {
        const int64_t r = i / D, d = i % D; /* r = b * L + t */
        const float s = wt[r];
        if (s != 0.0f) dx[i] += s * g[(r / L) * D + d];
    }
}

static void masked_mean_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const float *wt = (const float *)n->saved; // (B, L) on the device
    int64_t L = x->shape[1], D = x->shape[2], N = gf_tensor_numel(x);
    mmean_bwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(x->grad, n->out->grad, wt, L, D, N);
    GF_CUDA_LAUNCHED("mmean_bwd", 4 * (2 * N + N / D + N / L));
}

static const gf_op_def masked_mean_cuda = {"masked_mean", GF_FAM_ELEMWISE, masked_mean_backward_cuda, 0};

gf_tensor *gf_masked_mean_cuda(gf_ctx *ctx, gf_tensor *x, const float *mask) {
    int64_t B = x->shape[0], L = x->shape[1], D = x->shape[2], s[2] = {B, D};
    const float *wt_h = gf_masked_mean_weights(ctx, mask, B, L); // (B, L) host arena
    float *wt = (float *)cu_stage(ctx, wt_h, (size_t)(B * L) * sizeof(float)); // (B, L) device
    gf_tensor *y = gf_cuda_tensor_new(ctx, 2, s); // (B, D)
    mmean_fwd<<<cu_blocks(B * D, 256), 256, 0, gf_cuda_stream()>>>(y->data, x->data, wt, B, L, D);
    GF_CUDA_LAUNCHED("mmean_fwd", 4 * (B * L * D + B * L + B * D));
    gf_tensor *in[1] = {x};
    gf_node *n = gf_tape_record(ctx, &masked_mean_cuda, y, 1, in);
    if (n) n->saved = wt;
    return y;
}
