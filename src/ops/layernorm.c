/* layernorm.c — y = (x - mean) * rstd * gamma + beta over the last dim D.
 * rstd = 1 / sqrt(var + eps) with the biased variance and eps inside the sqrt (PyTorch).
 * Saved for backward: mean and rstd per row (N each); mean/var in double for stability.
 */
#include "op_util.h"
#include <math.h>
#include <omp.h>

/* a row's input gradient dxr (D) to its destinations, element off = r * D onwards (gf_ln_dx) */
static inline void ln_row_out(const gf_ln_dx *o, int64_t off, const float *restrict dxr, int64_t D) {
    if (o->dx) {
        float *restrict dx = o->dx + off;
        if (o->dx_fresh) memcpy(dx, dxr, (size_t)D * sizeof(float));
        else {
#pragma omp simd
            for (int64_t c = 0; c < D; c++) dx[c] += dxr[c];
        }
    }
    if (!o->df) return;
    float *restrict df = o->df + off;
    const uint8_t *kr = o->keep ? o->keep + off : NULL;
    const float sc = o->scale;
    if (o->df16 && kr) { /* stored (df_fresh), with its bits while the row is in cache */
        uint16_t *restrict d16 = o->df16 + off;
#pragma omp simd
        for (int64_t c = 0; c < D; c++) {
            df[c] = gf_dropout_kept(dxr[c] * sc, kr[c]);
            d16[c] = gf_bf16_of(df[c]);
        }
    } else if (o->df16) {
        uint16_t *restrict d16 = o->df16 + off;
#pragma omp simd
        for (int64_t c = 0; c < D; c++) {
            df[c] = dxr[c];
            d16[c] = gf_bf16_of(dxr[c]);
        }
    } else if (kr && o->df_fresh) {
#pragma omp simd
        for (int64_t c = 0; c < D; c++) df[c] = gf_dropout_kept(dxr[c] * sc, kr[c]);
    } else if (kr) {
#pragma omp simd
        for (int64_t c = 0; c < D; c++) df[c] += gf_dropout_kept(dxr[c] * sc, kr[c]);
    } else if (o->df_fresh) {
        memcpy(df, dxr, (size_t)D * sizeof(float));
    } else {
#pragma omp simd
        for (int64_t c = 0; c < D; c++) df[c] += dxr[c];
    }
}

/* backward, per row with xhat = (x - mean) * rstd and dxhat = dy ⊙ gamma:
 *   dx     += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat ⊙ xhat))
 *   dgamma += sum_rows dy ⊙ xhat ;  dbeta += sum_rows dy
 * The gain/shift sums use per-thread partials over static row blocks, added in thread order
 * (the gf_colsum_acc scheme, reproducible for a fixed thread count), accumulated in the same
 * pass as dx, so no (N, D) xhat buffer is written and read back. The row's dx goes where `o`
 * says (op_util.h): the fused LN(x + dropout(f)) hands it to both of its inputs. */
