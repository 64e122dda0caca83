/* head_ce.c — fused tied LM head + softmax cross-entropy, chunked over rows.
 *
 * loss = (1/C) Σ_{i counted} [ lse_i - l_{i,t_i} ],  l_i = E h_i  (h (N, D), E (V, D), logits (N, V))
 *
 * The plain path (gf_linear + gf_cross_entropy) keeps the (N, V) logits and their (N, V)
 * gradient: 2 × 500 MB at the paper's N = 4096, V = 30,522. Here rows are processed in
 * chunks of GF_HEAD_CHUNK: the chunk's logits are computed, turned into probabilities in
 * place, and — when a gradient is needed — the chunk's contribution to dh and dE is computed
 * right away, so only one (chunk, V) buffer exists at any time (in bf16 on oneDNN also the
 * rounded dlogits of GF_HEAD_DE_CHUNKS chunks, for one dE product over them). With upstream
 * gradient u (the backward seed, normally 1):
 *   dl_ij = u (p_ij - [j = t_i]) / C      (0 for ignored rows)
 *   dh    += dl · E        (N, D)          dE += dlᵀ · h      (V, D)
 * Forward computes both products with u = 1 into buffers saved on the node; backward only
 * scales them by u and adds: dh and dE are exact linear functions of u.
 */
#include "op_util.h"
#include <math.h>

#define GF_HEAD_CHUNK 256 /* (256, V) logits: 31 MB at V = 30,522; GEMMs stay efficient */
/* In bf16 (oneDNN 2.6's AMX matmul, measured on the paper's head, docs/performance.md): chunks of
 * 512 rows, and the vocabulary padded to a multiple of 256 with zero rows of E — a logits product
 * whose N has a tail runs at half the speed (256 x 30,522 x 256: 53 ms; x 30,720: 24 ms). The pad
 * columns of the logits and dlogits are zeros, so the products are those of the unpadded head
 * plus zero terms; dE gets pad rows (zeros) that the backward does not read. On Zen 5's
 * AVX512-BF16 (no AMX) the pad helps too (logits 675 -> 786 GFLOP/s) and 256-row chunks made the
 * step 5 % slower. */
#define GF_HEAD_CHUNK_BF16 512
#define GF_HEAD_PAD_BF16 256
/* bf16 on oneDNN: the rounded dlogits of this many chunks are kept (31 MB a chunk at the paper's
 * size) for one dE product over all their rows: each product after the first sums into dE (31 MB
 * read and written again), so fewer, longer ones take less. On Zen 5 the step's dE products took
 * 0.93x the time in six alternating pairs against one chunk a product, 4 chunks no better than 2
 * (docs/performance.md, "AMD EPYC Zen 5"). */
#define GF_HEAD_DE_CHUNKS 2

/* backward: h.grad += u * dh ; E.grad += u * dE */
static void head_ce_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *h = n->in[0], *E = n->in[1];
    float u = n->out->grad[0];
    const float *dh = n->saved, *dE = n->aux;
    int64_t nh = gf_tensor_numel(h), ne = gf_tensor_numel(E);
    if (gf_needs_grad(h)) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < nh; i++) h->grad[i] += u * dh[i];
    }
    if (gf_needs_grad(E)) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < ne; i++) E->grad[i] += u * dE[i];
    }
}

/* Row kernels (multiversioned in a portable build, GF_KERNEL_CLONES). exp_row: l[j] = exp(l[j] - m)
 * in place with m = max_j l[j] (*max gets it); returns Σ_j l[j], summed in float over blocks of
 * 256 (vector lanes) and in double across blocks. The max pass reads the row from memory (the
 * chunk's logits, 31 MB, are past the caches): the exponentials' pass prefetches the thread's next
 * row (next, its first V floats; NULL: none) block by block, so that read finds it cached. */
GF_KERNEL_CLONES static double exp_row(float *restrict l, int64_t V, float *max, const float *next) {
    float m = l[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 1; j < V; j++) m = l[j] > m ? l[j] : m;
    double s = 0.0;
    for (int64_t j0 = 0; j0 < V; j0 += 256) {
        int64_t j1 = j0 + 256 < V ? j0 + 256 : V;
        if (next)
            for (int64_t j = j0; j < j1; j += 16) __builtin_prefetch(next + j, 0, 3); /* a 64-byte line */
        float bs = 0.0f;
#pragma omp simd reduction(+ : bs)
        for (int64_t j = j0; j < j1; j++) { l[j] = gf_expf_le88(l[j] - m); bs += l[j]; }
        s += (double)bs;
    }
    *max = m;
    return s;
}

