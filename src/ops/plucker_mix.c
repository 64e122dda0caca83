/* plucker_mix.c — fused causal Grassmann mixing: Plücker pairs, normalisation, mean over
 * offsets and the shared projection, in one op.
 *
 * Forward, per batch row and position t (0-based), with a = z_t (current), c = z_{t-δ} (past):
 *   W_t   = { δ in offsets : t - δ >= 0 }            (δ >= L is never valid)
 *   p_k   = a_i c_j - a_j c_i   for pairs k = (i, j), i < j, row-major: (0,1),(0,2),...,(R-2,R-1)
 *   n     = |p|_2,  s = normalize ? 1 / max(n, eps) : 1,  p̂ = s p
 *   pbar_t = (1/|W_t|) Σ_{δ in W_t} p̂(t, δ)             (0 when W_t is empty)
 *   g_t   = W pbar_t + b  if |W_t| > 0,  else 0
 * Averaging before the projection is exact because the projection is linear (spec §8), and
 * costs one GEMM instead of |W|; no (B, L, |W|, P) tensor is ever materialised.
 * Saved for backward: pbar (B, L, P) for dW, and the norms n (B, L, |W|).
 * The forward over a sequence runs across positions (pm_block: 16 positions a vector, a pair at
 * a time), the decoder's few positions one at a time (pm_row: a position's pairs in vectors).
 *
 * Backward, with G = dL/dg (B, L, D):
 *   dW += G_vᵀ pbar_v ;  db += Σ_v G_v     (v: rows with a valid offset; others got g = 0)
 *   dpbar_t = G_t W                          (one GEMM, in row blocks)
 *   per valid δ:  Ĝ = dpbar_t / |W_t|
 *     normalize, n > eps:  dp = (Ĝ - q (q·Ĝ)) / n,  q = p / n   (derivative of p/|p|)
 *     normalize, n <= eps: dp = Ĝ / eps                          (the max picked the constant)
 *     no normalize:        dp = Ĝ
 *   and through p_k = a_i c_j - a_j c_i:
 *     da_i += dp_k c_j,  da_j -= dp_k c_i,  dc_i -= dp_k a_j,  dc_j += dp_k a_i,
 *   i.e. da += M(dp) c and dc = -M(dp) a with M(dp) the antisymmetric R x R matrix of dp,
 *   evaluated densely (pm_row_backward) without forming p or dp.
 * da lands on z_t and dc on z_{t-δ}. To keep the parallel loop over t race-free and the sum
 * order fixed, dc is first written to a (B, L, |W|, R) scratch slot owned by (t, δ), and a
 * second pass gathers dz_s += Σ_δ dc(s + δ, δ) in offset order.
 */
#include "op_util.h"
#include <math.h>
#include <omp.h>

#define PM_ROWS 1024 /* rows per dpbar block in backward */

typedef struct {
    float *pbar;     // (B, L, P)
    float *norms;    // (B, L, NW)
    int64_t *offs;   // (NW)
    uint8_t *valid;  // (B*L) 1 if any offset valid
} pm_saved;

/* The triangle's rows (R - 1 - i pairs each, 15.5 on average at r = 32) are written in whole
 * chunks of PM_VL floats: a fixed-length loop vectorises with no scalar tail, where a loop over
 * the row's own length spent most of its time in its tails. A row's last chunk writes up to
 * PM_VL - 1 floats past the row's end (the next row overwrites them; past the last row, the
 * buffer's slack) and reads its inputs as far: they are copies padded by PM_PAD floats. */
#define PM_VL 8
#define PM_PAD (PM_VL - 1)

/* dst (R + PM_PAD) = x (R), then zeros */
static inline void pm_padded(float *restrict dst, const float *restrict x, int64_t R) {
    memcpy(dst, x, (size_t)R * sizeof(float));
    memset(dst + R, 0, PM_PAD * sizeof(float));
}

/* p (P + PM_PAD) = a ∧ c over the row-major upper triangle, from padded copies a, c
 * (R + PM_PAD): p_k for pair (i, j) is p[k_i + j - i - 1], each row in whole chunks. */
