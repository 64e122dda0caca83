/* op_util.h — helpers shared by op files (internal). */
#ifndef GF_OP_UTIL_H
#define GF_OP_UTIL_H

#include "gflow/ops.h"
#include "gflow/threads.h"
#include <limits.h>
#include <string.h>

/* Forward-time profiling for `gflow bench` (no cost when ctx->profile is 0). */
static inline double gf_prof_begin(const gf_ctx *ctx) { return ctx->profile ? gf_time_now() : 0.0; }
static inline void gf_prof_end(gf_ctx *ctx, gf_op_family fam, double t0) {
    if (ctx->profile) { ctx->prof.fwd_s[fam] += gf_time_now() - t0; ctx->prof.calls[fam]++; }
}

/* New tensor with x's shape but last dim `cols`. */
gf_tensor *gf_tensor_like_cols(gf_ctx *ctx, const gf_tensor *x, int64_t cols);
gf_tensor *gf_tensor_like(gf_ctx *ctx, const gf_tensor *x);

/* dst[c] += sum_r x[r, c] * (w ? w[r, c] : 1) for r < N, c < C.
 * The one broadcast-reduction helper (bias grads, LayerNorm gain/shift, broadcast add/mul).
 * Parallel over row blocks with per-thread partials added in thread order: reproducible
 * for a fixed thread count. Scratch comes from the step arena. */
void gf_colsum_acc(gf_ctx *ctx, float *dst, const float *x, const float *w, int64_t N, int64_t C);

/* check that b broadcasts onto a: same shape, or b's shape equals a's trailing dims */
int gf_broadcastable(const gf_tensor *a, const gf_tensor *b);

static inline int gf_blas_int(int64_t v) {
    GF_ASSERT(v >= 0 && v <= INT_MAX, "GEMM dimension %lld exceeds the BLAS int range", (long long)v);
    return (int)v;
}

#endif
