/* runtime.c — the process's CUDA device, stream and cuBLAS handle; the probe; errors as
 * gf_status naming the call; copies; the backward seed. See gflow/cuda.h and gflow/device.h. */
#include "gflow/cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gf_cublas_api gf_cublas;

#define GF_CUBLAS_WORKSPACE ((size_t)32 << 20) /* what cuBLAS asks for on Hopper */

static struct {
    int tried;             /* gf_cuda_init ran */
    gf_status status;      /* and this was its result */
    char message[512];     /* its message when it failed */
    cudaStream_t stream;
    cublasHandle_t blas;
    void *workspace;
    void *scratch;         /* gf_cuda_scratch */
    size_t scratch_bytes;
    unsigned *counters;    /* gf_cuda_counters: the newest array, all 0 between kernels */
    size_t n_counters;
    gf_status noted;       /* first failure an op noted, until gf_cuda_sync reports it */
    char noted_msg[1024];
    int capturing;         /* gf_cuda_graph_begin .. gf_cuda_graph_launch */
    int capture_dropped;   /* gf_cuda_capture_drop during it */
    char capture_msg[1024]; /* the first failure during the capture: what spoilt it */
    int64_t n_allocs;      /* cudaMalloc and cudaFree calls (gf_cuda_allocs) */
    int64_t n_kernels, n_blas; /* launches of gflow's kernels and cuBLAS calls (gf_cuda_launches) */
    int64_t n_bytes;           /* the bytes gflow's kernels moved (gf_cuda_launch_bytes) */
    struct gf_cuda_live { void *p; size_t bytes; } *live; /* gflow's device allocations now */
    size_t n_live, cap_live;
    size_t held, peak;     /* their bytes, and the most at once (gf_cuda_mem_peak) */
    struct gf_cuda_const_buf {
        struct gf_cuda_const_buf *next;
        size_t bytes;
        void *dev;
        unsigned char host[];
    } *consts;             /* gf_cuda_const: kept until the process ends */
} rt;

/* "../src/ops/cuda/x.cu" (a path from the build directory) -> "src/ops/cuda/x.cu": meson.build's
 * -fmacro-prefix-map already makes __FILE__ the latter; this keeps other compilers' messages short */
static const char *short_path(const char *file) {
    while (!strncmp(file, "../", 3)) file += 3;
    return file;
}

/* during a capture the first failure is kept apart: the calls after it fail only because it spoilt
 * the capture, and gf_cuda_graph_launch names it */
static void keep_capture_failure(const char *msg) {
    if (rt.capturing && !rt.capture_msg[0]) snprintf(rt.capture_msg, sizeof rt.capture_msg, "%s", msg);
}

static void format_cuda(char *buf, size_t n, cudaError_t e, const char *call, const char *file, int line) {
    snprintf(buf, n, "CUDA error in %s at %s:%d: %s (%s)", call, short_path(file), line, cudaGetErrorString(e),
             cudaGetErrorName(e));
    keep_capture_failure(buf);
}

/* Load cuBLAS (see gflow/cuda.h): its soname first (LD_LIBRARY_PATH, the executable's run path,
 * ld.so.conf), then the toolkit's copy found at configure time. Idempotent. */
