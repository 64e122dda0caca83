/* backend_cpu.c — the CPU's ops (backend_ops.h): the op entries themselves, which run their host
 * code for host inputs. One line per op of gflow/ops.def. */
#include "backend_ops.h"

const gf_backend_ops gf_backend_ops_cpu = {
    .linear = gf_linear,
    .add = gf_add,
    .embedding = gf_embedding,
    .layernorm = gf_layernorm,
    .gelu = gf_gelu,
    .sigmoid = gf_sigmoid,
    .cross_entropy = gf_cross_entropy,
    .dropout = gf_dropout,
    .concat = gf_concat,
    .lerp = gf_lerp,
    .sigmoid_lerp = gf_sigmoid_lerp,
    .dropout_add_layernorm = gf_dropout_add_layernorm,
    .linear_gelu = gf_linear_gelu,
    .concat_linear = gf_concat_linear,
    .gated_lerp = gf_gated_lerp,
    .linear_dropout_add_layernorm = gf_linear_dropout_add_layernorm,
    .layernorm_dropout = gf_layernorm_dropout,
    .plucker_mix = gf_plucker_mix,
    .attention = gf_attention,
    .head_ce = gf_head_ce,
    .plucker_window = gf_plucker_window,
    .masked_mean = gf_masked_mean,
    .pair_match = gf_pair_match,
    .embedding_feed = gf_embedding_feed,
    .gemm_bf16_path = gf_gemm_bf16_path,
};
