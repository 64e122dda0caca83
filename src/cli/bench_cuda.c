/* bench_cuda.c — the GPU side of `gflow bench RECIPE --set run.device=cuda` (cmd_bench.c):
 * cuBLAS SGEMM rates (the MFU denominator), the phases of a training step timed with CUDA
 * events, the GPU's name and versions, device memory.
 *
 * Phases. Work on the GPU is queued: the host's clock around a phase measures how long it took
 * to queue it, not to run it. So the phases are marked by CUDA events on the one stream, and
 * the host waits for the end event of each step (the step itself waits once more: it is not
 * deferred, so it flushes its record, loss and Σg², at once). The step is the trainer's own gf_train_step
 * (zero grads + forward | backward | clip + AdamW, as on the CPU); bench marks its boundaries
 * without changing it:
 *   start     an event before gf_train_step;
 *   fwd_end   the session's task table is a copy whose forward_rows calls the task's own and then
 *             records an event (gf_train_step reaches the forward only through it);
 *   bwd_end   before the forward, a marker node is put on the still empty tape; the tape's
 *             backward walks the nodes newest first, so it reaches the marker last, when every
 *             other node's backward has been queued; the marker's backward records the event;
 *   end       an event after gf_train_step returns.
 * The forward phase includes zeroing the gradients (and the batch's upload), the optimizer
 * phase the gradient norm, clipping and AdamW, as `ms_forward` and `ms_optimizer` do on the CPU.
 *
 * Without CUDA in the build nothing here can be reached (gf_session_device_check refuses
 * device = cuda first); the functions then only say so.
 */
#include "cli.h"
#include "gflow/session.h"

#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA
#include "gflow/cuda.h"

#define MIB 1048576.0

/* "13.0" from cudaRuntimeGetVersion's 13000 */
static void cuda_version(char *buf, size_t n, int v) {
    if (v <= 0) snprintf(buf, n, "?");
    else snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* the kernel module's release ("580.159.04"), from /proc/driver/nvidia/version; "?" without it */
static void driver_release(char *buf, size_t n) {
    snprintf(buf, n, "?");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "Module");
        if (p) {
            p += strlen("Module");
            while (*p == ' ' || *p == '\t') p++;
            size_t len = strspn(p, "0123456789.");
            if (len > 0 && len < n) snprintf(buf, n, "%.*s", (int)len, p);
        }
    }
    fclose(f);
}

static gf_status mem_used(size_t *used, size_t *total) {
    size_t free_b = 0;
    GF_CUDA_TRY(cudaMemGetInfo(&free_b, total));
    *used = *total - free_b;
    return GF_OK;
}

gf_status gf_bench_gpu_measure(gf_bench_gpu *g) {
    GF_TRY(gf_cuda_init());
    gf_cuda_info info;
    gf_cuda_probe(&info);
    char rt[16], drv[16], rel[64];
    cuda_version(rt, sizeof rt, info.runtime_version);
    cuda_version(drv, sizeof drv, info.driver_version);
    driver_release(rel, sizeof rel);
    snprintf(g->gpu, sizeof g->gpu, "%s (cc %d.%d, %.1f GiB, driver %s for CUDA %s, runtime %s)", info.name,
             info.cc_major, info.cc_minor, (double)info.mem_bytes / (MIB * 1024.0), rel, drv, rt);
    if (g->peak_n > 0) {
        GF_TRY(gf_cuda_sgemm_gflops(g->peak_n, g->peak_n, g->peak_n, 0, 5, &g->peak));
        if (g->tf32) GF_TRY(gf_cuda_sgemm_gflops(g->peak_n, g->peak_n, g->peak_n, 1, 5, &g->peak_tf32));
    }
    /* the model's own shapes: the tied head (rows, d) x (d, V) and the block's (rows, d) x (d, d_ff) */
    if (g->rows > 0 && g->d > 0) {
        if (g->V > 0) GF_TRY(gf_cuda_sgemm_gflops(g->rows, g->V, g->d, 0, 10, &g->head));
        if (g->d_ff > 0) GF_TRY(gf_cuda_sgemm_gflops(g->rows, g->d_ff, g->d, 0, 10, &g->ffn));
    }
    return mem_used(&g->used_before, &g->total); /* the GEMMs' buffers are freed by now */
}

void gf_bench_gpu_print_device(const gf_bench_gpu *g) { printf("gpu: %s\n", g->gpu); }