static inline void plucker_pairs(const float *restrict a, const float *restrict c, float *restrict p, int64_t R) {
    int64_t k = 0;
    for (int64_t i = 0; i < R - 1; i++) {
        const float ai = a[i], ci = c[i];
        const float *aj = a + i + 1, *cj = c + i + 1;
        for (int64_t j0 = 0; j0 < R - 1 - i; j0 += PM_VL) {
            float *pj = p + k + j0;
#pragma omp simd
            for (int64_t l = 0; l < PM_VL; l++) pj[l] = ai * cj[j0 + l] - aj[j0 + l] * ci;
        }
        k += R - 1 - i;
    }
}

static inline float sumsq(const float *p, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; k++) s += p[k] * p[k];
    return s;
}

/* s (n) = the sums of squares of the n rows (P each, stride PS) of p, two rows a pass: each sum is
 * the one sumsq gives (its own lanes, in the same order), and the two chains of additions
 * overlap where one row's waited on each addition in turn */
static void pm_sumsqs(const float *p, int64_t PS, int64_t P, int64_t n, float *s) {
    int64_t v = 0;
    for (; v + 2 <= n; v += 2) {
        const float *x = p + v * PS, *y = x + PS;
        float sx = 0.0f, sy = 0.0f;
#pragma omp simd reduction(+ : sx, sy)
        for (int64_t k = 0; k < P; k++) {
            sx += x[k] * x[k];
            sy += y[k] * y[k];
        }
        s[v] = sx;
        s[v + 1] = sy;
    }
    if (v < n) s[v] = sumsq(p + v * PS, P);
}

/* out (PM_VL) = inv · Σ_v sc[v] p_v over the n rows (stride PS) of p, summed in row order (the
 * chunk's sums stay in a register) */
static inline void pm_pair_means(const float *p, int64_t PS, const float *sc, int64_t n, float inv, float *out) {
    float acc[PM_VL] = {0};
    for (int64_t v = 0; v < n; v++) {
        const float *pv = p + v * PS, s = sc[v];
#pragma omp simd
        for (int64_t l = 0; l < PM_VL; l++) acc[l] += pv[l] * s;
    }
#pragma omp simd
    for (int64_t l = 0; l < PM_VL; l++) out[l] = acc[l] * inv;
}

/* Floats of pm_row's scratch: the padded a and c, and the pairs of every offset (NW, PS) with
 * PS = P + PM_PAD, then NW scales */
static inline int64_t pm_row_scratch(int64_t R, int64_t NW) {
    return 2 * (R + PM_PAD) + NW * (R * (R - 1) / 2 + PM_PAD) + NW;
}

/* pb (P) = pbar of the position t whose reduced vector is a, with z_{t-δ} at a - δ R; norms (NW)
 * gets |p| per offset (0 where t - δ < 0); work: pm_row_scratch(R, NW) floats. The pairs of all
 * valid offsets are formed first, then their norms, then pb in one pass over the pairs (each
 * pb[k] the same sum, in offset order, as one pass per offset gave). Returns |W_t|, the count of
 * valid offsets. */
static int64_t pm_row(const float *a, int64_t t, int64_t R, const int64_t *offs, int64_t NW, float eps,
                      int normalize, float *work, float *pb, float *norms) {
    const int64_t P = R * (R - 1) / 2, PS = P + PM_PAD;
    float *ap = work, *cp = ap + R + PM_PAD;  // (R + PM_PAD) each
    float *pk = cp + R + PM_PAD, *sc = pk + NW * PS; // (NW, PS), (NW)
    /* pb's lines are fetched for writing while the pairs are formed: pbar (B, L, P) is megabytes
     * a layer, and the final stores waited on them */
    for (int64_t k = 0; k < P; k += 16) __builtin_prefetch(pb + k, 1, 3);
    __builtin_prefetch(pb + P - 1, 1, 3);
    pm_padded(ap, a, R);
    int64_t cnt = 0;
    for (int64_t q = 0; q < NW; q++) {
        if (t - offs[q] < 0) { norms[q] = 0.0f; continue; }
        pm_padded(cp, a - offs[q] * R, R);
        plucker_pairs(ap, cp, pk + cnt * PS, R);
        cnt++;
    }
    pm_sumsqs(pk, PS, P, cnt, sc);
    for (int64_t q = 0, v = 0; q < NW; q++) {
        if (t - offs[q] < 0) continue;
        const float nrm = sqrtf(sc[v]);
        norms[q] = nrm;
        sc[v++] = normalize ? 1.0f / (nrm > eps ? nrm : eps) : 1.0f;
    }
    const float inv = cnt > 1 ? 1.0f / (float)cnt : 1.0f; /* x * 1 is x: one offset is unscaled */
    const int64_t P8 = P - P % PM_VL;
    for (int64_t k0 = 0; k0 < P8; k0 += PM_VL) pm_pair_means(pk + k0, PS, sc, cnt, inv, pb + k0);
    if (P8 < P) { /* the last, partial chunk: pk's rows have the slack, pb has not */
        float tail[PM_VL];
        pm_pair_means(pk + P8, PS, sc, cnt, inv, tail);
        memcpy(pb + P8, tail, (size_t)(P - P8) * sizeof(float));
    }
    return cnt;
}

