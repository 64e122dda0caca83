/* optim_cuda.h — the CUDA twins of the optimizer's loops over a device parameter block
 * (internal to src/optim). src/optim/adamw.c computes the scalars on the host, exactly as for
 * the CPU loop, and hands a block whose device is GF_DEV_CUDA to these. A build without CUDA
 * compiles no .cu file: there the names expand to an abort that cannot be reached (no block can
 * be moved to the GPU there: gf_params_to_device refuses).
 */
#ifndef GF_OPTIM_CUDA_H
#define GF_OPTIM_CUDA_H

#include "gflow/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fp32 scalars of one AdamW step (gf_adamw_step computes them from its doubles). */
typedef struct gf_adamw_scalars {
    float step_size, bc2_sqrt, b1, b2, omb1, omb2, eps;
    float keep[GF_PK_COUNT]; /* the decoupled decay factor per parameter kind (1 = no decay) */
} gf_adamw_scalars;

#ifdef GF_HAVE_CUDA
/* one AdamW step over the block's chunks (one kernel on the stream; a failure is noted) */
void gf_adamw_step_cuda(gf_params *p, const gf_adamw_scalars *s);
/* grad *= c over the block (one kernel) */
void gf_grad_scale_cuda(gf_params *p, float c);
/* m = v = 0 (two memsets on the stream) */
void gf_adamw_reset_cuda(gf_params *p);
#else
static inline void gf_no_cuda_optim(const char *what) {
    gf_abort(__FILE__, __LINE__, "%s: a device parameter block in a build without CUDA", what);
}
#define gf_adamw_step_cuda(...) gf_no_cuda_optim("gf_adamw_step")
#define gf_grad_scale_cuda(...) gf_no_cuda_optim("gf_clip_grad_norm")
#define gf_adamw_reset_cuda(...) gf_no_cuda_optim("gf_adamw_reset")
#endif

#ifdef __cplusplus
}
#endif

#endif
