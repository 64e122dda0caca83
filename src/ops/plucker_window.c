/* plucker_window.c — bidirectional windowed Grassmann mixing for the NLI encoder: Plücker pairs
 * of tokens that share a window, normalisation, mean over partners and a grouped ("mixing
 * heads") projection, in one op.
 *
 * Windows: window k covers positions [k*stride, k*stride + window) ∩ [0, L), k >= 0 with
 * k*stride < L. Tokens t and s are partners when s != t, both are real tokens (mask != 0) and
 * at least one window holds both. For stride <= window the windows holding t overlap, so t's
 * partners form one interval [lo_t, hi_t) (minus t and padding); for stride > window t lies in
 * at most one window (or none).
 *
 * Forward, per batch row and real token t with partner set S_t (|S_t| > 0), a = z_t, c = z_s:
 *   p_k   = a_i c_j - a_j c_i   for pairs k = (i, j), i < j, row-major (as plucker_mix)
 *   n     = |p|_2 over all P coordinates,  p̂ = normalize ? p / max(n, eps) : p
 *   pbar_t = (1/|S_t|) Σ_{s in S_t} p̂(t, s)
 *   head h (H heads, Ph = P/H coordinates, Dh = D/H outputs):
 *     g_t[h*Dh : (h+1)*Dh] = W[h*Dh : (h+1)*Dh, :] pbar_t[h*Ph : (h+1)*Ph] + b[h*Dh : (h+1)*Dh]
 *   i.e. a block-diagonal projection, W stored as (D, Ph). Padding and tokens with no partner
 *   get g_t = 0 (no bias). Saved for backward: pbar (B, L, P), the partner counts and a copy
 *   of the mask; Plücker vectors and norms are recomputed with the same code.
 *
 * Backward, with G = dL/dg (B, L, D) and v ranging over rows with a partner:
 *   dW_h += G_v[h]ᵀ pbar_v[h] ;  db += Σ_v G_v
 *   dpbar_t[h] = G_t[h] W_h                   (H GEMMs)
 *   per partner s of t:  Ĝ = dpbar_t / |S_t|
 *     normalize, n > eps:  dp = (Ĝ - q (q·Ĝ)) / n,  q = p / n
 *     normalize, n <= eps: dp = Ĝ / eps
 *     no normalize:        dp = Ĝ
 *   da_i += dp_k c_j,  da_j -= dp_k c_i,  dc_i -= dp_k a_j,  dc_j += dp_k a_i   (da -> z_t, dc -> z_s)
 * Symmetry: s is t's partner iff t is s's, and p(s, t) = -p(t, s) with the same norm, so each
 * unordered pair {t < s} is formed once: forward adds p̂ to pbar_t and subtracts it from pbar_s;
 * backward uses Ĝ = dpbar_t/|S_t| - dpbar_s/|S_s| (the gradient reaching p̂(t, s) from both
 * sides). This halves the dominant cost. Partners live in the same batch row, so both passes
 * are parallel over batch rows: each thread owns its rows of pbar and dz and adds in a fixed
 * order (bitwise reproducible for any thread count).
 */
#include "op_util.h"
#include <math.h>
#include <omp.h>

typedef struct {
    float *pbar;    // (B, L, P)
    int32_t *cnt;   // (B, L) partners per token (0: g = 0)
    uint8_t *mask;  // (B, L) 1 = real token
} pw_saved;

/* p (P) = a ∧ c over the row-major upper triangle; inner loop over j is contiguous. */
static inline void pw_pairs(const float *a, const float *c, float *p, int64_t R) {
    int64_t k = 0;
    for (int64_t i = 0; i < R - 1; i++) {
        float ai = a[i], ci = c[i];
        float *pi = p + k - i - 1; /* pi[j] = p_k for pair (i, j) */
#pragma omp simd
        for (int64_t j = i + 1; j < R; j++) pi[j] = ai * c[j] - a[j] * ci;
        k += R - 1 - i;
    }
}

/* Σ p_k², summed in vector lanes (as plucker_mix's norms) */
static inline float pw_sumsq(const float *p, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; k++) s += p[k] * p[k];
    return s;
}

/* [lo, hi): the union of the windows holding t (empty when none does) */
static inline void pw_range(int64_t t, int64_t L, int64_t window, int64_t stride, int64_t *lo, int64_t *hi) {
    int64_t k_hi = t / stride;
    int64_t k_lo = t - window + 1 > 0 ? (t - window + stride) / stride : 0; /* ceil((t-window+1)/stride) */
    if (k_lo > k_hi) { *lo = *hi = 0; return; }
    *lo = k_lo * stride;
    *hi = k_hi * stride + window < L ? k_hi * stride + window : L;
}

