/* gflow/cuda.h — the CUDA runtime of gflow: one device, one stream, one cuBLAS handle, the
 * device step arena, copies, and error checks that turn CUDA and cuBLAS failures into a
 * gf_status whose message names the call. Only for a build with the CUDA backend
 * (GF_HAVE_CUDA): src/core/cuda/, src/ops/cuda/ and tests/cuda/ include it. What every build
 * has (device names, the probe, the tape's device memory) is gflow/device.h.
 *
 * Conventions:
 *  - device 0, one non-blocking stream; every kernel, copy and cuBLAS call goes on it, so work
 *    is ordered without host synchronisation inside a step;
 *  - functions that can fail return a gf_status (GF_CUDA_TRY); ops, which return a tensor,
 *    note the first failure instead (GF_CUDA_NOTE, GF_CUBLAS_NOTE, GF_CUDA_LAUNCHED) and
 *    gf_cuda_sync() reports it, as the stream's own asynchronous errors are reported there;
 *  - cuBLAS computes in FP32 (CUBLAS_DEFAULT_MATH: no TF32; [run] tf32 = true switches it to
 *    CUBLAS_TF32_TENSOR_OP_MATH, gf_cuda_tf32) with a workspace given at init, so a steady-state
 *    step calls neither cudaMalloc nor cudaFree;
 *  - cuBLAS is loaded by gf_cuda_init (dlopen), not linked: its two libraries are ~600 MB, and
 *    linking them cost every gflow process 0.4-0.9 s of CPU at start-up, GPU or not. Its
 *    functions are called through gf_cublas (gf_cublas.sgemm(...)); cudart is linked.
 */
#ifndef GFLOW_CUDA_H
#define GFLOW_CUDA_H

#ifndef GF_HAVE_CUDA
#error "gflow/cuda.h is for a build with the CUDA backend (GF_HAVE_CUDA, meson -Dcuda)"
#endif

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "gflow/device.h"
#include "gflow/tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLAS functions gflow calls, resolved by gf_cuda_init (NULL before). */
typedef struct gf_cublas_api {
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasSetMathMode) set_math_mode;
    __typeof__(&cublasGetMathMode) get_math_mode;
    __typeof__(&cublasSetWorkspace_v2) set_workspace;
    __typeof__(&cublasSgemm_v2) sgemm;
    /* [run] precision = bf16: bf16 inputs, fp32 out. Spelled out: C++ sees cublasGemmEx overloaded */
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    __typeof__(&cublasSaxpy_v2) saxpy;
    __typeof__(&cublasGetStatusString) status_string;
    __typeof__(&cublasGetStatusName) status_name;
} gf_cublas_api;
extern gf_cublas_api gf_cublas;

/* Select device 0, load cuBLAS, create the stream, the cuBLAS handle and its workspace; once per process
 * (later calls return the first call's status). GF_E_INVALID "no CUDA device visible (...)". */
gf_status gf_cuda_init(void);
cudaStream_t gf_cuda_stream(void);
cublasHandle_t gf_cuda_blas(void);

/* GF_OK for success, else GF_E_EXTERNAL with "CUDA error in CALL at FILE:LINE: text (name)". */
gf_status gf_cuda_status(cudaError_t e, const char *call, const char *file, int line);
gf_status gf_cublas_status(cublasStatus_t s, const char *call, const char *file, int line);
#define GF_CUDA_TRY(call) GF_TRY(gf_cuda_status((call), #call, __FILE__, __LINE__))
#define GF_CUBLAS_TRY(call) GF_TRY(gf_cublas_status((call), #call, __FILE__, __LINE__))

/* For ops: keep the first failure (the same message) for gf_cuda_sync. */
void gf_cuda_note(cudaError_t e, const char *call, const char *file, int line);
void gf_cublas_note(cublasStatus_t s, const char *call, const char *file, int line);
#define GF_CUDA_NOTE(call) gf_cuda_note((call), #call, __FILE__, __LINE__)
#define GF_CUBLAS_NOTE(call) gf_cublas_note((call), #call, __FILE__, __LINE__)
/* after a kernel launch: a bad launch configuration is reported at once by the runtime.
 * Debugging a fault on a GPU: GF_CUDA_SYNC=1 in the environment makes every noted call (each
 * launch, copy, memset and cuBLAS call of the ops) wait for the stream, so an error names the
 * kernel and the file:line of its launch (slow; gf_cuda_sync_mode says whether it is on). A
 * failure noted earlier is reported before any later GF_CUDA_TRY's error (a copy's, say). */
/* bytes: what the launch moves to and from device memory, from its shapes: every buffer it reads
 * plus every buffer it writes, each once at its size (an accumulation += a read and a write; a
 * re-read is not counted again) */
