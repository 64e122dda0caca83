/* emu.cc — gflow's CUDA emulator (docs/cuda.md "The emulator"): the CUDA runtime API and the
 * cuBLAS functions gflow calls, on the host, and the scheduler that runs kernels.
 *
 * It exists so that the CUDA backend's logic (indices, reductions, barriers, the tape's device
 * paths, the trainer's GPU step) is executed and checked against the CPU path on machines
 * without a GPU: suite cuda in a -Demulate_cuda=true build. It says nothing about a GPU's
 * speed, memory behaviour, or its arithmetic where that differs from IEEE FP32 on the host
 * (fused multiply-adds, the library's own summation orders, TF32 inside cuBLAS, which is modelled
 * by rounding the inputs to TF32).
 *
 * Device memory is host memory handed out by cudaMalloc and recorded, so that copies, cuBLAS
 * calls and kernel pointer arguments can be checked against it. Every kernel runs to completion
 * at its launch (one stream, in order, so the program cannot tell), its blocks one after another
 * (GF_CUDA_EMU_ORDER=reverse: the last first). Within a block each CUDA
 * thread is a fiber with its own stack (gf_emu_switch below); __syncthreads and the warp shuffles switch
 * back to the scheduler, which resumes the threads in index order once every thread that has
 * not exited waits at the same kind of barrier.
 *
 * Copies from pinned host memory (cudaHostAlloc) are asynchronous on a GPU: the host may not write
 * their source until a synchronisation that waits for them (the stream's, or an event recorded
 * after them). The emulator copies at once, so it remembers each such copy's source and a
 * checksum, and aborts when a synchronisation finds the source changed, or the buffer freed,
 * while the copy was still in flight.
 *
 * Stream capture (graphs): while the stream captures, launches, copies, memsets and cuBLAS calls
 * are kept as closures holding their arguments by value, not run; cudaGraphLaunch runs them in
 * order. What the toolkit refuses during a capture in its global mode fails here too, with its
 * error, and invalidates the capture: a call that may synchronise or allocate (cudaStreamSynchronize,
 * cudaMalloc, cudaFree, cudaHostAlloc, cudaFreeHost, a copy from or to pageable host memory), a
 * cuBLAS call on a handle without a workspace of the caller's (cuBLAS would allocate one), and
 * waiting for an event recorded during the capture (cudaErrorCapturedEvent). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_emu.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

#define EMU_MAX_THREADS 1024
#define EMU_STACK ((size_t)256 << 10)            /* per CUDA thread, with a guard page below */
#define EMU_SMEM_DEFAULT 49152                   /* dynamic shared memory without the opt-in */
#define EMU_SMEM_OPTIN 232448                    /* an H100's cudaDevAttrMaxSharedMemoryPerBlockOptin */
#define EMU_TOTAL_MEM ((size_t)16 << 30)         /* what the emulated device reports and allows */

static std::mutex lock;
static std::map<uintptr_t, size_t> allocs; /* device memory: start -> bytes asked for */
static size_t alloc_bytes;
static cudaError_t last_error = cudaSuccess;   /* for cudaGetLastError */

/* ---- stream capture: its state (the API is below, with the streams) ---- */

enum { N_KERNEL, N_COPY, N_SET, N_BLAS };
struct emu_node {
    int kind;
    const void *fn; /* the kernel, the cuBLAS function, or the copy's kind: what an update may not change */
    std::function<void()> run;
};
struct CUgraph_st {
    std::vector<emu_node> nodes;
};
struct CUgraphExec_st {
    std::vector<emu_node> nodes;
};
static struct {
    bool on;
    cudaError_t failed; /* the first refused call's error: the capture is invalidated */
    std::vector<emu_node> nodes;
} cap;
static unsigned long graph_launches, graph_nodes;

/* lock held: a call the global capture mode refuses (it may synchronise or allocate) */
static cudaError_t refuse_in_capture(void) {
    if (!cap.failed) cap.failed = cudaErrorStreamCaptureUnsupported;
    return cudaErrorStreamCaptureUnsupported;
}
/* lock held, capturing: keep f for the graph, or say that an earlier call invalidated the capture */
static cudaError_t capture(int kind, const void *fn, std::function<void()> f) {
    if (cap.failed) return cudaErrorStreamCaptureInvalidated;
    cap.nodes.push_back({kind, fn, std::move(f)});
    return cudaSuccess;
}
static std::map<const void *, int> smem_limit; /* cudaFuncAttributeMaxDynamicSharedMemorySize */