static void plucker_window_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *z = n->in[0], *w = n->in[1], *b = n->in[2];
    const pw_saved *sv = n->saved;
    const float *G = n->out->grad; // (B, L, D)
    int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    int64_t D = w->shape[0], H = n->ip[0], Ph = P / H, Dh = D / H, window = n->ip[1], stride = n->ip[2];
    int normalize = (int)n->ip[3];
    float eps = (float)n->fp[0];

    if (gf_needs_grad(w))
        for (int64_t h = 0; h < H; h++) /* pbar is 0 on rows without partners: no mask needed */
            gf_gemm(ctx, 1, 0, Dh, Ph, BL, G + h * Dh, D, sv->pbar + h * Ph, P, 1.0f, w->grad + h * Dh * Ph, Ph);
    if (gf_needs_grad(b)) {
        float *vm = gf_arena_floats(&ctx->arena, BL * D); // (B*L, D) G on rows with partners
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < BL; r++)
            for (int64_t d = 0; d < D; d++) vm[r * D + d] = sv->cnt[r] > 0 ? G[r * D + d] : 0.0f;
        gf_colsum_acc(ctx, b->grad, vm, NULL, BL, D);
    }
    if (!gf_needs_grad(z)) return;

    float *dpbar = gf_arena_floats(&ctx->arena, BL * P); // (B*L, P)
    for (int64_t h = 0; h < H; h++)
        gf_gemm(ctx, 0, 0, BL, Ph, Dh, G + h * Dh, D, w->data + h * Dh * Ph, Ph, 0.0f, dpbar + h * Ph, P);
    int T = omp_get_max_threads();
    float *scratch = gf_arena_floats(&ctx->arena, (int64_t)T * 2 * P); // (T, 2, P)

#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bb = 0; bb < B; bb++) {
        float *pk = scratch + (int64_t)omp_get_thread_num() * 2 * P, *dp = pk + P;
        for (int64_t t = 0; t < L; t++) {
            int64_t r = bb * L + t;
            if (sv->cnt[r] == 0) continue;
            float inv_t = 1.0f / (float)sv->cnt[r];
            const float *a = z->data + r * R, *Gt = dpbar + r * P;
            float *da = z->grad + r * R;
            int64_t lo, hi;
            pw_range(t, L, window, stride, &lo, &hi);
            for (int64_t s = t + 1; s < hi; s++) {
                int64_t rs = bb * L + s;
                if (!sv->mask[rs]) continue; /* a real s in t's range has cnt >= 1 (t itself) */
                float inv_s = 1.0f / (float)sv->cnt[rs];
                const float *c = z->data + rs * R, *Gs = dpbar + rs * P;
                float *dc = z->grad + rs * R;
                pw_pairs(a, c, pk, R);
                float nrm = sqrtf(pw_sumsq(pk, P));
#pragma omp simd
                for (int64_t k = 0; k < P; k++) dp[k] = Gt[k] * inv_t - Gs[k] * inv_s; /* Ĝ */
                if (normalize && nrm > eps) {
                    float qg = 0.0f;
#pragma omp simd reduction(+ : qg)
                    for (int64_t k = 0; k < P; k++) qg += pk[k] * dp[k];
                    qg /= nrm * nrm * nrm; /* (q·Ĝ)/n² with q = p/n, applied to p */
                    float sc = 1.0f / nrm;
#pragma omp simd
                    for (int64_t k = 0; k < P; k++) dp[k] = dp[k] * sc - pk[k] * qg;
                } else if (normalize) {
                    float sc = 1.0f / eps;
#pragma omp simd
                    for (int64_t k = 0; k < P; k++) dp[k] *= sc;
                }
                int64_t k = 0;
                for (int64_t i = 0; i < R - 1; i++) {
                    float ai = a[i], ci = c[i], dai = 0.0f, dci = 0.0f;
                    const float *dpi = dp + k - i - 1; /* dpi[j] = dp_k for pair (i, j) */
#pragma omp simd reduction(+ : dai, dci)
                    for (int64_t j = i + 1; j < R; j++) {
                        float d = dpi[j];
                        dai += d * c[j];
                        da[j] -= d * ci;
                        dci -= d * a[j];
                        dc[j] += d * ai;
                    }
                    da[i] += dai;
                    dc[i] += dci;
                    k += R - 1 - i;
                }
            }
        }
    }
}

