/* plucker_window.cu — the bidirectional windowed Grassmann mixing of the NLI encoder on the GPU;
 * the CPU op (src/ops/plucker_window.c) is the spec: windows [k stride, k stride + window) ∩
 * [0, L); s is a partner of t when s != t, both are real tokens (mask != 0; no mask: all real)
 * and a window holds both; for a real t with |S_t| > 0 partners, a = z_t, c = z_s,
 *   p_k = a_i c_j - a_j c_i,  p̂ = normalize ? p / max(|p|, eps) : p,  pbar_t = mean over S_t of p̂,
 *   g_t[h] = W_h pbar_t[h] + b[h]  (H heads: W is (D, P/H), a block-diagonal projection),
 * and g_t = 0 for padding and tokens without a partner. Saved for backward, as on the CPU:
 * pbar (B, L, P), the partner counts (B, L) and the mask (staged on the device by the forward,
 * so the caller may reuse its buffer).
 *
 * Forward: pw_fwd gives one block to each (row, token) t and one coordinate to each thread
 * (plucker.cuh); the block counts t's partners, then per partner s in increasing order loads
 * z_s into shared memory, sums |p|² (fixed-order block sum) and adds p̂ into pbar_t held in
 * shared memory; pbar_t is written once, times 1/|S_t|. The CPU forms each unordered pair once
 * and adds -p̂ to the later token; here every token forms its own pairs (twice the pair work,
 * no two blocks write one row), in the same order s = lo, lo+1, ... The block also writes the
 * bias into g's row when t has partners (0 elsewhere): no kernel of its own. Then H GEMMs
 * g[:, h] += pbar[:, h] W_h^T (cu_gemm_rm with row strides).
 *
 * Backward, with G = dL/dg (B, L, D):
 *   dW_h += G[:, h]^T pbar[:, h] (H GEMMs),  db += Σ over rows with partners of G (cu_colsum),
 *   dpbar[:, h] = G[:, h] W_h (H GEMMs into the step arena),
 *   then pw_bwd_z, one block per token t, gathers without atomics: for each partner s,
 *   Ĝ = dpbar_t/|S_t| - dpbar_s/|S_s| (the CPU's gradient of p̂(t, s), reaching it from both
 *   sides as p̂(s, t) = -p̂(t, s)), dp = Ĝ through the normalisation (norm recomputed, as the
 *   CPU does), and dz_t += M(dp) z_s (plk_contract). For the CPU's pair {s < t} handled from s,
 *   the gradient reaching t as the second member is the same M(dp(t, s)) z_s, so each dz_t is
 *   the CPU's sum, written by its own block only. Every sum has a fixed order: a second run
 *   gives the same bits.
 */
#include "plucker.cuh"

typedef struct pw_cuda_saved {
    float *pbar;  // (B, L, P) device
    int32_t *cnt; // (B, L) device: partners per token (0: g = 0)
    float *mask;  // (B, L) device, NULL: every token real
} pw_cuda_saved;

__device__ static inline int pw_real(const float *mask, int64_t r) { return !mask || mask[r] != 0.0f; }

/* [lo, hi): the union of the windows holding t (empty when none does), as pw_range of the CPU op */
__device__ static inline void pw_range(int64_t t, int64_t L, int64_t window, int64_t stride, int64_t *lo,
                                       int64_t *hi) {
    const int64_t k_hi = t / stride;
    const int64_t k_lo = t - window + 1 > 0 ? (t - window + stride) / stride : 0; /* ceil((t-window+1)/stride) */
    if (k_lo > k_hi) {
        *lo = *hi = 0;
        return;
    }
    *lo = k_lo * stride;
    *hi = k_hi * stride + window < L ? k_hi * stride + window : L;
}

/* grid (B L), block plk_threads(P); shared: a, c (R each), red (32), pb (P), pair table (P).
 * Also the projection's bias: g[r, :] = b on a row with partners, 0 elsewhere; the GEMMs add to it. */