/* g (B, L, D) = valid ? W pbar + b : 0, one GEMM over every row (the bias added by it), then the
 * rows without a valid offset (pbar 0 there: g = b) zeroed */
static gf_tensor *pm_project(gf_ctx *ctx, const float *pbar, const uint8_t *valid, const gf_tensor *w,
                             const gf_tensor *b, int64_t B, int64_t L) {
    const int64_t D = w->shape[0], P = w->shape[1], BL = B * L;
    int64_t gs[3] = {B, L, D};
    gf_tensor *g = gf_tensor_new(ctx, 3, gs); // (B, L, D)
    if (ctx->grad_enabled && gf_needs_grad(w)) gf_gemm_dw_hold_x(ctx, BL, D, P, pbar, P);
    gf_gemm_bias(ctx, 0, 1, BL, D, P, pbar, P, w->data, P, b->data, g->data, D);
    for (int64_t r = 0; r < BL; r++)
        if (!valid[r]) memset(g->data + r * D, 0, (size_t)D * sizeof(float));
    return g;
}

/* The forward over a block of PM_LANES consecutive rows (lanes) r0.., the pair algebra across
 * positions: pair k of all the lanes is one vector operation, where pm_row's per-position
 * triangle has rows of 31 down to 1 pairs (at r = 32) that vectorise poorly.
 *   zt (R, S): z transposed, zt[i*S + off + r] = z_r[i], the first off columns zero (off >= every
 *     offset this block reads), so z_{r-δ} of lane r is the contiguous zt[i*S + off + r0 - δ ..];
 *   pbar (B*L, P), norms (B*L, NW), valid (B*L): written for the lanes r < BL (and pbar's bf16
 *     bits into pb16 where not NULL: the projection's products take them), pbar's rows whole
 *     from the block's (P, PM_LANES) sums (pbar kept transposed, (P, B*L), took a store per pair,
 *     16 KB apart, and those stores most of the kernel's time).
 * Per offset δ, lanes with t - δ < 0 (t = r % L) read zeros (their pairs are 0 and their scale
 * 0), the pairs of all lanes go to pk (P, PM_LANES), their norms come from pk, and acc gets
 * scale · pk; at the end pbar = acc / |W_t|. Each lane's sums are pm_row's but for the order of
 * the sum of squares (four partial sums over the pairs). work: pm_block_scratch(R) floats. */
#define PM_LANES 16

static inline int64_t pm_block_scratch(int64_t R) { return (2 * R + R * (R - 1)) * PM_LANES; }