static gf_status load_cublas(void) {
#ifdef GF_CUDA_EMULATOR /* the emulator's cuBLAS is linked in (src/core/cuda/emu/emu.cc) */
    gf_cublas = (gf_cublas_api){cublasCreate_v2, cublasSetStream_v2, cublasSetMathMode, cublasGetMathMode,
                                cublasSetWorkspace_v2, cublasSgemm_v2, cublasGemmEx, cublasSaxpy_v2, cublasGetStatusString,
                                cublasGetStatusName};
    return GF_OK;
#else
    static gf_status st = GF_E_COUNT; /* not tried */
    static char why[512];
    if (st == GF_E_COUNT) {
        void *h = dlopen(GF_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h) h = dlopen(GF_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
        st = GF_OK;
        if (!h) {
            snprintf(why, sizeof why, "cannot load cuBLAS (%s, %s): %s", GF_CUBLAS_SONAME, GF_CUBLAS_PATH, dlerror());
            st = GF_E_EXTERNAL;
        }
#define SYM(field, name)                                                                         \
        if (!st) {                                                                               \
            void *f = dlsym(h, name);                                                            \
            memcpy(&gf_cublas.field, &f, sizeof f); /* POSIX: a data pointer holds a function's */ \
            if (!f) {                                                                            \
                snprintf(why, sizeof why, "cuBLAS (%s) lacks %s", GF_CUBLAS_SONAME, name);        \
                st = GF_E_EXTERNAL;                                                              \
            }                                                                                    \
        }
        SYM(create, "cublasCreate_v2")
        SYM(set_stream, "cublasSetStream_v2")
        SYM(set_math_mode, "cublasSetMathMode")
        SYM(get_math_mode, "cublasGetMathMode")
        SYM(set_workspace, "cublasSetWorkspace_v2")
        SYM(sgemm, "cublasSgemm_v2")
        SYM(gemm_ex, "cublasGemmEx")
        SYM(saxpy, "cublasSaxpy_v2")
        SYM(status_string, "cublasGetStatusString")
        SYM(status_name, "cublasGetStatusName")
#undef SYM
        if (st) memset(&gf_cublas, 0, sizeof gf_cublas);
    }
    return st ? gf_error_set(st, "%s", why) : GF_OK;
#endif
}

static void format_cublas(char *buf, size_t n, cublasStatus_t s, const char *call, const char *file, int line) {
    if (!gf_cublas.status_string) load_cublas(); /* a status to explain may come before gf_cuda_init */
    if (gf_cublas.status_string)
        snprintf(buf, n, "cuBLAS error in %s at %s:%d: %s (%s)", call, short_path(file), line,
                 gf_cublas.status_string(s), gf_cublas.status_name(s));
    else
        snprintf(buf, n, "cuBLAS error in %s at %s:%d: status %d", call, short_path(file), line, (int)s);
    keep_capture_failure(buf);
}

/* A kernel's fault surfaces at the next call that waits (a copy, a synchronisation): when an op
 * noted a failure before it, that one is the cause and is reported first (then forgotten). */
static gf_status report(const char *msg) {
    if (!rt.noted) return gf_error_set(GF_E_EXTERNAL, "%s", msg);
    rt.noted = GF_OK;
    return gf_error_set(GF_E_EXTERNAL, "%s; then %s", rt.noted_msg, msg);
}

gf_status gf_cuda_status(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return GF_OK;
    char msg[1024];
    format_cuda(msg, sizeof msg, e, call, file, line);
    return report(msg);
}

gf_status gf_cublas_status(cublasStatus_t s, const char *call, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return GF_OK;
    char msg[1024];
    format_cublas(msg, sizeof msg, s, call, file, line);
    return report(msg);
}

int gf_cuda_sync_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("GF_CUDA_SYNC");
        mode = e && *e && strcmp(e, "0");
    }
    return mode;
}

/* GF_CUDA_SYNC=1: after a call an op noted as successful, wait for the stream, so that a kernel
 * that faults is named with its launch's file and line instead of the next copy's */
static void sync_after(const char *call, const char *file, int line) {
    if (!gf_cuda_sync_mode() || rt.noted || !rt.tried || rt.status) return;
    cudaError_t e = cudaStreamSynchronize(rt.stream);
    if (e == cudaSuccess) return;
    char what[600];
    snprintf(what, sizeof what, "%s (GF_CUDA_SYNC=1: the stream synchronised after it)", call);
    format_cuda(rt.noted_msg, sizeof rt.noted_msg, e, what, file, line);
    rt.noted = GF_E_EXTERNAL;
}

void gf_cuda_note(cudaError_t e, const char *call, const char *file, int line) {
    if (rt.noted) return;
    if (e == cudaSuccess) {
        sync_after(call, file, line);
        return;
    }
    format_cuda(rt.noted_msg, sizeof rt.noted_msg, e, call, file, line);
    rt.noted = GF_E_EXTERNAL;
}

void gf_cuda_launched(const char *call, int64_t bytes, const char *file, int line) {
    rt.n_kernels++;
    rt.n_bytes += bytes;
    gf_cuda_note(cudaGetLastError(), call, file, line);
}

int64_t gf_cuda_launch_bytes(void) { return rt.n_bytes; }

void gf_cuda_launches(int64_t *kernels, int64_t *blas_calls) {
    *kernels = rt.n_kernels;
    *blas_calls = rt.n_blas;
}

