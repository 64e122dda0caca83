/* linear_dropout_add_layernorm.cu — a post-LN residual whose branch is a linear layer, on the GPU:
 * f = h W^T + b, y = LayerNorm(x + dropout(f, p)); the CPU op is
 * src/ops/linear_dropout_add_layernorm.c. The product is linear.cu's GEMM (cu_linear_into
 * without the bias), then dropout_add_layernorm.cu's dal_fwd adds the bias to each element of f
 * as it reads it (cu_dal_forward): the unfused chain writes the bias first (bias_rows) and the
 * GEMM adds the product to it, one launch more; either way the element is one rounding of
 * product + bias, so the bits are the chain's where the GEMM keeps its sum whole (as
 * linear_gelu.cu's). f (N, D), without the bias, is scratch, not saved.
 * Backward: dal_bwd stores df = dL/df (cu_dal_backward), then the bias gradient's column sum of
 * df and linear's GEMMs on it. Kernels (besides cuBLAS's): dal_fwd forward; dal_bwd, the gain's
 * and shift's sums and the bias's sum backward, as the chain's; the chain launches bias_rows
 * besides.
 */
#include "cu_ln.cuh"

static void linear_dropout_add_layernorm_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *h = n->in[1], *w = n->in[2], *b = n->in[3];
    const int64_t N = gf_tensor_rows(x), D = gf_tensor_cols(x);
    float *df = gf_cuda_floats(ctx, N * D); // (N, D)
    float *dx = NULL;
    int dx_fresh = 0;
    if (gf_needs_grad(x)) { dx = x->grad; dx_fresh = gf_grad_fresh(x); }
    /* bf16: df rounded as dal_bwd writes it, for both of linear's products */
    __nv_bfloat16 *df16 = (__nv_bfloat16 *)cu_bf16_hold_out(ctx, df, N, D, D);
    cu_dal_backward(ctx, n, dx, dx_fresh, df, 1, df16, n->in[4], n->in[5], N, D);
    cu_linear_grads(ctx, h, w, df);
    cu_bf16_release(df16 != NULL);
    if (gf_needs_grad(b)) cu_colsum(ctx, b->grad, N, D, gf_grad_fresh(b), cu_rows{df, D});
}

static const gf_op_def linear_dropout_add_layernorm_cuda = {"linear_dropout_add_layernorm", GF_FAM_GEMM,
                                                            linear_dropout_add_layernorm_backward_cuda, 1};

/* the entry has checked the shapes, p, ctx->rng and the rows */
gf_tensor *gf_linear_dropout_add_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *h, gf_tensor *w, gf_tensor *b,
                                                float p, gf_tensor *gamma, gf_tensor *beta, float eps) {
    float *f = gf_cuda_floats(ctx, gf_tensor_numel(x)); // (N, D) the branch without the bias
    cu_linear_into(ctx, h, w, NULL, f);
    gf_tensor *in[6] = {x, h, w, b, gamma, beta};
    return cu_dal_forward(ctx, &linear_dropout_add_layernorm_cuda, x, f, b ? b->data : NULL, p, gamma, beta, eps, 6,
                          in);
}
