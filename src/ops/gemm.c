/* gemm.c — gf_gemm, the one matrix product of the CPU ops: row-major
 *   C (M, N) = op(A) (M, K) · op(B) (K, N) + beta C,   beta 0 or 1,
 * cblas_sgemm's arguments (lda, ldb, ldc are row strides of the stored matrices).
 *
 * ctx->precision = GF_PREC_FP32: cblas_sgemm, as every op called it before.
 * ctx->precision = GF_PREC_BF16: A and B are rounded to bfloat16 (round to nearest even, NaN
 * kept quiet) into dense copies in their stored layout (A in one reused buffer, kept for the next
 * product of the same A in the same step: pack_a; B in the step arena, once a step: pack_b; a
 * transposed operand is passed by its strides), then
 *   - with oneDNN on a CPU with AMX, or with AVX512-BF16 on AMD (Intel's AVX512-BF16 alone: with
 *     GF_GEMM_BF16=dnnl, as it was slower there than OpenBLAS's fp32 products,
 *     gf_gemm_bf16_uses_dnnl): a matmul primitive,
 *     bf16 inputs, fp32 accumulation and output (beta 1: a sum post-op), one primitive per
 *     shape, created once and kept (gf_gemm_bf16_path says which); without AMX B is read in the
 *     layout the primitive picks, B's fp32 values reordered into it by oneDNN, rounding on the
 *     way, once a step (pack_b_for);
 *   - else: cblas_sgemm on the rounded values widened back to fp32: the same products of the
 *     same rounded inputs, accumulated in fp32 in another order (not the same bits), no faster.
 * Either way the result depends only on the inputs, the shape and the thread count.
 * In bf16 the B operand must not change until ctx is reset (every op's B is a weight or a saved
 * activation): its rounded copy is made once a step (pack_b).
 * An A operand its caller has rounded already comes as fp32 values to gf_gemm_rounded_a (read as
 * they are on OpenBLAS's path) or as bf16 bits to gf_gemm_a16 (oneDNN's operands); a caller asks
 * gf_gemm_bf16_dnnl which form the path takes.
 * gf_gemm_a16 takes an A operand its caller has rounded already (the head's dlogits, rounded
 * once by their row kernel for two products).
 * GF_GEMM_BF16=blas in the environment takes the second path on any CPU (tests, comparisons);
 * any value but blas and dnnl is refused by gflow's main.
 */
#include "op_util.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

float gf_bf16_round(float f) { return gf_bf16_float(gf_bf16_of(f)); }

/* dst (rows, cols), dense row-major, = src (rows, cols; row stride ld) rounded to bf16, in the
 * stored layout (a transposed operand is described to the product by its strides, not moved:
 * a plain sequential pass that vectorises). widen: store each value widened back to fp32. */
GF_KERNEL_CLONES void gf_bf16_row(uint16_t *restrict d, const float *restrict s, int64_t n) {
#pragma omp simd
    for (int64_t c = 0; c < n; c++) d[c] = gf_bf16_of(s[c]);
}

GF_KERNEL_CLONES static void pack_row32(float *restrict d, const float *restrict s, int64_t n) {
#pragma omp simd
    for (int64_t c = 0; c < n; c++) d[c] = gf_bf16_float(gf_bf16_of(s[c]));
}

/* the rows in vector passes (gf_bf16_row, pack_row32): as plain loops, with gf_bf16_round a call and the
 * copy not known apart from its source, they stayed scalar */
static void pack_bf16(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld, int widen) {
    uint16_t *d16 = dst;
    float *d32 = dst;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        if (widen) pack_row32(d32 + r * cols, src + r * ld, cols);
        else gf_bf16_row(d16 + r * cols, src + r * ld, cols);
    }
}

/* ctx->profile: the seconds gemm_bf16 spent rounding A and rounding and reordering B for the
 * product in progress (one caller at a time, as a_scratch) */
static double prep_a, prep_b;
/* gf_gemm_dw_hold_x's rounding, counted as the next product's A (the product it is made for) */
static double prep_a_held;

/* The rounded copy of an A operand is needed only during its product, so all share one buffer,
 * grown to the largest (the tied head's dlogits chunk, 17 MB at the paper's size) and kept: in
 * the step arena the head's 30 copies a step would take 500 MB. One caller at a time (the ops
 * run on one thread and parallelise inside). */
typedef struct {
    void *buf;
    size_t cap;
} scratch;

static void *scratch_take(scratch *s, size_t bytes) {
    if (bytes > s->cap) {
        free(s->buf);
        s->buf = gf_host_alloc(bytes);
        GF_ASSERT(s->buf, "gf_gemm: out of memory for a %zu-byte bf16 copy", bytes);
        s->cap = bytes;
    }
    return s->buf;
}