GF_KERNEL_CLONES static void pm_block(const float *restrict zt, int64_t S, int64_t off, int64_t r0, int64_t BL,
                                      int64_t L, int64_t R, const int64_t *offs, int64_t NW, float eps, int normalize,
                                      float *restrict work, float *restrict pbar, uint16_t *restrict pb16,
                                      float *restrict norms, uint8_t *restrict valid) {
    enum { V = PM_LANES };
    const int64_t P = R * (R - 1) / 2;
    float *restrict al = work, *restrict cl = al + R * V; // (R, V) each: this block's z and z_{t-δ}
    float *restrict pk = cl + R * V, *restrict acc = pk + P * V; // (P, V) each
    int64_t t[V];
    float cnt[V], mk[V], sc[V];
    for (int l = 0; l < V; l++) t[l] = (r0 + l) % L, cnt[l] = 0.0f;
    /* the block's rows of pbar fetched for writing while the pairs are formed (as pm_row's): pbar
     * is megabytes a layer, and the final stores waited on them */
    for (int l = 0; l < V && r0 + l < BL; l++) {
        const float *pr = pbar + (r0 + l) * P;
        for (int64_t k = 0; k < P; k += 16) __builtin_prefetch(pr + k, 1, 3);
        __builtin_prefetch(pr + P - 1, 1, 3);
    }
    for (int64_t i = 0; i < R; i++) memcpy(al + i * V, zt + i * S + off + r0, V * sizeof(float));
    memset(acc, 0, (size_t)(P * V) * sizeof(float));
    for (int64_t q = 0; q < NW; q++) {
        const int64_t d = offs[q];
        if (d > off) { /* past every row (d >= L): no lane has this offset */
            for (int l = 0; l < V && r0 + l < BL; l++) norms[(r0 + l) * NW + q] = 0.0f;
            continue;
        }
        for (int l = 0; l < V; l++) mk[l] = r0 + l < BL && t[l] >= d ? 1.0f : 0.0f;
        for (int64_t i = 0; i < R; i++) {
            const float *restrict zc = zt + i * S + off + r0 - d;
#pragma omp simd
            for (int l = 0; l < V; l++) cl[i * V + l] = mk[l] != 0.0f ? zc[l] : 0.0f;
        }
        float *restrict pp = pk;
        for (int64_t i = 0; i < R - 1; i++) {
            const float *restrict ai = al + i * V, *restrict ci = cl + i * V;
            for (int64_t j = i + 1; j < R; j++, pp += V) {
                const float *restrict aj = al + j * V, *restrict cj = cl + j * V;
#pragma omp simd
                for (int l = 0; l < V; l++) pp[l] = ai[l] * cj[l] - aj[l] * ci[l];
            }
        }
        float s0[V], s1[V], s2[V], s3[V];
        for (int l = 0; l < V; l++) s0[l] = s1[l] = s2[l] = s3[l] = 0.0f;
        int64_t k = 0;
        for (; k + 4 <= P; k += 4) {
            const float *restrict p0 = pk + k * V;
#pragma omp simd
            for (int l = 0; l < V; l++) {
                s0[l] += p0[l] * p0[l];
                s1[l] += p0[V + l] * p0[V + l];
                s2[l] += p0[2 * V + l] * p0[2 * V + l];
                s3[l] += p0[3 * V + l] * p0[3 * V + l];
            }
        }
        for (; k < P; k++)
#pragma omp simd
            for (int l = 0; l < V; l++) s0[l] += pk[k * V + l] * pk[k * V + l];
        for (int l = 0; l < V; l++) {
            const float nrm = sqrtf((s0[l] + s1[l]) + (s2[l] + s3[l]));
            if (r0 + l < BL) norms[(r0 + l) * NW + q] = mk[l] != 0.0f ? nrm : 0.0f;
            sc[l] = mk[l] == 0.0f ? 0.0f : normalize ? 1.0f / (nrm > eps ? nrm : eps) : 1.0f;
            cnt[l] += mk[l];
        }
        for (k = 0; k < P; k++)
#pragma omp simd
            for (int l = 0; l < V; l++) acc[k * V + l] += pk[k * V + l] * sc[l];
    }
    float inv[V];
    for (int l = 0; l < V; l++) {
        inv[l] = cnt[l] > 1.0f ? 1.0f / cnt[l] : 1.0f; /* x * 1 is x: one offset is unscaled */
        if (r0 + l < BL) valid[r0 + l] = cnt[l] > 0.0f;
    }
    for (int l = 0; l < V && r0 + l < BL; l++) {
        float *restrict pr = pbar + (r0 + l) * P;
        for (int64_t k = 0; k < P; k++) pr[k] = acc[k * V + l] * inv[l];
        if (pb16) gf_bf16_row(pb16 + (r0 + l) * P, pr, P);
    }
}

/* M (R, R) = the antisymmetric matrix of a pair vector g (P): M_ij = g_k, M_ji = -g_k for pair
 * k = (i, j), i < j; diagonal 0 */
