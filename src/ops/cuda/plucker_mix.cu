/* plucker_mix.cu — fused causal Grassmann mixing on the GPU; the CPU op (src/ops/plucker_mix.c)
 * is the spec: per batch row and position t, with a = z_t (current), c = z_{t-δ} (past),
 *   W_t = { δ in offsets : t - δ >= 0 },  p_k = a_i c_j - a_j c_i (i < j, row-major),
 *   n = |p|_2,  p̂ = normalize ? p / max(n, eps) : p,  pbar_t = mean over W_t of p̂ (0 if empty),
 *   g_t = W pbar_t + b where |W_t| > 0, else 0.
 * Valid rows are t >= min(offsets). Saved for backward, as on the CPU: pbar (B, L, P) and the
 * norms (B, L, |W|), plus the offsets staged on the device.
 *
 * Forward: pm_fwd gives one block to each (row, position) r = b L + t and one coordinate k to
 * each thread (plucker.cuh): per valid offset the block loads z_{t-δ} into shared memory, forms
 * its pairs, sums |p|² (fixed-order block sum), and adds p̂ into pbar_t held in shared memory;
 * pbar_t is written once, averaged, and the block writes the projection's bias into g's row
 * (0 on a row without a valid offset). Then one GEMM g += pbar W^T (cu_gemm_rm), as linear.cu
 * does: one launch fewer than a kernel of its own for the bias, the same bits.
 *
 * Backward, with G = dL/dg (B, L, D):
 *   dW += G^T pbar (one GEMM; pbar is 0 on rows without a valid offset),
 *   db += Σ over valid rows of G (cu_colsum, fixed order),
 *   dpbar = G W (one GEMM into the step arena),
 *   then dz by the CPU op's derivation in gather form, without atomics: pm_bwd_z gives one
 *   block to each (row, position) t, which adds both roles of z_t in offset order —
 *     as the current member of (t, t-δ):   dz_t += M(dp(t, δ)) z_{t-δ}      (t - δ >= 0)
 *     as the past member of (t+δ, t):      dz_t -= M(dp(t+δ, δ)) z_{t+δ}    (t + δ < L)
 *   where dp(u, δ) is the CPU's dL/dp of the pair at position u (Ĝ = dpbar_u / |W_u| through
 *   the normalisation, with u's saved norm) and M the antisymmetric matrix of dp
 *   (plk_contract). Each dz_t is written by its own block only.
 * Every sum has a fixed order: a second run gives the same bits.
 */
#include "plucker.cuh"

typedef struct pm_cuda_saved {
    float *pbar;   // (B, L, P) device
    float *norms;  // (B, L, NW) device
    int64_t *offs; // (NW) device
} pm_cuda_saved;

/* |W_t|: the offsets valid at position t */
__device__ static inline int pm_count(int64_t t, const int64_t *offs, int64_t NW) {
    int cnt = 0;
    for (int64_t q = 0; q < NW; q++) cnt += t - offs[q] >= 0;
    return cnt;
}

/* grid (B L), block plk_threads(P); shared: a, c (R each), red (32), pb (P), pair table (P).
 * Also the projection's bias: g[r, :] = b on a valid row (t >= minoff), 0 elsewhere; the GEMM
 * adds to it. */
__global__ static void pm_fwd(float *pbar, __nv_bfloat16 *pbar16, float *norms, float *g, const float *b,
                              const float *z, const int64_t *offs,
                              int64_t NW, int64_t L, int64_t D, int64_t minoff, int R, int P, float eps,
                              int normalize) {
    extern __shared__ float sh[];
    float *a = sh, *c = a + R, *red = c + R, *pb = red + 32;
    uint32_t *pr = (uint32_t *)(pb + P);
    const int64_t r = blockIdx.x, t = r % L;
    const int tid = threadIdx.x, T = blockDim.x;
    const float *zt = z + r * R;
    for (int i = tid; i < R; i += T) a[i] = zt[i];
    for (int k = tid; k < P; k += T) { /* pr[k] and pb[k] belong to thread k % T */
        pr[k] = plk_pair(k, R);
        pb[k] = 0.0f;
    }
    int cnt = 0;
    for (int64_t q = 0; q < NW; q++) {
        const int64_t d = offs[q];
        if (t - d < 0) { /* the same for the whole block */
            if (tid == 0) norms[r * NW + q] = 0.0f;
            continue;
        }
        const float nrm = plk_add_partner(a, c, zt - d * R, pr, pb, red, R, P, eps, normalize);
        if (tid == 0) norms[r * NW + q] = nrm;
        cnt++;
    }
    const float inv = cnt > 1 ? 1.0f / (float)cnt : 1.0f; /* cnt == 0: pb stayed 0 */
    for (int k = tid; k < P; k += T) {
        pbar[r * P + k] = pb[k] * inv;
        cu_bf16_put(pbar16, r * P + k, pbar[r * P + k]);
    }
    for (int64_t d = tid; d < D; d += T) g[r * D + d] = t >= minoff ? b[d] : 0.0f;
}