static void *a_scratch(size_t bytes) {
    static scratch a;
    return scratch_take(&a, bytes);
}

/* What a_scratch holds: A's rounded copy made in pack epoch `epoch` (gf_ctx.pack_epoch; 0: none).
 * Within one epoch an A operand is an op's input or a finished gradient, constant like B, so
 * back-to-back products of the same A (a linear's backward: dX = G W, dW = Gᵀ X) round it once. */
static struct {
    uint64_t epoch;
    const float *src;
    int64_t rows, cols, ld;
    int widen;
} a_held;

/* this step's rounded copy of the stored matrix (src; rows, cols, ld) in layout (NULL: the
 * stored one; else a matmul's, gf_bf16_pack.layout), or NULL; in the stored layout also the rows
 * of a copy of a taller matrix that src is a range of rows of */
static const void *step_copy(const gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld, int widen,
                             const void *layout) {
    for (int i = 0; i < ctx->n_bf16_packs; i++) {
        const struct gf_bf16_pack *p = &ctx->bf16_packs[i];
        if (p->cols != cols || p->ld != ld || p->widen != widen || p->layout != layout) continue;
        if (p->src == src && p->rows == rows) return p->packed;
        /* a plain copy's rows are dense: a range of them (the head's chunks of h) at row offset */
        const uintptr_t at = (uintptr_t)src, from = (uintptr_t)p->src, row = (uintptr_t)ld * sizeof(float);
        if (!layout && at > from && (at - from) % row == 0 && (int64_t)((at - from) / row) + rows <= p->rows)
            return (const char *)p->packed + (at - from) / row * (uintptr_t)cols * (widen ? sizeof(float) : sizeof(uint16_t));
    }
    return NULL;
}

/* whether this step's copies have room for one more (when full, a copy is made but not kept) */
static int step_room(const gf_ctx *ctx) {
    return ctx->n_bf16_packs < (int)(sizeof ctx->bf16_packs / sizeof ctx->bf16_packs[0]);
}

static void step_keep(gf_ctx *ctx, struct gf_bf16_pack p) {
    if (step_room(ctx)) ctx->bf16_packs[ctx->n_bf16_packs++] = p;
}

static const void *pack_a(const gf_ctx *ctx, const float *A, int64_t rows, int64_t cols, int64_t ld, int widen) {
    const void *held = step_copy(ctx, A, rows, cols, ld, widen, NULL); /* gf_gemm_dw_hold_x */
    if (held) return held;
    void *t = a_scratch((size_t)(rows * cols) * (widen ? sizeof(float) : sizeof(uint16_t))); // (rows, cols)
    if (a_held.epoch == ctx->pack_epoch && a_held.src == A && a_held.rows == rows && a_held.cols == cols &&
        a_held.ld == ld && a_held.widen == widen)
        return t;
    pack_bf16(t, A, rows, cols, ld, widen);
    a_held.epoch = ctx->pack_epoch, a_held.src = A, a_held.rows = rows, a_held.cols = cols, a_held.ld = ld;
    a_held.widen = widen;
    return t;
}

/* op(B) rounded, from this step's copies when it was rounded before (gf_ctx.bf16_packs: a B
 * operand is a weight or a saved activation, constant until the next reset), else into the arena */
static const void *pack_b(gf_ctx *ctx, const float *B, int64_t rows, int64_t cols, int64_t ld, int widen) {
    const void *kept = step_copy(ctx, B, rows, cols, ld, widen, NULL);
    if (kept) return kept;
    void *d = gf_arena_alloc(&ctx->arena, (size_t)(rows * cols) * (widen ? sizeof(float) : sizeof(uint16_t)));
    pack_bf16(d, B, rows, cols, ld, widen);
    step_keep(ctx, (struct gf_bf16_pack){B, rows, cols, ld, widen, NULL, d});
    return d;
}

#ifdef GF_HAVE_DNNL
/* one matmul primitive per shape: (M, K) bf16 · (K, N) bf16 -> (M, N) f32 with row stride ldc */
typedef struct mm_prim {
    int64_t M, N, K, ldc;
    int ta, tb, acc, bias;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias_m; /* bias_m: the (1, N) row added to each of C's, where bias */
    /* B in the layout the matmul chose, where that is not the stored one (any_b, mm_get): bq and its
     * size, and the reorder rf from B's fp32 values (bf, row stride rf_ld) into it; bq NULL: the
     * matmul reads b as stored */
    dnnl_memory_t bq, bf;
    size_t bq_bytes;
    dnnl_primitive_t rf;
    int64_t rf_ld;
    dnnl_primitive_t rb; /* the reorder from B's bf16 bits in b's (stored, dense) layout into bq's, or NULL */
} mm_prim;