[[noreturn]] static void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fault(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("gflow CUDA emulator: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (a GPU would fault or give wrong results here)\n", stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

/* [p, p + bytes) inside one allocation? (bytes 0: p inside or one past the end) */
static bool is_device(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return false;
    --it;
    return a >= it->first && a - it->first <= it->second && bytes <= it->second - (a - it->first);
}
static bool is_device_locked(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> g(lock);
    return is_device(p, bytes);
}

/* ---- device, errors ---- */

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "gflow CUDA emulator (CPU, no GPU)");
    prop->totalGlobalMem = EMU_TOTAL_MEM;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin) return cudaErrorInvalidValue;
    *value = EMU_SMEM_OPTIN;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *version) {
    *version = 0; /* no CUDA runtime: the probe shows 0.0 */
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *version) {
    *version = 0;
    return cudaSuccess;
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    }
    return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorGraphExecUpdateFailure:
        return "the graph update was not performed because it included changes which violated constraints "
               "specific to instantiated graph update";
    }
    return "unknown error";
}
cudaError_t cudaGetLastError(void) {
    std::lock_guard<std::mutex> g(lock);
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

/* ---- memory ---- */

/* what an allocation of `bytes` takes: whole 256-byte units, at least one */
static size_t taken(size_t bytes) { return bytes ? (bytes + 255) / 256 * 256 : 256; }

cudaError_t cudaMalloc(void **p, size_t bytes) {
    std::lock_guard<std::mutex> g(lock);
    *p = NULL;
    if (cap.on) return refuse_in_capture();
    size_t n = taken(bytes);
    if (n > EMU_TOTAL_MEM - alloc_bytes) return cudaErrorMemoryAllocation;
    void *q = aligned_alloc(256, n);
    if (!q) return cudaErrorMemoryAllocation;
    memset(q, 0xff, n); /* a GPU's fresh memory is not zero: NaN bytes find reads before writes */
    allocs[(uintptr_t)q] = bytes;
    alloc_bytes += n;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    std::lock_guard<std::mutex> g(lock);
    if (cap.on) return refuse_in_capture();
    if (!p) return cudaSuccess;
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end()) return cudaErrorInvalidValue;
    alloc_bytes -= taken(it->second);
    allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    std::lock_guard<std::mutex> g(lock);
    *free_bytes = EMU_TOTAL_MEM - alloc_bytes;
    *total_bytes = EMU_TOTAL_MEM;
    return cudaSuccess;
}
/* ---- pinned host memory, and the copies from it still in flight ---- */

static std::map<uintptr_t, size_t> pinned; /* cudaHostAlloc: start -> bytes */
struct inflight {
    const unsigned char *src;
    size_t bytes;
    uint64_t sum, seq;
};
static std::vector<inflight> in_flight;
static uint64_t stream_seq;  /* work queued so far: launches, copies, memsets, GEMMs, event records */
static uint64_t waited_seq;  /* the work the host has waited for */
static unsigned long host_waits; /* gf_emu_waits: synchronisations that had queued work to wait for */
static unsigned long pageable_uploads; /* gf_emu_pageable_uploads */
static void queued(void) { /* lock held */
    stream_seq++;
}
static void waits_for(uint64_t upto) { /* lock held */
    if (upto > waited_seq) {
        host_waits++;
        waited_seq = upto;
    }
}

static uint64_t checksum(const unsigned char *p, size_t n) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
/* [p, p + bytes) inside one pinned allocation? (bytes 0: p inside it) */
static bool is_pinned(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = pinned.upper_bound(a);
    if (it == pinned.begin()) return false;
    --it;
    return a - it->first < it->second && bytes <= it->second - (a - it->first);
}
/* a synchronisation that waits for the work numbered <= upto: its copies are done */
static void complete_upto(uint64_t upto) {
    std::vector<inflight> left;
    for (const inflight &c : in_flight) {
        if (c.seq > upto) {
            left.push_back(c);
            continue;
        }
        if (checksum(c.src, c.bytes) != c.sum)
            fault("the host wrote pinned memory [%p, +%zu) while a copy from it was in flight (after "
                  "cudaMemcpyAsync, before a synchronisation that waits for it)", (const void *)c.src, c.bytes);
    }
    in_flight.swap(left);
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
    std::lock_guard<std::mutex> g(lock);
    *p = NULL;
    if (cap.on) return refuse_in_capture();
    if (flags != cudaHostAllocDefault) return cudaErrorInvalidValue;
    void *q = aligned_alloc(256, taken(bytes));
    if (!q) {
        if (!last_error) last_error = cudaErrorMemoryAllocation; /* as the runtime: cudaGetLastError sees it */
        return cudaErrorMemoryAllocation;
    }
    pinned[(uintptr_t)q] = bytes ? bytes : 1;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    std::lock_guard<std::mutex> g(lock);
    if (cap.on) return refuse_in_capture();
    if (!p) return cudaSuccess;
    auto it = pinned.find((uintptr_t)p);
    if (it == pinned.end()) return cudaErrorInvalidValue;
    for (const inflight &c : in_flight)
        if ((uintptr_t)c.src - it->first < it->second)
            fault("cudaFreeHost(%p) while a copy from it was in flight", p);
    pinned.erase(it);
    free(p);
    return cudaSuccess;
}

/* a checked copy, when it runs on the stream (at the call, or at each launch of its graph) */
static void copy_now(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    {
        std::lock_guard<std::mutex> g(lock);
        queued();
        if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) { /* returns when the stream has done it */
            complete_upto(stream_seq);
            waits_for(stream_seq);
        }
        if (kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) pageable_uploads++;
        if (kind == cudaMemcpyHostToDevice && is_pinned(src, bytes)) {
            const unsigned char *p = (const unsigned char *)src;
            in_flight.push_back({p, bytes, checksum(p, bytes), stream_seq});
        }
    }
    memmove(dst, src, bytes);
}