void gf_layernorm_backward_rows(gf_ctx *ctx, const float *x, const float *g, const float *stats, gf_tensor *gamma,
                                gf_tensor *beta, int64_t N, int64_t D, const gf_ln_dx *o) {
    const float *gm = gamma->data;
    int need_g = gf_needs_grad(gamma), need_b = gf_needs_grad(beta), need_x = o->dx || o->df;
    int joint = need_x && need_g && need_b; // training: the gain's and shift's partials join dx's pass
    int T = omp_get_max_threads(), nt = 1;
    float *part = (need_g || need_b) ? gf_arena_calloc(&ctx->arena, (size_t)T * 2 * (size_t)D * sizeof(float))
                                     : NULL; // (T, 2, D): gamma, beta partials
    float *rows = need_x ? gf_arena_floats(&ctx->arena, (int64_t)T * D) : NULL; // (T, D): a row's dx
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
#pragma omp single
        nt = nth;
        int64_t lo = N * t / nth, hi = N * (t + 1) / nth;
        float *pg = part ? part + (int64_t)t * 2 * D : NULL, *pb = pg ? pg + D : NULL;
        float *restrict dxr = rows ? rows + (int64_t)t * D : NULL;
        for (int64_t r = lo; r < hi; r++) {
            const float *restrict xr = x + r * D, *restrict gr = g + r * D;
            const float mean = stats[2 * r], rstd = stats[2 * r + 1];
            if (need_g && !joint) {
#pragma omp simd
                for (int64_t c = 0; c < D; c++) pg[c] += gr[c] * ((xr[c] - mean) * rstd);
            }
            if (need_b && !joint) {
#pragma omp simd
                for (int64_t c = 0; c < D; c++) pb[c] += gr[c];
            }
            if (!need_x) continue;
            double s1 = 0.0, s2 = 0.0;
#pragma omp simd reduction(+ : s1, s2)
            for (int64_t c = 0; c < D; c++) {
                float xh = (xr[c] - mean) * rstd;
                float dxh = gr[c] * gm[c];
                s1 += dxh;
                s2 += (double)dxh * xh;
            }
            float m1 = (float)(s1 / (double)D), m2 = (float)(s2 / (double)D);
            if (joint) {
#pragma omp simd
                for (int64_t c = 0; c < D; c++) {
                    float xh = (xr[c] - mean) * rstd;
                    pg[c] += gr[c] * xh;
                    pb[c] += gr[c];
                    dxr[c] = rstd * (gr[c] * gm[c] - m1 - xh * m2);
                }
            } else {
#pragma omp simd
                for (int64_t c = 0; c < D; c++) {
                    float xh = (xr[c] - mean) * rstd;
                    dxr[c] = rstd * (gr[c] * gm[c] - m1 - xh * m2);
                }
            }
            ln_row_out(o, r * D, dxr, D);
        }
    }
    for (int t = 0; t < nt && part; t++) {
        const float *pg = part + (int64_t)t * 2 * D, *pb = pg + D;
        if (need_g)
            for (int64_t c = 0; c < D; c++) gamma->grad[c] += pg[c];
        if (need_b)
            for (int64_t c = 0; c < D; c++) beta->grad[c] += pb[c];
    }
}

/* stores into a fresh dx, so the tape need not zero it (gf_ln_dx_of) */
static void layernorm_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0];
    gf_ln_dx o = gf_ln_dx_of(n);
    gf_layernorm_backward_rows(ctx, x->data, n->out->grad, n->saved, n->in[1], n->in[2], gf_tensor_rows(x),
                               gf_tensor_cols(x), &o);
}

gf_tensor *gf_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps) {
    double t0 = gf_prof_begin(ctx);
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    GF_ASSERT(gamma->ndim == 1 && gamma->shape[0] == D && beta->ndim == 1 && beta->shape[0] == D,
              "layernorm %s: gain/shift must be [%lld]", gamma->name ? gamma->name : "?", (long long)D);
    gf_tensor *in[3] = {x, gamma, beta};
    const gf_backend_ops *dev = gf_op_backend("layernorm", 3, in);
    if (dev) return dev->layernorm(ctx, x, gamma, beta, eps);
    gf_tensor *y = gf_tensor_like(ctx, x);
    uint16_t *y16 = gf_gemm_round_into(ctx, y->data, N, D); // (N, D) y's bits for the products reading it, or NULL
    float *stats = gf_arena_floats(&ctx->arena, 2 * N); // (N, 2)
    const float *gm = gamma->data, *bt = beta->data;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        gf_layernorm_row(x->data + r * D, gm, bt, D, eps, y->data + r * D, stats + 2 * r);
        if (y16) gf_bf16_row(y16 + r * D, y->data + r * D, D);
    }
    gf_node *n = gf_tape_record(ctx, &gf_op_layernorm, y, 3, in);
    if (n) n->saved = stats;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_layernorm = {"layernorm", GF_FAM_ELEMWISE, layernorm_backward, 1};
