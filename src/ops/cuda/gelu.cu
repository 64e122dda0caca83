/* gelu.cu — exact GELU on the GPU: y = x Φ(x) = 0.5 x (1 + erf(x/√2)); the CPU op is
 * src/ops/gelu.c. The arithmetic is cu_gelu and cu_gelu_slope (cu_util.cuh), shared with the
 * fused linear_gelu.cu. */
#include "cu_util.cuh"

__global__ static void gelu_fwd(float *y, const float *x, int64_t n) {
    CU_FOR(i, n) y[i] = cu_gelu(x[i]);
}

/* backward: dx (= if fresh, else +=) dy * (Φ(x) + x φ(x)),  φ(x) = exp(-x²/2) / √(2π) */
template <bool Fresh>
__global__ void gelu_bwd(float *dx, const float *g, const float *x, int64_t n) {
    CU_FOR(i, n) {
        const float slope = cu_gelu_slope(x[i]);
        dx[i] = Fresh ? g[i] * slope : dx[i] + g[i] * slope;
    }
}

static void gelu_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    int64_t N = gf_tensor_numel(x);
    cudaStream_t s = gf_cuda_stream();
    const int fresh = gf_grad_fresh(x);
    if (fresh) gelu_bwd<true><<<cu_blocks(N, 256), 256, 0, s>>>(x->grad, n->out->grad, x->data, N);
    else gelu_bwd<false><<<cu_blocks(N, 256), 256, 0, s>>>(x->grad, n->out->grad, x->data, N);
    GF_CUDA_LAUNCHED("gelu_bwd", 4 * (fresh ? 3 : 4) * N);
}

static const gf_op_def gelu_cuda = {"gelu", GF_FAM_ELEMWISE, gelu_backward_cuda, 1};

gf_tensor *gf_gelu_cuda(gf_ctx *ctx, gf_tensor *x) {
    gf_tensor *y = cu_tensor_like(ctx, x);
    int64_t N = gf_tensor_numel(x);
    gelu_fwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(y->data, x->data, N);
    GF_CUDA_LAUNCHED("gelu_fwd", 4 * 2 * N);
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, &gelu_cuda, y, 1, in);
    return y;
}