__global__ static void pw_fwd(float *pbar, int32_t *cnt_out, float *g, const float *b, const float *z,
                              const float *mask, int64_t L, int64_t D, int64_t window, int64_t stride, int R, int P,
                              float eps, int normalize) {
    extern __shared__ float sh[];
    float *a = sh, *c = a + R, *red = c + R, *pb = red + 32;
    uint32_t *pr = (uint32_t *)(pb + P);
    const int64_t r = blockIdx.x, t = r % L, row = r - t; /* row: the batch row's first token */
    const int tid = threadIdx.x, T = blockDim.x;
    int64_t lo = 0, hi = 0;
    int cnt = 0; /* every thread counts, the same */
    if (pw_real(mask, r)) {
        pw_range(t, L, window, stride, &lo, &hi);
        for (int64_t s = lo; s < hi; s++) cnt += s != t && pw_real(mask, row + s);
    }
    if (tid == 0) cnt_out[r] = cnt;
    for (int64_t d = tid; d < D; d += T) g[r * D + d] = cnt > 0 ? b[d] : 0.0f;
    float *pt = pbar + r * P;
    if (cnt == 0) { /* the whole block leaves */
        for (int k = tid; k < P; k += T) pt[k] = 0.0f;
        return;
    }
    for (int i = tid; i < R; i += T) a[i] = z[r * R + i];
    for (int k = tid; k < P; k += T) { /* pr[k] and pb[k] belong to thread k % T */
        pr[k] = plk_pair(k, R);
        pb[k] = 0.0f;
    }
    for (int64_t s = lo; s < hi; s++) {
        if (s == t || !pw_real(mask, row + s)) continue; /* the same for the whole block */
        plk_add_partner(a, c, z + (row + s) * R, pr, pb, red, R, P, eps, normalize);
    }
    const float inv = 1.0f / (float)cnt;
    for (int k = tid; k < P; k += T) pt[k] = pb[k] * inv;
}

/* grid (B L), block plk_threads(P); shared: a, c (R each), red (32), acc (R), dp (P), pair table (P) */
__global__ static void pw_bwd_z(float *dz, const float *z, const float *dpbar, const int32_t *cnt, const float *mask,
                                int64_t L, int64_t window, int64_t stride, int R, int P, float eps, int normalize) {
    extern __shared__ float sh[];
    float *a = sh, *c = a + R, *red = c + R, *acc = red + 32, *dp = acc + R;
    uint32_t *pr = (uint32_t *)(dp + P);
    const int64_t r = blockIdx.x, t = r % L, row = r - t;
    const int tid = threadIdx.x, T = blockDim.x;
    if (cnt[r] == 0) return; /* padding or no partner: g_t was 0, nothing reaches z_t (whole block) */
    for (int i = tid; i < R; i += T) { /* acc[i] and pr[k] belong to threads i % T, k % T */
        a[i] = z[r * R + i];
        acc[i] = 0.0f;
    }
    for (int k = tid; k < P; k += T) pr[k] = plk_pair(k, R);
    const float inv_t = 1.0f / (float)cnt[r];
    const float *Gt = dpbar + r * P;
    int64_t lo, hi;
    pw_range(t, L, window, stride, &lo, &hi);
    for (int64_t s = lo; s < hi; s++) {
        if (s == t || !pw_real(mask, row + s)) continue; /* the same for the whole block */
        __syncthreads(); /* a is loaded; the previous partner no longer reads c, dp */
        for (int i = tid; i < R; i += T) c[i] = z[(row + s) * R + i];
        __syncthreads();
        const float inv_s = 1.0f / (float)cnt[row + s]; /* >= 1: t is a partner of s */
        const float *Gs = dpbar + (row + s) * P;
        for (int k = tid; k < P; k += T) dp[k] = Gt[k] * inv_t - Gs[k] * inv_s; /* Ĝ */
        if (normalize) {
            float ss = 0.0f;
            for (int k = tid; k < P; k += T) {
                const float p = plk_p(a, c, pr[k]);
                ss += p * p;
            }
            const float nrm = sqrtf(plk_block_sum(ss, red));
            if (nrm > eps) { /* dp = Ĝ/n - p (p·Ĝ)/n³ */
                float qg = 0.0f;
                for (int k = tid; k < P; k += T) qg += plk_p(a, c, pr[k]) * dp[k];
                qg = plk_block_sum(qg, red) / (nrm * nrm * nrm);
                const float sc = 1.0f / nrm;
                for (int k = tid; k < P; k += T) dp[k] = dp[k] * sc - plk_p(a, c, pr[k]) * qg;
            } else { /* the max picked eps */
                const float sc = 1.0f / eps;
                for (int k = tid; k < P; k += T) dp[k] *= sc;
            }
        }
        __syncthreads();
        for (int i = tid; i < R; i += T) acc[i] += plk_contract(dp, c, i, R);
    }
    for (int i = tid; i < R; i += T) dz[r * R + i] += acc[i];
}

/* f(r, c) = G[r, c] on rows with partners, 0 elsewhere (db) */
struct pw_partnered_rows {
    const float *g;
    const int32_t *cnt;
    int64_t D;
    int64_t bytes(int64_t N, int64_t C) const { return 4 * (N * C + N); }
    __device__ float operator()(int64_t r, int64_t c) const { return cnt[r] > 0 ? g[r * D + c] : 0.0f; }
};

