/* linear_dropout_add_layernorm.c — a post-LN residual whose branch is a linear layer, in one op
 * (the FFN's fc2, the Transformer's attention projection):
 *   f (N, D) = h (N, IN) · W^T + b,  y = LayerNorm(x + dropout(f, p))
 * = gf_dropout_add_layernorm(x, gf_linear(h, w, b), p, gamma, beta) with the same arithmetic in
 * the same order: the product is linear.c's (gf_linear_into: gf_gemm_bias, the bias added by
 * the product), the rest dropout_add_layernorm.c's passes, so the bits are the chain's. f is no
 * tensor; backward gives df = dL/df (dropout_add_layernorm's, stored), then the bias gradient
 * Σ_rows df and linear's two GEMMs on df. The GPU op adds the bias in its LayerNorm kernel
 * instead (src/ops/cuda/linear_dropout_add_layernorm.cu). In `gflow bench` the GEMMs count as
 * gemm, the rest as elementwise.
 */
#include "op_util.h"

/* backward: dx += ds, df = keep ? ds / (1 - p) : 0 (in bf16 with its bits for the products), the
 * gain's and shift's sums (gf_dal_backward); db += Σ_rows df; dh += df · W; dW += df^T · h
 * (gf_linear_grads) */
static void linear_dropout_add_layernorm_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3];
    int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    double t0 = gf_prof_begin(ctx);
    float *df = gf_arena_floats(&ctx->arena, N * D); // (N, D)
    /* df's bf16 bits written with it, for the products that read df as A (gf_gemm_round_into) */
    gf_ln_dx o = {.df = df, .df_fresh = 1,
                  .df16 = gf_needs_grad(h) || gf_needs_grad(w) ? gf_gemm_round_into(ctx, df, N, D) : NULL};
    if (gf_needs_grad(x)) { o.dx = x->grad; o.dx_fresh = gf_grad_fresh(x); }
    gf_dal_backward(ctx, n, &o, n->in[4], n->in[5], N, D);
    gf_prof_bwd_as(ctx, GF_FAM_GEMM, GF_FAM_ELEMWISE, t0);
    gf_linear_grads(ctx, h, w, df);
    if (gf_needs_grad(b)) {
        if (gf_grad_fresh(b)) memset(b->grad, 0, (size_t)D * sizeof(float));
        gf_colsum_acc(ctx, b->grad, df, NULL, N, D);
    }
}

gf_tensor *gf_linear_dropout_add_layernorm(gf_ctx *ctx, gf_tensor *x, gf_tensor *h, gf_tensor *w, gf_tensor *b,
                                           float p, gf_tensor *gamma, gf_tensor *beta, float eps) {
    double t0 = gf_prof_begin(ctx);
    gf_linear_check("linear_dropout_add_layernorm", h, w, b);
    GF_ASSERT(gf_tensor_rows(h) == gf_tensor_rows(x) && w->shape[0] == gf_tensor_cols(x),
              "linear_dropout_add_layernorm: the residual has %lld rows of %lld, the branch %lld rows of %lld (weight %s)",
              (long long)gf_tensor_rows(x), (long long)gf_tensor_cols(x), (long long)gf_tensor_rows(h),
              (long long)w->shape[0], w->name ? w->name : "?");
    gf_dal_check("linear_dropout_add_layernorm", ctx, x, p, gamma, beta);
    gf_tensor *in[6] = {x, h, w, b, gamma, beta};
    const gf_backend_ops *dev = gf_op_backend("linear_dropout_add_layernorm", 6, in);
    if (dev) return dev->linear_dropout_add_layernorm(ctx, x, h, w, b, p, gamma, beta, eps);
    float *f = gf_arena_floats(&ctx->arena, gf_tensor_numel(x)); // (N, D) the branch
    gf_linear_into(ctx, h, w, b, f);
    gf_prof_end(ctx, GF_FAM_GEMM, t0);
    double t1 = gf_prof_begin(ctx);
    gf_tensor *y;
    gf_dal_forward(ctx, &gf_op_linear_dropout_add_layernorm, x, f, p, gamma, beta, eps, 6, in, &y);
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t1);
    return y;
}

const gf_op_def gf_op_linear_dropout_add_layernorm = {"linear_dropout_add_layernorm", GF_FAM_GEMM,
                                                      linear_dropout_add_layernorm_backward, 1};