static struct {
    int tried, ok;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    mm_prim cache[64];
    int n;
} dn;

/* the vendor: AVX512-BF16 alone is worth oneDNN on AMD, not on Intel (gf_gemm_bf16_uses_dnnl) */
static int cpu_is_amd(void) {
    static int amd = -1; /* read once: dnnl_usable asks at every product */
    if (amd < 0) __builtin_cpu_init(), amd = __builtin_cpu_is("amd") != 0;
    return amd;
}

/* what the CPU has, as oneDNN sees it (ONEDNN_MAX_CPU_ISA can hold it lower) */
static void dnnl_isa(int *has_bf16, int *has_amx) {
    static int read, bf16, amx; /* oneDNN fixes its ISA at its first use */
    if (!read) {
        const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        /* bf16 arithmetic in hardware: AVX512-BF16 (0xe7) and AMX (0x3e7 in 2.x, 0xfef in 3.x) include its bits */
        bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
        amx = (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
        read = 1;
    }
    *has_bf16 = bf16, *has_amx = amx;
}

static int dnnl_usable(void) {
    /* the choice read each call, not once: a test sets GF_GEMM_BF16=blas after other products ran on oneDNN */
    int has_bf16, has_amx;
    dnnl_isa(&has_bf16, &has_amx);
    if (!gf_gemm_bf16_uses_dnnl(has_bf16, has_amx, cpu_is_amd(), getenv("GF_GEMM_BF16"))) return 0;
    if (!dn.tried) {
        dn.tried = 1;
        if (dnnl_engine_create(&dn.eng, dnnl_cpu, 0) == dnnl_success &&
            dnnl_stream_create(&dn.strm, dn.eng, dnnl_stream_default_flags) == dnnl_success)
            dn.ok = 1;
    }
    return dn.ok;
}

#define DN_TRY(call)                                                                               \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        GF_ASSERT(s_ == dnnl_success, "oneDNN: %s failed (status %d) for a %lld x %lld x %lld bf16 matmul", \
                  #call, (int)s_, (long long)M, (long long)N, (long long)K);                       \
    } while (0)

/* a memory descriptor as both APIs pass it: a handle in 3.x, a pointer to the struct in 2.x */
#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t md_ref;
#else
typedef const dnnl_memory_desc_t *md_ref;
#endif

/* where the matmul chose another layout for B than the stored one (plain): bq, B's copy in it */
static void blocked_b(mm_prim *p, md_ref plain, md_ref chosen) {
    if (dnnl_memory_desc_equal(chosen, plain)) return;
    const int64_t M = p->M, N = p->N, K = p->K; /* for DN_TRY's message */
    DN_TRY(dnnl_memory_create(&p->bq, chosen, dn.eng, DNNL_MEMORY_NONE));
    p->bq_bytes = dnnl_memory_desc_get_size(chosen);
}

/* p->rf: the reorder from B's stored fp32 values, row stride ld, into bq's layout, made for the
 * first ld seen and again if another comes (one op's B keeps its stride) */
static void f32_reorder(mm_prim *p, int64_t ld) {
    const int64_t M = p->M, N = p->N, K = p->K; /* for DN_TRY's message */
    if (p->rf) dnnl_primitive_destroy(p->rf), dnnl_memory_destroy(p->bf), p->rf = NULL;
    dnnl_dims_t db = {K, N}, sb = {p->tb ? 1 : ld, p->tb ? ld : 1};
    md_ref chosen;
#if DNNL_VERSION_MAJOR >= 3
    dnnl_memory_desc_t mf;
    DN_TRY(dnnl_memory_desc_create_with_strides(&mf, 2, db, dnnl_f32, sb));
    DN_TRY(dnnl_memory_get_memory_desc(p->bq, &chosen));
    md_ref from = mf;
#else
    dnnl_memory_desc_t mf;
    DN_TRY(dnnl_memory_desc_init_by_strides(&mf, 2, db, dnnl_f32, sb));
    DN_TRY(dnnl_memory_get_memory_desc(p->bq, &chosen));
    md_ref from = &mf;
#endif
    dnnl_primitive_desc_t rpd;
    DN_TRY(dnnl_reorder_primitive_desc_create(&rpd, from, dn.eng, chosen, dn.eng, NULL));
    DN_TRY(dnnl_primitive_create(&p->rf, rpd));
    dnnl_primitive_desc_destroy(rpd);
    DN_TRY(dnnl_memory_create(&p->bf, from, dn.eng, DNNL_MEMORY_NONE));
#if DNNL_VERSION_MAJOR >= 3
    dnnl_memory_desc_destroy(mf);
#endif
    p->rf_ld = ld;
}