/* the copy's direction must be the pointers' (the toolkit refuses a wrong kind) */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    (void)s;
    if (bytes == 0) return cudaSuccess;
    {
        std::lock_guard<std::mutex> g(lock);
        bool dd = is_device(dst, bytes), sd = is_device(src, bytes);
        bool ok = kind == cudaMemcpyHostToDevice   ? dd && !is_device(src, 0)
                  : kind == cudaMemcpyDeviceToHost ? sd && !is_device(dst, 0)
                  : kind == cudaMemcpyDeviceToDevice ? dd && sd
                  : kind == cudaMemcpyHostToHost   ? !is_device(dst, 0) && !is_device(src, 0)
                                                   : true;
        if (!ok) return cudaErrorInvalidValue;
        if (cap.on) { /* pageable host memory: the copy may synchronise, which a capture refuses */
            if ((kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) ||
                (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) || kind == cudaMemcpyHostToHost)
                return refuse_in_capture();
            return capture(N_COPY, (const void *)(uintptr_t)kind, [=] { copy_now(dst, src, bytes, kind); });
        }
    }
    copy_now(dst, src, bytes, kind);
    return cudaSuccess;
}
static void memset_now(void *dst, int value, size_t bytes) {
    {
        std::lock_guard<std::mutex> g(lock);
        queued();
    }
    memset(dst, value, bytes);
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s) {
    (void)s;
    if (bytes == 0) return cudaSuccess;
    {
        std::lock_guard<std::mutex> g(lock);
        if (!is_device(dst, bytes)) return cudaErrorInvalidValue;
        if (cap.on) return capture(N_SET, NULL, [=] { memset_now(dst, value, bytes); });
    }
    memset_now(dst, value, bytes);
    return cudaSuccess;
}

/* ---- streams and events: every call has finished when it returns ---- */

struct CUstream_st {
    unsigned flags;
};
struct CUevent_st {
    double t;     /* seconds, CLOCK_MONOTONIC; < 0 before the first record */
    uint64_t seq; /* the work queued before its record (stream_seq) */
    bool timing;
    bool captured; /* last recorded during a capture: the host may not wait for it or time it */
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    *s = new CUstream_st{flags};
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    std::lock_guard<std::mutex> g(lock);
    if (cap.on) return refuse_in_capture();
    complete_upto(stream_seq);
    waits_for(stream_seq);
    return cudaSuccess;
}
static unsigned long counter(const unsigned long *c) {
    std::lock_guard<std::mutex> g(lock);
    return *c;
}
unsigned long gf_emu_waits(void) { return counter(&host_waits); }
size_t gf_emu_device_bytes(void) {
    std::lock_guard<std::mutex> g(lock);
    size_t n = 0;
    for (const auto &a : allocs) n += a.second;
    return n;
}
unsigned long gf_emu_pageable_uploads(void) { return counter(&pageable_uploads); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    if (flags & ~(unsigned)cudaEventDisableTiming) return cudaErrorInvalidValue;
    *e = new CUevent_st{-1.0, 0, !(flags & cudaEventDisableTiming), false};
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)s;
    if (!e) return cudaErrorInvalidValue;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::lock_guard<std::mutex> g(lock);
    e->captured = cap.on; /* in a graph, an event only orders work: nothing the host can wait for */
    if (cap.on) return cap.failed ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    e->t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    queued();
    e->seq = stream_seq;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> g(lock);
    if (e->captured) return cudaErrorCapturedEvent;
    complete_upto(e->seq);
    waits_for(e->seq);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start || !end || !start->timing || !end->timing || start->t < 0 || end->t < 0) return cudaErrorInvalidValue;
    if (start->captured || end->captured) return cudaErrorCapturedEvent;
    *ms = (float)((end->t - start->t) * 1e3);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}