GF_KERNEL_CLONES static void scale_row(float *restrict l, int64_t V, float sc) {
#pragma omp simd
    for (int64_t j = 0; j < V; j++) l[j] *= sc;
}

/* bf16: the row's dlogits rounded as gf_gemm would round scale_row's result (then l[t] -= inv),
 * once for both backward products: as bf16 bits into d for oneDNN (l is left as exp_row made
 * it), or, d NULL, as fp32 values in place for OpenBLAS (gf_gemm_rounded_a reads them as they are) */
GF_KERNEL_CLONES static void scale_row_bf16(uint16_t *restrict d, float *restrict l, int64_t V, float sc, int32_t t,
                                            float inv) {
    float lt = l[t] * sc;
    lt -= inv;
    if (d) {
#pragma omp simd
        for (int64_t j = 0; j < V; j++) d[j] = gf_bf16_of(l[j] * sc);
        d[t] = gf_bf16_of(lt);
    } else {
#pragma omp simd
        for (int64_t j = 0; j < V; j++) l[j] = gf_bf16_float(gf_bf16_of(l[j] * sc));
        l[t] = gf_bf16_float(gf_bf16_of(lt));
    }
}

gf_tensor *gf_head_ce(gf_ctx *ctx, gf_tensor *h, gf_tensor *E, const int32_t *targets, int32_t ignore_index,
                      double *nll_sum, int64_t *n_counted) {
    double t0 = gf_prof_begin(ctx);
    int64_t N = gf_tensor_rows(h), D = gf_tensor_cols(h), V = E->shape[0];
    GF_ASSERT(E->ndim == 2 && E->shape[1] == D, "head_ce: E must be (V, %lld)", (long long)D);
    gf_tensor *hE[2] = {h, E};
    const gf_backend_ops *dev = gf_op_backend("head_ce", 2, hE);
    if (dev) return dev->head_ce(ctx, h, E, targets, ignore_index, nll_sum, n_counted);
    int grad = ctx->grad_enabled && (gf_needs_grad(h) || gf_needs_grad(E));
    int64_t cnt = 0;
    for (int64_t i = 0; i < N; i++) {
        if (targets[i] == ignore_index) continue;
        GF_ASSERT(targets[i] >= 0 && targets[i] < V, "head_ce: target %d at row %lld outside [0, %lld)", targets[i],
                  (long long)i, (long long)V);
        cnt++;
    }
    float inv = cnt ? 1.0f / (float)cnt : 0.0f;
    const int bf16 = ctx->precision == GF_PREC_BF16;
    const int64_t Vp = bf16 ? (V + GF_HEAD_PAD_BF16 - 1) / GF_HEAD_PAD_BF16 * GF_HEAD_PAD_BF16 : V;
    int64_t CH = bf16 ? GF_HEAD_CHUNK_BF16 : GF_HEAD_CHUNK;
    if (N < CH) CH = N;
    const float *Ew = E->data; // (Vp, D)
    if (Vp != V) {
        float *Ep = gf_arena_floats(&ctx->arena, Vp * D);
        memcpy(Ep, E->data, (size_t)(V * D) * sizeof(float));
        memset(Ep + V * D, 0, (size_t)((Vp - V) * D) * sizeof(float));
        Ew = Ep;
    }
    float *buf = gf_arena_floats(&ctx->arena, CH * Vp);                         // (CH, Vp)
    /* bf16: the dlogits rounded once, by the row kernel, for both backward products: into dl16
     * where the products run on oneDNN, else in place in buf */
    const int bits = grad && bf16 && gf_gemm_bf16_dnnl(D, D);
    const int64_t G = bits ? GF_HEAD_DE_CHUNKS : 1;
    uint16_t *dl16 = bits ? gf_arena_alloc(&ctx->arena, (size_t)(G * CH * Vp) * sizeof(uint16_t)) : NULL; // (G CH, Vp)
    double *nll = gf_arena_alloc(&ctx->arena, (size_t)N * sizeof(double));      // (N)
    float *dh = grad ? gf_arena_floats(&ctx->arena, N * D) : NULL;              // (N, D)
    /* dE is written by the first dE product (beta 0, the first chunk or group of chunks) and summed
     * into by the others: zeroed first, it took a 31 MB pass and oneDNN's sum post-op one more time */
    float *dE = !grad ? NULL
                : N > 0 ? gf_arena_floats(&ctx->arena, Vp * D)
                        : gf_arena_calloc(&ctx->arena, (size_t)(Vp * D) * sizeof(float)); // (Vp, D)
    int iD = gf_blas_int(D), iV = gf_blas_int(Vp);

    for (int64_t c0 = 0; c0 < N; c0 += CH) {
        int64_t n = N - c0 < CH ? N - c0 : CH;
        const float *hc = h->data + c0 * D;
        const int64_t g0 = c0 - c0 % (G * CH);          /* the first row of this chunk's dE group */
        uint16_t *dlc = dl16 ? dl16 + (c0 - g0) * Vp : NULL; /* the chunk's rows of the group's dlogits */
        gf_gemm(ctx, 0, 1, n, iV, iD, hc, iD, Ew, iD, 0.0f, buf, iV);
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < n; r++) {
            float *l = buf + r * Vp; /* a thread's rows are consecutive (static): the next is its own */
            uint16_t *d = dlc ? dlc + r * Vp : NULL;
            int32_t t = targets[c0 + r];
            if (t == ignore_index) {
                nll[c0 + r] = 0.0;
                if (d) memset(d, 0, (size_t)Vp * sizeof(uint16_t));
                else if (grad) memset(l, 0, (size_t)Vp * sizeof(float));
                continue;
            }
            float lt = l[t], m;
            double s = exp_row(l, V, &m, r + 1 < n ? l + Vp : NULL);
            nll[c0 + r] = (double)m + log(s) - (double)lt;
            if (grad) {
                float sc = (float)(1.0 / s) * inv;
                if (d) {
                    scale_row_bf16(d, l, V, sc, t, inv);
                    memset(d + V, 0, (size_t)(Vp - V) * sizeof(uint16_t));
                } else if (bf16) {
                    scale_row_bf16(NULL, l, V, sc, t, inv);
                    memset(l + V, 0, (size_t)(Vp - V) * sizeof(float));
                } else {
                    scale_row(l, V, sc);
                    l[t] -= inv;
                }
            }
        }
        if (dl16) {
            gf_gemm_a16(ctx, 0, 0, n, iD, iV, dlc, iV, Ew, iD, 0.0f, dh + c0 * D, iD);
            if (c0 + n == N || c0 + n - g0 == G * CH)
                gf_gemm_a16(ctx, 1, 0, iV, iD, c0 + n - g0, dl16, iV, h->data + g0 * D, iD, g0 ? 1.0f : 0.0f, dE, iD);
        } else if (grad && bf16) {
            gf_gemm_rounded_a(ctx, 0, 0, n, iD, iV, buf, iV, Ew, iD, 0.0f, dh + c0 * D, iD);
            gf_gemm_rounded_a(ctx, 1, 0, iV, iD, n, buf, iV, hc, iD, c0 ? 1.0f : 0.0f, dE, iD);
        } else if (grad) {
            gf_gemm(ctx, 0, 0, n, iD, iV, buf, iV, Ew, iD, 0.0f, dh + c0 * D, iD);
            gf_gemm(ctx, 1, 0, iV, iD, n, buf, iV, hc, iD, c0 ? 1.0f : 0.0f, dE, iD);
        }
    }
    double tot = 0.0;
    for (int64_t i = 0; i < N; i++) tot += nll[i]; /* serial: fixed order */
    int64_t one = 1;
    gf_tensor *y = gf_tensor_new(ctx, 1, &one);
    y->data[0] = cnt ? (float)(tot / (double)cnt) : 0.0f;
    if (nll_sum) *nll_sum = tot;
    if (n_counted) *n_counted = cnt;
    if (grad) {
        gf_tensor *in[2] = {h, E};
        gf_node *nd = gf_tape_record(ctx, &gf_op_head_ce, y, 2, in);
        nd->saved = dh;
        nd->aux = dE;
    } else {
        y->name = "head_ce";
    }
    gf_prof_end(ctx, GF_FAM_GEMM, t0);
    return y;
}

const gf_op_def gf_op_head_ce = {"head_ce", GF_FAM_GEMM, head_ce_backward, 0};