#define GF_CUDA_LAUNCHED(kernel, bytes) gf_cuda_launched("launch of " kernel, (int64_t)(bytes), __FILE__, __LINE__)
/* GF_CUDA_LAUNCHED's function: counts the launch and its bytes (gf_cuda_launches,
 * gf_cuda_launch_bytes), then notes its error */
void gf_cuda_launched(const char *call, int64_t bytes, const char *file, int line);
/* Launches the host has made since the process started: gflow's own kernels (each
 * GF_CUDA_LAUNCHED) and cuBLAS calls (each GF_CUBLAS_NOTE: one or more kernels of cuBLAS's). A
 * replayed CUDA graph launches its kernels without the host, so it adds nothing here. */
void gf_cuda_launches(int64_t *kernels, int64_t *blas_calls);
/* The bytes those launches of gflow's kernels moved (their GF_CUDA_LAUNCHED figures; cuBLAS's
 * and the copies' not counted) */
int64_t gf_cuda_launch_bytes(void);


/* Wait for the stream. The first noted failure (then forgotten), else the stream's error. */
gf_status gf_cuda_sync(void);

/* A captured step (gf_cuda_graph_begin / gf_cuda_graph_launch, gflow/device.h): the instantiated
 * graph and what became of the captures, for tests and the docs' counts */
typedef struct gf_cuda_graph {
    cudaGraphExec_t exec;
    int64_t n_instantiated; /* captures instantiated: the first, and each with other nodes */
    int64_t n_updated;      /* captures that updated exec in place (cudaGraphExecUpdate) */
    int64_t n_launched;
    int64_t n_redone;       /* captures dropped for a staging copy from pageable memory (*redo) */
    int64_t n_replayed;     /* launches without a capture (gf_cuda_graph_replay) */
} gf_cuda_graph;
/* a step is being captured (gf_cuda_graph_begin .. gf_cuda_graph_launch) */
int gf_cuda_capturing(void);
/* During a capture, for what no capture may hold (a cudaMalloc or cudaFree as the arena or the
 * scratch grows, a copy from pageable memory): the capture is dropped, so that nothing of it will
 * run (gf_cuda_graph_launch tells the caller to run the step again, uncaptured), and the stream
 * stops capturing until gf_cuda_capture_resume, which captures the rest of the step into a graph
 * that is dropped too. */
void gf_cuda_capture_drop(void);
void gf_cuda_capture_resume(void);

/* The runtime's one reusable device scratch, at least `bytes` (256-byte aligned), for work that
 * is done before the next call's work starts on the stream (the bf16 operand copies of the
 * GEMMs): stream order keeps one user from overwriting what the last still reads. Grown by
 * cudaMalloc when a request is larger (cudaFree of the old one waits for the device), so a steady
 * step allocates nothing. NULL, with the failure noted, when the GPU has no room. */
void *gf_cuda_scratch(size_t bytes);
/* bf16 operands (src/core/cuda/bf16.cu). gf_cuda_to_bf16: dst (rows, cols; row stride ldd, bf16)
 * = src (rows, cols; row stride lds) rounded to nearest even, one kernel on the stream.
 * The weights' mirrors (gf_params_keep_bf16): a device block's data16 registered with its data
 * (n floats); gf_cuda_bf16_mirror_of gives the bf16 copy of p[0 .. extent) when that lies in a
 * registered block, else NULL. gf_cuda_bf16_reuse(mode): 1 (the default) the products read the
 * mirrors and the copies ops hold or keep (cu_bf16_hold, cu_bf16_keep); 0 they ignore them and
 * round each operand at its product, as before either existed; 2 as 1, and each copy a product
 * reuses is first compared with a fresh rounding of its source (gf_cuda_bf16_check: a kernel and
 * a wait per product, skipped in a capture; tests); -1 asks. It returns the previous mode.
 * gf_cuda_init sets it from GF_CUDA_BF16_REUSE (0, 1 or 2; another value fails the init).
 * gf_cuda_bf16_checked: the copies checked so far, and in *stale how many differed. */
void gf_cuda_to_bf16(void *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols);
gf_status gf_cuda_bf16_mirror_add(const float *base, int64_t n, const void *m16);
void gf_cuda_bf16_mirror_remove(const float *base);
const void *gf_cuda_bf16_mirror_of(const float *p, int64_t extent);
int gf_cuda_bf16_reuse(int mode);
void gf_cuda_bf16_check(const void *copy, int64_t ldc, const float *src, int64_t lds, int64_t rows, int64_t cols);
int64_t gf_cuda_bf16_checked(int64_t *stale);

