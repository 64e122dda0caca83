/* arena.c — the device step arena: chunked bump allocator over cudaMalloc; see gflow/cuda.h.
 * The same scheme as the host arena (src/core/arena.c), with device memory. */
#include "gflow/cuda.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define GF_CUDA_ALIGN 256 /* cudaMalloc's own alignment: any vector load type fits */

/* Under gflow's CUDA emulator (docs/cuda.md "The emulator") each allocation is followed by a fence
 * of GF_CUDA_ALIGN bytes, and everything not handed out is poisoned (an AddressSanitizer build
 * reports a kernel or copy that reaches past its buffer); on a GPU, neither. */
#ifdef GF_CUDA_EMULATOR
#define GF_CUDA_FENCE GF_CUDA_ALIGN
#define FENCE_POISON(p, n) gf_emu_poison((p), (n))
#define FENCE_UNPOISON(p, n) gf_emu_unpoison((p), (n))
#else
#define GF_CUDA_FENCE 0
#define FENCE_POISON(p, n) ((void)0)
#define FENCE_UNPOISON(p, n) ((void)0)
#endif

static gf_cuda_chunk *chunk_new(gf_cuda_arena *a, size_t cap, gf_status *st) {
    gf_cuda_chunk *c = calloc(1, sizeof *c);
    if (!c) {
        *st = gf_error_set(GF_E_NOMEM, "device step arena: out of host memory");
        return NULL;
    }
    void *base = NULL;
    const int captured = gf_cuda_capturing(); /* a captured step that needs more: dropped, run again */
    if (captured) gf_cuda_capture_drop();
    *st = gf_cuda_malloc(&base, cap);
    if (captured) gf_cuda_capture_resume();
    if (*st) {
        free(c);
        return NULL;
    }
    c->cap = cap;
    c->base = base;
    FENCE_POISON(base, cap);
    a->n_mallocs++;
    return c;
}

/* growth inside a step: no status can be returned from an op, so a failure aborts with it */
static gf_cuda_chunk *chunk_new_or_abort(void *self, size_t cap) {
    gf_cuda_arena *a = self;
    gf_status st;
    gf_cuda_chunk *c = chunk_new(a, cap, &st);
    if (!c)
        gf_abort(__FILE__, __LINE__, "out of device memory: the device step arena needs another %zu bytes "
                 "(%zu in use, high-water %zu): %s", cap, a->used, a->high_water, gf_last_error());
    return c;
}

/* debug mode: one cudaMalloc per request (see gf_cuda_arena.debug) */
static void *debug_alloc(gf_cuda_arena *a, size_t bytes) {
    if (a->n_dbg == a->cap_dbg) {
        size_t cap = a->cap_dbg ? 2 * a->cap_dbg : 256;
        void **d = realloc(a->dbg, cap * sizeof *d);
        if (!d) gf_abort(__FILE__, __LINE__, "device step arena (debug mode): out of host memory");
        a->dbg = d;
        a->cap_dbg = cap;
    }
    void *p = NULL;
    const int captured = gf_cuda_capturing(); /* every step is dropped and run again: no graph */
    if (captured) gf_cuda_capture_drop();
    gf_status st = gf_cuda_malloc(&p, bytes);
    if (captured) gf_cuda_capture_resume();
    if (st)
        gf_abort(__FILE__, __LINE__, "out of device memory: the device step arena (GF_CUDA_ARENA_DEBUG=1) needs "
                 "%zu bytes more (%zu in use): %s", bytes, a->used, gf_last_error());
    a->dbg[a->n_dbg++] = p;
    a->n_mallocs++;
    a->used += bytes;
    if (a->used > a->high_water) a->high_water = a->used;
    return p;
}

static void debug_free(gf_cuda_arena *a) {
    if (!a->n_dbg) return;
    gf_cuda_note(cudaStreamSynchronize(gf_cuda_stream()), "cudaStreamSynchronize (arena)", __FILE__, __LINE__);
    for (size_t i = a->n_dbg; i-- > 0;) gf_cuda_free(a->dbg[i]);
    a->n_dbg = 0;
}

gf_status gf_ctx_use_cuda(gf_ctx *ctx, size_t first_bytes) {
    if (ctx->cuda) return GF_OK;
    GF_TRY(gf_cuda_init());
    gf_cuda_arena *a = calloc(1, sizeof *a);
    if (!a) return gf_error_set(GF_E_NOMEM, "device step arena: out of host memory");
    static int64_t serials;
    a->serial = ++serials;
    a->min_chunk = first_bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : first_bytes;
    gf_status st;
    a->first = a->head = chunk_new(a, a->min_chunk, &st);
    if (!a->first) {
        free(a);
        return st;
    }
    const char *dbg = getenv("GF_CUDA_ARENA_DEBUG");
    a->debug = dbg && *dbg && strcmp(dbg, "0");
    ctx->cuda = a;
    return GF_OK;
}