/* p->rb: the reorder from B's bf16 bits as stored (b's layout) into bq's, made at its first use */
static void bits_reorder(mm_prim *p) {
    const int64_t M = p->M, N = p->N, K = p->K; /* for DN_TRY's message */
    md_ref from, chosen;
    DN_TRY(dnnl_memory_get_memory_desc(p->b, &from));
    DN_TRY(dnnl_memory_get_memory_desc(p->bq, &chosen));
    dnnl_primitive_desc_t rpd;
    DN_TRY(dnnl_reorder_primitive_desc_create(&rpd, from, dn.eng, chosen, dn.eng, NULL));
    DN_TRY(dnnl_primitive_create(&p->rb, rpd));
    dnnl_primitive_desc_destroy(rpd);
}

static mm_prim *mm_get(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t ldc, int acc, int bias) {
    for (int i = 0; i < dn.n; i++) {
        mm_prim *p = &dn.cache[i];
        if (p->M == M && p->N == N && p->K == K && p->ldc == ldc && p->ta == ta && p->tb == tb && p->acc == acc &&
            p->bias == bias)
            return p;
    }
    GF_ASSERT(dn.n < (int)(sizeof dn.cache / sizeof dn.cache[0]), "gf_gemm: more than %d bf16 matmul shapes",
              (int)(sizeof dn.cache / sizeof dn.cache[0]));
    mm_prim *p = &dn.cache[dn.n];
    *p = (mm_prim){.M = M, .N = N, .K = K, .ldc = ldc, .ta = ta, .tb = tb, .acc = acc, .bias = bias};
    /* B in the layout oneDNN picks where that is faster: without AMX (Zen 5: the tied head's
     * products 1.2-1.3x, docs/performance.md "AMD EPYC Zen 5"); with AMX the stored layout, as
     * measured there (no gain on the head) */
    int has_bf16, has_amx;
    dnnl_isa(&has_bf16, &has_amx);
    const int any_b = !has_amx;
    /* the packed copies keep the stored layout: a transposed operand is the other stride order */
    dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N}, sc = {ldc, 1}, dbias = {1, N}, sbias = {N, 1};
    dnnl_dims_t sa = {ta ? 1 : K, ta ? M : 1}, sb = {tb ? 1 : N, tb ? K : 1};
    dnnl_primitive_attr_t attr;
    DN_TRY(dnnl_primitive_attr_create(&attr));
    if (acc) { /* C += A·B: the sum post-op reads C before the product is added */
        dnnl_post_ops_t po;
        DN_TRY(dnnl_post_ops_create(&po));
#if DNNL_VERSION_MAJOR >= 3
        DN_TRY(dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef));
#else
        DN_TRY(dnnl_post_ops_append_sum(po, 1.0f));