/* Counters in device memory for a kernel whose blocks count themselves done with an integer
 * atomicAdd, so that the last one finishes the work (cu_colsums): at least n of them, 0 at every
 * kernel's start, since each kernel that counts leaves them at 0 again and the kernels of the one
 * stream run one after another (a captured graph's too: its nodes are the stream's, in order).
 * GF_CUDA_COUNTERS are allocated by gf_cuda_init; a larger request gets a larger array (outside
 * any capture: one that asks is dropped and run again), and the old one is kept, never freed,
 * for the graphs that hold it. NULL, with the failure noted, when the GPU has no room. */
/* The most bytes an op's chunked work buffer takes (head_ce's logits, a chunk of rows at a time):
 * 512 MiB, so the paper's 4,096 rows of 30,522 logits are one chunk (one set of products and no
 * more roundings of the table in bf16). `set` > 0 sets it (tests lower it to run several chunks);
 * returns the previous value. */
int64_t gf_cuda_chunk_bytes(int64_t set);
#define GF_CUDA_COUNTERS 4096
unsigned *gf_cuda_counters(size_t n);

/* Device memory outside the step arena (parameters, test tensors); free(NULL) is a no-op. */
gf_status gf_cuda_malloc(void **p, size_t bytes);
void gf_cuda_free(void *p);
/* Every cudaMalloc and cudaFree of gflow (these two, the scratch, gf_cuda_const, the counters,
 * cuBLAS's workspace, the step arena's chunks) is counted: gf_cuda_allocs (gflow/device.h), the calls so
 * far; gf_cuda_mem_held, the bytes held now; gf_cuda_mem_peak, the most held at once since
 * gf_cuda_mem_peak_reset (or the start). The CUDA context's own memory is not among them. */
size_t gf_cuda_mem_held(void);
size_t gf_cuda_mem_peak(void);
void gf_cuda_mem_peak_reset(void);
/* A device copy of `bytes` the same at every step (the backward's seed, a layer's offsets): one
 * per distinct content, made at its first request (outside any capture: one that meets new bytes
 * is dropped and run again) and kept until the process ends, so a graph that reads it can be
 * replayed. Aborts when the GPU has no room. */
const void *gf_cuda_const(const void *host, size_t bytes);
/* Copies on the stream that return when they are done (they synchronise it). */
gf_status gf_cuda_upload(void *dst_dev, const void *src_host, size_t bytes);
gf_status gf_cuda_download(void *dst_host, const void *src_dev, size_t bytes);

/* GFLOP/s of cublasSgemm on this GPU, for row-major Y (m, n) = X (m, k) · Wᵀ (the model's
 * linear layers and tied head), best of `reps` CUDA-event-timed batches after a warm-up;
 * tf32: in CUBLAS_TF32_TENSOR_OP_MATH (the handle goes back to plain FP32 after). The
 * denominator of `gflow bench`'s MFU on the GPU (src/core/cuda/gemm_peak.c). */
gf_status gf_cuda_sgemm_gflops(int64_t m, int64_t n, int64_t k, int tf32, int reps, double *gflops);

/* Σ x[i]², i < n, accumulated in double on the stream and read back into *out (a synchronous
 * copy: it waits for the stream, so it also reports a failure noted before it). Two stages in
 * an order fixed by n alone: GF_SUMSQ_BLOCKS blocks (fewer for small n) each sum a grid-strided
 * share in double, reduce it in a fixed tree and write one partial; one block adds the partials
 * the same way. The same n gives the same bits on every run and every GPU; no atomics. Its
 * scratch (GF_SUMSQ_BLOCKS + 1 doubles) is allocated once, at the first call. Not finite iff an
 * element is not (a finite float's square cannot overflow a double). */
#define GF_SUMSQ_BLOCKS 1024
gf_status gf_cuda_sumsq(const float *x, int64_t n, double *out);
/* The same sum into out_dev (one double of device memory) on the stream: no wait; a launch's
 * failure is noted (gf_cuda_sync reports it). */
gf_status gf_cuda_sumsq_to(const float *x, int64_t n, double *out_dev);
/* The lowest i < n with x[i] not finite into *out_dev (int64, -1: none), the same two stages with
 * a minimum; both kernels return at once unless *when_dev is non-zero (device memory a kernel
 * queued before sets: the step's non-finite flag), so a step pays for the search only when its
 * gradient is not finite. Needs n < 2^53. */
gf_status gf_cuda_first_nonfinite(const float *x, int64_t n, const int32_t *when_dev, int64_t *out_dev);

/* The device step arena: the GPU twin of gf_arena (gflow/arena.h). Activations, saved buffers
 * and activation gradients of GPU ops are bump-allocated here and released all at once by
 * gf_ctx_reset. When a chunk is full a new one is chained (cudaMalloc); reset coalesces the
 * chain into one chunk of the high-water mark and a sixteenth more (and 1 MiB), so from the
 * second step on a step calls no cudaMalloc, nor does a later step a little larger than the
 * first (a timed step's marker node). Growth failing (the GPU is out of memory) aborts with a message, as
 * the host arena does: a step cannot continue half-allocated. */
