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

/* rows of the column sums at a time (colsum_block): a column's running sum stays in a register
 * across them, so the partials are read and written once per block, not once per row */
#define COLSUM_ROWS 8

/* p[c] += x[r, c] (⊙ w[r, c]) for r < n (n <= COLSUM_ROWS), added row after row in order, so
 * every column sums in the order of one row at a time */
GF_KERNEL_CLONES static void colsum_block(float *restrict p, const float *restrict x, const float *restrict w,
                                          int64_t n, int64_t C) {
    if (n == COLSUM_ROWS && !w) {
        const float *restrict x0 = x, *restrict x1 = x0 + C, *restrict x2 = x1 + C, *restrict x3 = x2 + C,
                              *restrict x4 = x3 + C, *restrict x5 = x4 + C, *restrict x6 = x5 + C, *restrict x7 = x6 + C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) {
            p[c] = p[c] + x0[c] + x1[c] + x2[c] + x3[c] + x4[c] + x5[c] + x6[c] + x7[c];
        }
        return;
    }
    for (int64_t r = 0; r < n; r++) {
        const float *restrict xr = x + r * C;
        if (w) {
            const float *restrict wr = w + r * C;
#pragma omp simd
            for (int64_t c = 0; c < C; c++) p[c] += xr[c] * wr[c];
        } else {
#pragma omp simd
            for (int64_t c = 0; c < C; c++) p[c] += xr[c];
        }
    }
}

/* rows [lo, hi) into p, COLSUM_ROWS at a time; fill (when given) writes a block's rows of x
 * before they are summed */
static void colsum_rows(float *p, const float *x, const float *w, int64_t lo, int64_t hi, int64_t C,
                        void (*fill)(void *, int64_t), void *arg) {
    for (int64_t r = lo; r < hi; r += COLSUM_ROWS) {
        int64_t n = hi - r < COLSUM_ROWS ? hi - r : COLSUM_ROWS;
        for (int64_t k = 0; fill && k < n; k++) fill(arg, r + k);
        colsum_block(p, x + r * C, w ? w + r * C : NULL, n, C);
    }
}

/* gf_colsum_acc and gf_colsum_fill */
static void colsum(gf_ctx *ctx, float *dst, const float *x, const float *w, int64_t N, int64_t C,
                   void (*fill)(void *, int64_t), void *arg) {
    int T = omp_get_max_threads();
    if (N < 64 || T == 1) {
        colsum_rows(dst, x, w, 0, N, C, fill, arg);
        return;
    }
    float *part = gf_arena_calloc(&ctx->arena, (size_t)T * (size_t)C * sizeof(float)); // (T, C)
    int nt = 1;
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
#pragma omp single
        nt = n;
        colsum_rows(part + (int64_t)t * C, x, w, N * t / n, N * (t + 1) / n, C, fill, arg);
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
