/* gflow/device.h — devices: what this build and this machine can run on, and the device memory
 * the tape needs.
 *
 * Every build has these functions. A build with the CUDA backend (meson -Dcuda, GF_HAVE_CUDA)
 * implements the CUDA ones in src/core/cuda/ with the CUDA runtime; a build without it compiles
 * no CUDA object at all, and src/core/device.c reports "built without CUDA" (the memory
 * functions there abort: without CUDA no tensor can be on the GPU, so they are never reached).
 * The CUDA-only API (stream, cuBLAS handle, copies, error checks, the arena's layout) is
 * gflow/cuda.h. What runs on the GPU so far: docs/cuda.md.
 */
#ifndef GFLOW_DEVICE_H
#define GFLOW_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"
#include "gflow/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gf_ctx;
struct gf_cuda_arena;

/* "cpu", "cuda" */
const char *gf_device_name(gf_device d);
/* 1 when this build has the CUDA backend */
int gf_cuda_built(void);

typedef struct gf_cuda_info {
    int n_devices;             /* visible CUDA devices: 0 with none, without a driver, or without CUDA in the build */
    char why[256];             /* n_devices == 0: why ("built without CUDA", or the cudaGetDeviceCount error) */
    char name[256];            /* device 0 */
    int cc_major, cc_minor;    /* device 0's compute capability */
    size_t mem_bytes;          /* device 0's memory */
    int runtime_version;       /* 13000 = 13.0; 0 without CUDA */
    int driver_version;        /* the newest CUDA the driver supports; 0 without a driver */
} gf_cuda_info;
/* What the CUDA runtime sees (without CUDA in the build: nothing, why = "built without CUDA"). */
void gf_cuda_probe(gf_cuda_info *info);

/* Attach a device step arena to ctx, its first chunk first_bytes (initialising CUDA on device 0
 * on first use). GF_E_INVALID "built without CUDA" or "no CUDA device visible (...)";
 * GF_E_EXTERNAL for a CUDA or cuBLAS error, naming the call. */
gf_status gf_ctx_use_cuda(struct gf_ctx *ctx, size_t first_bytes);

/* cuBLAS's math mode for the GEMMs of every op from now on: on, TF32 tensor cores
 * (CUBLAS_TF32_TENSOR_OP_MATH: inputs rounded to 10 mantissa bits, FP32 accumulation); off, plain
 * FP32 (CUBLAS_DEFAULT_MATH, the default). `[run] tf32` (the session applies it). Initialises CUDA
 * on first use; GF_E_INVALID "built without CUDA" or "no CUDA device visible (...)". */
gf_status gf_cuda_tf32(int on);

/* n floats of t's data into host memory dst, whatever t's device. A GPU tensor: a synchronous
 * copy, which waits for the stream and so also reports a CUDA failure noted before it (an op's);
 * this is how the trainer reads the loss. */
gf_status gf_tensor_to_host(const gf_tensor *t, float *dst, int64_t n);

/* ---- device memory for the tape (src/core/tape.c, through the CUDA backend's table) ---- */

/* n floats from ctx's device step arena: uninitialised, or zeroed (on the stream) */
float *gf_cuda_floats(struct gf_ctx *ctx, int64_t n);
float *gf_cuda_zeros(struct gf_ctx *ctx, int64_t n);
/* dst[i] += src[i], i < n, for a device dst and a host src (the seed of a backward) */
void gf_cuda_acc_host(struct gf_ctx *ctx, float *dst, const float *src, int64_t n);
/* the same for a src whose values are the same at every step (gf_cuda_const, gflow/cuda.h) */
void gf_cuda_acc_const(struct gf_ctx *ctx, float *dst, const float *src, int64_t n);

/* ---- a step's inputs in device memory before its capture (docs/cuda.md "Captured once") ---- */

/* host's bytes copied to the step's device memory now (gf_cuda_stage), for an op of this step
 * that stages the same host array: it takes this copy. Called before the step's capture, the
 * copy is not in the graph, so a replay of it reads the next step's. A no-op without ctx->cuda. */
void gf_ctx_feed(struct gf_ctx *ctx, const void *host, size_t bytes);
/* n dropout keys drawn from ctx->rng now, in order, and copied to the step's device memory: the
 * step's GPU dropout ops take them in turn (ctx->key_dev) instead of drawing. */
void gf_ctx_draw_keys(struct gf_ctx *ctx, int32_t n);
/* gflow's cudaMalloc and cudaFree calls so far (gflow/cuda.h counts them): a graph captured when
 * it read N holds device addresses that still hold while it reads N (0 without CUDA) */
int64_t gf_cuda_allocs(void);
/* bytes of ctx's device step arena in use (0 without one) */
size_t gf_ctx_device_used(const struct gf_ctx *ctx);
/* A replayed step: the arena memory its graph's capture used (`used` bytes of the first chunk,
 * where a captured step's allocations all are) handed out again, after the feed's, so that
 * nothing else of the step is placed there while the graph's kernels use it. */
void gf_ctx_device_hold(struct gf_ctx *ctx, size_t used);
/* copies staged while the stream captured, so far (in a graph, which a replay would read stale) */
int64_t gf_ctx_captured_stages(const struct gf_ctx *ctx);
/* The training step as a CUDA graph (docs/cuda.md "CUDA graphs"): gf_cuda_graph_begin starts
 * capturing the stream; gf_cuda_graph_launch ends the capture and launches what it recorded into
 * *g (made at the first call; the graph there is updated in place when the capture has the same
 * nodes, else instantiated anew). A call refused during the capture (one that synchronises or
 * allocates) fails the launch with a message naming it; none of the captured work has run then.
 * A step that needs more device memory than the first (the arena grows) or outgrew its pinned
 * staging (gflow/cuda.h) is not refused: its capture is dropped, nothing launched, and *redo set:
 * the caller runs the step again without a graph (the arena has grown meanwhile, and the reset
 * before grows the staging). Built without CUDA: GF_E_INVALID. */
struct gf_cuda_graph;
gf_status gf_cuda_graph_begin(void);
/* GF_CUDA_SYNC=1 (gflow/cuda.h: every noted call waits for the stream, which no capture allows);
 * 0 in a build without CUDA */
int gf_cuda_sync_mode(void);
gf_status gf_cuda_graph_launch(struct gf_cuda_graph **g, int *redo);
/* launch g's graph as it is: the step's inputs fed, its keys drawn and its scalars prepared
 * (gf_step_queue_prepare) just before, as for the capture it was made from */
gf_status gf_cuda_graph_replay(struct gf_cuda_graph *g);
void gf_cuda_graph_free(struct gf_cuda_graph *g);
/* the device arena's gf_arena_reset / gf_arena_free (free also releases the struct) */
void gf_cuda_arena_reset(struct gf_cuda_arena *a);
void gf_cuda_arena_free(struct gf_cuda_arena *a);

#ifdef __cplusplus
}
#endif

#endif
