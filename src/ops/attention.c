/* attention.c — fused multi-head scaled dot-product attention on a QKV tensor.
 *
 * qkv (B, L, 3D) = [q | k | v]; head h reads columns h*Dh..(h+1)*Dh-1 of each block.
 * Per (b, h), with S = Q K^T / sqrt(Dh) (masked entries -inf), P = softmax_rows(S):
 *   O (L, Dh) = P V, written to columns h*Dh.. of y (B, L, D).
 * Queries go in tiles of GF_ATT_BQ rows; a tile's visible keys are 0..jend-1 (all L, or up to
 * its last row when causal), so a tile holds whole rows of S: the products (att_gemm) are
 * libxsmm's JIT kernels where gflow is built with libxsmm, else OpenBLAS sgemm calls, on strided
 * views of qkv, K and V transposed into the task's scratch where a product reads them as Kᵀ, Vᵀ
 * (libxsmm 1.17 has no kernel with its first operand transposed); the softmax is exact per row
 * (no running max), and only a (BQ, L) scratch per thread exists, never the L x L matrix. Saved for backward:
 * lse (B, H, L) = m + log l per query row, the output y (the node's own output) and a copy of
 * key_mask; backward recomputes S tile by tile.
 * A query row with no visible key (every key it may see is padding) outputs 0; its lse is +inf,
 * which marks it for backward: it passes no gradient to q, k or v. Masked entries are written
 * (0), never computed from S, so a masked key's k and v cannot reach another row.
 * Parallelism: forward and backward over (b, h), K (and V) transposed once a task; each task runs its products
 * single-threaded (att_blas_serial) and owns disjoint rows of y or columns of dqkv, adding in a
 * fixed order, so results are bitwise reproducible for any thread count.
 */
#include "op_util.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#ifdef GF_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

#define GF_ATT_BQ 64 /* query rows per tile: causal tiles skip the keys after their last row */
/* the forward's floats a thread: a tile's scores (BQ, L), the key bias (L), Kᵀ (Dh, L) */
#define ATT_FWD_SCRATCH(L, Dh) ((GF_ATT_BQ + 1) * (L) + (Dh) * (L))

typedef struct att_dims {
    int64_t B, L, D, H, Dh, ld; /* ld = 3D, the qkv row stride */
    int causal;
    float scale;
} att_dims;

static att_dims att_dims_of(const gf_tensor *qkv, int64_t H, int causal) {
    att_dims a;
    a.B = qkv->shape[0];
    a.L = qkv->shape[1];
    a.ld = qkv->shape[2];
    a.D = a.ld / 3;
    a.H = H;
    a.Dh = a.D / H;
    a.causal = causal;
    a.scale = (float)(1.0 / sqrt((double)a.Dh));
    return a;
}

/* The per-task products are small (BQ x L x Dh): each OpenMP thread runs its own, so a pthreads
 * OpenBLAS is held to one thread meanwhile (else every call would start its pool). Returns the old
 * count, or 0 where nothing was changed: an OpenMP OpenBLAS runs a call made inside a parallel
 * region on its caller's thread by itself, and its openblas_set_num_threads sets OpenMP's team
 * size, which would have run the loops below on one thread. */
static int att_blas_serial(void) {
    if (openblas_get_parallel() != 1) return 0;
    int n = openblas_get_num_threads();
    openblas_set_num_threads(1);
    return n;
}

static void att_blas_restore(int n) {
    if (n) openblas_set_num_threads(n);
}

/* C (M, N) = op(A) (M, K) · B (K, N) + beta C, row-major strided views, one thread; op(A) = A, or
 * Aᵀ where ta (A stored (K, M)). libxsmm's kernel where built with it: its products are
 * column-major, so the row-major C is its Cᵀ = Bᵀ op(A)ᵀ (B first; ta its second operand
 * transposed). Kernels are JIT-compiled once per shape and found again in libxsmm's registry;
 * on these shapes (tiles of 64 queries, 128 keys, heads of 32) they took 0.63-0.68x OpenBLAS's
 * time, the transposes of K and V included (Zen 5; docs/performance.md). A shape libxsmm has no
 * kernel for goes to OpenBLAS. */
static void att_gemm(int ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                     float beta, float *C, int64_t ldc) {
#ifdef GF_HAVE_LIBXSMM
    const libxsmm_blasint m = gf_blas_int(N), n = gf_blas_int(M), k = gf_blas_int(K), la = gf_blas_int(ldb),
                          lb = gf_blas_int(lda), lc = gf_blas_int(ldc);
    const float alpha = 1.0f;
    const int flags = ta ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
    const libxsmm_smmfunction f = libxsmm_smmdispatch(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags, NULL);
    if (f) {
        f(B, A, C);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, gf_blas_int(M), gf_blas_int(N),
                gf_blas_int(K), 1.0f, A, gf_blas_int(lda), B, gf_blas_int(ldb), beta, C, gf_blas_int(ldc));
}