void gf_bench_gpu_print_mfu(const gf_bench_gpu *g, double gflops) {
    if (g->peak > 0) {
        printf("sgemm_peak_gflops: %.1f (%d^3 cublasSgemm fp32)\n", g->peak, g->peak_n);
        printf("mfu_pct: %.1f\n", 100.0 * gflops / g->peak);
    }
    if (g->peak_tf32 > 0) {
        printf("sgemm_peak_tf32_gflops: %.1f (%d^3 cublasSgemm tf32)\n", g->peak_tf32, g->peak_n);
        printf("mfu_pct_tf32: %.1f\n", 100.0 * gflops / g->peak_tf32);
    }
    if (g->head > 0)
        printf("sgemm_head_gflops: %.1f (%lldx%lldx%lld cublasSgemm fp32)\n", g->head, (long long)g->rows,
               (long long)g->V, (long long)g->d);
    if (g->ffn > 0)
        printf("sgemm_ffn_gflops: %.1f (%lldx%lldx%lld cublasSgemm fp32)\n", g->ffn, (long long)g->rows,
               (long long)g->d_ff, (long long)g->d);
}

gf_status gf_bench_gpu_print_memory(const gf_bench_gpu *g, const gf_session *s, int64_t mallocs_timed) {
    size_t used = 0, total = 0;
    GF_TRY(mem_used(&used, &total));
    const gf_cuda_arena *a = s->ctx.cuda;
    printf("device_arena_mb: %.1f (high-water mark of the device step arena)\n",
           a ? (double)a->high_water / MIB : 0.0);
    printf("device_taken_mb: %.1f (cudaMemGetInfo after the timed steps, a snapshot, not a peak: device memory "
           "taken since the session opened: parameters, gradients, moments, step arena, buffers)\n",
           used > g->used_before ? (double)(used - g->used_before) / MIB : 0.0);
    printf("device_used_mb: %.1f of %.1f (cudaMemGetInfo: the whole GPU, CUDA context and cuBLAS workspace "
           "included)\n", (double)used / MIB, (double)total / MIB);
    printf("device_arena_mallocs_timed: %lld\n", (long long)mallocs_timed);
    /* torch.cuda.max_memory_allocated's counterpart (tools/bench_torch.py): a true peak, counted at
     * every cudaMalloc and cudaFree gflow makes, not a snapshot */
    printf("peak_device_mb: %.1f (the most device memory gflow held at once from the first timed step to the last "
           "queued one: parameters, gradients, AdamW moments, the step arena, scratch, cuBLAS's workspace; the "
           "CUDA context not included)\n", (double)gf_cuda_mem_peak() / MIB);
    return GF_OK;
}

int64_t gf_bench_gpu_mallocs(const gf_session *s) { return s->ctx.cuda ? s->ctx.cuda->n_mallocs : 0; }

void gf_bench_gpu_peak_reset(void) { gf_cuda_mem_peak_reset(); }

void gf_bench_gpu_launches(int64_t counts[3]) {
    gf_cuda_launches(&counts[0], &counts[1]);
    counts[2] = gf_cuda_launch_bytes();
}

void gf_bench_gpu_graphs(const gf_session *s, int64_t counts[5]) {
    const gf_cuda_graph *g = gf_gpu_step_graph(s->gpu);
    counts[0] = g ? g->n_launched : 0, counts[1] = g ? g->n_instantiated : 0;
    counts[2] = g ? g->n_updated : 0, counts[3] = g ? g->n_redone : 0, counts[4] = g ? g->n_replayed : 0;
}

/* ---- the phase clock ---- */

struct gf_bench_clock {
    gf_session *s;
    const gf_task_ops *inner; /* the task's own table, put back by close */
    gf_task_ops wrapped;      /* the session's table while the clock runs */
    cudaEvent_t start, fwd_end, bwd_end, end;
    int forwards, marks, misplaced; /* this step's */
    bool cuda_graph;                /* the recipe's [run] cuda_graph, put back by close */
};

static gf_bench_clock *live; /* the clock the wrapped forward and the marker report to */

static void mark_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    (void)n;
    live->marks++;
    GF_CUDA_NOTE(cudaEventRecord(live->bwd_end, gf_cuda_stream()));
}

static const gf_op_def mark_op = {"bench_mark", GF_FAM_ELEMWISE, mark_backward, 0};

static gf_tensor *marked_forward(gf_session *s, int64_t lo, int64_t n) {
    gf_bench_clock *c = live;
    /* the marker: an output on the device (one float of the step arena, its gradient too) of a
     * parameter, so that the tape records it and its backward runs */
    gf_tensor *o = gf_arena_alloc(&s->ctx.arena, sizeof *o);
    memset(o, 0, sizeof *o);
    o->ndim = 1;
    o->shape[0] = 1;
    o->device = GF_DEV_CUDA;
    o->data = o->grad = gf_cuda_floats(&s->ctx, 1);
    gf_tensor *in[1] = {&s->params->items[0]->t};
    gf_node *node = gf_tape_record(&s->ctx, &mark_op, o, 1, in);
    if (!node || node->prev) c->misplaced++; /* not recorded, or not the tape's first node */
    gf_tensor *loss = c->inner->forward_rows(s, lo, n);
    c->forwards++;
    GF_CUDA_NOTE(cudaEventRecord(c->fwd_end, gf_cuda_stream()));
    return loss;
}

