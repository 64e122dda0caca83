/* attention.c — fused multi-head scaled dot-product attention on a QKV tensor.
 *
 * qkv (B, L, 3D) = [q | k | v]; head h reads columns h*Dh..(h+1)*Dh-1 of each block.
 * Per (b, h), with S = Q K^T / sqrt(Dh) (masked entries -inf), P = softmax_rows(S):
 *   O (L, Dh) = P V, written to columns h*Dh.. of y (B, L, D).
 * Forward streams over key tiles of GF_ATT_BK keys with an online softmax (running max m,
 * running sum l, rescaled accumulator), so the L x L matrix P is never stored. Saved for
 * backward: lse (B, H, L) = m + log l per query row, the output y (the node's own output) and
 * a copy of key_mask; backward recomputes S and P tile by tile.
 * A query row with no visible key (every key it may see is padding) outputs 0; its lse is +inf,
 * which marks it for backward: it passes no gradient to q, k or v.
 * Parallelism: forward over (b, h, query tile); backward over (b, h) — each (b, h) owns disjoint
 * columns of dqkv and accumulates in a fixed order, so gradients are race-free and bitwise
 * reproducible for any thread count.
 */
#include "op_util.h"
#include <math.h>
#include <omp.h>

#define GF_ATT_BQ 32 /* query rows per forward task */
#define GF_ATT_BK 64 /* keys per tile */

typedef struct att_dims {
    int64_t B, L, D, H, Dh, ld; /* ld = 3D, the qkv row stride */
    int64_t Dp;                 /* Dh rounded up to 16 for the scratch tiles */
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
    a.Dp = (a.Dh + 15) / 16 * 16;
    a.causal = causal;
    a.scale = (float)(1.0 / sqrt((double)a.Dh));
    return a;
}

/* additive key bias for keys j0..j0+nk-1 of batch row b: 0, or -inf for padding */
static void att_key_bias(float *kb, const uint8_t *mask, int64_t b, int64_t L, int64_t j0, int64_t nk) {
    for (int64_t j = 0; j < nk; j++) kb[j] = (mask && !mask[b * L + j0 + j]) ? -INFINITY : 0.0f;
}

/* dst (R, Dp) = nr rows of src (row stride ld, Dh used columns), zero-padded */
static void att_load(float *dst, int64_t R, int64_t Dp, const float *src, int64_t ld, int64_t nr, int64_t Dh) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t d = 0; d < Dp; d++) dst[r * Dp + d] = (r < nr && d < Dh) ? src[r * ld + d] : 0.0f;
}

/* dst (Dp, BK) = the transpose of nk rows of src, zero-padded */
static void att_load_t(float *dst, int64_t Dp, const float *src, int64_t ld, int64_t nk, int64_t Dh) {
    for (int64_t d = 0; d < Dp; d++)
        for (int64_t j = 0; j < GF_ATT_BK; j++) dst[d * GF_ATT_BK + j] = (j < nk && d < Dh) ? src[j * ld + d] : 0.0f;
}

/* C (R, N) (+)= A (R, K) · M (K, N), all row-major with leading dims lda/ldm/ldc; R % 4 == 0,
 * N % 16 == 0. The 4 x 16 accumulator block stays in registers and the fixed-size inner loops
 * vectorise without reassociation; the k order is fixed, so results are reproducible. */
static void att_mm(float *restrict C, int64_t ldc, const float *restrict A, int64_t lda, const float *restrict M,
                   int64_t ldm, int64_t R, int64_t K, int64_t N, int accumulate) {
    for (int64_t r = 0; r < R; r += 4)
        for (int64_t c = 0; c < N; c += 16) {
            float acc[4][16];
            for (int i = 0; i < 4; i++)
                for (int t = 0; t < 16; t++) acc[i][t] = accumulate ? C[(r + i) * ldc + c + t] : 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float *m = M + k * ldm + c;
                for (int i = 0; i < 4; i++) {
                    const float a = A[(r + i) * lda + k];
                    for (int t = 0; t < 16; t++) acc[i][t] = fmaf(a, m[t], acc[i][t]);
                }
            }
            for (int i = 0; i < 4; i++)
                for (int t = 0; t < 16; t++) C[(r + i) * ldc + c + t] = acc[i][t];
        }
}