/* ---- graphs: capture, instantiate, update, launch ---- */

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    std::lock_guard<std::mutex> g(lock);
    if (!s) return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot be captured */
    if (mode != cudaStreamCaptureModeGlobal) return cudaErrorInvalidValue; /* the one mode gflow uses */
    if (cap.on) return cudaErrorIllegalState;
    cap.on = true;
    cap.failed = cudaSuccess;
    cap.nodes.clear();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
    (void)s;
    std::lock_guard<std::mutex> g(lock);
    *graph = NULL;
    if (!cap.on) return cudaErrorIllegalState;
    cap.on = false;
    std::vector<emu_node> nodes;
    nodes.swap(cap.nodes);
    if (cap.failed) return cudaErrorStreamCaptureInvalidated;
    graph_nodes = nodes.size();
    *graph = new CUgraph_st{std::move(nodes)};
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
    (void)s;
    std::lock_guard<std::mutex> g(lock);
    *status = !cap.on ? cudaStreamCaptureStatusNone
              : cap.failed ? cudaStreamCaptureStatusInvalidated
                           : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    *exec = NULL;
    if (!graph || flags) return cudaErrorInvalidValue;
    *exec = new CUgraphExec_st{graph->nodes};
    return cudaSuccess;
}
/* the toolkit's rule as far as the emulator can see it: the same nodes in the same order, each
 * of the same type and function (kernel, cuBLAS call, copy direction); their arguments may change */
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info) {
    if (!exec || !graph || !info) return cudaErrorInvalidValue;
    *info = cudaGraphExecUpdateResultInfo{cudaGraphExecUpdateSuccess, NULL, NULL};
    if (exec->nodes.size() != graph->nodes.size()) info->result = cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t i = 0; !info->result && i < graph->nodes.size(); i++) {
        if (exec->nodes[i].kind != graph->nodes[i].kind) info->result = cudaGraphExecUpdateErrorNodeTypeChanged;
        else if (exec->nodes[i].fn != graph->nodes[i].fn) info->result = cudaGraphExecUpdateErrorFunctionChanged;
    }
    if (info->result) return cudaErrorGraphExecUpdateFailure;
    exec->nodes = graph->nodes;
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    (void)s;
    if (!exec) return cudaErrorInvalidValue;
    {
        std::lock_guard<std::mutex> g(lock);
        if (cap.on) return refuse_in_capture(); /* a graph inside a graph: gflow never asks */
        graph_launches++;
    }
    for (const emu_node &n : exec->nodes) n.run();
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}
unsigned long gf_emu_graph_launches(void) { return counter(&graph_launches); }
unsigned long gf_emu_graph_nodes(void) { return counter(&graph_nodes); }

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
void gf_emu_poison(const void *p, size_t bytes) { ASAN_POISON_MEMORY_REGION(p, bytes); }
void gf_emu_unpoison(const void *p, size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(p, bytes); }
#else
void gf_emu_poison(const void *p, size_t bytes) { (void)p, (void)bytes; }
void gf_emu_unpoison(const void *p, size_t bytes) { (void)p, (void)bytes; }
#endif

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > EMU_SMEM_OPTIN)
        return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> g(lock);
    smem_limit[func] = value;
    return cudaSuccess;
}

/* ---- cuBLAS on OpenBLAS ---- */

struct cublasContext {
    cublasMath_t math;
    bool workspace; /* the caller's (cublasSetWorkspace): a captured call needs one */
};

/* While the stream captures, a cuBLAS call is kept for the graph (its scalars by value: in host
 * pointer mode cuBLAS reads them at the call) and 1 returned with its status in *st; a handle
 * without a workspace of the caller's would allocate one during the capture, which is refused. */
static int blas_captured(cublasHandle_t h, const void *fn, std::function<void()> f, cublasStatus_t *st) {
    std::lock_guard<std::mutex> g(lock);
    if (!cap.on) return 0;
    if (!h->workspace) {
        refuse_in_capture();
        *st = CUBLAS_STATUS_NOT_SUPPORTED;
    } else {
        *st = capture(N_BLAS, fn, std::move(f)) ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
    }
    return 1;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    *handle = new cublasContext{CUBLAS_DEFAULT_MATH, false};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t s) {
    (void)s;
    return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    *mode = handle->math;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes != 0 && !is_device_locked(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = bytes != 0;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t sgemm_now(cublasMath_t math, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                                int ldc);
static cublasStatus_t gemm_bf16_now(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float al,
                                    const void *A, int lda, const void *B, int ldb, float be, void *C, int ldc);

/* an (rows, cols) column-major matrix with leading dimension ld lies in device memory */
static bool matrix_on_device(const float *p, int rows, int cols, int ld) {
    if (rows == 0 || cols == 0) return true;
    return is_device_locked(p, ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float));
}

/* TF32: 10 mantissa bits, rounded to nearest (ties away, as the tensor cores' conversion) */
static float *to_tf32(const float *a, int rows, int cols, int ld) {
    float *t = (float *)malloc((size_t)cols * (size_t)ld * sizeof(float));
    if (!t) return NULL;
    for (size_t j = 0; j < (size_t)cols; j++)
        for (size_t i = 0; i < (size_t)rows; i++) {
            float x = a[j * (size_t)ld + i];
            uint32_t u;
            memcpy(&u, &x, 4);
            if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
            memcpy(&t[j * (size_t)ld + i], &u, 4);
        }
    return t;
}

/* The product both cuBLAS calls end in: OpenBLAS's cblas_sgemm, the CPU backend's own, so an emulated
 * product has the CPU's bits. GF_CUDA_EMU_GEMM=reverse_k sums each product's terms last first
 * instead (the operands copied with the k axis reversed), another order of summation, as cuBLAS's
 * differs from OpenBLAS's on a GPU: the suite's CUDA-against-CPU tolerances are checked with
 * products that are not the CPU's bits. Another value aborts. */
static bool gemm_reverse_k(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *g = getenv("GF_CUDA_EMU_GEMM");
        if (!g || !*g || !strcmp(g, "blas")) mode = 0;
        else if (!strcmp(g, "reverse_k")) mode = 1;
        else {
            fprintf(stderr, "gflow CUDA emulator: GF_CUDA_EMU_GEMM=%s: the products are blas (the default) or reverse_k\n", g);
            exit(2);
        }
    }
    return mode == 1;
}

