/* cuda_ops.h — the CUDA twins of the op entry functions (internal to src/ops).
 *
 * src/ops/cuda/<op>.cu defines gf_<op>_cuda with the signature of its CPU entry gf_<op>; the CPU
 * entry (src/ops/<op>.c) checks the shapes, then hands over when its inputs are on the GPU
 * (gf_op_device in op_util.h). A build without CUDA compiles no .cu file: there these names
 * expand to an abort that cannot be reached (gf_op_device has already refused a GPU tensor).
 * Adding a CUDA op: its .cu file, its line here (both branches), its name in src/ops/meson.build,
 * the dispatch line in the CPU entry, its forward and backward test in tests/cuda/.
 */
#ifndef GF_CUDA_OPS_H
#define GF_CUDA_OPS_H

#include "gflow/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef GF_HAVE_CUDA
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
gf_tensor *gf_concat_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
gf_tensor *gf_dropout_cuda(gf_ctx *ctx, gf_tensor *x, float p);
gf_tensor *gf_masked_mean_cuda(gf_ctx *ctx, gf_tensor *x, const float *mask);
gf_tensor *gf_pair_match_cuda(gf_ctx *ctx, gf_tensor *x);
gf_tensor *gf_attention_cuda(gf_ctx *ctx, gf_tensor *qkv, int64_t n_heads, int causal, const uint8_t *key_mask);
#else
static inline gf_tensor *gf_no_cuda_op(const char *op) {
    gf_abort(__FILE__, __LINE__, "%s: a GPU tensor in a build without CUDA", op);
}
#define gf_linear_cuda(...) gf_no_cuda_op("linear")
#define gf_add_cuda(...) gf_no_cuda_op("add")
#define gf_embedding_cuda(...) gf_no_cuda_op("embedding")
/* its arguments evaluated, so the caller's count as used */
#define gf_embedding_feed_cuda(ctx, table, ids, cnt)                                                               \
    ((void)(ctx), (void)(table), (void)(ids), (void)(cnt), (void)gf_no_cuda_op("embedding"))
#define gf_layernorm_cuda(...) gf_no_cuda_op("layernorm")
#define gf_gelu_cuda(...) gf_no_cuda_op("gelu")
#define gf_plucker_mix_cuda(...) gf_no_cuda_op("plucker_mix")
#define gf_plucker_window_cuda(...) gf_no_cuda_op("plucker_window")
#define gf_cross_entropy_cuda(...) gf_no_cuda_op("cross_entropy")
#define gf_head_ce_cuda(...) gf_no_cuda_op("head_ce")
#define gf_sigmoid_cuda(...) gf_no_cuda_op("sigmoid")
#define gf_lerp_cuda(...) gf_no_cuda_op("lerp")
#define gf_sigmoid_lerp_cuda(...) gf_no_cuda_op("sigmoid_lerp")
#define gf_dropout_add_layernorm_cuda(...) gf_no_cuda_op("dropout_add_layernorm")
#define gf_concat_cuda(...) gf_no_cuda_op("concat")
#define gf_dropout_cuda(...) gf_no_cuda_op("dropout")
#define gf_masked_mean_cuda(...) gf_no_cuda_op("masked_mean")
#define gf_pair_match_cuda(...) gf_no_cuda_op("pair_match")
#define gf_attention_cuda(...) gf_no_cuda_op("attention")
#endif

#ifdef __cplusplus
}
#endif

#endif