/* One pair's share of dz_t, block-wide. u = current member, v = past member (shared), Gp =
 * dpbar of the current position, inv = 1/|W_u|, nrm = the pair's saved norm. dp (shared) gets
 * the CPU's dL/dp; then acc[i] += sign Σ_j M_ij w_j: w = v, sign +1 when z_t is the current
 * member; w = u, sign -1 when it is the past one. */
__device__ static void pm_term(float *acc, const float *u, const float *v, const float *w, float sign, float *dp,
                               float *red, const uint32_t *pr, const float *Gp, float inv, float nrm, float eps,
                               int normalize, int R, int P) {
    const int tid = threadIdx.x, T = blockDim.x;
    if (normalize && nrm > eps) { /* dp = (Ĝ - q (q·Ĝ)) / n, q = p / n, Ĝ = Gp / |W_u| */
        float qg = 0.0f;
        for (int k = tid; k < P; k += T) qg += plk_p(u, v, pr[k]) * Gp[k];
        qg = plk_block_sum(qg, red) * (inv / (nrm * nrm));
        const float s = inv / nrm, qn = qg / nrm;
        for (int k = tid; k < P; k += T) dp[k] = Gp[k] * s - plk_p(u, v, pr[k]) * qn;
    } else { /* the max picked eps, or no normalisation */
        const float s = normalize ? inv / eps : inv;
        for (int k = tid; k < P; k += T) dp[k] = Gp[k] * s;
    }
    __syncthreads();
    for (int i = tid; i < R; i += T) acc[i] += sign * plk_contract(dp, w, i, R);
}

/* grid (B L), block plk_threads(P); shared: u, v (R each), red (32), acc (R), dp (P), pair table (P) */
__global__ static void pm_bwd_z(float *dz, const float *z, const float *dpbar, const float *norms, const int64_t *offs,
                                int64_t NW, int64_t L, int R, int P, float eps, int normalize) {
    extern __shared__ float sh[];
    float *u = sh, *v = u + R, *red = v + R, *acc = red + 32, *dp = acc + R;
    uint32_t *pr = (uint32_t *)(dp + P);
    const int64_t r = blockIdx.x, t = r % L;
    const int tid = threadIdx.x, T = blockDim.x;
    for (int i = tid; i < R; i += T) acc[i] = 0.0f; /* acc[i] and pr[k] belong to threads i % T, k % T */
    for (int k = tid; k < P; k += T) pr[k] = plk_pair(k, R);
    const int cnt_t = pm_count(t, offs, NW);
    for (int64_t q = 0; q < NW; q++) {
        const int64_t d = offs[q];
        if (t - d >= 0) { /* z_t current, z_{t-δ} past */
            __syncthreads(); /* the previous term no longer reads u, v, dp */
            for (int i = tid; i < R; i += T) {
                u[i] = z[r * R + i];
                v[i] = z[(r - d) * R + i];
            }
            __syncthreads();
            pm_term(acc, u, v, v, 1.0f, dp, red, pr, dpbar + r * P, 1.0f / (float)cnt_t, norms[r * NW + q], eps,
                    normalize, R, P);
        }
        if (t + d < L) { /* z_{t+δ} current, z_t past */
            __syncthreads();
            for (int i = tid; i < R; i += T) {
                u[i] = z[(r + d) * R + i];
                v[i] = z[r * R + i];
            }
            __syncthreads();
            pm_term(acc, u, v, u, -1.0f, dp, red, pr, dpbar + (r + d) * P, 1.0f / (float)pm_count(t + d, offs, NW),
                    norms[(r + d) * NW + q], eps, normalize, R, P);
        }
    }
    for (int i = tid; i < R; i += T) dz[r * R + i] += acc[i];
}

/* f(r, c) = G[r, c] on valid rows, 0 elsewhere (db) */
struct pm_valid_rows {
    const float *g;
    int64_t D, L, minoff;
    int64_t bytes(int64_t N, int64_t C) const { return 4 * N * C; }
    __device__ float operator()(int64_t r, int64_t c) const { return r % L >= minoff ? g[r * D + c] : 0.0f; }
};