/* Xt (Dh, n), row stride L = the first n rows of X (row stride ld) transposed, for the products
 * that read Kᵀ or Vᵀ: libxsmm's transpose where built with it (about half the time of the gathers
 * below on the paper's heads, Zen 5; docs/performance.md), else 16 rows at a time, each of Xt's
 * 16-float runs one vector (a gather), where a row at a time stored each value to another line */
static void att_transpose(float *restrict Xt, const float *restrict X, int64_t n, int64_t Dh, int64_t ld, int64_t L) {
#ifdef GF_HAVE_LIBXSMM
    /* column-major, as libxsmm sees them: X is (Dh, n) with stride ld, Xt (n, Dh) with stride L */
    libxsmm_otrans(Xt, X, sizeof(float), gf_blas_int(Dh), gf_blas_int(n), gf_blas_int(ld), gf_blas_int(L));
#else
    int64_t j0 = 0;
    for (; j0 + 16 <= n; j0 += 16)
        for (int64_t d = 0; d < Dh; d++) {
            float *restrict t = Xt + d * L + j0;
            const float *restrict x = X + j0 * ld + d;
#pragma omp simd
            for (int64_t j = 0; j < 16; j++) t[j] = x[j * ld];
        }
    for (int64_t j = j0; j < n; j++)
        for (int64_t d = 0; d < Dh; d++) Xt[d * L + j] = X[j * ld + d];
#endif
}

/* what att_gemm runs: libxsmm where it has kernels for both forms of the products on this CPU (the
 * paper's shapes: a 64 x 128 x 32 tile, written and summed into), else OpenBLAS */
const char *gf_attention_products(void) {
#ifdef GF_HAVE_LIBXSMM
    const libxsmm_blasint m = 128, n = 64, k = 32, l128 = 128, l768 = 768;
    const float one = 1.0f, zero = 0.0f;
    const int nn = LIBXSMM_GEMM_FLAG_NONE, tn = LIBXSMM_GEMM_FLAG_TRANS_B;
    if (libxsmm_smmdispatch(m, n, k, &l128, &l768, &l128, &one, &zero, &nn, NULL) &&
        libxsmm_smmdispatch(k, m, n, &l768, &l128, &l768, &one, &one, &tn, NULL))
        return "libxsmm " LIBXSMM_VERSION " JIT kernels";
    return "OpenBLAS sgemm (libxsmm " LIBXSMM_VERSION " has no kernel for this CPU)";
#else
    return "OpenBLAS sgemm (built without libxsmm)";
#endif
}

/* additive key bias of batch row b's keys 0..n-1: 0, or -inf for padding */
static void att_key_bias(float *kb, const uint8_t *mask, int64_t b, int64_t L, int64_t n) {
    for (int64_t j = 0; j < n; j++) kb[j] = (mask && !mask[b * L + j]) ? -INFINITY : 0.0f;
}

/* keys 0..jend-1 a tile starting at query i0 with ni rows sees */
static inline int64_t att_jend(const att_dims *a, int64_t i0, int64_t ni) { return a->causal ? i0 + ni : a->L; }

/* visible keys of query row i among 0..jend-1 */
static inline int64_t att_ncols(const att_dims *a, int64_t i, int64_t jend) {
    return a->causal && i + 1 < jend ? i + 1 : jend;
}

/* one score row s (jend) -> exp(s * scale + kb - m) in place for the nc visible keys, 0 after;
 * returns l = Σ exp (0: nothing visible, the row is all 0) and *m the row max */
static float att_softmax_row(float *restrict s, const float *restrict kb, int64_t nc, int64_t jend, float scale,
                             float *m) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < nc; j++) {
        s[j] = s[j] * scale + kb[j];
        mx = s[j] > mx ? s[j] : mx; /* fmaxf's NaN rule keeps the loop scalar; the same max here */
    }
    float sum = 0.0f;
    if (mx != -INFINITY) {
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < nc; j++) {
            s[j] = gf_expf(s[j] - mx);
            sum += s[j];
        }
    } else {
        nc = 0;
    }
    for (int64_t j = nc; j < jend; j++) s[j] = 0.0f;
    *m = mx;
    return sum;
}