/* a (rows, cols) column-major matrix with leading dimension ld, its k axis (the rows when
 * k_rows, else the columns) reversed */
static float *reversed_k(const float *x, int rows, int cols, int ld, bool k_rows) {
    float *r = (float *)malloc((size_t)cols * (size_t)ld * sizeof(float));
    if (!r) return NULL;
    for (size_t j = 0; j < (size_t)cols; j++)
        for (size_t i = 0; i < (size_t)rows; i++)
            r[j * (size_t)ld + i] = k_rows ? x[j * (size_t)ld + (size_t)rows - 1 - i]
                                           : x[((size_t)cols - 1 - j) * (size_t)ld + i];
    return r;
}

static cublasStatus_t emu_sgemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    float *ra = NULL, *rb = NULL;
    if (gemm_reverse_k() && k > 1) {
        ra = ta == CUBLAS_OP_N ? reversed_k(A, m, k, lda, false) : reversed_k(A, k, m, lda, true);
        rb = tb == CUBLAS_OP_N ? reversed_k(B, k, n, ldb, true) : reversed_k(B, n, k, ldb, false);
        if (!ra || !rb) {
            free(ra);
            free(rb);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
    }
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, alpha, ra ? ra : A, lda, rb ? rb : B, ldb,
                beta, C, ldc);
    free(ra);
    free(rb);
    return CUBLAS_STATUS_SUCCESS;
}

/* the column-major GEMM's shape arguments as cuBLAS accepts them (CUBLAS_STATUS_INVALID_VALUE else) */
static bool gemm_args_ok(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
    const int ar = ta == CUBLAS_OP_N ? m : k, br = tb == CUBLAS_OP_N ? k : n;
    return m >= 0 && n >= 0 && k >= 0 && lda >= (ar > 1 ? ar : 1) && ldb >= (br > 1 ? br : 1) &&
           ldc >= (m > 1 ? m : 1) && (ta == CUBLAS_OP_N || ta == CUBLAS_OP_T) && (tb == CUBLAS_OP_N || tb == CUBLAS_OP_T);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if (!matrix_on_device(C, m, n, ldc) || (k > 0 && (!matrix_on_device(A, ar, ac, lda) ||
                                                      !matrix_on_device(B, br, bc, ldb))))
        fault("cublasSgemm(m %d, n %d, k %d, lda %d, ldb %d, ldc %d): a matrix is not (wholly) in device memory", m,
              n, k, lda, ldb, ldc);
    const float al = *alpha, be = *beta;
    const cublasMath_t math = handle->math;
    cublasStatus_t st;
    if (blas_captured(handle, (const void *)&cublasSgemm_v2, [=] {
            sgemm_now(math, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
        }, &st))
        return st;
    return sgemm_now(math, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
}

/* C = alpha op(A) op(B) + beta C, checked; when it runs on the stream */
static cublasStatus_t sgemm_now(cublasMath_t math, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                                int ldc) {
    const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    {
        std::lock_guard<std::mutex> g(lock);
        queued();
    }
    if (k == 0) { /* C = beta C; beta 0 stores zeros (C is not read) */
        for (size_t j = 0; j < (size_t)n; j++)
            for (size_t i = 0; i < (size_t)m; i++)
                C[j * (size_t)ldc + i] = beta == 0.0f ? 0.0f : beta * C[j * (size_t)ldc + i];
        return CUBLAS_STATUS_SUCCESS;
    }
    float *a32 = NULL, *b32 = NULL;
    if (math == CUBLAS_TF32_TENSOR_OP_MATH) {
        a32 = to_tf32(A, ar, ac, lda);
        b32 = to_tf32(B, br, bc, ldb);
        if (!a32 || !b32) {
            free(a32);
            free(b32);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
    }
    const cublasStatus_t st = emu_sgemm(ta, tb, m, n, k, alpha, a32 ? a32 : A, lda, b32 ? b32 : B, ldb, beta, C, ldc);
    free(a32);
    free(b32);
    return st;
}

/* bf16 inputs, fp32 output and compute: the inputs widened to fp32 (exactly) and multiplied as
 * cublasSgemm does (emu_sgemm), so the emulator checks the operands and the casts, not the tensor
 * cores' order of summation */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F ||
        algo != CUBLAS_GEMM_DEFAULT)
        return CUBLAS_STATUS_INVALID_VALUE; /* the toolkit would run these; gflow never asks */
    const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    const size_t abytes = ar && ac ? ((size_t)(ac - 1) * (size_t)lda + (size_t)ar) * 2 : 0;
    const size_t bbytes = br && bc ? ((size_t)(bc - 1) * (size_t)ldb + (size_t)br) * 2 : 0;
    if (!matrix_on_device((const float *)C, m, n, ldc) ||
        (k > 0 && (!is_device_locked(A, abytes) || !is_device_locked(B, bbytes))))
        fault("cublasGemmEx(m %d, n %d, k %d, lda %d, ldb %d, ldc %d): a matrix is not (wholly) in device memory", m,
              n, k, lda, ldb, ldc);
    const float al = *(const float *)alpha, be = *(const float *)beta;
    cublasStatus_t st;
    if (blas_captured(handle, (const void *)&cublasGemmEx, [=] {
            gemm_bf16_now(ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
        }, &st))
        return st;
    return gemm_bf16_now(ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc);
}

static cublasStatus_t gemm_bf16_now(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float al,
                                    const void *A, int lda, const void *B, int ldb, float be, void *C, int ldc) {
    const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    {
        std::lock_guard<std::mutex> g(lock);
        queued();
    }
    float *c = (float *)C;
    if (k == 0) {
        for (size_t j = 0; j < (size_t)n; j++)
            for (size_t i = 0; i < (size_t)m; i++)
                c[j * (size_t)ldc + i] = be == 0.0f ? 0.0f : be * c[j * (size_t)ldc + i];
        return CUBLAS_STATUS_SUCCESS;
    }
    float *a32 = (float *)malloc((size_t)ac * (size_t)lda * sizeof(float));
    float *b32 = (float *)malloc((size_t)bc * (size_t)ldb * sizeof(float));
    if (!a32 || !b32) {
        free(a32);
        free(b32);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    const __nv_bfloat16 *a16 = (const __nv_bfloat16 *)A, *b16 = (const __nv_bfloat16 *)B;
    for (size_t j = 0; j < (size_t)ac; j++)
        for (size_t i = 0; i < (size_t)ar; i++) a32[j * (size_t)lda + i] = __bfloat162float(a16[j * (size_t)lda + i]);
    for (size_t j = 0; j < (size_t)bc; j++)
        for (size_t i = 0; i < (size_t)br; i++) b32[j * (size_t)ldb + i] = __bfloat162float(b16[j * (size_t)ldb + i]);
    const cublasStatus_t st = emu_sgemm(ta, tb, m, n, k, al, a32, lda, b32, ldb, be, c, ldc);
    free(a32);
    free(b32);
    return st;
}

cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float *alpha, const float *x, int incx, float *y,
                              int incy) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (n <= 0) return CUBLAS_STATUS_SUCCESS;
    if (incx <= 0 || incy <= 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (!is_device_locked(x, ((size_t)(n - 1) * incx + 1) * sizeof(float)) ||
        !is_device_locked(y, ((size_t)(n - 1) * incy + 1) * sizeof(float)))
        fault("cublasSaxpy(n %d): a vector is not (wholly) in device memory", n);
    const float al = *alpha;
    auto now = [=] {
        {
            std::lock_guard<std::mutex> g(lock);
            queued();
        }
        cblas_saxpy(n, al, x, incx, y, incy);
    };
    cublasStatus_t st;
    if (blas_captured(handle, (const void *)&cublasSaxpy_v2, now, &st)) return st;
    now();
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}
const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    }
    return "unknown status";
}

} /* extern "C" */