#endif
        DN_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3 /* descriptors are opaque handles, the matmul's made in one call */
    dnnl_memory_desc_t ma, mb, mc, mw, mbias = NULL;
    DN_TRY(dnnl_memory_desc_create_with_strides(&ma, 2, da, dnnl_bf16, sa));
    DN_TRY(dnnl_memory_desc_create_with_strides(&mb, 2, db, dnnl_bf16, sb));
    DN_TRY(dnnl_memory_desc_create_with_strides(&mc, 2, dc, dnnl_f32, sc));
    if (bias) DN_TRY(dnnl_memory_desc_create_with_strides(&mbias, 2, dbias, dnnl_f32, sbias));
    if (any_b) DN_TRY(dnnl_memory_desc_create_with_tag(&mw, 2, db, dnnl_bf16, dnnl_format_tag_any));
    DN_TRY(dnnl_matmul_primitive_desc_create(&pd, dn.eng, ma, any_b ? mw : mb, mbias, mc, attr));
    DN_TRY(dnnl_memory_create(&p->a, ma, dn.eng, DNNL_MEMORY_NONE));
    DN_TRY(dnnl_memory_create(&p->b, mb, dn.eng, DNNL_MEMORY_NONE));
    DN_TRY(dnnl_memory_create(&p->c, mc, dn.eng, DNNL_MEMORY_NONE));
    if (bias) DN_TRY(dnnl_memory_create(&p->bias_m, mbias, dn.eng, DNNL_MEMORY_NONE)), dnnl_memory_desc_destroy(mbias);
    blocked_b(p, mb, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
    if (any_b) dnnl_memory_desc_destroy(mw);
    dnnl_memory_desc_destroy(ma), dnnl_memory_desc_destroy(mb), dnnl_memory_desc_destroy(mc);
#else
    dnnl_memory_desc_t ma, mb, mc, mw, mbias;
    DN_TRY(dnnl_memory_desc_init_by_strides(&ma, 2, da, dnnl_bf16, sa));
    DN_TRY(dnnl_memory_desc_init_by_strides(&mb, 2, db, dnnl_bf16, sb));
    DN_TRY(dnnl_memory_desc_init_by_strides(&mc, 2, dc, dnnl_f32, sc));
    if (bias) DN_TRY(dnnl_memory_desc_init_by_strides(&mbias, 2, dbias, dnnl_f32, sbias));
    if (any_b) DN_TRY(dnnl_memory_desc_init_by_tag(&mw, 2, db, dnnl_bf16, dnnl_format_tag_any));
    dnnl_matmul_desc_t md;
    DN_TRY(dnnl_matmul_desc_init(&md, &ma, any_b ? &mw : &mb, bias ? &mbias : NULL, &mc));
    DN_TRY(dnnl_primitive_desc_create(&pd, &md, attr, dn.eng, NULL));
    DN_TRY(dnnl_memory_create(&p->a, &ma, dn.eng, DNNL_MEMORY_NONE));
    DN_TRY(dnnl_memory_create(&p->b, &mb, dn.eng, DNNL_MEMORY_NONE));
    DN_TRY(dnnl_memory_create(&p->c, &mc, dn.eng, DNNL_MEMORY_NONE));
    if (bias) DN_TRY(dnnl_memory_create(&p->bias_m, &mbias, dn.eng, DNNL_MEMORY_NONE));
    blocked_b(p, &mb, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
#endif
    dnnl_primitive_attr_destroy(attr);
    DN_TRY(dnnl_primitive_create(&p->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    dn.n++;
    return p;
}

/* B (the stored rows x cols at B, row stride ld) rounded, in the layout p's matmul reads: pack_b's
 * copy, or B's fp32 values reordered into p's layout in the arena by oneDNN, rounded on the way,
 * made once a step as pack_b's copies are. One pass, where rounding into a plain copy first and
 * reordering that took 2.8x as long (Zen 5). oneDNN's rounding is gf_bf16_of's (to nearest even)
 * but for fp32 subnormals, which become zeros (the hardware's conversion), as the bf16 dot
 * products treat subnormal inputs in any layout: the same product (unit/gemm_bf16_blocked_b_rounds_as_gflow). */
static const void *pack_b_for(gf_ctx *ctx, mm_prim *p, const float *B, int64_t rows, int64_t cols, int64_t ld) {
    if (!p->bq) return pack_b(ctx, B, rows, cols, ld, 0);
    const int64_t M = p->M, N = p->N, K = p->K; /* for DN_TRY's message */
    const void *kept = step_copy(ctx, B, rows, cols, ld, 0, p);
    if (kept) return kept;
    /* B's bits in its stored layout where this step has them (the op that wrote B made them,
     * gf_gemm_round_into, or a product kept them): reordered from those, half the bytes of B's
     * fp32 values (a dW product's B, the layer's input). The same product: the bits are
     * gf_bf16_of's, which the fp32 reorder's rounding is but for subnormals, which the bf16 dot
     * products take as zeros either way (unit/gemm_bf16_blocked_b_rounds_as_gflow). */
    const void *bits = step_copy(ctx, B, rows, cols, ld, 0, NULL);
    void *d = gf_arena_alloc(&ctx->arena, p->bq_bytes);
    DN_TRY(dnnl_memory_set_data_handle(p->bq, d));
    if (bits) {
        if (!p->rb) bits_reorder(p);
        DN_TRY(dnnl_memory_set_data_handle(p->b, (void *)bits));
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p->b}, {DNNL_ARG_TO, p->bq}};
        DN_TRY(dnnl_primitive_execute(p->rb, dn.strm, 2, args));
    } else {
        if (!p->rf || p->rf_ld != ld) f32_reorder(p, ld);
        DN_TRY(dnnl_memory_set_data_handle(p->bf, (void *)B));
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p->bf}, {DNNL_ARG_TO, p->bq}};
        DN_TRY(dnnl_primitive_execute(p->rf, dn.strm, 2, args));
    }
    DN_TRY(dnnl_stream_wait(dn.strm));
    step_keep(ctx, (struct gf_bf16_pack){B, rows, cols, ld, 0, p, d});
    return d;
}

/* C (M, N; row stride ldc) = or += a · B, + bias (N) on each row where bias: a A's rounded copy,
 * B (br, bc; row stride ldb) as stored */
