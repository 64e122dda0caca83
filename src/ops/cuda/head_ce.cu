/* head_ce.cu — fused tied LM head + softmax cross-entropy on the GPU, chunked over rows; the CPU
 * op (src/ops/head_ce.c) is the spec.
 *
 * loss = (1/C) Σ_{i counted} [ lse_i - l_{i,t_i} ],  l_i = E h_i  (h (N, D), E (V, D), logits (N, V)),
 * 0 when every target is ignored (C = 0). As on the CPU, rows go in chunks so that only one
 * (rows, V) buffer of logits exists: the chunk is gf_cuda_chunk_bytes of logits (512 MiB: 4,398
 * rows at V = 30,522, so the paper's 4,096 rows are one chunk; the CPU's is 32 MiB). Per chunk:
 *   1. logits (n, V) = h_c (n, D) · Eᵀ by cuBLAS, row-major through swapped operands
 *      (linear.cu): buf^T (V, n) = E (V, D) · h_c^T:   sgemm(T, N, V, n, D,  E ld D, h_c ld D, buf ld V)
 *   2. head_rows, one block per row: the row's max m, s = Σ exp(l - m) (cu_loss.cuh, fixed order),
 *      nll_i = m + log s - l_{i,t_i} (double), and — when a gradient is needed — the logits'
 *      gradient in place: dl_ij = (p_ij - [j = t_i]) / C (0 for ignored rows), for an upstream 1;
 *   3. dh_c (n, D) = dl · E:   dh_c^T (D, n) = E^T (D, V) · dl^T (V, n):  sgemm(N, N, D, n, V) (stores)
 *      dE (V, D) += dlᵀ · h_c: dE^T (D, V) = h_c^T (D, n) · dl (n, V):     sgemm(N, T, D, V, n)
 *      (beta 0 for the first chunk, 1 after: the buffer needs no memset).
 * In bf16 ([run] precision = bf16) every product reads rounded operands (cu_gemm_rm): E's
 * rounded copy is the weights' mirror or one rounding held for the whole call, h_c's one per chunk
 * held for the logits and dE, and dl is written rounded by head_rows itself into a held copy
 * that dh and dE read (the fp32 row is not written back): the values a rounding of the fp32 dl
 * would give, without its pass.
 * Then one block adds the N row losses in a fixed order (cu_nll_mean). As on the CPU, forward
 * computes dh and dE for an upstream gradient of 1 into buffers saved on the node; backward
 * scales them by the upstream gradient u (read on the device) and adds them to h.grad and
 * E.grad: dh and dE are exact linear functions of u. A product whose input needs no gradient
 * is skipped (the CPU computes both; its backward adds only the needed one).
 */
#include "cu_loss.cuh"

#include <cuda_bf16.h>

/* row r = blockIdx.x of a chunk: nll[r], and with grad the row's dl in place (see above) */
__global__ static void __launch_bounds__(CU_LOSS_MAX_THREADS)
    head_rows(float *l, __nv_bfloat16 *l16, double *nll, const int32_t *tg, int64_t V, int32_t ignore, float inv,
              int grad) {
    const int64_t r = blockIdx.x;
    float *row = l + r * V;
    __nv_bfloat16 *row16 = l16 ? l16 + r * V : NULL; /* bf16: dl rounded there, the row left as it is */
    const int32_t t = tg[r];
    if (t == ignore) { /* the whole block leaves: no barrier is left waiting */
        if (threadIdx.x == 0) nll[r] = 0.0;
        if (grad)
            for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
                if (row16)
                    row16[j] = __float2bfloat16_rn(0.0f);
                else
                    row[j] = 0.0f;
            }
        return;
    }
    const float lt = row[t]; /* read by every thread before the barriers in cu_row_stats, written after */
    float m;
    double s;
    cu_row_stats(row, V, &m, &s);
    if (threadIdx.x == 0) nll[r] = (double)m + log(s) - (double)lt;
    if (grad) {
        const float sc = (float)(1.0 / s) * inv; /* p = exp(l - m) / s, times 1/C */
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
            float p = __fmul_rn(expf(row[j] - m), sc);
            p = j == t ? p - inv : p;
            if (row16)
                row16[j] = __float2bfloat16_rn(p);
            else
                row[j] = p;
        }
    }
}

/* dst[i] += u[0] * src[i] */
__global__ static void head_acc(float *dst, const float *src, const float *u, int64_t n) {
    const float s = u[0];
    CU_FOR(i, n) dst[i] += s * src[i];
}