/* ---- kernels ---- */

enum { T_RUN, T_AT_BLOCK, T_AT_WARP, T_DONE };

/* The switch between fibers. glibc's swapcontext makes a system call (the signal mask) at every
 * switch, which made the emulator spend most of its time in the kernel: on x86-64 the switch is
 * these few instructions instead (the callee-saved registers, MXCSR and the x87 control word, as
 * the System V ABI asks a function call to keep them). x86-64 only. */
#if !defined(__x86_64__)
#error "gflow's CUDA emulator switches fibers in x86-64 assembly: build it on an x86-64 machine"
#endif
extern "C" void gf_emu_switch(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".globl gf_emu_switch\n"
        ".type gf_emu_switch, @function\n"
        "gf_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size gf_emu_switch, .-gf_emu_switch\n");

struct fiber {
    void *sp; /* saved stack pointer while switched out */
    int state;
    uint64_t shfl_gen; /* shuffles this thread has made in this block */
};

/* the static __shared__ arrays of every kernel (cuda_emu.h); weak: a program may have none */
extern char __start_gf_emu_shared[] __attribute__((weak));
extern char __stop_gf_emu_shared[] __attribute__((weak));

static struct {
    fiber *f;              /* [EMU_MAX_THREADS] */
    unsigned char *stacks; /* EMU_MAX_THREADS × (guard page + EMU_STACK) */
    size_t page;
    void *sched_sp;
    int n, cur, reverse;
    gf_emu::body_fn body;
    void *ctx;
    const gf_emu::cfg *c;
    uint64_t slots[EMU_MAX_THREADS / 32][2][32]; /* shuffle values: warp, generation parity, lane */
    uint3 idx[EMU_MAX_THREADS];                  /* threadIdx of each thread of a block of shape idx_of */
    dim3 idx_of{0, 0, 0};
    /* the block's threads by state, kept as they change (the scheduler reads them after each round) */
    int n_done, n_block;
    int warp_wait[EMU_MAX_THREADS / 32], warp_done[EMU_MAX_THREADS / 32];
    unsigned char *dyn;
    size_t dyn_cap;
} S;