static void mm_run(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *a, const float *B,
                   int64_t br, int64_t bc, int64_t ldb, const float *bias, float *C, int64_t ldc, int acc) {
    mm_prim *p = mm_get(ta, tb, M, N, K, ldc, acc, bias != NULL);
    const double t0 = gf_prof_begin(ctx);
    const void *b = pack_b_for(ctx, p, B, br, bc, ldb);
    if (ctx->profile) prep_b += gf_time_now() - t0;
    dnnl_memory_t wb = p->bq ? p->bq : p->b;
    DN_TRY(dnnl_memory_set_data_handle(p->a, (void *)a));
    DN_TRY(dnnl_memory_set_data_handle(wb, (void *)b));
    DN_TRY(dnnl_memory_set_data_handle(p->c, C));
    if (bias) DN_TRY(dnnl_memory_set_data_handle(p->bias_m, (void *)bias));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DST, p->c}, {DNNL_ARG_BIAS, p->bias_m}};
    DN_TRY(dnnl_primitive_execute(p->prim, dn.strm, bias ? 4 : 3, args));
    DN_TRY(dnnl_stream_wait(dn.strm));
}
#endif

const char *gf_gemm_bf16_path_on(gf_device device) {
    const gf_backend *b = gf_backend_find(device);
    return b ? b->ops->gemm_bf16_path() : "none: gflow was built without this device";
}

/* oneDNN's bf16 matmul runs the products where it beats OpenBLAS's fp32 ones: with AMX (a bf16
 * step 1.7-1.9x an fp32 one) and with AVX512-BF16 on AMD (a Zen 5 step 1.6-1.85x, docs/performance.md
 * "AMD EPYC Zen 5"). On Intel's AVX512-BF16 alone (Cooper Lake) a bf16 step ran at 0.79-0.81x an
 * fp32 one (oneDNN held to that ISA on an AMX Xeon), where OpenBLAS on the rounded inputs costs what
 * fp32 does, so OpenBLAS takes them there. GF_GEMM_BF16=dnnl takes oneDNN wherever it has bf16
 * arithmetic (to measure that case), =blas never. */
int gf_gemm_bf16_uses_dnnl(int has_bf16, int has_amx, int amd, const char *force) {
    if (!has_bf16 || (force && !strcmp(force, "blas"))) return 0;
    return has_amx || amd || (force && !strcmp(force, "dnnl"));
}

const char *gf_gemm_bf16_path(void) {
    const char *force = getenv("GF_GEMM_BF16");
    if (force && !strcmp(force, "blas")) return "OpenBLAS on bf16-rounded inputs (GF_GEMM_BF16=blas): no faster than fp32";
#ifdef GF_HAVE_DNNL
    static char buf[200];
    int has_bf16, has_amx;
    dnnl_isa(&has_bf16, &has_amx);
    if (dnnl_usable()) {
        const dnnl_version_t *v = dnnl_version();
        snprintf(buf, sizeof buf, "oneDNN %d.%d.%d, %s", v->major, v->minor, v->patch,
                 has_amx      ? "AMX-BF16"
                 : cpu_is_amd() ? "AVX512-BF16 on AMD: a Zen 5 step 1.6-1.85x fp32's"
                              : "AVX512-BF16 without AMX (GF_GEMM_BF16=dnnl): slower than fp32 where measured, 0.8x");
        return buf;
    }
    if (has_bf16)
        return "OpenBLAS on bf16-rounded inputs (Intel AVX512-BF16 without AMX: oneDNN's bf16 products were slower "
               "there, 0.8x fp32; these cost what fp32 does)";
    return "OpenBLAS on bf16-rounded inputs (this CPU has no bf16 arithmetic that oneDNN uses: no faster than fp32)";
#else
    return "OpenBLAS on bf16-rounded inputs (built without oneDNN: no faster than fp32)";
#endif
}

int gf_gemm_bf16_dnnl(int64_t N, int64_t ldc) {
#ifdef GF_HAVE_DNNL
    /* oneDNN 3.7 writes an (M, 1) output with a row stride > 1 as if dense, past column 0
     * (unit/gemm_bf16_*: N 1, ldc 4); such a matrix-vector product takes OpenBLAS's path */
    const int dnnl_shape_ok = DNNL_VERSION_MAJOR < 3 || N > 1 || ldc == 1;
    return dnnl_shape_ok && dnnl_usable();
#else
    (void)N, (void)ldc;
    return 0;
#endif
}

/* ctx->profile: one product's time added to its shape's row (gf_profile.gemm); acc: 0 C =, 1 C +=,
 * 2 C = with the row bias (gf_gemm_bias) */
static void gemm_note(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, int acc, double s) {
    gf_profile *pr = &ctx->prof;
    gf_gemm_stat *g = NULL;
    for (int i = 0; i < pr->n_gemm && !g; i++) {
        gf_gemm_stat *q = &pr->gemm[i];
        if (q->M == M && q->N == N && q->K == K && q->ta == ta && q->tb == tb && q->acc == acc) g = q;
    }
    if (!g && pr->n_gemm == GF_GEMM_STATS) {
        pr->gemm_more++;
        return;
    }
    if (!g) g = &pr->gemm[pr->n_gemm++], *g = (gf_gemm_stat){.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .acc = acc};
    g->calls++, g->s += s, g->s_round_a += prep_a, g->s_round_b += prep_b;
}

