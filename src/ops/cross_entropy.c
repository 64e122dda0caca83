/* cross_entropy.c — fused softmax + negative log-likelihood, mean over counted rows.
 *
 * forward, per row i with target t_i != ignore:  lse_i = m_i + log Σ_j exp(l_ij - m_i),
 *   m_i = max_j l_ij (subtracted so exp never overflows);  nll_i = lse_i - l_{i,t_i};
 *   loss = Σ nll_i / count.  Only lse (N) is saved: the softmax is recomputed in backward
 *   from the logits, so no second (N, V) buffer is kept (V is 30k in the paper's models).
 */
#include "op_util.h"
#include <math.h>

/* backward: dl_ij += dloss / count * (softmax_ij - [j == t_i]) for counted rows */
static void cross_entropy_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *lg = n->in[0];
    const int32_t *tg = n->aux;
    const float *lse = n->saved;
    int64_t N = gf_tensor_rows(lg), V = gf_tensor_cols(lg), cnt = n->ip[0];
    int32_t ignore = (int32_t)n->ip[1];
    if (cnt == 0) return;
    float scale = n->out->grad[0] / (float)cnt;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        if (tg[i] == ignore) continue;
        const float *l = lg->data + i * V;
        float *d = lg->grad + i * V;
        const float li = lse[i];
#pragma omp simd
        for (int64_t j = 0; j < V; j++) d[j] += scale * gf_expf(l[j] - li);
        d[tg[i]] -= scale;
    }
}

gf_tensor *gf_cross_entropy(gf_ctx *ctx, gf_tensor *logits, const int32_t *targets,
                            int32_t ignore_index, double *nll_sum, int64_t *n_counted) {
    double t0 = gf_prof_begin(ctx);
    const gf_backend_ops *dev = gf_op_backend("cross_entropy", 1, &logits);
    if (dev) return dev->cross_entropy(ctx, logits, targets, ignore_index, nll_sum, n_counted);
    int64_t N = gf_tensor_rows(logits), V = gf_tensor_cols(logits); /* (..., V): rows are predictions */
    float *lse = gf_arena_floats(&ctx->arena, N);      // (N)
    double *nll = gf_arena_alloc(&ctx->arena, (size_t)N * sizeof(double)); // (N)
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        if (targets[i] == ignore_index) { nll[i] = 0.0; lse[i] = 0.0f; continue; }
        GF_ASSERT(targets[i] >= 0 && targets[i] < V, "cross_entropy: target %d at row %lld outside [0, %lld)",
                  targets[i], (long long)i, (long long)V);
        const float *l = logits->data + i * V;
        float m = l[0];
#pragma omp simd reduction(max : m)
        for (int64_t j = 1; j < V; j++) m = l[j] > m ? l[j] : m;
        double s = 0.0; /* float within blocks of 256 (vector lanes), double across blocks */
        for (int64_t j0 = 0; j0 < V; j0 += 256) {
            int64_t j1 = j0 + 256 < V ? j0 + 256 : V;
            float bs = 0.0f;
#pragma omp simd reduction(+ : bs)
            for (int64_t j = j0; j < j1; j++) bs += gf_expf(l[j] - m);
            s += (double)bs;
        }
        double ls = (double)m + log(s);
        lse[i] = (float)ls;
        nll[i] = ls - (double)l[targets[i]];
    }
    double tot = 0.0;
    int64_t cnt = 0;
    for (int64_t i = 0; i < N; i++) /* serial: a fixed summation order */
        if (targets[i] != ignore_index) { tot += nll[i]; cnt++; }
    int64_t one = 1;
    gf_tensor *y = gf_tensor_new(ctx, 1, &one);
    y->data[0] = cnt ? (float)(tot / (double)cnt) : 0.0f;
    if (nll_sum) *nll_sum = tot;
    if (n_counted) *n_counted = cnt;
    gf_tensor *in[1] = {logits};
    gf_node *n = gf_tape_record(ctx, &gf_op_cross_entropy, y, 1, in);
    if (n) {
        int32_t *copy = gf_arena_alloc(&ctx->arena, (size_t)N * sizeof(int32_t));
        memcpy(copy, targets, (size_t)N * sizeof(int32_t));
        n->aux = copy;
        n->saved = lse;
        n->ip[0] = cnt;
        n->ip[1] = ignore_index;
    }
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_cross_entropy = {"cross_entropy", GF_FAM_ELEMWISE, cross_entropy_backward, 0};
