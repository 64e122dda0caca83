/* backend_cuda.c — the CUDA backend's table (gflow/backend.h): the step arena's device memory,
 * the parameter block as one cudaMalloc (params.c), copies and reductions on the stream. Its ops
 * are src/ops/cuda/backend_cuda.c, its optimizer loops src/optim/cuda/backend_cuda.c. */
#include "gflow/backend.h"
#include "gflow/cuda.h"

static void cuda_zero(float *x, int64_t n) {
    GF_CUDA_NOTE(cudaMemsetAsync(x, 0, (size_t)n * sizeof(float), gf_cuda_stream()));
}

static void cuda_params_free(gf_params *p) {
    gf_cuda_free(p->data); /* the base of the one allocation (gf_params_from_host_cuda) */
    gf_cuda_free(p->chunks);
}

const gf_backend gf_backend_cuda = {
    .name = "cuda",
    .grad_zeros = gf_cuda_zeros,
    .grad_floats = gf_cuda_floats,
    .grad_acc_host = gf_cuda_acc_host,
    .grad_acc_const = gf_cuda_acc_const,
    .params_from_host = gf_params_from_host_cuda,
    .params_to_host = gf_params_to_host_cuda,
    .download = gf_cuda_download,
    .upload = gf_cuda_upload,
    .zero = cuda_zero,
    .sumsq = gf_cuda_sumsq,
    .params_free = cuda_params_free,
    .ops = &gf_backend_ops_cuda,
    .optim = &gf_backend_optim_cuda,
};