static void pm_antisym(float *restrict M, const float *restrict g, int64_t R) {
    int64_t k = 0;
    for (int64_t i = 0; i < R; i++) {
        M[i * R + i] = 0.0f;
        const float *gi = g + k - i - 1; /* gi[j] = g_k for pair (i, j) */
        for (int64_t j = i + 1; j < R; j++) {
            M[i * R + j] = gi[j];
            M[j * R + i] = -gi[j];
        }
        k += R - 1 - i;
    }
}

/* Y (K, R): y_x = M x_x for the K vectors X (K, R) and an antisymmetric M (R, R), each as
 * -Σ_j x_j M[j, :] summed in j order (rows of M read contiguously), the K products in one pass
 * over M's rows (the K·R accumulators of one row j are independent of each other), four rows
 * of M a pass (y read and written once per four terms, each y[i] still summed in j order). X is
 * a dense copy: read through K pointers, the loop's pointer loads stalled it (~1/6 of its samples). */
static void pm_matvecs(float *restrict Y, const float *restrict M, const float *restrict X, int64_t K, int64_t R) {
    memset(Y, 0, (size_t)(K * R) * sizeof(float));
    int64_t j = 0;
    for (; j + 4 <= R; j += 4) {
        const float *restrict M0 = M + j * R, *restrict M1 = M0 + R, *restrict M2 = M1 + R, *restrict M3 = M2 + R;
        for (int64_t x = 0; x < K; x++) {
            const float *xr = X + x * R;
            const float x0 = xr[j], x1 = xr[j + 1], x2 = xr[j + 2], x3 = xr[j + 3];
            float *restrict y = Y + x * R;
#pragma omp simd
            for (int64_t i = 0; i < R; i++) y[i] = (((y[i] - x0 * M0[i]) - x1 * M1[i]) - x2 * M2[i]) - x3 * M3[i];
        }
    }
    for (; j < R; j++) {
        const float *restrict Mj = M + j * R;
        for (int64_t x = 0; x < K; x++) {
            const float xj = X[x * R + j];
            float *restrict y = Y + x * R;
#pragma omp simd
            for (int64_t i = 0; i < R; i++) y[i] -= xj * Mj[i];
        }
    }
}

static inline float pm_dot(const float *x, const float *y, int64_t R) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < R; i++) s += x[i] * y[i];
    return s;
}

/* *s1 = x·y1, *s2 = x·y2, each the sum pm_dot gives, in one pass (the two chains overlap) */
static inline void pm_dot2(const float *x, const float *y1, const float *y2, int64_t R, float *s1, float *s2) {
    float t1 = 0.0f, t2 = 0.0f;
#pragma omp simd reduction(+ : t1, t2)
    for (int64_t i = 0; i < R; i++) {
        t1 += x[i] * y1[i];
        t2 += x[i] * y2[i];
    }
    *s1 = t1;
    *s2 = t2;
}

/* Backward of one position t (reduced vector a; its pair gradient Gp = dpbar_t), with the pair
 * algebra done on dense R x R matrices instead of the triangle (the triangle's short rows do not
 * vectorise): for p = a ∧ c, M(p) = a cᵀ - c aᵀ, and for dp = s·Gp - qn·p (the normalisation's
 * derivative, s and qn below)
 *   da += M(dp) c = s·u - qn·(a (c·c) - c (a·c)),     u = M(Gp) c  (one per valid offset)
 *   dc  = -M(dp) a = -s·v + qn·(a (a·c) - c (a·a)),  v = M(Gp) a  (one per position)
 *   p·Gp = aᵀ M(Gp) c = a·u
 * zz[-δ] = c·c for c = z_{t-δ} (zz[0] = a·a), from the caller's one pass over z's rows.
 * dc goes to the position's (NW, R) slot of dpast. MG (R, R), Y (NW + 1, R) holding v then the
 * u of each valid offset, X (NW + 1, R) a then the valid offsets' c: the caller's scratch. */