void *gf_cuda_arena_alloc(gf_cuda_arena *a, size_t bytes) {
    if (a->debug) return debug_alloc(a, bytes);
    size_t need = ((bytes + GF_CUDA_ALIGN - 1) & ~(size_t)(GF_CUDA_ALIGN - 1)) + GF_CUDA_FENCE;
    if (need == 0) need = GF_CUDA_ALIGN;
    void *p = gf_chunks_take(&a->head, a->first, a->min_chunk, need, chunk_new_or_abort, a);
    FENCE_UNPOISON(p, bytes);
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return p;
}

size_t gf_cuda_arena_capacity(const gf_cuda_arena *a) { return gf_chunks_capacity(a->first); }

static void free_chain(gf_cuda_chunk *c) {
    /* kernels of the step may still read the chunks: let the stream finish first */
    gf_cuda_note(cudaStreamSynchronize(gf_cuda_stream()), "cudaStreamSynchronize (arena)", __FILE__, __LINE__);
    while (c) {
        gf_cuda_chunk *n = c->next;
        FENCE_UNPOISON(c->base, c->cap);
        gf_cuda_free(c->base);
        free(c);
        c = n;
    }
}

/* ---- pinned staging (gf_cuda_stage) ---- */

#define GF_STAGE_ALIGN 64

void *gf_cuda_stage(gf_cuda_arena *a, const void *host, size_t bytes) {
    const gf_cuda_fed *f = gf_cuda_fed_find(a, host, bytes);
    if (f) return f->dev; /* fed before the capture: not a copy of the graph's */
    void *d = gf_cuda_arena_alloc(a, bytes);
    gf_cuda_stage_into(a, d, host, bytes);
    return d;
}

void gf_cuda_stage_into(gf_cuda_arena *a, void *d, const void *host, size_t bytes) {
    if (bytes == 0) return;
    size_t need = (bytes + GF_STAGE_ALIGN - 1) & ~(size_t)(GF_STAGE_ALIGN - 1);
    gf_cuda_staging *s = &a->stage[a->cur];
    const void *src = host;
    a->staged += need;
    a->n_captured_stages += gf_cuda_capturing();
    if (s->used + need <= s->cap) {
        src = memcpy(s->buf + s->used, host, bytes);
        s->used += need;
    } else if (gf_cuda_capturing()) { /* the step runs again uncaptured, after a reset that makes room */
        gf_cuda_capture_drop();
        gf_cuda_capture_resume();
        return;
    } else {
        a->n_pageable++; /* correct, possibly slower; the next resets make room */
    }
    GF_CUDA_NOTE(cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, gf_cuda_stream()));
}

gf_cuda_fed *gf_cuda_feed_into(gf_cuda_arena *a, const void *host, size_t bytes) {
    GF_ASSERT(a->n_fed < (int)(sizeof a->fed / sizeof a->fed[0]), "gf_cuda_feed: more than %d inputs in a step",
              (int)(sizeof a->fed / sizeof a->fed[0]));
    GF_ASSERT(!gf_cuda_capturing(), "gf_cuda_feed: the stream is capturing (feed before the capture)");
    gf_cuda_fed *f = &a->fed[a->n_fed];
    *f = (gf_cuda_fed){.host = host, .bytes = bytes, .dev = gf_cuda_stage(a, host, bytes)};
    a->n_fed++;
    return f;
}

gf_cuda_fed *gf_cuda_fed_find(gf_cuda_arena *a, const void *host, size_t bytes) {
    for (int i = 0; i < a->n_fed; i++)
        if (a->fed[i].host == host && a->fed[i].bytes >= bytes) return &a->fed[i];
    return NULL;
}

void gf_ctx_feed(gf_ctx *ctx, const void *host, size_t bytes) {
    if (ctx->cuda) gf_cuda_feed_into(ctx->cuda, host, bytes);
}

void gf_ctx_draw_keys(gf_ctx *ctx, int32_t n) {
    GF_ASSERT(ctx->cuda && ctx->rng && n > 0, "gf_ctx_draw_keys: %d keys for a step without a device arena or rng", n);
    uint64_t *k = gf_arena_alloc(&ctx->arena, (size_t)n * sizeof *k); // (n)
    for (int32_t i = 0; i < n; i++) k[i] = gf_rng_u64(ctx->rng);
    ctx->key_dev = gf_cuda_feed_into(ctx->cuda, k, (size_t)n * sizeof *k)->dev;
    ctx->n_keys = n;
    ctx->key_next = 0;
}

size_t gf_ctx_device_used(const gf_ctx *ctx) { return ctx->cuda ? ctx->cuda->used : 0; }

void gf_ctx_device_hold(gf_ctx *ctx, size_t used) {
    gf_cuda_arena *a = ctx->cuda;
    GF_ASSERT(a && a->head == a->first && a->used <= used && used <= a->first->cap,
              "gf_ctx_device_hold: %zu bytes of the first chunk (%zu used, %zu there)", used, a ? a->used : 0,
              a ? a->first->cap : 0);
    FENCE_UNPOISON(a->first->base + a->used, used - a->used);
    a->first->used = used;
    a->used = used;
}

int64_t gf_ctx_captured_stages(const gf_ctx *ctx) { return ctx->cuda ? ctx->cuda->n_captured_stages : 0; }

