/* backend_cuda.c — the CUDA backend's optimizer loops (gf_backend_optim, gflow/optim.h): the
 * kernels of adamw.cu over a device parameter block. */
#include "gflow/backend.h"
#include "optim_cuda.h"

const gf_backend_optim gf_backend_optim_cuda = {
    .adamw_reset = gf_adamw_reset_cuda,
    .adamw_step = gf_adamw_step_cuda,
    .grad_scale = gf_grad_scale_cuda,
};