/* visible keys of tile [j0, j0+nk) for query row i */
static inline int64_t att_ncols(const att_dims *a, int64_t i, int64_t j0, int64_t nk) {
    if (!a->causal) return nk;
    int64_t n = i - j0 + 1;
    return n < 0 ? 0 : (n < nk ? n : nk);
}

static int64_t att_fwd_scratch(int64_t Dp) {
    return (2 * Dp * GF_ATT_BK + 2 * GF_ATT_BQ * Dp + GF_ATT_BQ * GF_ATT_BK + GF_ATT_BK + 2 * GF_ATT_BQ + 15) & ~15;
}

static void att_forward(const att_dims *a, const float *qkv, const uint8_t *mask, float *y, float *lse,
                        float *scratch, int64_t per_thread) {
    const int64_t B = a->B, L = a->L, H = a->H, Dh = a->Dh, ld = a->ld, D = a->D, Dp = a->Dp;
    const int64_t nqb = (L + GF_ATT_BQ - 1) / GF_ATT_BQ;
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t qb = 0; qb < nqb; qb++) {
                float *kT = scratch + per_thread * omp_get_thread_num(); // (Dp, BK)
                float *vt = kT + Dp * GF_ATT_BK;          // (BK, Dp)
                float *qt = vt + GF_ATT_BK * Dp;          // (BQ, Dp)
                float *o = qt + GF_ATT_BQ * Dp;           // (BQ, Dp)
                float *S = o + GF_ATT_BQ * Dp;            // (BQ, BK) scores, then probabilities
                float *kb = S + GF_ATT_BQ * GF_ATT_BK;    // (BK)
                float *m = kb + GF_ATT_BK, *l = m + GF_ATT_BQ; // (BQ) each
                const int64_t i0 = qb * GF_ATT_BQ, ni = (L - i0 < GF_ATT_BQ) ? L - i0 : GF_ATT_BQ;
                const float *Q = qkv + b * L * ld + h * Dh, *K = Q + D, *V = Q + 2 * D;
                att_load(qt, GF_ATT_BQ, Dp, Q + i0 * ld, ld, ni, Dh);
                memset(o, 0, (size_t)(GF_ATT_BQ * Dp) * sizeof(float));
                for (int64_t r = 0; r < GF_ATT_BQ; r++) { m[r] = -INFINITY; l[r] = 0.0f; }
                const int64_t jend = a->causal ? i0 + ni : L;
                for (int64_t j0 = 0; j0 < jend; j0 += GF_ATT_BK) {
                    const int64_t nk = (jend - j0 < GF_ATT_BK) ? jend - j0 : GF_ATT_BK;
                    att_load_t(kT, Dp, K + j0 * ld, ld, nk, Dh);
                    att_load(vt, GF_ATT_BK, Dp, V + j0 * ld, ld, nk, Dh);
                    att_key_bias(kb, mask, b, L, j0, nk);
                    att_mm(S, GF_ATT_BK, qt, Dp, kT, GF_ATT_BK, GF_ATT_BQ, Dp, GF_ATT_BK, 0);
                    for (int64_t r = 0; r < GF_ATT_BQ; r++) {
                        float *sr = S + r * GF_ATT_BK;
                        const int64_t nc = r < ni ? att_ncols(a, i0 + r, j0, nk) : 0;
                        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
                        for (int64_t j = 0; j < nc; j++) {
                            sr[j] = sr[j] * a->scale + kb[j];
                            mx = fmaxf(mx, sr[j]);
                        }
                        if (mx == -INFINITY) { /* nothing visible in this tile */
                            for (int64_t j = 0; j < GF_ATT_BK; j++) sr[j] = 0.0f;
                            continue;
                        }
                        const float mnew = fmaxf(m[r], mx), corr = expf(m[r] - mnew);
                        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                        for (int64_t j = 0; j < nc; j++) {
                            sr[j] = gf_expf(sr[j] - mnew);
                            sum += sr[j];
                        }
                        for (int64_t j = nc; j < GF_ATT_BK; j++) sr[j] = 0.0f;
                        l[r] = l[r] * corr + sum;
                        m[r] = mnew;
                        if (corr != 1.0f)
                            for (int64_t d = 0; d < Dp; d++) o[r * Dp + d] *= corr;
                    }
                    att_mm(o, Dp, S, GF_ATT_BK, vt, Dp, GF_ATT_BQ, nk, Dp, 1);
                }
                for (int64_t r = 0; r < ni; r++) {
                    const int64_t i = i0 + r;
                    float *yr = y + (b * L + i) * D + h * Dh, *lr = lse + (b * H + h) * L + i;
                    if (l[r] == 0.0f) { /* fully padded row: output 0, lse = +inf marks it for backward */
                        for (int64_t d = 0; d < Dh; d++) yr[d] = 0.0f;
                        *lr = INFINITY;
                        continue;
                    }
                    const float inv = 1.0f / l[r];
                    for (int64_t d = 0; d < Dh; d++) yr[d] = o[r * Dp + d] * inv;
                    *lr = m[r] + logf(l[r]);
                }
            }
}

