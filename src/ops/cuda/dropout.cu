/* dropout.cu — inverted dropout on the GPU: y = x * keep / (1 - p); the CPU op is src/ops/dropout.c,
 * and the mask is its mask bit for bit (cu_drop of cu_util.cuh: the key drawn on the host as the
 * CPU draws it, the hash of gflow/rng.h itself compiled for the device, GF_HOST_DEVICE). The products
 * x * scale and dy * scale are __fmul_rn (never fused into an add), so y and dx are the CPU's
 * bits too. One thread per element (grid-stride); the mask (uint8, N) is kept in the device
 * step arena for backward. */
#include "cu_util.cuh"

__global__ static void dropout_fwd(float *y, uint8_t *keep, const float *x, int64_t N, cu_drop d) {
    const uint64_t key = cu_drop_key(d);
    CU_FOR(i, N) {
        const uint8_t k = cu_drop_keeps(d, key, i);
        keep[i] = k;
        y[i] = k ? __fmul_rn(x[i], d.scale) : 0.0f;
    }
}

/* backward: dx (= if fresh, else +=) keep ? dy * scale : 0 */
template <bool Fresh>
__global__ void dropout_bwd(float *dx, const float *g, const uint8_t *keep, float scale, int64_t N) {
    CU_FOR(i, N) {
        const float t = keep[i] ? __fmul_rn(g[i], scale) : 0.0f;
        dx[i] = Fresh ? t : __fadd_rn(dx[i], t);
    }
}

static void dropout_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const uint8_t *keep = (const uint8_t *)n->saved; // (N) on the device
    float scale = (float)n->fp[0];
    int64_t N = gf_tensor_numel(x);
    cudaStream_t s = gf_cuda_stream();
    const int fresh = gf_grad_fresh(x);
    if (fresh) dropout_bwd<true><<<cu_blocks(N, 256), 256, 0, s>>>(x->grad, n->out->grad, keep, scale, N);
    else dropout_bwd<false><<<cu_blocks(N, 256), 256, 0, s>>>(x->grad, n->out->grad, keep, scale, N);
    GF_CUDA_LAUNCHED("dropout_bwd", 4 * (fresh ? 2 : 3) * N + N);
}

static const gf_op_def dropout_cuda = {"dropout", GF_FAM_ELEMWISE, dropout_backward_cuda, 1};

/* the entry has returned x when not training or p == 0, and checked p, ctx->rng and the rows */
gf_tensor *gf_dropout_cuda(gf_ctx *ctx, gf_tensor *x, float p) {
    int64_t N = gf_tensor_numel(x);
    const cu_drop d = cu_drop_draw(ctx, x, p);
    uint8_t *keep = (uint8_t *)gf_cuda_arena_alloc(ctx->cuda, (size_t)N); // (N)
    gf_tensor *y = cu_tensor_like(ctx, x);
    if (N > 0) {
        dropout_fwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(y->data, keep, x->data, N, d);
        GF_CUDA_LAUNCHED("dropout_fwd", 4 * 2 * N + N);
    }
    gf_tensor *in[1] = {x};
    gf_node *n = gf_tape_record(ctx, &dropout_cuda, y, 1, in);
    if (n) {
        n->saved = keep;
        n->fp[0] = d.scale;
    }
    return y;
}