static void to_sched(fiber *f) { gf_emu_switch(&f->sp, S.sched_sp); }
static void to_fiber(fiber *f) { gf_emu_switch(&S.sched_sp, f->sp); }
[[noreturn]] static void fiber_main(void) {
    S.body(S.ctx);
    S.f[S.cur].state = T_DONE;
    S.n_done++;
    S.warp_done[S.cur / 32]++;
    to_sched(&S.f[S.cur]); /* never resumed: the next block starts it afresh */
    abort();
}
/* a fresh stack whose first switch "returns" into fiber_main with the ABI's alignment */
static void fiber_start(fiber *f, unsigned char *stack, size_t bytes) {
    uintptr_t top = ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 16); /* fiber_main's return address slot: rsp = top - 8 on entry */
    *sp = (uint64_t)(uintptr_t)&fiber_main;
    for (int r = 0; r < 6; r++) *--sp = 0;             /* rbp rbx r12 r13 r14 r15 */
    *--sp = (uint64_t)0x037f << 32 | (uint64_t)0x1f80; /* MXCSR and x87 control word: the defaults */
    f->sp = sp;
}

static void set_thread(int t) {
    S.cur = t;
    threadIdx = S.idx[t];
}

static void wait_here(int state) {
    fiber *f = &S.f[S.cur];
    f->state = state;
    if (state == T_AT_BLOCK) S.n_block++;
    else S.warp_wait[S.cur / 32]++;
    to_sched(f);
}

extern "C" void gf_emu_syncthreads(void) { wait_here(T_AT_BLOCK); }

extern "C" uint64_t gf_emu_shfl_xor(unsigned mask, uint64_t v, int lane_mask) {
    if (mask != 0xffffffffu || lane_mask < 0 || lane_mask > 31)
        fault("kernel launched at %s:%d: __shfl_xor_sync(mask %#x, lane mask %d): the emulator knows full-warp "
              "shuffles with a lane mask below 32 only", S.c->file, S.c->line, mask, lane_mask);
    const int lane = S.cur % 32, warp = S.cur / 32;
    const uint64_t gen = S.f[S.cur].shfl_gen++;
    S.slots[warp][gen & 1][lane] = v;
    wait_here(T_AT_WARP);
    return S.slots[warp][gen & 1][lane ^ lane_mask];
}

extern "C" void *gf_emu_dyn_smem(void) { return S.dyn; }

/* lock held (by the launch running the kernel) */
extern "C" void gf_emu_check_atomic(const void *p, size_t bytes) {
    if (!is_device(p, bytes) || (uintptr_t)p % bytes)
        fault("kernel launched at %s:%d: an atomic on %p, which is not %zu-byte aligned device memory", S.c->file,
              S.c->line, p, bytes);
}