static void pm_row_backward(const float *a, int64_t t, int64_t R, const int64_t *offs, int64_t NW, float eps,
                            int normalize, const float *Gp, const float *norms, const float *zz, float *da,
                            float *dpast, float *MG, float *Y, float *X) {
    int64_t K = 0;
    memcpy(X + K++ * R, a, (size_t)R * sizeof(float));
    for (int64_t q = 0; q < NW; q++)
        if (t - offs[q] >= 0) memcpy(X + K++ * R, a - offs[q] * R, (size_t)R * sizeof(float));
    const float inv_cnt = 1.0f / (float)(K - 1);
    pm_antisym(MG, Gp, R);
    pm_matvecs(Y, MG, X, K, R);
    const float *v = Y;
    const float aa = zz[0];
    for (int64_t q = 0, x = 1; q < NW; q++) {
        if (t - offs[q] < 0) continue;
        const float *c = X + x * R, *u = Y + x * R;
        x++;
        float *dc = dpast + q * R;
        const float nrm = norms[q];
        float s = inv_cnt, qn = 0.0f, au, ac;
        pm_dot2(a, u, c, R, &au, &ac);
        if (normalize && nrm > eps) {
            s = inv_cnt / nrm;
            qn = au * (inv_cnt / (nrm * nrm)) / nrm; /* (q·Ĝ)/n with q = p/n */
        } else if (normalize) {
            s = inv_cnt / eps;
        }
        /* the scalars first: qn·(c·c) stays quadratic in the inputs' size, as p does, where
         * a (c·c) would be cubic and overflow first (a blow-up must fail where it did) */
        const float qcc = qn * zz[-offs[q]], qac = qn * ac, qaa = qn * aa;
#pragma omp simd
        for (int64_t i = 0; i < R; i++) {
            da[i] += s * u[i] - (qcc * a[i] - qac * c[i]);
            dc[i] = (qac * a[i] - qaa * c[i]) - s * v[i];
        }
    }
}

static void plucker_mix_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *z = n->in[0], *w = n->in[1], *b = n->in[2];
    const pm_saved *sv = n->saved;
    const float *G = n->out->grad; // (B, L, D)
    int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2;
    int64_t D = w->shape[0], NW = n->ip[0], BL = B * L;
    float eps = (float)n->fp[0];
    int normalize = (int)n->ip[1];
    const int64_t *offs = sv->offs;

    /* Rows without a valid offset produced g = 0 (no bias): their G must not reach W or b.
     * pbar is 0 there, so dW is already right; db needs the mask, dpbar is ignored below. */
    if (gf_needs_grad(w)) gf_gemm_dw(ctx, BL, D, P, G, D, sv->pbar, P, 1.0f, w->grad, P);
    if (gf_needs_grad(b)) {
        /* db = Σ over valid rows of G: per-thread partials over static row blocks, added in
         * thread order (reproducible for a fixed thread count), no masked (B*L, D) copy */
        int T = omp_get_max_threads(), nt = 1;
        float *part = gf_arena_calloc(&ctx->arena, (size_t)T * (size_t)D * sizeof(float)); // (T, D)
#pragma omp parallel num_threads(T)
        {
            int th = omp_get_thread_num(), nth = omp_get_num_threads();
#pragma omp single
            nt = nth;
            int64_t lo = BL * th / nth, hi = BL * (th + 1) / nth;
            float *pp = part + (int64_t)th * D;
            for (int64_t r = lo; r < hi; r++) {
                if (!sv->valid[r]) continue;
                const float *gr = G + r * D;
#pragma omp simd
                for (int64_t d = 0; d < D; d++) pp[d] += gr[d];
            }
        }
        for (int th = 0; th < nt; th++)
            for (int64_t d = 0; d < D; d++) b->grad[d] += part[(int64_t)th * D + d];
    }
    if (!gf_needs_grad(z)) return;

    /* dpbar is produced in row blocks of PM_ROWS into one reused buffer: the arena keeps every
     * backward scratch until the step ends, so a full (B*L, P) buffer per layer was peak RSS */
    const int64_t RB = BL < PM_ROWS ? BL : PM_ROWS;
    float *dpbar = gf_arena_floats(&ctx->arena, RB * P); // (RB, P)
    /* (B*L, NW, R), not zeroed: the gather below reads slot q of row s + δ_q only, whose
     * position t + δ_q >= δ_q has that offset valid, so its backward wrote the slot */
    float *dpast = gf_arena_floats(&ctx->arena, BL * NW * R);
    float *zz = gf_arena_floats(&ctx->arena, BL); // (B*L): z_r·z_r, each row's once for every offset
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < BL; r++) zz[r] = pm_dot(z->data + r * R, z->data + r * R, R);

    /* per-thread scratch (R*R floats for M_G, (NW + 1) R for v and the u's, (NW + 1) R for a and
     * the c's) allocated up front: the arena is not thread-safe */
    int T = omp_get_max_threads();
    const int64_t per_thread = R * R + 2 * (NW + 1) * R;
    float *scratch = gf_arena_floats(&ctx->arena, (int64_t)T * per_thread); // (T, R*R + 2 (NW+1) R)

    for (int64_t r0 = 0; r0 < BL; r0 += RB) {
        const int64_t nr = BL - r0 < RB ? BL - r0 : RB;
        gf_gemm(ctx, 0, 0, nr, P, D, G + r0 * D, D, w->data, P, 0.0f, dpbar, P);
#pragma omp parallel for schedule(static)
        for (int64_t r = r0; r < r0 + nr; r++) {
            if (!sv->valid[r]) continue;
            const int th = omp_get_thread_num();
            float *MG = scratch + (int64_t)th * per_thread;
            pm_row_backward(z->data + r * R, r % L, R, offs, NW, eps, normalize, dpbar + (r - r0) * P,
                            sv->norms + r * NW, zz + r, z->grad + r * R, dpast + r * NW * R, MG, MG + R * R,
                            MG + R * R + (NW + 1) * R);
        }
    }
    /* gather the past-member contributions: dz_s += Σ_δ dc(s + δ, δ), fixed order */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < BL; r++) {
        int64_t t = r % L;
        float *dz = z->grad + r * R;
        for (int64_t q = 0; q < NW; q++) {
            if (t + offs[q] >= L) continue;
            const float *dc = dpast + ((r + offs[q]) * NW + q) * R;
#pragma omp simd
            for (int64_t i = 0; i < R; i++) dz[i] += dc[i];
        }
    }
}

