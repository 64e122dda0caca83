/* arena.c — chunked bump allocator; see gflow/arena.h. */
#include "gflow/arena.h"
#include "gflow/error.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GF_ARENA_ALIGN 64
#define GF_HUGE_PAGE ((size_t)2 << 20)

void *gf_host_alloc(size_t bytes) {
    void *p = NULL;
    int huge = bytes >= GF_HUGE_PAGE;
    if (posix_memalign(&p, huge ? GF_HUGE_PAGE : GF_ARENA_ALIGN, bytes ? bytes : 1) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: where the kernel has THP off (or cannot) the pages stay small */
    if (huge) (void)madvise(p, bytes / GF_HUGE_PAGE * GF_HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

static gf_arena_chunk *chunk_new(gf_arena *a, size_t cap) {
    gf_arena_chunk *c = malloc(sizeof *c);
    void *base = c ? gf_host_alloc(cap) : NULL;
    if (!base) {
        free(c);
        /* the step outgrew the machine (gf_session_memory_check is a lower bound): the user's
         * sizes, not a bug, and no status reaches back out of the op that asked */
        gf_fatal(GF_E_NOMEM, "the step's activations (the step arena): cannot allocate %.1f MiB more, %.1f MiB "
                 "in use: lower [train] batch_size or [data] seq_len (or [eval] batch_size)",
                 (double)cap / 1048576.0, (double)a->used / 1048576.0);
    }
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    c->base = base;
    a->n_chunk_allocs++;
    return c;
}

static gf_arena_chunk *grow_host(void *a, size_t cap) { return chunk_new(a, cap); }

unsigned char *gf_chunks_take(gf_arena_chunk **head, const gf_arena_chunk *first, size_t min_chunk, size_t need,
                              gf_arena_chunk *(*grow)(void *self, size_t cap), void *self) {
    gf_arena_chunk *c = *head;
    if (c->used + need > c->cap) {
        size_t cap = gf_chunks_capacity(first);
        if (cap < min_chunk) cap = min_chunk;
        if (cap < need) cap = need;
        c->next = grow(self, cap);
        *head = c = c->next;
    }
    unsigned char *p = c->base + c->used;
    c->used += need;
    return p;
}

size_t gf_chunks_capacity(const gf_arena_chunk *first) {
    size_t cap = 0;
    for (const gf_arena_chunk *c = first; c; c = c->next) cap += c->cap;
    return cap;
}

void gf_arena_init(gf_arena *a, size_t first_chunk_bytes) {
    memset(a, 0, sizeof *a);
    a->min_chunk = first_chunk_bytes < (1u << 20) ? (1u << 20) : first_chunk_bytes;
    a->first = a->head = chunk_new(a, a->min_chunk);
}

void *gf_arena_alloc(gf_arena *a, size_t bytes) {
    size_t need = (bytes + GF_ARENA_ALIGN - 1) & ~(size_t)(GF_ARENA_ALIGN - 1);
    if (need == 0) need = GF_ARENA_ALIGN;
    void *p = gf_chunks_take(&a->head, a->first, a->min_chunk, need, grow_host, a);
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return p;
}

void *gf_arena_calloc(gf_arena *a, size_t bytes) {
    void *p = gf_arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

float *gf_arena_floats(gf_arena *a, int64_t n) {
    GF_ASSERT(n >= 0, "negative float count %lld", (long long)n);
    return gf_arena_alloc(a, (size_t)n * sizeof(float));
}

size_t gf_arena_capacity(const gf_arena *a) { return gf_chunks_capacity(a->first); }

void gf_arena_reset(gf_arena *a) {
    if (a->first->next) {
        /* coalesce the chain into one chunk sized to the high-water mark */
        size_t cap = a->high_water;
        for (gf_arena_chunk *c = a->first; c;) {
            gf_arena_chunk *n = c->next;
            free(c->base);
            free(c);
            c = n;
        }
        a->first = a->head = chunk_new(a, cap < a->min_chunk ? a->min_chunk : cap);
    }
    a->first->used = 0;
    a->head = a->first;
    a->used = 0;
    a->n_resets++;
}

void gf_arena_free(gf_arena *a) {
    for (gf_arena_chunk *c = a->first; c;) {
        gf_arena_chunk *n = c->next;
        free(c->base);
        free(c);
        c = n;
    }
    memset(a, 0, sizeof *a);
}