/* backward: h.grad += u * dh ; E.grad += u * dE */
static void head_ce_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *h = n->in[0], *E = n->in[1];
    const float *u = n->out->grad, *dh = (const float *)n->saved, *dE = (const float *)n->aux;
    int64_t nh = gf_tensor_numel(h), ne = gf_tensor_numel(E);
    if (gf_needs_grad(h) && nh > 0) {
        head_acc<<<cu_blocks(nh, 256), 256, 0, gf_cuda_stream()>>>(h->grad, dh, u, nh);
        GF_CUDA_LAUNCHED("head_acc", 4 * 3 * nh);
    }
    if (gf_needs_grad(E) && ne > 0) {
        head_acc<<<cu_blocks(ne, 256), 256, 0, gf_cuda_stream()>>>(E->grad, dE, u, ne);
        GF_CUDA_LAUNCHED("head_acc", 4 * 3 * ne);
    }
}

static const gf_op_def head_ce_cuda = {"head_ce", GF_FAM_GEMM, head_ce_backward_cuda, 0};

gf_tensor *gf_head_ce_cuda(gf_ctx *ctx, gf_tensor *h, gf_tensor *E, const int32_t *targets, int32_t ignore_index,
                           double *nll_sum, int64_t *n_counted) {
    int64_t N = gf_tensor_rows(h), D = gf_tensor_cols(h), V = E->shape[0];
    int gh = ctx->grad_enabled && gf_needs_grad(h), gE = ctx->grad_enabled && gf_needs_grad(E), grad = gh || gE;
    int64_t cnt = cu_count_targets("head_ce", targets, N, V, ignore_index);
    float inv = cnt ? 1.0f / (float)cnt : 0.0f;
    int64_t CH = gf_cuda_chunk_bytes(0) / ((V > 0 ? V : 1) * (int64_t)sizeof(float)); /* rows of a chunk */
    CH = CH < 1 ? 1 : CH > N ? N : CH;
    double *nll = (double *)gf_cuda_arena_alloc(ctx->cuda, (size_t)N * sizeof(double)); // (N)
    float *dh = gh ? gf_cuda_floats(ctx, N * D) : NULL;                                   // (N, D)
    float *dE = gE ? (N > 0 ? gf_cuda_floats(ctx, V * D) : gf_cuda_zeros(ctx, V * D)) : NULL; // (V, D)
    if (N > 0) {
        const int32_t *tg = (const int32_t *)cu_stage(ctx, targets, (size_t)N * sizeof(int32_t)); // (N)
        float *buf = gf_cuda_floats(ctx, CH * V);                                                  // (CH, V)
        const int bf16 = ctx->precision == GF_PREC_BF16 && gf_cuda_bf16_reuse(-1);
        /* bf16: E rounded once for every product (none when it is a mirrored weight) */
        const int heldE = cu_bf16_hold(ctx, E->data, V, D, D);
        for (int64_t c0 = 0; c0 < N; c0 += CH) {
            const int64_t n = N - c0 < CH ? N - c0 : CH;
            const float *hc = h->data + c0 * D; // (n, D)
            const int heldh = gE ? cu_bf16_hold(ctx, hc, n, D, D) : 0; /* for the logits and dE */
            cu_gemm_rm(ctx, 0, 1, n, V, D, hc, D, E->data, D, 0.0f, buf, V); /* logits = h·Eᵀ */
            /* bf16: the row kernel writes dl rounded, which both products read, and no fp32 dl */
            __nv_bfloat16 *dl16 = bf16 && grad ? (__nv_bfloat16 *)cu_bf16_hold_for(ctx, buf, n, V, V) : NULL; // (n, V)
            head_rows<<<(unsigned)n, cu_row_threads(V), 0, gf_cuda_stream()>>>(buf, dl16, nll + c0, tg + c0, V,
                                                                                ignore_index, inv, grad);
            GF_CUDA_LAUNCHED("head_rows", (grad ? (dl16 ? 6 : 8) : 4) * n * V + 4 * n + 8 * n);
            if (gh) cu_gemm_rm(ctx, 0, 0, n, D, V, buf, V, E->data, D, 0.0f, dh + c0 * D, D); /* dh = dl·E */
            if (gE) cu_gemm_rm(ctx, 1, 0, V, D, n, buf, V, hc, D, c0 == 0 ? 0.0f : 1.0f, dE, D); /* dE += dlᵀ·h */
            cu_bf16_release(heldh + (dl16 != NULL));
        }
        cu_bf16_release(heldE);
    }
    gf_tensor *y = cu_loss_mean(ctx, nll, N, cnt, nll_sum); // (1)
    if (n_counted) *n_counted = cnt;
    gf_node *nd = NULL;
    if (grad) {
        gf_tensor *in[2] = {h, E};
        nd = gf_tape_record(ctx, &head_ce_cuda, y, 2, in);
    }
    if (nd) {
        nd->saved = dh;
        nd->aux = dE;
    } else {
        y->name = "head_ce";
    }
    return y;
}
