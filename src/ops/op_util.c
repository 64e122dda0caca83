/* op_util.c — shared op helpers; see op_util.h. */
#include "op_util.h"
#include <omp.h>

gf_tensor *gf_tensor_like_cols(gf_ctx *ctx, const gf_tensor *x, int64_t cols) {
    int64_t s[GF_MAX_DIMS];
    for (int32_t i = 0; i < x->ndim; i++) s[i] = x->shape[i];
    s[x->ndim - 1] = cols;
    return gf_tensor_new(ctx, x->ndim, s);
}

gf_tensor *gf_tensor_like(gf_ctx *ctx, const gf_tensor *x) {
    return gf_tensor_new(ctx, x->ndim, x->shape);
}

/* gf_colsum_acc and gf_colsum_fill: fill (when given) writes row r of x before it is summed */
static void colsum(gf_ctx *ctx, float *dst, const float *x, const float *w, int64_t N, int64_t C,
                   void (*fill)(void *, int64_t), void *arg) {
    int T = omp_get_max_threads();
    if (N < 64 || T == 1) {
        for (int64_t r = 0; r < N; r++) {
            if (fill) fill(arg, r);
            for (int64_t c = 0; c < C; c++) dst[c] += x[r * C + c] * (w ? w[r * C + c] : 1.0f);
        }
        return;
    }
    float *part = gf_arena_calloc(&ctx->arena, (size_t)T * (size_t)C * sizeof(float)); // (T, C)
    int nt = 1;
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
#pragma omp single
        nt = n;
        int64_t lo = N * t / n, hi = N * (t + 1) / n;
        float *p = part + (int64_t)t * C;
        for (int64_t r = lo; r < hi; r++) {
            if (fill) fill(arg, r);
            const float *xr = x + r * C;
            if (w) {
                const float *wr = w + r * C;
                for (int64_t c = 0; c < C; c++) p[c] += xr[c] * wr[c];
            } else {
                for (int64_t c = 0; c < C; c++) p[c] += xr[c];
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int64_t c = 0; c < C; c++) dst[c] += part[(int64_t)t * C + c];
}

void gf_colsum_acc(gf_ctx *ctx, float *dst, const float *x, const float *w, int64_t N, int64_t C) {
    colsum(ctx, dst, x, w, N, C, NULL, NULL);
}

void gf_colsum_fill(gf_ctx *ctx, float *dst, float *x, int64_t N, int64_t C, void (*fill)(void *arg, int64_t r),
                    void *arg) {
    colsum(ctx, dst, x, NULL, N, C, fill, arg);
}

int gf_broadcastable(const gf_tensor *a, const gf_tensor *b) {
    if (b->ndim > a->ndim) return 0;
    for (int32_t i = 0; i < b->ndim; i++)
        if (b->shape[b->ndim - 1 - i] != a->shape[a->ndim - 1 - i]) return 0;
    return 1;
}