gf_status gf_bench_clock_open(gf_session *s, gf_bench_clock **out) {
    *out = NULL;
    if (!s->ctx.cuda || s->params->n_items < 1)
        return gf_error_set(GF_E_INVALID, "bench: [run] device = cuda, but the session's step context has no "
                            "device arena (the GPU training path is not complete)");
    gf_bench_clock *c = calloc(1, sizeof *c);
    if (!c) return gf_error_set(GF_E_NOMEM, "bench: out of memory");
    cudaEvent_t *ev[4] = {&c->start, &c->fwd_end, &c->bwd_end, &c->end};
    for (int i = 0; i < 4; i++) {
        gf_status st = gf_cuda_status(cudaEventCreate(ev[i]), "cudaEventCreate", __FILE__, __LINE__);
        if (st) {
            for (int j = 0; j < i; j++) cudaEventDestroy(*ev[j]);
            free(c);
            return st;
        }
    }
    c->cuda_graph = s->r.run.cuda_graph;
    s->r.run.cuda_graph = false; /* its phase events are host-visible: none may be recorded in a capture */
    c->s = s;
    c->inner = s->task;
    c->wrapped = *s->task;
    c->wrapped.forward_rows = marked_forward;
    s->task = &c->wrapped;
    live = c;
    *out = c;
    return GF_OK;
}

gf_status gf_bench_clock_start(gf_bench_clock *c) {
    c->forwards = c->marks = c->misplaced = 0;
    GF_CUDA_TRY(cudaEventRecord(c->start, gf_cuda_stream()));
    return GF_OK;
}

static gf_status elapsed(cudaEvent_t a, cudaEvent_t b, double *s) {
    float ms = 0;
    GF_CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
    *s = 1e-3 * (double)ms;
    return GF_OK;
}

gf_status gf_bench_clock_stop(gf_bench_clock *c, double *fwd, double *bwd, double *upd) {
    GF_CUDA_TRY(cudaEventRecord(c->end, gf_cuda_stream()));
    GF_CUDA_TRY(cudaEventSynchronize(c->end));
    GF_TRY(gf_cuda_sync());
    if (c->forwards != 1 || c->marks != 1 || c->misplaced)
        return gf_error_set(GF_E_INVALID, "bench: the step's phases could not be marked (%d forwards, %d "
                            "backward markers%s); the phase split assumes one forward through the session "
                            "and one backward of its tape per step", c->forwards, c->marks,
                            c->misplaced ? ", the tape was not empty at the forward" : "");
    GF_TRY(elapsed(c->start, c->fwd_end, fwd));
    GF_TRY(elapsed(c->fwd_end, c->bwd_end, bwd));
    return elapsed(c->bwd_end, c->end, upd);
}

void gf_bench_clock_close(gf_bench_clock *c) {
    if (!c) return;
    c->s->task = c->inner;
    c->s->r.run.cuda_graph = c->cuda_graph;
    cudaEventDestroy(c->start);
    cudaEventDestroy(c->fwd_end);
    cudaEventDestroy(c->bwd_end);
    cudaEventDestroy(c->end);
    if (live == c) live = NULL;
    free(c);
}

#else /* without CUDA: unreachable, as device = cuda is refused before (see above) */

static gf_status no_cuda(void) { return gf_error_set(GF_E_INVALID, "bench: gflow was built without CUDA"); }

gf_status gf_bench_gpu_measure(gf_bench_gpu *g) { (void)g; return no_cuda(); }
void gf_bench_gpu_print_device(const gf_bench_gpu *g) { (void)g; }
void gf_bench_gpu_print_mfu(const gf_bench_gpu *g, double gflops) { (void)g; (void)gflops; }
gf_status gf_bench_gpu_print_memory(const gf_bench_gpu *g, const gf_session *s, int64_t mallocs_timed) {
    (void)g; (void)s; (void)mallocs_timed;
    return no_cuda();
}
int64_t gf_bench_gpu_mallocs(const gf_session *s) { (void)s; return 0; }
void gf_bench_gpu_peak_reset(void) {}
void gf_bench_gpu_launches(int64_t counts[3]) { counts[0] = counts[1] = counts[2] = 0; }
void gf_bench_gpu_graphs(const gf_session *s, int64_t counts[5]) { (void)s; memset(counts, 0, 5 * sizeof counts[0]); }
gf_status gf_bench_clock_open(gf_session *s, gf_bench_clock **out) { (void)s; *out = NULL; return no_cuda(); }
gf_status gf_bench_clock_start(gf_bench_clock *c) { (void)c; return no_cuda(); }
gf_status gf_bench_clock_stop(gf_bench_clock *c, double *fwd, double *bwd, double *upd) {
    (void)c; *fwd = *bwd = *upd = 0;
    return no_cuda();
}
void gf_bench_clock_close(gf_bench_clock *c) { (void)c; }

#endif
