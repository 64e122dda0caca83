/* gflow/arena.h — the step arena: a bump allocator for everything that lives one step.
 *
 * Tape nodes, activations, saved-for-backward buffers and activation gradients are
 * bump-allocated here and released all at once by gf_arena_reset() after the
 * optimizer step. When a chunk is full a new one is chained (no fixed pool to
 * overflow); reset coalesces the chain into one chunk as large as the high-water
 * mark, so a steady-state step does no malloc at all.
 */
#ifndef GFLOW_ARENA_H
#define GFLOW_ARENA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_arena_chunk {
    struct gf_arena_chunk *next;
    size_t cap, used;
    unsigned char *base;
} gf_arena_chunk;

typedef struct gf_arena {
    gf_arena_chunk *head;   /* chunk being filled */
    gf_arena_chunk *first;  /* oldest chunk */
    size_t used;            /* bytes handed out since the last reset */
    size_t high_water;      /* max of `used` over the arena's life */
    size_t min_chunk;       /* smallest chunk to allocate */
    int64_t n_resets;
    int64_t n_chunk_allocs; /* how many times malloc was called (tests check steady state) */
} gf_arena;

/* The growth both step arenas share (this one, and the device arena of gflow/cuda.h, whose
 * chunks are these too): `need` bytes (aligned by the caller) bumped from *head, or, when it
 * cannot hold them, from a new chunk grow(self, cap) chained after it and made the head; cap is
 * at least the chain's capacity so far (doubling it: a step needs O(log) chunks), min_chunk and
 * need. grow does not return without a chunk (it aborts with a message). */
unsigned char *gf_chunks_take(gf_arena_chunk **head, const gf_arena_chunk *first, size_t min_chunk, size_t need,
                              gf_arena_chunk *(*grow)(void *self, size_t cap), void *self);
/* the bytes of the chain's chunks */
size_t gf_chunks_capacity(const gf_arena_chunk *first);

/* Host memory for the big buffers that live across steps (the arena's chunks, the parameter
 * block, gf_gemm's operand copies), freed with free(). From 2 MiB up it is 2 MiB-aligned and
 * advised as transparent huge pages (MADV_HUGEPAGE: Debian's kernels give them only on request):
 * first touch faults 512x less often (a paper-size `gflow bench`: 655,000 faults -> 7,000) and
 * the step's passes over the 31-63 MB head buffers miss the TLB less. Smaller, 64-byte aligned.
 * NULL when out of memory. */
void *gf_host_alloc(size_t bytes);

void gf_arena_init(gf_arena *a, size_t first_chunk_bytes);
/* 64-byte aligned, uninitialised. Aborts with a message on out-of-memory (the caller
 * cannot sensibly continue a step half-allocated). */
void *gf_arena_alloc(gf_arena *a, size_t bytes);
void *gf_arena_calloc(gf_arena *a, size_t bytes);
float *gf_arena_floats(gf_arena *a, int64_t n);
void gf_arena_reset(gf_arena *a);
size_t gf_arena_capacity(const gf_arena *a);
void gf_arena_free(gf_arena *a);

#ifdef __cplusplus
}
#endif

#endif