/* forward: y (B, L, D), and its bf16 bits into y16 (B, L, D) where not NULL; lse (B, H, L);
 * scratch (threads, ATT_FWD_SCRATCH(L, Dh)) */
static void att_forward(const att_dims *a, const float *qkv, const uint8_t *mask, float *y, uint16_t *y16, float *lse,
                        float *scratch) {
    const int64_t B = a->B, L = a->L, H = a->H, Dh = a->Dh, ld = a->ld, D = a->D;
    const int64_t nqb = (L + GF_ATT_BQ - 1) / GF_ATT_BQ, per_thread = ATT_FWD_SCRATCH(L, Dh);
    const int nb = att_blas_serial();
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *S = scratch + per_thread * omp_get_thread_num(); // (ni, jend) scores, then exp
            float *kb = S + GF_ATT_BQ * L, *Kt = kb + L;            // (L), (Dh, L)
            const float *Q = qkv + b * L * ld + h * Dh, *K = Q + D, *V = Q + 2 * D;
            /* every key, once for all the tiles (the last tile sees every key, causal too) */
            att_key_bias(kb, mask, b, L, L);
            att_transpose(Kt, K, L, Dh, ld, L);
            for (int64_t qb = nqb - 1; qb >= 0; qb--) {
                const int64_t i0 = qb * GF_ATT_BQ, ni = L - i0 < GF_ATT_BQ ? L - i0 : GF_ATT_BQ;
                const int64_t jend = att_jend(a, i0, ni);
                float *Y = y + (b * L + i0) * D + h * Dh, *lr = lse + (b * H + h) * L + i0;
                att_gemm(0, ni, jend, Dh, Q + i0 * ld, ld, Kt, L, 0.0f, S, jend);
                float inv[GF_ATT_BQ];
                for (int64_t r = 0; r < ni; r++) {
                    float m;
                    const float l = att_softmax_row(S + r * jend, kb, att_ncols(a, i0 + r, jend), jend, a->scale, &m);
                    inv[r] = l > 0.0f ? 1.0f / l : 0.0f; /* a row with no visible key outputs 0 */
                    lr[r] = l > 0.0f ? m + logf(l) : INFINITY;
                }
                att_gemm(0, ni, Dh, jend, S, jend, V, ld, 0.0f, Y, D);
                for (int64_t r = 0; r < ni; r++) {
                    float *yr = Y + r * D;
                    const float ir = inv[r];
#pragma omp simd
                    for (int64_t d = 0; d < Dh; d++) yr[d] *= ir; /* without the pragma -O2 left it scalar */
                    if (y16) gf_bf16_row(y16 + (Y - y) + r * D, yr, Dh);
                }
            }
        }
    att_blas_restore(nb);
}

/* di[i] = Σ_d g[i, d] y[i, d] in double, d in order (each product is exact in double), for rows
 * 0..n-1 of stride ld. Eight rows at a time: one row's sum is a chain of dependent additions, so
 * eight chains side by side keep the adder busy; each row's sum is the same as on its own. */
static void att_row_dots(float *restrict di, const float *restrict g, const float *restrict y, int64_t n,
                         int64_t dh, int64_t ld) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        double s[8] = {0.0};
        for (int64_t d = 0; d < dh; d++)
            for (int r = 0; r < 8; r++) s[r] += (double)g[(i + r) * ld + d] * y[(i + r) * ld + d];
        for (int r = 0; r < 8; r++) di[i + r] = (float)s[r];
    }
    for (; i < n; i++) {
        double s = 0.0;
        for (int64_t d = 0; d < dh; d++) s += (double)g[i * ld + d] * y[i * ld + d];
        di[i] = (float)s;
    }
}

/* backward for one (b, h), with dO = dL/dO (L, Dh), P recomputed as exp(S - lse):
 *   D_i  = rowsum(dO_i ⊙ O_i)               (= sum_j P_ij dP_ij)
 *   dP   = dO V^T ;  dS = scale · P ⊙ (dP - D_i)   (softmax backward, row by row)
 *   dV  += P^T dO ;  dQ += dS K ;  dK += dS^T Q
 * query tile by tile, the last first, the three products added straight into dqkv's columns of
 * head h; where dqkv is fresh (attention the first to write it) they store instead: dQ's rows
 * each tile's own, dK and dV at the last tile, which sees every key (causal too), so the tape
 * need not zero dqkv first (12.6 MB a layer at the paper's size).
 * Rows with lse = +inf (no visible key) get P = dS = 0. */
