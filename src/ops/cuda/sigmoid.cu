/* sigmoid.cu — y = 1 / (1 + exp(-x)) on the GPU; the CPU op is src/ops/sigmoid.c. The same
 * overflow-free form: exp of a non-positive number only (x >= 0: 1 / (1 + e^-x), else
 * e^x / (1 + e^x); cu_sigmoid). One thread per element (grid-stride). */
#include "cu_util.cuh"

__global__ static void sigmoid_fwd(float *y, const float *x, int64_t n) {
    CU_FOR(i, n) y[i] = cu_sigmoid(x[i]);
}

/* backward: dx += dy * y * (1 - y), from the saved output y (accumulates, as sigmoid.c) */
__global__ static void sigmoid_bwd(float *dx, const float *g, const float *y, int64_t n) {
    CU_FOR(i, n) dx[i] += g[i] * y[i] * (1.0f - y[i]);
}

static void sigmoid_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    int64_t N = gf_tensor_numel(x);
    sigmoid_bwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(x->grad, n->out->grad, n->out->data, N);
    GF_CUDA_LAUNCHED("sigmoid_bwd", 4 * 4 * N);
}

static const gf_op_def sigmoid_cuda = {"sigmoid", GF_FAM_ELEMWISE, sigmoid_backward_cuda, 0};

gf_tensor *gf_sigmoid_cuda(gf_ctx *ctx, gf_tensor *x) {
    gf_tensor *y = cu_tensor_like(ctx, x);
    int64_t N = gf_tensor_numel(x);
    sigmoid_fwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(y->data, x->data, N);
    GF_CUDA_LAUNCHED("sigmoid_fwd", 4 * 2 * N);
    gf_tensor *in[1] = {x};
    gf_tape_record(ctx, &sigmoid_cuda, y, 1, in);
    return y;
}
