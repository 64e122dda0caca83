/* test_core.c — arenas, parameter block, tape bookkeeping, RNG, errors. */
#include "gf_test.h"
#include "gflow.h"
#include "ops/test_only_ops.h"
#include <string.h>

GF_TEST(unit, arena_growth_reset_highwater) {
    gf_arena a;
    gf_arena_init(&a, 1 << 20);
    GF_CHECK(a.n_chunk_allocs == 1, "one chunk at init");
    /* 5 MiB in 1 MiB pieces: must chain new chunks, not fail */
    for (int i = 0; i < 5; i++) {
        unsigned char *p = gf_arena_alloc(&a, 1 << 20);
        GF_REQUIRE(p != NULL, "alloc");
        GF_CHECK(((uintptr_t)p & 63) == 0, "64-byte aligned");
        memset(p, i, 1 << 20);
    }
    GF_CHECK(a.high_water >= (size_t)5 << 20, "high water %zu", a.high_water);
    GF_CHECK(a.n_chunk_allocs > 1, "grew by chunks");
    size_t hw = a.high_water;
    gf_arena_reset(&a);
    GF_CHECK(a.used == 0, "used reset");
    GF_CHECK(a.first->next == NULL && a.first->cap >= hw, "coalesced into one chunk of the high-water size");
    int64_t allocs = a.n_chunk_allocs;
    /* the same step again: no further malloc */
    for (int i = 0; i < 5; i++) gf_arena_alloc(&a, 1 << 20);
    gf_arena_reset(&a);
    GF_CHECK(a.n_chunk_allocs == allocs, "steady state allocates nothing (%lld -> %lld)",
             (long long)allocs, (long long)a.n_chunk_allocs);
    GF_CHECK(a.high_water == hw, "high water unchanged");
    gf_arena_free(&a);
}

/* smaps' THPeligible line of the mapping that holds p: 1 or 0, -1 when not reported */
static int thp_eligible(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, r = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) in = a >= lo && a < hi;
        else if (in && sscanf(line, "THPeligible: %d", &r) == 1) break;
    }
    fclose(f);
    return r;
}

/* gf_host_alloc: big buffers 2 MiB-aligned and advised as huge pages (docs/performance.md,
 * "Huge pages"); the arena's and the parameter block's memory comes from it */
GF_TEST(unit, host_alloc_big_buffers_are_huge_page_candidates) {
    const size_t big = (size_t)6 << 20;
    unsigned char *p = gf_host_alloc(big), *q = gf_host_alloc(100);
    GF_CHECK(p && q, "allocated");
    uintptr_t off_p = (uintptr_t)p & ((2u << 20) - 1), off_q = (uintptr_t)q & 63;
    GF_CHECK(off_p == 0, "a big buffer starts on a 2 MiB boundary: %p", (void *)p);
    GF_CHECK(off_q == 0, "a small one on 64 bytes: %p", (void *)q);
    memset(p, 1, big);
    q[99] = 7;
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
        fclose(f);
    }
    int e = thp_eligible(p);
    /* with THP on request ("[madvise]") or always, the kernel reports the mapping eligible only
     * when it was advised or THP is always on; "[never]" or no THP: nothing to check */
    if (mode[0] && !strstr(mode, "[never]") && e >= 0)
        GF_CHECK(e == 1, "the 6 MiB buffer is THP-eligible (THP mode %s)", mode);
    gf_arena a;
    gf_arena_init(&a, big);
    uintptr_t off_a = (uintptr_t)a.first->base & ((2u << 20) - 1);
    GF_CHECK(off_a == 0, "the arena's chunk comes from gf_host_alloc");
    gf_arena_free(&a);
    free(p);
    free(q);
}