static void init_fibers(void) {
    if (S.f) return;
    S.page = 4096;
    S.f = (fiber *)calloc(EMU_MAX_THREADS, sizeof(fiber));
    size_t each = S.page + EMU_STACK;
    void *m = mmap(NULL, each * EMU_MAX_THREADS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (!S.f || m == MAP_FAILED) fault("cannot map %d fiber stacks", EMU_MAX_THREADS);
    S.stacks = (unsigned char *)m;
    for (int t = 0; t < EMU_MAX_THREADS; t++) mprotect(S.stacks + (size_t)t * each, S.page, PROT_NONE);
    const char *o = getenv("GF_CUDA_EMU_ORDER");
    S.reverse = o && !strcmp(o, "reverse");
}

/* release the warps whose every lane waits at a shuffle; 1 when one was released. Between rounds no
 * thread runs: a lane neither waiting at a shuffle nor exited waits at __syncthreads. */
static int release_warps(void) {
    int any = 0;
    for (int w = 0; w * 32 < S.n; w++) {
        const int waiting = S.warp_wait[w], lanes = S.n - w * 32 < 32 ? S.n - w * 32 : 32;
        if (!waiting || waiting + S.warp_done[w] < lanes) continue;
        if (waiting != 32)
            fault("kernel launched at %s:%d: a warp shuffle in block (%u,%u,%u) with %d of the warp's 32 lanes "
                  "(a partial warp or exited lanes)", S.c->file, S.c->line, blockIdx.x, blockIdx.y, blockIdx.z,
                  waiting);
        for (int t = w * 32; t < w * 32 + 32; t++) {
            if (S.f[t].shfl_gen != S.f[w * 32].shfl_gen)
                fault("kernel launched at %s:%d: the lanes of warp %d reach different shuffles", S.c->file,
                      S.c->line, w);
            S.f[t].state = T_RUN;
        }
        S.warp_wait[w] = 0;
        any = 1;
    }
    return any;
}

static void run_block(void) {
    const size_t each = S.page + EMU_STACK;
    for (int t = 0; t < S.n; t++) {
        fiber *f = &S.f[t];
        f->state = T_RUN;
        f->shfl_gen = 0;
        fiber_start(f, S.stacks + (size_t)t * each + S.page, EMU_STACK);
    }
    S.n_done = S.n_block = 0;
    for (int w = 0; w * 32 < S.n; w++) S.warp_wait[w] = S.warp_done[w] = 0;
    for (;;) {
        for (int i = 0; i < S.n; i++) {
            int t = S.reverse ? S.n - 1 - i : i;
            if (S.f[t].state != T_RUN) continue;
            set_thread(t);
            to_fiber(&S.f[t]);
        }
        const int done = S.n_done, at_block = S.n_block;
        if (done == S.n) return;
        if (release_warps()) continue;
        if (done + at_block == S.n) {
            for (int t = 0; t < S.n; t++)
                if (S.f[t].state == T_AT_BLOCK) S.f[t].state = T_RUN;
            S.n_block = 0;
            continue;
        }
        fault("kernel launched at %s:%d: block (%u,%u,%u) deadlocks: %d threads wait at __syncthreads, %d at "
              "shuffles of warps not all there, %d have exited", S.c->file, S.c->line, blockIdx.x, blockIdx.y,
              blockIdx.z, at_block, S.n - done - at_block, done);
    }
}

extern "C" void gf_emu_check_arg(const gf_emu::cfg *c, int index, const void *p) {
    if (p && !is_device_locked(p, 0))
        fault("kernel launched at %s:%d: argument %d (%p) is not device memory", c->file, c->line, index, p);
}

/* lock held: the configuration's error (kept for cudaGetLastError), as a GPU reports it at the launch */
static cudaError_t check_config(const void *kernel, const gf_emu::cfg *c) {
    const dim3 gr = c->grid, bl = c->block;
    const uint64_t threads = (uint64_t)bl.x * bl.y * bl.z;
    int limit = EMU_SMEM_DEFAULT;
    auto it = smem_limit.find(kernel);
    if (it != smem_limit.end()) limit = it->second > EMU_SMEM_DEFAULT ? it->second : EMU_SMEM_DEFAULT;
    cudaError_t e = cudaSuccess;
    if (threads == 0 || threads > EMU_MAX_THREADS || bl.x > 1024 || bl.y > 1024 || bl.z > 64 || gr.x == 0 ||
        gr.y == 0 || gr.z == 0 || gr.x > 0x7fffffffu || gr.y > 65535 || gr.z > 65535)
        e = cudaErrorInvalidConfiguration;
    else if (c->smem > (size_t)limit)
        e = cudaErrorInvalidValue; /* over the function's dynamic shared memory limit */
    if (e && !last_error) last_error = e;
    return e;
}

extern "C" int gf_emu_capturing(void) {
    std::lock_guard<std::mutex> g(lock);
    return cap.on;
}

extern "C" cudaError_t gf_emu_capture_launch(const void *kernel, const gf_emu::cfg *c, gf_emu::body_fn body,
                                             void *ctx, void (*drop)(void *)) {
    std::shared_ptr<void> held(ctx, drop); /* the arguments live as long as a graph holding them */
    std::lock_guard<std::mutex> g(lock);
    cudaError_t e = check_config(kernel, c);
    if (e) return e;
    const gf_emu::cfg cc = *c;
    e = capture(N_KERNEL, kernel, [kernel, cc, body, held] { gf_emu_launch(kernel, &cc, body, held.get()); });
    if (e && !last_error) last_error = e;
    return e;
}

extern "C" cudaError_t gf_emu_launch(const void *kernel, const gf_emu::cfg *c, gf_emu::body_fn body, void *ctx) {
    std::lock_guard<std::mutex> g(lock);
    const cudaError_t e = check_config(kernel, c);
    if (e) return e;
    const dim3 gr = c->grid, bl = c->block;
    const uint64_t threads = (uint64_t)bl.x * bl.y * bl.z;
    queued();
    init_fibers();
    if (c->smem > S.dyn_cap) {
        free(S.dyn);
        S.dyn = (unsigned char *)malloc(c->smem);
        if (!S.dyn) fault("no host memory for %zu bytes of shared memory", c->smem);
        S.dyn_cap = c->smem;
    }
    S.n = (int)threads;
    S.body = body;
    S.ctx = ctx;
    S.c = c;
    gridDim = gr;
    blockDim = bl;
    if (bl.x != S.idx_of.x || bl.y != S.idx_of.y || bl.z != S.idx_of.z) { /* x fastest, as on a GPU */
        for (uint64_t t = 0; t < threads; t++)
            S.idx[t] = uint3{(unsigned)(t % bl.x), (unsigned)(t / bl.x % bl.y), (unsigned)(t / ((uint64_t)bl.x * bl.y))};
        S.idx_of = bl;
    }
    const size_t shared = __start_gf_emu_shared ? (size_t)(__stop_gf_emu_shared - __start_gf_emu_shared) : 0;
    const uint64_t blocks = (uint64_t)gr.x * gr.y * gr.z;
    for (uint64_t i = 0; i < blocks; i++) { /* x fastest; GF_CUDA_EMU_ORDER=reverse: the last block first */
        const uint64_t b = S.reverse ? blocks - 1 - i : i;
        blockIdx.x = (unsigned)(b % gr.x);
        blockIdx.y = (unsigned)(b / gr.x % gr.y);
        blockIdx.z = (unsigned)(b / ((uint64_t)gr.x * gr.y));
        if (shared) memset(__start_gf_emu_shared, 0xff, shared); /* shared memory starts undefined */
        if (c->smem) memset(S.dyn, 0xff, c->smem);
        run_block();
    }
    return cudaSuccess;
}