/* the end of a step: mark the step's buffer, then make the next one ready for the next step */
static void staging_next(gf_cuda_arena *a) {
    gf_cuda_staging *s = &a->stage[a->cur];
    if (s->used) {
        GF_CUDA_NOTE(cudaEventRecord(s->done, gf_cuda_stream()));
        s->pending = 1;
    }
    if (a->staged > a->staged_high) a->staged_high = a->staged;
    a->staged = 0;
    a->cur = (a->cur + 1) % GF_CUDA_STAGES;
    s = &a->stage[a->cur];
    if (s->pending) { /* the copies of GF_CUDA_STAGES steps ago read this buffer: wait until they have */
        GF_CUDA_NOTE(cudaEventSynchronize(s->done));
        s->pending = 0;
    }
    s->used = 0;
    if (a->staged_high <= s->cap) return;
    if (a->staged_high <= a->stage_refused) return; /* pinned memory was refused at this size */
    /* grow to the most one step staged, with room for batches a little larger (NLI's vary); the
     * old buffer goes only once the new one is had */
    size_t cap = a->staged_high + a->staged_high / 4 + 4096;
    void *b = NULL;
    if (cudaHostAlloc(&b, cap, cudaHostAllocDefault) != cudaSuccess ||
        (!s->done && cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming) != cudaSuccess)) {
        (void)cudaGetLastError(); /* no pinned memory to be had: stay as it is, not an error */
        if (b) GF_CUDA_NOTE(cudaFreeHost(b));
        a->stage_refused = a->staged_high; /* not asked again until a step stages more */
        return;
    }
    if (s->buf) GF_CUDA_NOTE(cudaFreeHost(s->buf));
    s->buf = b;
    s->cap = cap;
    a->n_host_allocs++;
}

static void staging_free(gf_cuda_arena *a) {
    for (int i = 0; i < GF_CUDA_STAGES; i++) {
        gf_cuda_staging *s = &a->stage[i];
        if (s->buf) gf_cuda_note(cudaFreeHost(s->buf), "cudaFreeHost(s->buf)", __FILE__, __LINE__);
        if (s->done) gf_cuda_note(cudaEventDestroy(s->done), "cudaEventDestroy(s->done)", __FILE__, __LINE__);
        *s = (gf_cuda_staging){0};
    }
}

void gf_cuda_arena_reset(gf_cuda_arena *a) {
    staging_next(a);
    a->n_fed = 0;
    debug_free(a);
    if (a->first->next) {
        /* coalesce the chain into one chunk of the high-water mark and a sixteenth more (and 1 MiB):
         * a later step a little larger than the first (a timed step's marker node, 512 bytes) fits */
        size_t cap = a->high_water + a->high_water / 16 + ((size_t)1 << 20);
        cap = cap < a->min_chunk ? a->min_chunk : cap;
        free_chain(a->first);
        a->first = a->head = chunk_new_or_abort(a, cap);
    }
    a->first->used = 0;
    FENCE_POISON(a->first->base, a->first->cap);
    a->head = a->first;
    a->used = 0;
    a->n_resets++;
}

void gf_cuda_arena_free(gf_cuda_arena *a) {
    if (!a) return;
    debug_free(a);
    free_chain(a->first); /* synchronises the stream first: no copy reads the staging after it */
    staging_free(a);
    free(a->dbg);
    free(a);
}

float *gf_cuda_floats(gf_ctx *ctx, int64_t n) {
    GF_ASSERT(ctx->cuda, "a GPU tensor in a step context without a device arena (gf_ctx_use_cuda)");
    GF_ASSERT(n >= 0, "negative float count %lld", (long long)n);
    return gf_cuda_arena_alloc(ctx->cuda, (size_t)n * sizeof(float));
}

float *gf_cuda_zeros(gf_ctx *ctx, int64_t n) {
    float *p = gf_cuda_floats(ctx, n);
    GF_CUDA_NOTE(cudaMemsetAsync(p, 0, (size_t)n * sizeof(float), gf_cuda_stream()));
    return p;
}

/* dst += src: src is staged in the device arena (gf_cuda_stage: the caller may free it), then
 * one saxpy */
void gf_cuda_acc_host(gf_ctx *ctx, float *dst, const float *src, int64_t n) {
    GF_ASSERT(n >= 0 && n <= INT_MAX, "gf_cuda_acc_host: %lld elements", (long long)n);
    GF_ASSERT(ctx->cuda, "gf_cuda_acc_host: a step context without a device arena (gf_ctx_use_cuda)");
    const float *tmp = gf_cuda_stage(ctx->cuda, src, (size_t)n * sizeof(float));
    const float one = 1.0f;
    GF_CUBLAS_NOTE(gf_cublas.saxpy(gf_cuda_blas(), (int)n, &one, tmp, 1, dst, 1));
}

gf_tensor *gf_cuda_tensor_new(gf_ctx *ctx, int32_t ndim, const int64_t *shape) {
    gf_tensor *t = gf_tensor_header(ctx, ndim, shape);
    t->device = GF_DEV_CUDA;
    t->data = gf_cuda_floats(ctx, gf_tensor_numel(t));
    return t;
}
