/* cuda_ops.h — the CUDA twins of the op entry functions (internal to src/ops).
 *
 * src/ops/cuda/<op>.cu defines gf_<op>_cuda with the signature of its CPU entry gf_<op>; the CUDA
 * backend's table (backend_cuda.c beside it) registers it, and the CPU entry (src/ops/<op>.c)
 * checks the shapes, then hands inputs on the GPU to that table (gf_op_backend in op_util.h).
 * Nothing else calls these (tests/arch/check_backend.py). A build without CUDA compiles neither
 * the .cu files nor the table. Adding a CUDA op: its .cu file, its line here, its name in
 * src/ops/meson.build, its line in backend_cuda.c, its forward and backward test in tests/cuda/.
 */
#ifndef GF_CUDA_OPS_H
#define GF_CUDA_OPS_H

#include "gflow/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

gf_tensor *gf_linear_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b);
gf_tensor *gf_add_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
gf_tensor *gf_embedding_cuda(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int32_t ids_ndim,
                             const int64_t *ids_shape);
void gf_embedding_feed_cuda(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int64_t cnt);
gf_tensor *gf_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps);
gf_tensor *gf_gelu_cuda(gf_ctx *ctx, gf_tensor *x);
gf_tensor *gf_plucker_mix_cuda(gf_ctx *ctx, gf_tensor *z, gf_tensor *w, gf_tensor *b, const int64_t *offsets,
                               int32_t n_offsets, float eps, int normalize);
gf_tensor *gf_plucker_window_cuda(gf_ctx *ctx, gf_tensor *z, const float *mask, gf_tensor *w, gf_tensor *b,
                                  int64_t window, int64_t stride, int64_t heads, float eps, int normalize);
gf_tensor *gf_cross_entropy_cuda(gf_ctx *ctx, gf_tensor *logits, const int32_t *targets, int32_t ignore_index,
                                 double *nll_sum, int64_t *n_counted);
gf_tensor *gf_head_ce_cuda(gf_ctx *ctx, gf_tensor *h, gf_tensor *E, const int32_t *targets, int32_t ignore_index,
                           double *nll_sum, int64_t *n_counted);
gf_tensor *gf_sigmoid_cuda(gf_ctx *ctx, gf_tensor *x);
gf_tensor *gf_lerp_cuda(gf_ctx *ctx, gf_tensor *alpha, gf_tensor *a, gf_tensor *b, float alpha_const);
gf_tensor *gf_sigmoid_lerp_cuda(gf_ctx *ctx, gf_tensor *u, gf_tensor *a, gf_tensor *b);
gf_tensor *gf_dropout_add_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *f, float p, gf_tensor *gamma,
                                         gf_tensor *beta, float eps);
gf_tensor *gf_linear_gelu_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b);
gf_tensor *gf_concat_linear_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias);
gf_tensor *gf_gated_lerp_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias);
gf_tensor *gf_linear_dropout_add_layernorm_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *h, gf_tensor *w, gf_tensor *b,
                                                float p, gf_tensor *gamma, gf_tensor *beta, float eps);
gf_tensor *gf_layernorm_dropout_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *gamma, gf_tensor *beta, float eps, float p);
gf_tensor *gf_concat_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
gf_tensor *gf_dropout_cuda(gf_ctx *ctx, gf_tensor *x, float p);
gf_tensor *gf_masked_mean_cuda(gf_ctx *ctx, gf_tensor *x, const float *mask);
gf_tensor *gf_pair_match_cuda(gf_ctx *ctx, gf_tensor *x);
gf_tensor *gf_attention_cuda(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, int causal, const uint8_t *key_mask);

#ifdef __cplusplus
}
#endif

#endif