typedef gf_arena_chunk gf_cuda_chunk; /* its base in device memory; grown by gf_chunks_take */

/* Pinned host memory for the step's host-to-device copies (gf_cuda_stage): a copy from pinned
 * memory is a DMA in stream order that the host does not wait for; one from pageable memory may
 * make the host wait for the stream (the runtime's documented behaviour), which would stop it
 * queueing the rest of the step while the GPU runs. GF_CUDA_STAGES buffers, used in turn, one a
 * step (a reset ends it): the step that reuses one first waits for the event recorded at the end
 * of the step that filled it, so no copy can read bytes the host has already overwritten. One
 * more than the steps a training step queue holds (GF_STEP_RING, gflow/optim.h): the flush of a
 * full queue has waited for that event already, so deferred steps never wait here. */
#define GF_CUDA_STAGES 17 /* GF_STEP_RING + 1 (asserted in src/optim/cuda/adamw.cu) */
typedef struct gf_cuda_staging {
    unsigned char *buf; /* pinned host memory (cudaHostAlloc), cap bytes; NULL before the first */
    size_t cap, used;
    cudaEvent_t done; /* recorded on the stream at the reset that ends this buffer's step */
    int pending;      /* done recorded and not yet waited for */
} gf_cuda_staging;

/* A step's input copied before its capture (gf_cuda_feed_into): a stage of the same host array
 * takes the copy, so the graph holds no copy of it and a replay reads the next step's */
typedef struct gf_cuda_fed {
    const void *host;
    size_t bytes;
    void *dev, *aux; /* aux: what the feeding op derived from it (the embedding's index) */
} gf_cuda_fed;

typedef struct gf_cuda_arena {
    gf_cuda_chunk *head, *first;
    size_t used, high_water, min_chunk;
    int64_t n_resets;
    int64_t serial;    /* this arena among the process's (a freed arena's address may come back) */
    int64_t n_mallocs; /* cudaMalloc calls so far (tests check the steady state) */
    gf_cuda_staging stage[GF_CUDA_STAGES];
    int cur;                         /* the staging buffer of this step */
    size_t staged, staged_high;      /* staged bytes this step, most in one step */
    size_t stage_refused;            /* staged_high when cudaHostAlloc last failed (0: never) */
    int64_t n_host_allocs;           /* cudaHostAlloc calls so far */
    int64_t n_pageable;              /* copies made from pageable memory (staging full or absent) */
    gf_cuda_fed fed[8];              /* this step's (gf_cuda_feed_into); emptied by the reset */
    int n_fed;
    int64_t n_captured_stages;       /* copies staged while the stream captured (in the graph) */
    /* GF_CUDA_ARENA_DEBUG=1 (compute-sanitizer runs): every request is its own cudaMalloc of
     * exactly its size, freed at the next reset, so memcheck sees a kernel that reaches past its
     * tensor (in the bump arena that would land in the next tensor, unseen). Slow. */
    int debug;
    void **dbg;                      /* this step's allocations (debug mode) */
    size_t n_dbg, cap_dbg;
} gf_cuda_arena;

/* 256-byte aligned device memory, uninitialised */
void *gf_cuda_arena_alloc(gf_cuda_arena *a, size_t bytes);
/* `bytes` of host memory copied into new step-arena memory on the stream, through the step's
 * pinned staging buffer (the host may reuse `host` at once). The first step, and one that stages
 * more than its buffer holds, copies from pageable memory; resets grow the buffers to the most
 * one step staged, so from the third step on a steady run allocates nothing and copies pinned.
 * During a capture such a copy is not made (no capture holds one): gf_cuda_capture_drop. */
void *gf_cuda_stage(gf_cuda_arena *a, const void *host, size_t bytes);
/* the same into device memory the caller has (at least `bytes` of it) */
void gf_cuda_stage_into(gf_cuda_arena *a, void *dst_dev, const void *host, size_t bytes);
/* gf_cuda_stage, remembered until the reset (at most 8 a step); the entry, whose aux is NULL */
gf_cuda_fed *gf_cuda_feed_into(gf_cuda_arena *a, const void *host, size_t bytes);
/* this step's entry for `host` with at least `bytes`, or NULL */
gf_cuda_fed *gf_cuda_fed_find(gf_cuda_arena *a, const void *host, size_t bytes);
size_t gf_cuda_arena_capacity(const gf_cuda_arena *a);
/* a new activation on the GPU: the struct in ctx's host arena, the data in its device arena */
gf_tensor *gf_cuda_tensor_new(gf_ctx *ctx, int32_t ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif

#endif