GF_TEST(unit, rng_save_restore_reproduces_stream) {
    gf_rng r, saved;
    gf_rng_seed(&r, 42);
    for (int i = 0; i < 10; i++) gf_rng_u64(&r);
    (void)gf_rng_normal(&r); /* leaves a cached spare: must be part of the state */
    memcpy(&saved, &r, sizeof r);
    double a[8];
    for (int i = 0; i < 8; i++) a[i] = i % 2 ? gf_rng_normal(&r) : (double)gf_rng_u64(&r);
    memcpy(&r, &saved, sizeof r);
    for (int i = 0; i < 8; i++) {
        double b = i % 2 ? gf_rng_normal(&r) : (double)gf_rng_u64(&r);
        GF_CHECK(a[i] == b, "draw %d differs after restore", i);
    }
    gf_rng r2;
    gf_rng_seed(&r2, 43);
    GF_CHECK(gf_rng_u64(&r2) != (gf_rng_seed(&r, 42), gf_rng_u64(&r)), "seeds differ");
    /* moments of the normal and uniform generators */
    double s = 0, ss = 0, u = 0;
    for (int i = 0; i < 100000; i++) { double x = gf_rng_normal(&r); s += x; ss += x * x; u += gf_rng_uniform(&r); }
    GF_CHECK(fabs(s / 1e5) < 0.02 && fabs(ss / 1e5 - 1) < 0.02, "normal moments %g %g", s / 1e5, ss / 1e5);
    GF_CHECK(fabs(u / 1e5 - 0.5) < 0.01, "uniform mean %g", u / 1e5);
    int64_t perm[50];
    for (int i = 0; i < 50; i++) perm[i] = i;
    gf_rng_shuffle_i64(&r, perm, 50);
    int seen[50] = {0}, moved = 0;
    for (int i = 0; i < 50; i++) { seen[perm[i]]++; moved += perm[i] != i; }
    for (int i = 0; i < 50; i++) GF_CHECK(seen[i] == 1, "permutation");
    GF_CHECK(moved > 30, "shuffled");
}

GF_TEST(unit, params_block_layout) {
    gf_params p;
    gf_params_init(&p);
    int64_t s1[2] = {3, 4}, s2[1] = {4};
    gf_tensor *w = gf_params_add(&p, "lin.weight", GF_PK_WEIGHT, 2, s1);
    gf_tensor *b = gf_params_add(&p, "lin.bias", GF_PK_BIAS, 1, s2);
    GF_REQUIRE_OK(gf_params_alloc(&p));
    GF_CHECK(p.n == 16, "total %lld", (long long)p.n);
    GF_CHECK(w->data == p.data && b->data == p.data + 12, "contiguous in declaration order");
    GF_CHECK(w->grad == p.grad && b->grad == p.grad + 12, "grads parallel");
    GF_CHECK(gf_params_find(&p, "lin.bias")->kind == GF_PK_BIAS, "find");
    GF_CHECK(gf_params_find(&p, "nope") == NULL, "find missing");
    for (int i = 0; i < 16; i++) p.grad[i] = 1.0f;
    GF_CHECK_NEAR(gf_params_grad_norm(&p), 4.0, 1e-12, 0);
    gf_params_zero_grad(&p);
    GF_CHECK(gf_params_grad_norm(&p) == 0.0, "zeroed");
    gf_params_free(&p);
}

GF_TEST(unit, tape_records_only_what_needs_grad) {
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    int64_t s[2] = {2, 3};
    gf_tensor *a = gf_tensor_zeros(&ctx, 2, s), *b = gf_tensor_zeros(&ctx, 2, s);
    gf_tensor *y = gf_add(&ctx, a, b);
    GF_CHECK(ctx.n_nodes == 0 && !(y->flags & GF_T_REQ_GRAD), "constants: nothing recorded");
    gf_params p;
    gf_params_init(&p);
    gf_tensor *w = gf_params_add(&p, "w", GF_PK_WEIGHT, 2, s);
    GF_REQUIRE_OK(gf_params_alloc(&p));
    for (int i = 0; i < 6; i++) { w->data[i] = (float)i; a->data[i] = 1.0f; }
    gf_tensor *z = gf_mul(&ctx, a, w);
    GF_CHECK(ctx.n_nodes == 1 && (z->flags & GF_T_REQ_GRAD), "param input: recorded");
    gf_tensor *loss = gf_sum(&ctx, gf_add(&ctx, z, z)); /* z used twice: grads accumulate */
    gf_tape_backward(&ctx, loss);
    for (int i = 0; i < 6; i++) GF_CHECK_NEAR(w->grad[i], 2.0, 0, 0);
    GF_CHECK(a->grad == NULL, "no grad buffer for a constant");
    /* a second backward pass accumulates (+=) into parameter grads */
    gf_ctx_reset(&ctx);
    a = gf_tensor_zeros(&ctx, 2, s);
    for (int i = 0; i < 6; i++) a->data[i] = 1.0f;
    gf_tape_backward(&ctx, gf_sum(&ctx, gf_mul(&ctx, a, w)));
    for (int i = 0; i < 6; i++) GF_CHECK_NEAR(w->grad[i], 3.0, 0, 0);
    /* no-grad mode records nothing */
    gf_ctx_reset(&ctx);
    gf_ctx_set_grad(&ctx, 0);
    a = gf_tensor_zeros(&ctx, 2, s);
    gf_tensor *e = gf_mul(&ctx, a, w);
    GF_CHECK(ctx.n_nodes == 0 && !(e->flags & GF_T_REQ_GRAD), "no-grad mode: nothing recorded");
    gf_ctx_free(&ctx);
    gf_params_free(&p);
}