gf_tensor *gf_plucker_mix(gf_ctx *ctx, gf_tensor *z, gf_tensor *w, gf_tensor *b, const int64_t *offsets,
                          int32_t n_offsets, float eps, int normalize) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(z->ndim == 3, "plucker_mix: z must be (B, L, R)");
    int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    GF_ASSERT(R >= 2, "plucker_mix: r must be >= 2");
    GF_ASSERT(w->ndim == 2 && w->shape[1] == P, "plucker_mix: W must be (D, %lld)", (long long)P);
    GF_ASSERT(b && b->ndim == 1 && b->shape[0] == w->shape[0], "plucker_mix: bias must be (D)");
    GF_ASSERT(n_offsets >= 1, "plucker_mix: no offsets");
    int64_t NW = n_offsets;
    for (int32_t q = 0; q < n_offsets; q++) GF_ASSERT(offsets[q] >= 1, "plucker_mix: offset %lld < 1", (long long)offsets[q]);
    gf_tensor *in[3] = {z, w, b};
    const gf_backend_ops *dev = gf_op_backend("plucker_mix", 3, in);
    if (dev) return dev->plucker_mix(ctx, z, w, b, offsets, n_offsets, eps, normalize);

    pm_saved *sv = gf_arena_alloc(&ctx->arena, sizeof *sv);
    const int64_t nblk = (BL + PM_LANES - 1) / PM_LANES;
    sv->pbar = gf_arena_floats(&ctx->arena, BL * P);
    sv->norms = gf_arena_floats(&ctx->arena, BL * NW);
    sv->offs = gf_arena_alloc(&ctx->arena, (size_t)NW * sizeof(int64_t));
    sv->valid = gf_arena_alloc(&ctx->arena, (size_t)BL);
    memcpy(sv->offs, offsets, (size_t)NW * sizeof(int64_t));
    /* zt (R, S): z transposed behind off zero columns, off the largest offset a row can have
     * (offsets >= L have none), and zero columns past BL up to a whole block */
    int64_t off = 0;
    for (int64_t q = 0; q < NW; q++) off = offsets[q] < L && offsets[q] > off ? offsets[q] : off;
    const int64_t S = off + nblk * PM_LANES;
    float *zt = gf_arena_calloc(&ctx->arena, (size_t)(R * S) * sizeof(float)); // (R, S)
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < R; i++)
        for (int64_t r = 0; r < BL; r++) zt[i * S + off + r] = z->data[r * R + i];
    int T = omp_get_max_threads();
    const int64_t per_thread = pm_block_scratch(R);
    float *scratch = gf_arena_floats(&ctx->arena, (int64_t)T * per_thread); // (T, per_thread)
    uint16_t *pb16 = gf_gemm_round_into(ctx, sv->pbar, BL, P); // (B*L, P) pbar's bits, or NULL
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < nblk; blk++)
        pm_block(zt, S, off, blk * PM_LANES, BL, L, R, offsets, NW, eps, normalize,
                 scratch + (int64_t)omp_get_thread_num() * per_thread, sv->pbar, pb16, sv->norms, sv->valid);
    gf_tensor *g = pm_project(ctx, sv->pbar, sv->valid, w, b, B, L);

    const int64_t ip[2] = {NW, normalize};
    gf_record_op(ctx, &gf_op_plucker_mix, g, 3, in, sv, 2, ip, eps);
    gf_prof_end(ctx, GF_FAM_PLUCKER, t0);
    return g;
}