/* C (M, N; row stride ldc) = bias (N) in every row: where no library adds the bias, the product
 * then adds to it (beta 1), the same sums as oneDNN's bias */
static void fill_rows(float *C, int64_t ldc, int64_t M, int64_t N, const float *bias) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; r++) memcpy(C + r * ldc, bias, (size_t)N * sizeof(float));
}

/* How gemm_bf16 gets A: rounded here (pack_a, kept for the next product of the same A), the
 * caller's bf16 bits (A16, dense), or the caller's fp32 values that are bf16 already (A_ROUNDED:
 * not kept, the caller may rewrite them, as the head does chunk by chunk) */
enum { A_ROUND, A_BITS, A_ROUNDED };

/* the bf16 product: A as `akind` says, B this step's copy; bias (N) or NULL, only with beta 0 */
static void gemm_bf16(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                      const uint16_t *A16, int akind, int64_t lda, const float *B, int64_t ldb, const float *bias,
                      float beta, float *C, int64_t ldc) {
    /* the stored matrices: A is (M, K), or (K, M) when transposed; B (K, N), or (N, K) */
    const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
#ifdef GF_HAVE_DNNL
    if (gf_gemm_bf16_dnnl(N, ldc)) {
        const double t0 = gf_prof_begin(ctx);
        const uint16_t *a = A16; // (ar, ac) bf16
        if (akind == A_ROUND) {
            a = pack_a(ctx, A, ar, ac, lda, 0);
        } else if (akind == A_ROUNDED) { /* rounding a bf16 value is exact: the caller's bits */
            uint16_t *w = a_scratch((size_t)(ar * ac) * sizeof(uint16_t));
            a_held.epoch = 0; /* a_scratch no longer holds a rounded A */
            pack_bf16(w, A, ar, ac, lda, 0);
            a = w;
        }
        if (ctx->profile) prep_a += gf_time_now() - t0;
        mm_run(ctx, ta, tb, M, N, K, a, B, br, bc, ldb, bias, C, ldc, beta != 0.0f);
        return;
    }
#endif
    const double t0 = gf_prof_begin(ctx);
    const float *a = A; // (ar, ac) bf16 values, row stride la
    int64_t la = ac;
    if (akind == A_BITS) {
        float *w = a_scratch((size_t)(M * K) * sizeof(float));
        a_held.epoch = 0; /* a_scratch no longer holds a rounded A */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < ar * ac; i++) w[i] = gf_bf16_float(A16[i]);
        a = w;
    } else if (akind == A_ROUND) {
        a = pack_a(ctx, A, ar, ac, lda, 1);
    } else {
        la = lda;
    }
    const double t1 = gf_prof_begin(ctx);
    const float *b = pack_b(ctx, B, br, bc, ldb, 1); // (br, bc) bf16 values
    if (ctx->profile) prep_a += t1 - t0, prep_b += gf_time_now() - t1;
    if (bias) fill_rows(C, ldc, M, N, bias), beta = 1.0f;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, gf_blas_int(M),
                gf_blas_int(N), gf_blas_int(K), 1.0f, a, gf_blas_int(la), b, gf_blas_int(bc), beta, C,
                gf_blas_int(ldc));
}

/* gf_gemm and gf_gemm_bias: C = op(A) op(B) + (bias in every row, or beta C) */
static void gemm_any(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, const float *bias, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    const double t0 = gf_prof_begin(ctx), held = prep_a_held;
    prep_a = held, prep_b = prep_a_held = 0.0;
    if (ctx->precision == GF_PREC_FP32 || K == 0) {
        if (bias) fill_rows(C, ldc, M, N, bias), beta = 1.0f;
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, gf_blas_int(M),
                    gf_blas_int(N), gf_blas_int(K), 1.0f, A, gf_blas_int(lda), B, gf_blas_int(ldb), beta, C,
                    gf_blas_int(ldc));
    } else {
        gemm_bf16(ctx, ta, tb, M, N, K, A, NULL, A_ROUND, lda, B, ldb, bias, beta, C, ldc);
    }
    if (ctx->profile) gemm_note(ctx, ta, tb, M, N, K, bias ? 2 : beta != 0.0f, gf_time_now() - t0 + held);
}

void gf_gemm(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
             const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    GF_ASSERT(beta == 0.0f || beta == 1.0f, "gf_gemm: beta %g (0 or 1)", (double)beta);
    gemm_any(ctx, ta, tb, M, N, K, A, lda, B, ldb, NULL, beta, C, ldc);
}

