/* gflow/backend.h — one table per device: what the core, the ops and the optimizer run on it.
 *
 * A device's backend registers one gf_backend (src/core/backend_<dev>.c, or src/core/<dev>/ for a
 * device with its own runtime), and gf_backend_of finds it by the device of a tensor or of the
 * parameter block. The core's own services (the tape's gradient memory, the parameter block) are
 * its fields; the later stages' parts are tables of their own, which the core only points to:
 *   ops    the ops' forward functions, one entry per op of gflow/ops.def (src/ops/backend_ops.h;
 *          src/ops/backend_<dev>.c or src/ops/<dev>/backend_<dev>.c);
 *   optim  the optimizer's loops over a device parameter block (gflow/optim.h;
 *          src/optim/<dev>/backend_<dev>.c). NULL for the CPU: the host loops are adamw.c's.
 * Nothing outside these tables names a device's kernels (tests/arch/check_backend.py). A build
 * registers only the backends it has: without CUDA, gf_backend_find(GF_DEV_CUDA) is NULL and
 * gf_backend_of aborts "built without cuda" (no tensor can be there). docs/architecture.md,
 * "A backend", lists the files a new one adds.
 */
#ifndef GFLOW_BACKEND_H
#define GFLOW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"
#include "gflow/params.h"
#include "gflow/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gf_ctx;
struct gf_backend_ops;   /* src/ops/backend_ops.h */
struct gf_backend_optim; /* gflow/optim.h */

typedef struct gf_backend {
    const char *name; /* gf_device_name of its device */
    /* the tape's gradient buffers (tape.c): n floats of ctx's step memory on this device,
     * zeroed or uninitialised */
    float *(*grad_zeros)(struct gf_ctx *ctx, int64_t n);
    float *(*grad_floats)(struct gf_ctx *ctx, int64_t n);
    /* dst[i] += src[i], i < n, for dst on this device and src on the host: any values, or
     * (acc_const) values that are the same at every step, which a replayed step may keep */
    void (*grad_acc_host)(struct gf_ctx *ctx, float *dst, const float *src, int64_t n);
    void (*grad_acc_const)(struct gf_ctx *ctx, float *dst, const float *src, int64_t n);
    /* the parameter block (params.c): moved from the host onto this device, and back (NULL for
     * the CPU, where the block is already); bytes copied between this device's memory and the
     * host's; n floats zeroed; Σ x² of n floats; the block's memory freed */
    gf_status (*params_from_host)(gf_params *p);
    gf_status (*params_to_host)(gf_params *p);
    gf_status (*download)(void *host_dst, const void *src, size_t bytes);
    gf_status (*upload)(void *dst, const void *host_src, size_t bytes);
    void (*zero)(float *x, int64_t n);
    gf_status (*sumsq)(const float *x, int64_t n, double *out);
    void (*params_free)(gf_params *p);
    /* gf_params_keep_bf16: make or refresh the weights' bf16 copy (NULL: the device rounds at each
     * product) */
    gf_status (*params_keep_bf16)(gf_params *p);
    const struct gf_backend_ops *ops;
    const struct gf_backend_optim *optim;
} gf_backend;

/* The registered backends (their tables' files) and their parts in the later stages. */
extern const gf_backend gf_backend_cpu;
extern const struct gf_backend_ops gf_backend_ops_cpu;
#ifdef GF_HAVE_CUDA
extern const gf_backend gf_backend_cuda;
extern const struct gf_backend_ops gf_backend_ops_cuda;
extern const struct gf_backend_optim gf_backend_optim_cuda;
#endif

/* d's backend, or NULL when this build does not have it */
const gf_backend *gf_backend_find(gf_device d);
/* d's backend; aborts "a tensor on <d> in a build without it" where gf_backend_find is NULL */
const gf_backend *gf_backend_of(gf_device d);

#ifdef __cplusplus
}
#endif

#endif