/* Ops flagged stores_fresh write the first contribution into an unzeroed gradient buffer; a
 * tensor with several consumers must still get the sum, whichever consumer's backward runs first. */
GF_TEST(unit, tape_fresh_gradients_store_then_accumulate) {
    gf_params p;
    gf_params_init(&p);
    int64_t ws[2] = {2, 3}, xs[2] = {4, 3};
    gf_tensor *w = gf_params_add(&p, "w", GF_PK_WEIGHT, 2, ws);
    GF_REQUIRE_OK(gf_params_alloc(&p));
    for (int i = 0; i < 6; i++) w->data[i] = 0.5f * (float)i - 1.0f;
    for (int order = 0; order < 2; order++) {
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        /* leave garbage where the fresh buffer will be: the arena hands this memory out again */
        float *junk = gf_arena_floats(&ctx.arena, 4096);
        for (int i = 0; i < 4096; i++) junk[i] = 1e30f;
        gf_ctx_reset(&ctx);
        gf_tensor *x = gf_tensor_new(&ctx, 2, xs), *c = gf_tensor_new(&ctx, 2, xs);
        for (int i = 0; i < 12; i++) { x->data[i] = (float)i; c->data[i] = 0.25f * (float)(i % 5); }
        x->flags |= GF_T_REQ_GRAD;
        gf_tensor *a, *b;
        if (order == 0) { a = gf_mul(&ctx, x, c); b = gf_linear(&ctx, x, w, NULL); } /* linear's backward first */
        else { b = gf_linear(&ctx, x, w, NULL); a = gf_mul(&ctx, x, c); }             /* mul's backward first */
        gf_tape_backward(&ctx, gf_add(&ctx, gf_sum(&ctx, a), gf_sum(&ctx, b)));
        /* d/dx [Σ x∘c + Σ x Wᵀ] = c + Σ_o W[o, k] */
        for (int i = 0; i < 12; i++)
            GF_CHECK_NEAR(x->grad[i], c->data[i] + w->data[i % 3] + w->data[3 + i % 3], 1e-6, 0);
        gf_ctx_free(&ctx);
    }
    gf_params_free(&p);
}

GF_TEST(unit, error_messages_and_status_names) {
    gf_status s = gf_error_set(GF_E_PARSE, "%s:%d: key '%s': bad number", "r.ini", 7, "lr");
    GF_CHECK(s == GF_E_PARSE, "returns the code");
    GF_CHECK(strcmp(gf_last_error(), "r.ini:7: key 'lr': bad number") == 0, "%s", gf_last_error());
    gf_error_wrap(s, "loading recipe: ");
    GF_CHECK(strncmp(gf_last_error(), "loading recipe: r.ini:7", 23) == 0, "%s", gf_last_error());
    GF_CHECK(strcmp(gf_status_name(GF_E_CORRUPT), "corrupt") == 0, "name");
    /* every op in the list is defined (else the link fails), under its own name, with a backward */
#define GF_OP(nm) GF_CHECK(!strcmp(gf_op_##nm.name, #nm) && gf_op_##nm.backward, "op %s registered", #nm);
#include "gflow/ops.def"
#undef GF_OP
}