void gf_cublas_note(cublasStatus_t s, const char *call, const char *file, int line) {
    rt.n_blas++;
    if (rt.noted) return;
    if (s == CUBLAS_STATUS_SUCCESS) {
        sync_after(call, file, line);
        return;
    }
    format_cublas(rt.noted_msg, sizeof rt.noted_msg, s, call, file, line);
    rt.noted = GF_E_EXTERNAL;
}

/* the noted failure (then forgotten), else GF_OK */
static gf_status take_noted(void) {
    if (!rt.noted) return GF_OK;
    const gf_status st = gf_error_set(rt.noted, "%s", rt.noted_msg);
    rt.noted = GF_OK;
    return st;
}

gf_status gf_cuda_sync(void) {
    gf_status st = GF_OK;
    if (rt.tried && !rt.status) /* else no stream exists and nothing can have run on it */
        st = gf_cuda_status(cudaStreamSynchronize(rt.stream), "cudaStreamSynchronize(stream)", __FILE__, __LINE__);
    if (rt.noted) st = take_noted(); /* the first failure explains the later ones: report it */
    return st;
}

void gf_cuda_probe(gf_cuda_info *info) {
    memset(info, 0, sizeof *info);
    cudaRuntimeGetVersion(&info->runtime_version);
    cudaDriverGetVersion(&info->driver_version);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        /* say what is missing in the user's words: with no driver loaded at all cudart reports
         * "CUDA driver version is insufficient", which reads like a version mismatch */
        if (info->driver_version == 0)
            snprintf(info->why, sizeof info->why, "no NVIDIA driver (libcuda.so.1 not found or not loadable; "
                     "cudaGetDeviceCount: %s)", cudaGetErrorName(e));
        else if (e == cudaErrorNoDevice || (e == cudaSuccess && n <= 0))
            snprintf(info->why, sizeof info->why, "no NVIDIA GPU visible to driver %d.%d (cudaGetDeviceCount: %s)",
                     info->driver_version / 1000, info->driver_version % 1000 / 10, cudaGetErrorName(e));
        else
            snprintf(info->why, sizeof info->why, "cudaGetDeviceCount: %s (%s); driver %d.%d, runtime %d.%d",
                     cudaGetErrorString(e), cudaGetErrorName(e), info->driver_version / 1000,
                     info->driver_version % 1000 / 10, info->runtime_version / 1000,
                     info->runtime_version % 1000 / 10);
        return;
    }
    info->n_devices = n;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
        snprintf(info->name, sizeof info->name, "%s", p.name);
        info->cc_major = p.major;
        info->cc_minor = p.minor;
        info->mem_bytes = p.totalGlobalMem;
    }
}

/* ---- gflow's device memory: every cudaMalloc and cudaFree of gflow is one of these two, which
 * keep the bytes held and their high-water mark (gf_cuda_mem_peak) ---- */

static cudaError_t dev_malloc(void **p, size_t bytes) {
    *p = NULL;
    rt.n_allocs++;
    if (rt.n_live == rt.cap_live) {
        size_t cap = rt.cap_live ? 2 * rt.cap_live : 64;
        struct gf_cuda_live *l = realloc(rt.live, cap * sizeof *l);
        if (!l) return cudaErrorMemoryAllocation;
        rt.live = l;
        rt.cap_live = cap;
    }
    bytes = bytes ? bytes : 1;
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) return e;
    rt.live[rt.n_live++] = (struct gf_cuda_live){*p, bytes};
    rt.held += bytes;
    if (rt.held > rt.peak) rt.peak = rt.held;
    return cudaSuccess;
}

static cudaError_t dev_free(void *p) {
    if (!p) return cudaSuccess;
    rt.n_allocs++;
    for (size_t i = rt.n_live; i-- > 0;) /* the newest first: the arena's debug mode frees its last */
        if (rt.live[i].p == p) {
            rt.held -= rt.live[i].bytes;
            rt.live[i] = rt.live[--rt.n_live];
            break;
        }
    return cudaFree(p);
}

size_t gf_cuda_mem_held(void) { return rt.held; }
size_t gf_cuda_mem_peak(void) { return rt.peak; }
void gf_cuda_mem_peak_reset(void) { rt.peak = rt.held; }