static void plucker_mix_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *z = n->in[0], *w = n->in[1], *b = n->in[2];
    const pm_cuda_saved *sv = (const pm_cuda_saved *)n->saved;
    const float *G = n->out->grad; // (B, L, D)
    const int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    const int64_t D = w->shape[0], NW = n->ip[0], minoff = n->ip[2];
    const int normalize = (int)n->ip[1];
    const float eps = (float)n->fp[0];

    const int held = gf_needs_grad(w) && gf_needs_grad(z) ? cu_bf16_hold(ctx, G, BL, D, D) : 0; /* bf16: once */
    if (gf_needs_grad(w)) cu_gemm_rm(ctx, 1, 0, D, P, BL, G, D, sv->pbar, P, 1.0f, w->grad, P);
    if (gf_needs_grad(b)) cu_colsum(ctx, b->grad, BL, D, 0, pm_valid_rows{G, D, L, minoff});
    if (!gf_needs_grad(z)) return;
    float *dpbar = gf_cuda_floats(ctx, BL * P); // (B*L, P)
    cu_gemm_rm(ctx, 0, 0, BL, P, D, G, D, w->data, P, 0.0f, dpbar, P);
    cu_bf16_release(held);
    const size_t smem = (size_t)(3 * R + 32 + 2 * P) * sizeof(float); /* pm_bwd_z's shared layout */
    cu_smem_opt_in((const void *)pm_bwd_z, smem, "plucker_mix (r too large for the fused kernel)");
    pm_bwd_z<<<(unsigned)BL, plk_threads(P), smem, gf_cuda_stream()>>>(z->grad, z->data, dpbar, sv->norms, sv->offs,
                                                                       NW, L, (int)R, (int)P, eps, normalize);
    GF_CUDA_LAUNCHED("pm_bwd_z", 4 * (3 * BL * R + BL * P + BL * NW) + 8 * NW);
}

static const gf_op_def plucker_mix_cuda = {"plucker_mix", GF_FAM_PLUCKER, plucker_mix_backward_cuda, 0};

gf_tensor *gf_plucker_mix_cuda(gf_ctx *ctx, gf_tensor *z, gf_tensor *w, gf_tensor *b, const int64_t *offsets,
                               int32_t n_offsets, float eps, int normalize) {
    const int64_t B = z->shape[0], L = z->shape[1], R = z->shape[2], P = R * (R - 1) / 2, BL = B * L;
    const int64_t D = w->shape[0], NW = n_offsets;
    GF_ASSERT(BL >= 1 && BL <= INT32_MAX, "plucker_mix: %lld rows for the GPU kernel", (long long)BL);
    int64_t minoff = offsets[0];
    for (int64_t q = 1; q < NW; q++) minoff = offsets[q] < minoff ? offsets[q] : minoff;

    pm_cuda_saved *sv = (pm_cuda_saved *)gf_arena_alloc(&ctx->arena, sizeof *sv);
    sv->pbar = gf_cuda_floats(ctx, BL * P);
    sv->norms = gf_cuda_floats(ctx, BL * NW);
    sv->offs = (int64_t *)gf_cuda_const(offsets, (size_t)NW * sizeof(int64_t)); /* the layer's: every step's */
    const size_t smem = (size_t)(2 * R + 32 + 2 * P) * sizeof(float); /* pm_fwd's shared layout */
    int64_t gs[3] = {B, L, D};
    gf_tensor *g = gf_cuda_tensor_new(ctx, 3, gs); // (B, L, D)
    cu_smem_opt_in((const void *)pm_fwd, smem, "plucker_mix (r too large for the fused kernel)");
    /* bf16: pbar rounded as it is written, for the projection and its weight gradient */
    __nv_bfloat16 *pbar16 = (__nv_bfloat16 *)cu_bf16_keep_out(ctx, sv->pbar, BL, P, P);
    pm_fwd<<<(unsigned)BL, plk_threads(P), smem, gf_cuda_stream()>>>(sv->pbar, pbar16, sv->norms, g->data, b->data,
                                                                     z->data, sv->offs, NW, L, D, minoff, (int)R,
                                                                     (int)P, eps, normalize);
    /* z in, pbar (and its copy) and norms out, the offsets; the bias in (once, as cached), g out */
    GF_CUDA_LAUNCHED("pm_fwd", 4 * (BL * R + BL * P + BL * NW + BL * D + D) + 8 * NW + (pbar16 ? 2 * BL * P : 0));
    cu_gemm_rm(ctx, 0, 1, BL, D, P, sv->pbar, P, w->data, P, 1.0f, g->data, D);

    gf_tensor *in[3] = {z, w, b};
    const int64_t ip[3] = {NW, normalize, minoff};
    gf_record_op(ctx, &plucker_mix_cuda, g, 3, in, sv, 3, ip, eps);
    return g;
}