static void attention_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *qkv = n->in[0];
    if (!gf_needs_grad(qkv)) return;
    const att_dims a = att_dims_of(qkv, n->ip[0], (int)n->ip[1]);
    const int64_t B = a.B, L = a.L, H = a.H, Dh = a.Dh, ld = a.ld, D = a.D, BQ = GF_ATT_BQ;
    const float *lse = n->saved;      // (B, H, L)
    const uint8_t *mask = n->aux;     // (B, L) or NULL
    const float *Y = n->out->data, *G = n->out->grad; // (B, L, D) each
    float *dqkv = qkv->grad;          // (B, L, 3D)
    const float *X = qkv->data;
    const int64_t per_thread = 2 * BQ * L + 2 * L + 2 * Dh * L, nqb = (L + BQ - 1) / BQ;
    float *scratch = gf_arena_floats(&ctx->arena, per_thread * omp_get_max_threads());
    const float b0 = gf_grad_fresh(qkv) ? 0.0f : 1.0f; /* the first contribution's beta */
    const int nb = att_blas_serial();
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *P = scratch + per_thread * omp_get_thread_num(), *dS = P + BQ * L; // (ni, jend) each
            float *kb = dS + BQ * L, *Di = kb + L;                                   // (L) each
            float *Kt = Di + L, *Vt = Kt + Dh * L;                                   // (Dh, L) each
            const float *Q = X + b * L * ld + h * Dh, *K = Q + D, *V = Q + 2 * D;
            const float *Yb = Y + b * L * D + h * Dh, *Gb = G + b * L * D + h * Dh;
            float *dQ = dqkv + b * L * ld + h * Dh, *dK = dQ + D, *dV = dQ + 2 * D;
            const float *lrow = lse + (b * H + h) * L;
            att_row_dots(Di, Gb, Yb, L, Dh, D);
            att_key_bias(kb, mask, b, L, L);
            att_transpose(Kt, K, L, Dh, ld, L);
            att_transpose(Vt, V, L, Dh, ld, L);
            for (int64_t qb = nqb - 1; qb >= 0; qb--) {
                const int64_t i0 = qb * BQ, ni = L - i0 < BQ ? L - i0 : BQ, jend = att_jend(&a, i0, ni);
                const float bkv = qb == nqb - 1 ? b0 : 1.0f;
                att_gemm(0, ni, jend, Dh, Q + i0 * ld, ld, Kt, L, 0.0f, P, jend);
                att_gemm(0, ni, jend, Dh, Gb + i0 * D, D, Vt, L, 0.0f, dS, jend);
                for (int64_t r = 0; r < ni; r++) {
                    const int64_t i = i0 + r;
                    const int64_t nc = lrow[i] != INFINITY ? att_ncols(&a, i, jend) : 0;
                    float *pr = P + r * jend, *sr = dS + r * jend;
                    const float li = lrow[i], Dii = Di[i];
#pragma omp simd
                    for (int64_t j = 0; j < nc; j++) {
                        const float p = gf_expf(pr[j] * a.scale + kb[j] - li);
                        sr[j] = a.scale * (p * (sr[j] - Dii));
                        pr[j] = p;
                    }
                    for (int64_t j = nc; j < jend; j++) pr[j] = sr[j] = 0.0f;
                }
                att_gemm(1, jend, Dh, ni, P, jend, Gb + i0 * D, D, bkv, dV, ld);
                att_gemm(1, jend, Dh, ni, dS, jend, Q + i0 * ld, ld, bkv, dK, ld);
                att_gemm(0, ni, Dh, jend, dS, jend, K, ld, b0, dQ + i0 * ld, ld);
            }
        }
    att_blas_restore(nb);
}