/* GF_CUDA_BF16_REUSE=0 rounds each bf16 product's operands at the product, as before their
 * copies were reused (to measure what reuse saves, or to rule it out); 1 reuses them (the
 * default); 2 checks each reuse (gf_cuda_bf16_reuse) */
static gf_status bf16_reuse_from_env(void) {
    const char *e = getenv("GF_CUDA_BF16_REUSE");
    if (!e) return GF_OK;
    if (strcmp(e, "0") && strcmp(e, "1") && strcmp(e, "2"))
        return gf_error_set(GF_E_INVALID, "GF_CUDA_BF16_REUSE='%s': use 0 (round each operand at its product), 1 "
                            "(reuse the rounded copies, the default) or 2 (reuse and check each)", e);
    gf_cuda_bf16_reuse(e[0] - '0');
    return GF_OK;
}

static gf_status init_once(void) {
    GF_TRY(bf16_reuse_from_env());
    gf_cuda_info info;
    gf_cuda_probe(&info);
    if (info.n_devices == 0) return gf_error_set(GF_E_INVALID, "no CUDA device visible (%s)", info.why);
    GF_TRY(load_cublas());
    GF_CUDA_TRY(cudaSetDevice(0));
    GF_CUDA_TRY(cudaStreamCreateWithFlags(&rt.stream, cudaStreamNonBlocking));
    GF_CUBLAS_TRY(gf_cublas.create(&rt.blas));
    GF_CUBLAS_TRY(gf_cublas.set_stream(rt.blas, rt.stream));
    /* plain FP32: no TF32 tensor-core rounding unless a recipe asks for it (gf_cuda_tf32) */
    GF_CUBLAS_TRY(gf_cublas.set_math_mode(rt.blas, CUBLAS_DEFAULT_MATH));
    /* our own workspace, so cuBLAS allocates nothing during a step */
    GF_CUDA_TRY(dev_malloc(&rt.workspace, GF_CUBLAS_WORKSPACE));
    GF_CUBLAS_TRY(gf_cublas.set_workspace(rt.blas, rt.workspace, GF_CUBLAS_WORKSPACE));
    GF_CUDA_TRY(dev_malloc((void **)&rt.counters, GF_CUDA_COUNTERS * sizeof(unsigned)));
    GF_CUDA_TRY(cudaMemsetAsync(rt.counters, 0, GF_CUDA_COUNTERS * sizeof(unsigned), rt.stream));
    rt.n_counters = GF_CUDA_COUNTERS;
    return GF_OK;
}

gf_status gf_cuda_init(void) {
    if (!rt.tried) {
        rt.tried = 1;
        rt.status = init_once();
        if (rt.status) snprintf(rt.message, sizeof rt.message, "%s", gf_last_error());
    }
    if (rt.status) return gf_error_set(rt.status, "%s", rt.message);
    return GF_OK;
}

