/* backend_cuda.c — the CUDA backend's ops (../backend_ops.h): each op's twin src/ops/cuda/<op>.cu.
 * One line per op of gflow/ops.def. */
#include "../backend_ops.h"
#include "cuda_ops.h"

static const char *cuda_gemm_bf16_path(void) { return "cuBLAS GemmEx, bf16 tensor cores"; }

const gf_backend_ops gf_backend_ops_cuda = {
    .linear = gf_linear_cuda,
    .add = gf_add_cuda,
    .embedding = gf_embedding_cuda,
    .layernorm = gf_layernorm_cuda,
    .gelu = gf_gelu_cuda,
    .sigmoid = gf_sigmoid_cuda,
    .cross_entropy = gf_cross_entropy_cuda,
    .dropout = gf_dropout_cuda,
    .concat = gf_concat_cuda,
    .lerp = gf_lerp_cuda,
    .sigmoid_lerp = gf_sigmoid_lerp_cuda,
    .dropout_add_layernorm = gf_dropout_add_layernorm_cuda,
    .linear_gelu = gf_linear_gelu_cuda,
    .concat_linear = gf_concat_linear_cuda,
    .gated_lerp = gf_gated_lerp_cuda,
    .linear_dropout_add_layernorm = gf_linear_dropout_add_layernorm_cuda,
    .layernorm_dropout = gf_layernorm_dropout_cuda,
    .plucker_mix = gf_plucker_mix_cuda,
    .attention = gf_attention_cuda,
    .head_ce = gf_head_ce_cuda,
    .plucker_window = gf_plucker_window_cuda,
    .masked_mean = gf_masked_mean_cuda,
    .pair_match = gf_pair_match_cuda,
    .embedding_feed = gf_embedding_feed_cuda,
    .gemm_bf16_path = cuda_gemm_bf16_path,
};