/* backward for one (b, h), with dO = dL/dO (L, Dh), P recomputed as exp(S - lse):
 *   D_i  = rowsum(dO_i ⊙ O_i)               (= sum_j P_ij dP_ij)
 *   dP   = dO V^T ;  dS = P ⊙ (dP - D_i)    (softmax backward, row by row)
 *   dV  += P^T dO ;  dQ += scale · dS K ;  dK += scale · dS^T Q
 * Outer loop over key tiles keeps that tile's dK, dV in scratch; inner loop over query chunks;
 * dQ accumulates in an (L, Dh) scratch and is added once at the end. Rows with lse = +inf
 * (no visible key) get P = dS = 0. */
static void attention_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *qkv = n->in[0];
    if (!gf_needs_grad(qkv)) return;
    const att_dims a = att_dims_of(qkv, n->ip[0], (int)n->ip[1]);
    const int64_t B = a.B, L = a.L, H = a.H, Dh = a.Dh, ld = a.ld, D = a.D, Dp = a.Dp;
    const int64_t Lp = (L + GF_ATT_BQ - 1) / GF_ATT_BQ * GF_ATT_BQ;
    const float *lse = n->saved;      // (B, H, L)
    const uint8_t *mask = n->aux;     // (B, L) or NULL
    const float *Y = n->out->data, *G = n->out->grad; // (B, L, D) each
    float *dqkv = qkv->grad;          // (B, L, 3D)
    const float *X = qkv->data;
    const int64_t BK = GF_ATT_BK, BQ = GF_ATT_BQ;
    const int64_t per_thread = (2 * Dp * BK + 3 * BK * Dp + 2 * BQ * Dp + 4 * BQ * BK + BK + Lp + Lp * Dp + 15) & ~15;
    float *scratch = gf_arena_floats(&ctx->arena, per_thread * omp_get_max_threads());
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *kT = scratch + per_thread * omp_get_thread_num(), *vT = kT + Dp * BK; // (Dp, BK) each
            float *kt = vT + Dp * BK, *dK = kt + BK * Dp, *dV = dK + BK * Dp;          // (BK, Dp) each
            float *qt = dV + BK * Dp, *gt = qt + BQ * Dp;                              // (BQ, Dp) each
            float *P = gt + BQ * Dp, *dP = P + BQ * BK;                                // (BQ, BK) each
            float *PT = dP + BQ * BK, *dST = PT + BK * BQ;                             // (BK, BQ) each
            float *kb = dST + BK * BQ;                                                 // (BK)
            float *Di = kb + BK;                                                       // (Lp)
            float *dQ = Di + Lp;                                                       // (Lp, Dp)
            const float *Q = X + b * L * ld + h * Dh, *K = Q + D, *V = Q + 2 * D;
            const float *Yb = Y + b * L * D + h * Dh, *Gb = G + b * L * D + h * Dh;
            const float *lrow = lse + (b * H + h) * L;
            for (int64_t i = 0; i < L; i++) {
                double s = 0.0;
                for (int64_t d = 0; d < Dh; d++) s += (double)Gb[i * D + d] * Yb[i * D + d];
                Di[i] = (float)s;
            }
            memset(dQ, 0, (size_t)(Lp * Dp) * sizeof(float));
            for (int64_t j0 = 0; j0 < L; j0 += BK) {
                const int64_t nk = (L - j0 < BK) ? L - j0 : BK;
                att_load_t(kT, Dp, K + j0 * ld, ld, nk, Dh);
                att_load_t(vT, Dp, V + j0 * ld, ld, nk, Dh);
                att_load(kt, BK, Dp, K + j0 * ld, ld, nk, Dh);
                att_key_bias(kb, mask, b, L, j0, nk);
                memset(dK, 0, (size_t)(2 * BK * Dp) * sizeof(float)); /* dK and dV */
                for (int64_t i0 = a.causal ? j0 : 0; i0 < L; i0 += BQ) {
                    const int64_t ni = (L - i0 < BQ) ? L - i0 : BQ;
                    att_load(qt, BQ, Dp, Q + i0 * ld, ld, ni, Dh);
                    att_load(gt, BQ, Dp, Gb + i0 * D, D, ni, Dh);
                    att_mm(P, BK, qt, Dp, kT, BK, BQ, Dp, BK, 0);
                    att_mm(dP, BK, gt, Dp, vT, BK, BQ, Dp, BK, 0);
                    for (int64_t r = 0; r < BQ; r++) {
                        const int64_t i = i0 + r;
                        const int64_t nc = (r < ni && lrow[i] != INFINITY) ? att_ncols(&a, i, j0, nk) : 0;
                        float *pr = P + r * BK;
                        const float li = lrow[i], Dii = Di[i];
#pragma omp simd
                        for (int64_t j = 0; j < nc; j++) {
                            const float p = gf_expf(pr[j] * a.scale + kb[j] - li);
                            const float ds = p * (dP[r * BK + j] - Dii);
                            PT[j * BQ + r] = p;
                            dST[j * BQ + r] = ds;
                            pr[j] = ds; /* P's row now holds dS for the dQ product */
                        }
                        for (int64_t j = nc; j < BK; j++) pr[j] = PT[j * BQ + r] = dST[j * BQ + r] = 0.0f;
                    }
                    att_mm(dV, Dp, PT, BQ, gt, Dp, BK, BQ, Dp, 1);
                    att_mm(dK, Dp, dST, BQ, qt, Dp, BK, BQ, Dp, 1);
                    att_mm(dQ + i0 * Dp, Dp, P, BK, kt, Dp, BQ, nk, Dp, 1);
                }
                for (int64_t j = 0; j < nk; j++) {
                    float *gk = dqkv + (b * L + j0 + j) * ld + D + h * Dh, *gv = gk + D;
                    for (int64_t d = 0; d < Dh; d++) {
                        gk[d] += a.scale * dK[j * Dp + d];
                        gv[d] += dV[j * Dp + d];
                    }
                }
            }
            for (int64_t i = 0; i < L; i++) {
                float *gq = dqkv + (b * L + i) * ld + h * Dh;
                for (int64_t d = 0; d < Dh; d++) gq[d] += a.scale * dQ[i * Dp + d];
            }
        }
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
    if (gf_op_device("attention", 1, in) != GF_DEV_CPU) return gf_attention_cuda(ctx, qkv, n_heads, causal, key_mask);
    gf_tensor *y = gf_tensor_new3(ctx, a.B, a.L, a.D);         // (B, L, D)
    float *lse = gf_arena_floats(&ctx->arena, a.B * a.H * a.L); // (B, H, L)
    const int64_t per_thread = att_fwd_scratch(a.Dp);
    float *scratch = gf_arena_floats(&ctx->arena, per_thread * omp_get_max_threads());
    att_forward(&a, qkv->data, key_mask, y->data, lse, scratch, per_thread);
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

const gf_op_def gf_op_attention = {"attention", GF_FAM_ATTENTION, attention_backward, 0};

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
        const int64_t per_thread = att_fwd_scratch(a.Dp);
        float *scratch = gf_arena_floats(&ctx->arena, per_thread * omp_get_max_threads());
        att_forward(&a, qkv->data, NULL, y->data, lse, scratch, per_thread);
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