gf_status gf_cuda_tf32(int on) {
    GF_TRY(gf_cuda_init());
    GF_CUBLAS_TRY(gf_cublas.set_math_mode(rt.blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    return GF_OK;
}

cudaStream_t gf_cuda_stream(void) {
    GF_ASSERT(rt.tried && !rt.status, "CUDA used before gf_cuda_init succeeded");
    return rt.stream;
}

cublasHandle_t gf_cuda_blas(void) {
    GF_ASSERT(rt.tried && !rt.status, "cuBLAS used before gf_cuda_init succeeded");
    return rt.blas;
}

gf_status gf_cuda_malloc(void **p, size_t bytes) {
    *p = NULL;
    GF_TRY(gf_cuda_init());
    GF_CUDA_TRY(dev_malloc(p, bytes));
    return GF_OK;
}

int64_t gf_cuda_allocs(void) { return rt.n_allocs; }

const void *gf_cuda_const(const void *host, size_t bytes) {
    for (const struct gf_cuda_const_buf *c = rt.consts; c; c = c->next)
        if (c->bytes == bytes && !memcmp(c->host, host, bytes)) return c->dev;
    struct gf_cuda_const_buf *c = malloc(sizeof *c + bytes);
    if (!c) gf_abort(__FILE__, __LINE__, "gf_cuda_const: out of host memory");
    memcpy(c->host, host, bytes);
    c->bytes = bytes;
    const int captured = rt.capturing; /* a captured step that meets new bytes: dropped, run again */
    if (captured) gf_cuda_capture_drop();
    gf_status st = gf_cuda_status(dev_malloc(&c->dev, bytes), "cudaMalloc(&c->dev)", __FILE__, __LINE__);
    if (!st) st = gf_cuda_upload(c->dev, host, bytes); /* waits: the caller's bytes may go at once */
    if (captured) gf_cuda_capture_resume();
    if (st) gf_abort(__FILE__, __LINE__, "gf_cuda_const: %s", gf_last_error());
    c->next = rt.consts;
    rt.consts = c;
    return c->dev;
}

int64_t gf_cuda_chunk_bytes(int64_t set) {
    static int64_t bytes = (int64_t)512 << 20;
    const int64_t was = bytes;
    if (set > 0) bytes = set;
    return was;
}

void *gf_cuda_scratch(size_t bytes) {
    if (bytes <= rt.scratch_bytes) return rt.scratch;
    const int captured = rt.capturing; /* a captured step that needs more: dropped, run again */
    if (captured) gf_cuda_capture_drop();
    gf_cuda_free(rt.scratch);
    rt.scratch = NULL, rt.scratch_bytes = 0;
    size_t want = (bytes + 255) & ~(size_t)255;
    cudaError_t e = dev_malloc(&rt.scratch, want);
    if (captured) gf_cuda_capture_resume();
    if (e != cudaSuccess) {
        gf_cuda_note(e, "cudaMalloc(scratch)", __FILE__, __LINE__);
        rt.scratch = NULL;
        return NULL;
    }
    rt.scratch_bytes = want;
    return rt.scratch;
}

unsigned *gf_cuda_counters(size_t n) {
    if (n <= rt.n_counters) return rt.counters;
    const int captured = rt.capturing; /* a captured step that needs more: dropped, run again */
    if (captured) gf_cuda_capture_drop();
    unsigned *c = NULL;
    cudaError_t e = dev_malloc((void **)&c, n * sizeof *c);
    if (e == cudaSuccess) e = cudaMemsetAsync(c, 0, n * sizeof *c, rt.stream); /* before any kernel uses them */
    if (captured) gf_cuda_capture_resume();
    if (e != cudaSuccess) {
        gf_cuda_note(e, "cudaMalloc and cudaMemsetAsync(counters)", __FILE__, __LINE__);
        return NULL;
    }
    rt.counters = c; /* the old array stays: a graph may hold it */
    rt.n_counters = n;
    return c;
}

void gf_cuda_free(void *p) {
    if (p) gf_cuda_note(dev_free(p), "cudaFree(p)", __FILE__, __LINE__);
}

gf_status gf_cuda_upload(void *dst_dev, const void *src_host, size_t bytes) {
    GF_TRY(gf_cuda_init());
    GF_CUDA_TRY(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, rt.stream));
    return gf_cuda_sync();
}

gf_status gf_cuda_download(void *dst_host, const void *src_dev, size_t bytes) {
    GF_TRY(gf_cuda_init());
    GF_CUDA_TRY(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, rt.stream));
    return gf_cuda_sync();
}

/* ---- the step as a CUDA graph (gflow/device.h) ---- */

gf_status gf_cuda_graph_begin(void) {
    GF_TRY(gf_cuda_init());
    GF_ASSERT(!rt.capturing, "gf_cuda_graph_begin: the stream is capturing already");
    GF_TRY(take_noted()); /* an earlier step's failure, not this capture's */
    GF_CUDA_TRY(cudaStreamBeginCapture(rt.stream, cudaStreamCaptureModeGlobal));
    rt.capturing = 1;
    rt.capture_dropped = 0;
    rt.capture_msg[0] = 0;
    return GF_OK;
}

int gf_cuda_capturing(void) { return rt.capturing; }

void gf_cuda_capture_drop(void) {
    if (!rt.capturing || rt.capture_dropped == 2) return;
    rt.capture_dropped = 2; /* 2: the stream is not capturing now */
    cudaGraph_t graph = NULL;
    (void)cudaStreamEndCapture(rt.stream, &graph); /* nothing of it runs */
    if (graph) gf_cuda_note(cudaGraphDestroy(graph), "cudaGraphDestroy(graph)", __FILE__, __LINE__);
    (void)cudaGetLastError();
}