void gf_gemm_bias(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                  const float *B, int64_t ldb, const float *bias, float *C, int64_t ldc) {
    GF_ASSERT(bias, "gf_gemm_bias: no bias");
    gemm_any(ctx, ta, tb, M, N, K, A, lda, B, ldb, bias, 0.0f, C, ldc);
}

static int dw_transposed(const gf_ctx *ctx, int64_t OUT, int64_t IN) {
    return ctx->precision == GF_PREC_BF16 && IN > OUT;
}

void gf_gemm_dw_hold_x(gf_ctx *ctx, int64_t N, int64_t OUT, int64_t IN, const float *X, int64_t ldx) {
    if (!dw_transposed(ctx, OUT, IN) || N == 0) return;
    const double t0 = gf_prof_begin(ctx);
    (void)pack_b(ctx, X, N, IN, ldx, !gf_gemm_bf16_dnnl(OUT, OUT));
    if (ctx->profile) prep_a_held += gf_time_now() - t0;
}

uint16_t *gf_gemm_round_into(gf_ctx *ctx, const float *X, int64_t rows, int64_t cols) {
    if (ctx->precision != GF_PREC_BF16 || !gf_gemm_bf16_dnnl(cols, cols) || rows * cols == 0 || !step_room(ctx))
        return NULL;
    GF_ASSERT(!step_copy(ctx, X, rows, cols, cols, 0, NULL), "gf_gemm_round_into: X already has a copy this step");
    uint16_t *d = gf_arena_alloc(&ctx->arena, (size_t)(rows * cols) * sizeof(uint16_t)); // (rows, cols)
    step_keep(ctx, (struct gf_bf16_pack){X, rows, cols, cols, 0, NULL, d});
    return d;
}

void gf_gemm_dw(gf_ctx *ctx, int64_t N, int64_t OUT, int64_t IN, const float *G, int64_t ldg, const float *X,
                int64_t ldx, float beta, float *dW, int64_t ldw) {
    if (!dw_transposed(ctx, OUT, IN)) {
        gf_gemm(ctx, 1, 0, OUT, IN, N, G, ldg, X, ldx, beta, dW, ldw);
        return;
    }
    GF_ASSERT(beta == 0.0f || beta == 1.0f, "gf_gemm_dw: beta %g (0 or 1)", (double)beta);
    float *dwt = gf_arena_floats(&ctx->arena, IN * OUT); // (IN, OUT)
    gf_gemm(ctx, 1, 0, IN, OUT, N, X, ldx, G, ldg, 0.0f, dwt, OUT);
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < OUT; o++) {
        float *w = dW + o * ldw;
        if (beta != 0.0f)
            for (int64_t i = 0; i < IN; i++) w[i] += dwt[i * OUT + o];
        else
            for (int64_t i = 0; i < IN; i++) w[i] = dwt[i * OUT + o];
    }
}

void gf_gemm_a16(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const uint16_t *A16, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    GF_ASSERT(beta == 0.0f || beta == 1.0f, "gf_gemm_a16: beta %g (0 or 1)", (double)beta);
    GF_ASSERT(ctx->precision == GF_PREC_BF16, "gf_gemm_a16: a bf16 operand in an fp32 context");
    GF_ASSERT(lda == (ta ? M : K), "gf_gemm_a16: A's row stride %lld is not its column count", (long long)lda);
    GF_ASSERT(K > 0, "gf_gemm_a16: K = 0");
    if (M == 0 || N == 0) return;
    const double t0 = gf_prof_begin(ctx);
    prep_a = prep_b = 0.0;
    gemm_bf16(ctx, ta, tb, M, N, K, NULL, A16, A_BITS, lda, B, ldb, NULL, beta, C, ldc);
    if (ctx->profile) gemm_note(ctx, ta, tb, M, N, K, beta != 0.0f, gf_time_now() - t0);
}

void gf_gemm_rounded_a(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    GF_ASSERT(beta == 0.0f || beta == 1.0f, "gf_gemm_rounded_a: beta %g (0 or 1)", (double)beta);
    GF_ASSERT(ctx->precision == GF_PREC_BF16, "gf_gemm_rounded_a: a bf16 operand in an fp32 context");
    GF_ASSERT(K > 0, "gf_gemm_rounded_a: K = 0");
    if (M == 0 || N == 0) return;
    const double t0 = gf_prof_begin(ctx);
    prep_a = prep_b = 0.0;
    gemm_bf16(ctx, ta, tb, M, N, K, A, NULL, A_ROUNDED, lda, B, ldb, NULL, beta, C, ldc);
    if (ctx->profile) gemm_note(ctx, ta, tb, M, N, K, beta != 0.0f, gf_time_now() - t0);
}