const gf_op_def gf_op_plucker_mix = {"plucker_mix", GF_FAM_PLUCKER, plucker_mix_backward, 0};

/* Decoding (no tape): z (B, n, R) are the reduced vectors of positions pos..pos+n-1; the W
 * before them come from ring (B, 2W, R), where position q sits at slots q % W and q % W + W so
 * that the last W positions are always contiguous. Computes g for the n positions exactly as
 * gf_plucker_mix does over the whole sequence, then stores the n vectors in the ring. */
gf_tensor *gf_plucker_mix_cached(gf_ctx *ctx, gf_tensor *z, gf_tensor *w, gf_tensor *b, const int64_t *offsets,
                                 int32_t n_offsets, float eps, int normalize, float *ring, int64_t W, int64_t pos) {
    double t0 = gf_prof_begin(ctx);
    const int64_t B = z->shape[0], n = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, NW = n_offsets;
    GF_ASSERT(z->device == GF_DEV_CPU, "plucker_mix_cached: generation runs on the CPU only (z is on %s)",
              gf_device_name(z->device));
    GF_ASSERT(w->ndim == 2 && w->shape[1] == P && W >= 1, "plucker_mix_cached: bad W or ring");
    for (int32_t q = 0; q < n_offsets; q++)
        GF_ASSERT(offsets[q] >= 1, "plucker_mix_cached: offset %lld < 1", (long long)offsets[q]);
    const int64_t Lw = W + n;
    float *win = gf_arena_floats(&ctx->arena, B * Lw * R); // (B, W + n, R): the past W, then z
    float *pbar = gf_arena_floats(&ctx->arena, B * n * P); // (B, n, P)
    float *norms = gf_arena_floats(&ctx->arena, B * n * NW);
    uint8_t *valid = gf_arena_alloc(&ctx->arena, (size_t)(B * n));
    const int64_t per_thread = pm_row_scratch(R, NW);
    float *scratch = gf_arena_floats(&ctx->arena, (int64_t)omp_get_max_threads() * per_thread); // (T, per_thread)
    for (int64_t bb = 0; bb < B; bb++) {
        memcpy(win + bb * Lw * R, ring + (bb * 2 * W + pos % W) * R, (size_t)(W * R) * sizeof(float));
        memcpy(win + (bb * Lw + W) * R, z->data + bb * n * R, (size_t)(n * R) * sizeof(float));
    }
#pragma omp parallel for schedule(static) if (B * n > 1)
    for (int64_t r = 0; r < B * n; r++) {
        const int64_t bb = r / n, i = r % n;
        valid[r] = pm_row(win + (bb * Lw + W + i) * R, pos + i, R, offsets, NW, eps, normalize,
                          scratch + (int64_t)omp_get_thread_num() * per_thread, pbar + r * P, norms + r * NW) > 0;
    }
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t i = n > W ? n - W : 0; i < n; i++) {
            const int64_t slot = (pos + i) % W;
            const float *zi = z->data + (bb * n + i) * R;
            memcpy(ring + (bb * 2 * W + slot) * R, zi, (size_t)R * sizeof(float));
            memcpy(ring + (bb * 2 * W + slot + W) * R, zi, (size_t)R * sizeof(float));
        }
    gf_tensor *g = pm_project(ctx, pbar, valid, w, b, B, n);
    gf_prof_end(ctx, GF_FAM_PLUCKER, t0);
    return g;
}