void gf_cuda_capture_resume(void) {
    if (rt.capture_dropped != 2) return;
    rt.capture_dropped = 1;
    gf_cuda_note(cudaStreamBeginCapture(rt.stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture(resume)",
                 __FILE__, __LINE__);
}

/* the captured graph into g->exec: updated in place when it has exec's nodes, else instantiated */
static gf_status graph_install(gf_cuda_graph *g, cudaGraph_t graph) {
    if (g->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(g->exec, graph, &info) == cudaSuccess) {
            g->n_updated++;
            return GF_OK;
        }
        (void)cudaGetLastError(); /* other nodes (another shape): not an error */
        GF_CUDA_TRY(cudaGraphExecDestroy(g->exec)); /* a launch in flight completes first */
        g->exec = NULL;
    }
    GF_CUDA_TRY(cudaGraphInstantiate(&g->exec, graph, 0));
    g->n_instantiated++;
    return GF_OK;
}

gf_status gf_cuda_graph_launch(gf_cuda_graph **gp, int *redo) {
    GF_ASSERT(rt.capturing, "gf_cuda_graph_launch: no capture begun (gf_cuda_graph_begin)");
    *redo = 0;
    if (rt.capture_dropped) { /* something no capture holds: nothing runs, the caller redoes the step */
        gf_cuda_capture_drop();
        rt.capturing = 0;
        rt.noted = GF_OK; /* a refusal after the drop: the step run again meets that call uncaptured */
        if (!*gp && !(*gp = calloc(1, sizeof **gp))) return gf_error_set(GF_E_NOMEM, "gf_cuda_graph_launch");
        (*gp)->n_redone++;
        *redo = 1;
        return GF_OK;
    }
    cudaGraph_t graph = NULL;
    const cudaError_t e = cudaStreamEndCapture(rt.stream, &graph);
    rt.capturing = 0;
    if (e != cudaSuccess || rt.noted) {
        if (graph) gf_cuda_note(cudaGraphDestroy(graph), "cudaGraphDestroy(graph)", __FILE__, __LINE__);
        (void)cudaGetLastError();
        rt.noted = GF_OK;
        return gf_error_set(GF_E_EXTERNAL, "the training step captured as a CUDA graph did not run (a call that "
                            "synchronises or allocates cannot be captured; [run] cuda_graph = false runs the step "
                            "without a graph): %s", rt.capture_msg[0] ? rt.capture_msg : cudaGetErrorString(e));
    }
    if (!*gp && !(*gp = calloc(1, sizeof **gp))) {
        gf_cuda_note(cudaGraphDestroy(graph), "cudaGraphDestroy(graph)", __FILE__, __LINE__);
        return gf_error_set(GF_E_NOMEM, "gf_cuda_graph_launch");
    }
    gf_status st = graph_install(*gp, graph);
    gf_cuda_note(cudaGraphDestroy(graph), "cudaGraphDestroy(graph)", __FILE__, __LINE__);
    GF_TRY(st);
    GF_CUDA_TRY(cudaGraphLaunch((*gp)->exec, rt.stream));
    (*gp)->n_launched++;
    return GF_OK;
}

gf_status gf_cuda_graph_replay(gf_cuda_graph *g) {
    GF_ASSERT(g && g->exec && !rt.capturing, "gf_cuda_graph_replay: no graph, or the stream is capturing");
    GF_TRY(take_noted()); /* an earlier step's failure, not this launch's */
    GF_CUDA_TRY(cudaGraphLaunch(g->exec, rt.stream));
    g->n_launched++;
    g->n_replayed++;
    return GF_OK;
}

void gf_cuda_graph_free(gf_cuda_graph *g) {
    if (!g) return;
    if (g->exec) gf_cuda_note(cudaGraphExecDestroy(g->exec), "cudaGraphExecDestroy(g->exec)", __FILE__, __LINE__);
    free(g);
}

void gf_cuda_acc_const(gf_ctx *ctx, float *dst, const float *src, int64_t n) {
    GF_ASSERT(n >= 0 && n <= INT_MAX, "gf_cuda_acc_const: %lld elements", (long long)n);
    (void)ctx;
    const float *c = gf_cuda_const(src, (size_t)n * sizeof(float)), one = 1.0f;
    GF_CUBLAS_NOTE(gf_cublas.saxpy(rt.blas, (int)n, &one, c, 1, dst, 1));
}