gf_tensor *gf_attention(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, int causal, const uint8_t *key_mask) {
    double t0 = gf_prof_begin(ctx);
    char sb[64];
    GF_ASSERT(qkv->ndim == 3 && qkv->shape[2] % 3 == 0 && n_heads > 0 && (qkv->shape[2] / 3) % n_heads == 0,
              "attention: qkv %s must be (B, L, 3D) with D divisible by %lld heads",
              gf_tensor_shape_str(qkv, sb, sizeof sb), (long long)n_heads);
    const att_dims a = att_dims_of(qkv, n_heads, causal ? 1 : 0);
    GF_ASSERT(a.L > 0 && a.Dh > 0, "attention: empty qkv %s", gf_tensor_shape_str(qkv, sb, sizeof sb));
    gf_tensor *in[1] = {qkv};
    const gf_backend_ops *dev = gf_op_backend("attention", 1, in);
    if (dev) return dev->attention(ctx, qkv, n_heads, causal, key_mask);
    gf_tensor *y = gf_tensor_new3(ctx, a.B, a.L, a.D);         // (B, L, D)
    float *lse = gf_arena_floats(&ctx->arena, a.B * a.H * a.L); // (B, H, L)
    float *scratch = gf_arena_floats(&ctx->arena, ATT_FWD_SCRATCH(a.L, a.Dh) * omp_get_max_threads());
    uint16_t *y16 = gf_gemm_round_into(ctx, y->data, a.B * a.L, a.D); // (B, L, D) y's bits for the products, or NULL
    att_forward(&a, qkv->data, key_mask, y->data, y16, lse, scratch);
    gf_node *n = gf_tape_record(ctx, &gf_op_attention, y, 1, in);
    if (n) {
        n->saved = lse;
        n->ip[0] = a.H;
        n->ip[1] = a.causal;
        if (key_mask) { /* the caller's mask buffer may be reused before backward runs */
            uint8_t *mk = gf_arena_alloc(&ctx->arena, (size_t)(a.B * a.L));
            memcpy(mk, key_mask, (size_t)(a.B * a.L));
            n->aux = mk;
        }
    }
    gf_prof_end(ctx, GF_FAM_ATTENTION, t0);
    return y;
}

const gf_op_def gf_op_attention = {"attention", GF_FAM_ATTENTION, attention_backward, 1};

/* Decoding (no tape): qkv (B, n, 3D) holds positions pos..pos+n-1. Their keys and values are
 * stored into kv (B, 2, H, cap, Dh) (K then V, each head's positions contiguous), then each new
 * query attends causally to positions 0..its own. From an empty cache (pos = 0) this is the
 * tiled kernel above on qkv itself; later, one query row at a time against the cache. */
gf_tensor *gf_attention_cached(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, float *kv, int64_t cap, int64_t pos) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(qkv->device == GF_DEV_CPU, "attention_cached: generation runs on the CPU only (qkv is on %s)",
              gf_device_name(qkv->device));
    const att_dims a = att_dims_of(qkv, n_heads, 1);
    const int64_t B = a.B, n = a.L, H = a.H, Dh = a.Dh, D = a.D, ld = a.ld;
    GF_ASSERT(pos >= 0 && pos + n <= cap, "attention_cached: positions %lld..%lld outside the cache of %lld",
              (long long)pos, (long long)(pos + n - 1), (long long)cap);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++) {
                const float *src = qkv->data + (b * n + i) * ld + h * Dh;
                float *K = kv + ((b * 2 * H + h) * cap + pos + i) * Dh, *V = K + H * cap * Dh;
                memcpy(K, src + D, (size_t)Dh * sizeof(float));
                memcpy(V, src + 2 * D, (size_t)Dh * sizeof(float));
            }
    gf_tensor *y = gf_tensor_new3(ctx, B, n, D); // (B, n, D)
    if (pos == 0) {
        float *lse = gf_arena_floats(&ctx->arena, B * H * n);
        float *scratch = gf_arena_floats(&ctx->arena, ATT_FWD_SCRATCH(n, Dh) * omp_get_max_threads());
        att_forward(&a, qkv->data, NULL, y->data, NULL, lse, scratch);
        gf_prof_end(ctx, GF_FAM_ATTENTION, t0);
        return y;
    }
    float *sc = gf_arena_floats(&ctx->arena, (int64_t)omp_get_max_threads() * cap); // (T, cap) scores
#pragma omp parallel for collapse(3) schedule(static) if (B * H * n * (pos + n) > 32768)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++) {
                const float *q = qkv->data + (b * n + i) * ld + h * Dh;
                const float *K = kv + (b * 2 * H + h) * cap * Dh, *V = K + H * cap * Dh;
                float *s = sc + (int64_t)omp_get_thread_num() * cap, *yr = y->data + (b * n + i) * D + h * Dh;
                const int64_t nk = pos + i + 1;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    float d = 0.0f;
#pragma omp simd reduction(+ : d)
                    for (int64_t e = 0; e < Dh; e++) d += q[e] * K[j * Dh + e];
                    s[j] = d * a.scale;
                    mx = fmaxf(mx, s[j]);
                }
                for (int64_t j = 0; j < nk; j++) { s[j] = gf_expf(s[j] - mx); sum += s[j]; }
                for (int64_t e = 0; e < Dh; e++) yr[e] = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    const float pj = s[j] / sum;
#pragma omp simd
                    for (int64_t e = 0; e < Dh; e++) yr[e] += pj * V[j * Dh + e];
                }
            }
    gf_prof_end(ctx, GF_FAM_ATTENTION, t0);
    return y;
}