gf_tensor *gf_plucker_window(gf_ctx *ctx, gf_tensor *z, const float *mask, gf_tensor *w, gf_tensor *b,
                             int64_t window, int64_t stride, int64_t heads, float eps, int normalize) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(z->ndim == 3, "plucker_window: z must be (B, L, R)");
    int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    GF_ASSERT(R >= 2, "plucker_window: r must be >= 2");
    GF_ASSERT(heads >= 1 && P % heads == 0, "plucker_window: %lld Plücker coordinates do not split into %lld heads",
              (long long)P, (long long)heads);
    int64_t Ph = P / heads;
    GF_ASSERT(w->ndim == 2 && w->shape[1] == Ph && w->shape[0] % heads == 0,
              "plucker_window: W must be (D, %lld) with D divisible by %lld heads", (long long)Ph, (long long)heads);
    int64_t D = w->shape[0], Dh = D / heads;
    GF_ASSERT(b && b->ndim == 1 && b->shape[0] == D, "plucker_window: bias must be (D)");
    GF_ASSERT(window >= 1 && stride >= 1, "plucker_window: window and stride must be >= 1");
    gf_tensor *in[3] = {z, w, b};
    const gf_backend_ops *dev = gf_op_backend("plucker_window", 3, in);
    if (dev) return dev->plucker_window(ctx, z, mask, w, b, window, stride, heads, eps, normalize);

    pw_saved *sv = gf_arena_alloc(&ctx->arena, sizeof *sv);
    sv->pbar = gf_arena_floats(&ctx->arena, BL * P);
    sv->cnt = gf_arena_alloc(&ctx->arena, (size_t)BL * sizeof(int32_t));
    sv->mask = gf_arena_alloc(&ctx->arena, (size_t)BL);
    for (int64_t r = 0; r < BL; r++) sv->mask[r] = mask ? mask[r] != 0.0f : 1;
    int T = omp_get_max_threads();
    float *scratch = gf_arena_floats(&ctx->arena, (int64_t)T * P); // (T, P)

    /* partner counts first: cnt_t = real tokens in t's range other than t */
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < BL; r++) {
        int64_t bb = r / L, t = r % L, lo, hi;
        int32_t cnt = 0;
        if (sv->mask[r]) {
            pw_range(t, L, window, stride, &lo, &hi);
            for (int64_t s = lo; s < hi; s++) cnt += s != t && sv->mask[bb * L + s];
        }
        sv->cnt[r] = cnt;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bb = 0; bb < B; bb++) {
        float *pk = scratch + (int64_t)omp_get_thread_num() * P;
        memset(sv->pbar + bb * L * P, 0, (size_t)(L * P) * sizeof(float));
        for (int64_t t = 0; t < L; t++) {
            int64_t r = bb * L + t, lo, hi;
            if (sv->cnt[r] == 0) continue;
            const float *a = z->data + r * R;
            float *pt = sv->pbar + r * P;
            pw_range(t, L, window, stride, &lo, &hi);
            for (int64_t s = t + 1; s < hi; s++) { /* each unordered pair once */
                if (!sv->mask[bb * L + s]) continue;
                float *ps = sv->pbar + (bb * L + s) * P;
                pw_pairs(a, z->data + (bb * L + s) * R, pk, R);
                float nrm = sqrtf(pw_sumsq(pk, P));
                float sc = normalize ? 1.0f / (nrm > eps ? nrm : eps) : 1.0f;
#pragma omp simd
                for (int64_t k = 0; k < P; k++) {
                    float v = pk[k] * sc;
                    pt[k] += v;
                    ps[k] -= v; /* p(s, t) = -p(t, s) */
                }
            }
            float inv = 1.0f / (float)sv->cnt[r]; /* pbar_t is complete: later s only add to s */
#pragma omp simd
            for (int64_t k = 0; k < P; k++) pt[k] *= inv;
        }
    }

    int64_t gs[3] = {B, L, D};
    gf_tensor *g = gf_tensor_new(ctx, 3, gs); // (B, L, D)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < BL; r++)
        for (int64_t d = 0; d < D; d++) g->data[r * D + d] = sv->cnt[r] > 0 ? b->data[d] : 0.0f;
    for (int64_t h = 0; h < heads; h++)
        gf_gemm(ctx, 0, 1, BL, Dh, Ph, sv->pbar + h * Ph, P, w->data + h * Dh * Ph, Ph, 1.0f, g->data + h * Dh, D);

    const int64_t ip[4] = {heads, window, stride, normalize};
    gf_record_op(ctx, &gf_op_plucker_window, g, 3, in, sv, 4, ip, eps);
    gf_prof_end(ctx, GF_FAM_PLUCKER, t0);
    return g;
}

const gf_op_def gf_op_plucker_window = {"plucker_window", GF_FAM_PLUCKER, plucker_window_backward, 0};
