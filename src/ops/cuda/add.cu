/* add.cu — y = a + b on the GPU, b of a's shape or of a's trailing shape (broadcast over rows);
 * the CPU op is src/ops/add.c. */
#include "cu_util.cuh"

/* y[i] = a[i] + b[i % nb] */
__global__ static void add_fwd(float *y, const float *a, const float *b, int64_t na, int64_t nb) {
    CU_FOR(i, na) y[i] = a[i] + b[i % nb];
}

/* dst[i] += g[i] */
__global__ static void add_acc(float *dst, const float *g, int64_t n) {
    CU_FOR(i, n) dst[i] += g[i];
}

/* backward: da += dy ; db += dy summed over the broadcast rows (cu_colsum, fixed order).
 * A fresh gradient is stored (a copy, or the column sum stored), as in add.c. */
static void add_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1];
    const float *g = n->out->grad;
    int64_t na = gf_tensor_numel(a), nb = gf_tensor_numel(b);
    cudaStream_t s = gf_cuda_stream();
    if (gf_needs_grad(a)) {
        if (gf_grad_fresh(a)) {
            GF_CUDA_NOTE(cudaMemcpyAsync(a->grad, g, (size_t)na * sizeof(float), cudaMemcpyDeviceToDevice, s));
        } else {
            add_acc<<<cu_blocks(na, 256), 256, 0, s>>>(a->grad, g, na);
            GF_CUDA_LAUNCHED("add_acc", 4 * 3 * na);
        }
    }
    if (gf_needs_grad(b)) {
        int fresh = gf_grad_fresh(b);
        if (nb == na && fresh)
            GF_CUDA_NOTE(cudaMemcpyAsync(b->grad, g, (size_t)nb * sizeof(float), cudaMemcpyDeviceToDevice, s));
        else
            cu_colsum(ctx, b->grad, na / nb, nb, fresh, cu_rows{g, nb});
    }
}

static const gf_op_def add_cuda = {"add", GF_FAM_ELEMWISE, add_backward_cuda, 1};

gf_tensor *gf_add_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b) {
    int64_t na = gf_tensor_numel(a), nb = gf_tensor_numel(b);
    gf_tensor *y = cu_tensor_like(ctx, a);
    add_fwd<<<cu_blocks(na, 256), 256, 0, gf_cuda_stream()>>>(y->data, a->data, b->data, na, nb);
    GF_CUDA_LAUNCHED("add_fwd", 4 * (2 * na + nb));
    gf_tensor *in[2] = {a, b};
    gf_tape_record(ctx, &add_cuda, y, 2, in);
    return y;
}
