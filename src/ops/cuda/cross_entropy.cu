/* cross_entropy.cu — fused softmax + negative log-likelihood on the GPU, mean over counted rows;
 * the CPU op (src/ops/cross_entropy.c) is the spec.
 *
 * forward, per row i with target t_i != ignore:  lse_i = m_i + log Σ_j exp(l_ij - m_i),
 *   m_i = max_j l_ij;  nll_i = lse_i - l_{i,t_i} (double);  loss = Σ nll_i / count, or 0 when every
 *   target is ignored (count = 0). Ignored rows have lse = nll = 0. Only lse (N, float) is saved,
 *   with the targets (staged to the device) and count; backward recomputes the softmax.
 * Threads: one block per row (ce_fwd, ce_bwd; cu_loss.cuh for the fixed-order row reductions),
 * then one block adds the N losses (cu_nll_mean). Targets are host data: they are checked
 * against V on the host, as the CPU op does, and copied into the device step arena.
 */
#include "cu_loss.cuh"

/* lse[i], nll[i] of row i = blockIdx.x */
__global__ static void __launch_bounds__(CU_LOSS_MAX_THREADS)
    ce_fwd(float *lse, double *nll, const float *l, const int32_t *tg, int64_t V, int32_t ignore) {
    const int64_t i = blockIdx.x;
    const int32_t t = tg[i];
    if (t == ignore) { /* the whole block leaves: no barrier is left waiting */
        if (threadIdx.x == 0) { lse[i] = 0.0f; nll[i] = 0.0; }
        return;
    }
    const float *li = l + i * V;
    float m;
    double s;
    cu_row_stats(li, V, &m, &s);
    if (threadIdx.x == 0) {
        double ls = (double)m + log(s);
        lse[i] = (float)ls;
        nll[i] = ls - (double)li[t];
    }
}

/* backward: dl_ij += dloss / count * (softmax_ij - [j == t_i]) for counted rows, with
 * softmax_ij = exp(l_ij - lse_i) (float lse, as the CPU); dloss = gy[0] is read on the device.
 * One block per row, each thread its columns: no two threads write one element. */
__global__ static void __launch_bounds__(CU_LOSS_MAX_THREADS)
    ce_bwd(float *dl, const float *l, const float *lse, const int32_t *tg, int64_t V, int32_t ignore,
           const float *gy, int64_t cnt) {
    const int64_t i = blockIdx.x;
    const int32_t t = tg[i];
    if (t == ignore) return;
    const float scale = gy[0] / (float)cnt, lsi = lse[i];
    const float *li = l + i * V;
    float *di = dl + i * V;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
        float d = di[j] + scale * expf(li[j] - lsi);
        di[j] = j == t ? d - scale : d;
    }
}

static void cross_entropy_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *lg = n->in[0];
    int64_t N = gf_tensor_rows(lg), V = gf_tensor_cols(lg), cnt = n->ip[0];
    if (cnt == 0 || N == 0) return;
    ce_bwd<<<(unsigned)N, cu_row_threads(V), 0, gf_cuda_stream()>>>(lg->grad, lg->data, (const float *)n->saved,
                                                                     (const int32_t *)n->aux, V, (int32_t)n->ip[1],
                                                                     n->out->grad, cnt);
    GF_CUDA_LAUNCHED("ce_bwd", 4 * (3 * N * V + 2 * N + 1));
}

static const gf_op_def cross_entropy_cuda = {"cross_entropy", GF_FAM_ELEMWISE, cross_entropy_backward_cuda, 0};

gf_tensor *gf_cross_entropy_cuda(gf_ctx *ctx, gf_tensor *logits, const int32_t *targets, int32_t ignore_index,
                                 double *nll_sum, int64_t *n_counted) {
    int64_t N = gf_tensor_rows(logits), V = gf_tensor_cols(logits); /* (..., V): rows are predictions */
    GF_ASSERT(N <= INT32_MAX, "cross_entropy: %lld rows", (long long)N);
    int64_t cnt = cu_count_targets("cross_entropy", targets, N, V, ignore_index);
    float *lse = gf_cuda_floats(ctx, N);                                                  // (N)
    double *nll = (double *)gf_cuda_arena_alloc(ctx->cuda, (size_t)N * sizeof(double));   // (N)
    int32_t *tg = NULL;                                                                   // (N) on the device
    if (N > 0) {
        tg = (int32_t *)cu_stage(ctx, targets, (size_t)N * sizeof(int32_t));
        ce_fwd<<<(unsigned)N, cu_row_threads(V), 0, gf_cuda_stream()>>>(lse, nll, logits->data, tg, V, ignore_index);
        GF_CUDA_LAUNCHED("ce_fwd", 4 * (N * V + 2 * N) + 8 * N);
    }
    gf_tensor *y = cu_loss_mean(ctx, nll, N, cnt, nll_sum); // (1)
    if (n_counted) *n_counted = cnt;
    gf_tensor *in[1] = {logits};
    gf_node *n = gf_tape_record(ctx, &cross_entropy_cuda, y, 1, in);
    if (n) {
        n->aux = tg;
        n->saved = lse;
        n->ip[0] = cnt;
        n->ip[1] = ignore_index;
    }
    return y;
}