static void plucker_window_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *z = n->in[0], *w = n->in[1], *b = n->in[2];
    const pw_cuda_saved *sv = (const pw_cuda_saved *)n->saved;
    const float *G = n->out->grad; // (B, L, D)
    const int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    const int64_t D = w->shape[0], H = n->ip[0], Ph = P / H, Dh = D / H, window = n->ip[1], stride = n->ip[2];
    const int normalize = (int)n->ip[3];
    const float eps = (float)n->fp[0];

    /* bf16: G rounded once for its products (two per head) */
    const int held = (gf_needs_grad(w) ? H : 0) + (gf_needs_grad(z) ? H : 0) > 1 ? cu_bf16_hold(ctx, G, BL, D, D) : 0;
    if (gf_needs_grad(w)) /* pbar is 0 on rows without partners: no mask needed */
        for (int64_t h = 0; h < H; h++)
            cu_gemm_rm(ctx, 1, 0, Dh, Ph, BL, G + h * Dh, D, sv->pbar + h * Ph, P, 1.0f, w->grad + h * Dh * Ph, Ph);
    if (gf_needs_grad(b)) cu_colsum(ctx, b->grad, BL, D, 0, pw_partnered_rows{G, sv->cnt, D});
    if (!gf_needs_grad(z)) {
        cu_bf16_release(held);
        return;
    }
    float *dpbar = gf_cuda_floats(ctx, BL * P); // (B*L, P)
    for (int64_t h = 0; h < H; h++)
        cu_gemm_rm(ctx, 0, 0, BL, Ph, Dh, G + h * Dh, D, w->data + h * Dh * Ph, Ph, 0.0f, dpbar + h * Ph, P);
    cu_bf16_release(held);
    const size_t smem = (size_t)(3 * R + 32 + 2 * P) * sizeof(float); /* pw_bwd_z's shared layout */
    cu_smem_opt_in((const void *)pw_bwd_z, smem, "plucker_window (r too large for the fused kernel)");
    pw_bwd_z<<<(unsigned)BL, plk_threads(P), smem, gf_cuda_stream()>>>(z->grad, z->data, dpbar, sv->cnt, sv->mask, L,
                                                                       window, stride, (int)R, (int)P, eps, normalize);
    GF_CUDA_LAUNCHED("pw_bwd_z", 4 * (3 * BL * R + BL * P + BL + (sv->mask ? BL : 0)));
}

static const gf_op_def plucker_window_cuda = {"plucker_window", GF_FAM_PLUCKER, plucker_window_backward_cuda, 0};

gf_tensor *gf_plucker_window_cuda(gf_ctx *ctx, gf_tensor *z, const float *mask, gf_tensor *w, gf_tensor *b,
                                  int64_t window, int64_t stride, int64_t heads, float eps, int normalize) {
    const int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    const int64_t D = w->shape[0], H = heads, Ph = P / H, Dh = D / H;
    GF_ASSERT(BL >= 1 && BL <= INT32_MAX, "plucker_window: %lld rows for the GPU kernel", (long long)BL);

    pw_cuda_saved *sv = (pw_cuda_saved *)gf_arena_alloc(&ctx->arena, sizeof *sv);
    sv->pbar = gf_cuda_floats(ctx, BL * P);
    sv->cnt = (int32_t *)gf_cuda_arena_alloc(ctx->cuda, (size_t)BL * sizeof(int32_t));
    sv->mask = mask ? (float *)cu_stage(ctx, mask, (size_t)BL * sizeof(float)) : NULL;
    const size_t smem = (size_t)(2 * R + 32 + 2 * P) * sizeof(float); /* pw_fwd's shared layout */
    int64_t gs[3] = {B, L, D};
    gf_tensor *g = gf_cuda_tensor_new(ctx, 3, gs); // (B, L, D)
    cu_smem_opt_in((const void *)pw_fwd, smem, "plucker_window (r too large for the fused kernel)");
    pw_fwd<<<(unsigned)BL, plk_threads(P), smem, gf_cuda_stream()>>>(sv->pbar, sv->cnt, g->data, b->data, z->data,
                                                                     sv->mask, L, D, window, stride, (int)R, (int)P,
                                                                     eps, normalize);
    /* z in, pbar and the counts out, the mask; the bias in (once, as cached), g out */
    GF_CUDA_LAUNCHED("pw_fwd", 4 * (BL * R + BL * P + BL + (sv->mask ? BL : 0) + BL * D + D));
    if (ctx->grad_enabled && gf_needs_grad(w)) cu_bf16_keep(ctx, sv->pbar, BL, P, P); /* bf16: dW reads it again */
    for (int64_t h = 0; h < H; h++)
        cu_gemm_rm(ctx, 0, 1, BL, Dh, Ph, sv->pbar + h * Ph, P, w->data + h * Dh * Ph, Ph, 1.0f, g->data + h * Dh, D);

    gf_tensor *in[3] = {z, w, b};
    const int64_t ip[4] = {heads, window, stride, normalize};
    gf_record_op(ctx, &plucker_window_cuda, g, 3, in, sv, 4, ip, eps);
    return g;
}
