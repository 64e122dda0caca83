/* gated_lerp.cu — the Grassmann block's gate in one op on the GPU:
 *   u = [a ; b] W^T + bias,  y = σ(u) ⊙ a + (1 − σ(u)) ⊙ b
 * the CPU op is src/ops/gated_lerp.c. The product is concat_linear.cu's two GEMMs (without the
 * bias), then gate_fwd adds the bias and blends (cu_slerp, sigmoid_lerp.cu's arithmetic) in one
 * pass: the unfused chain writes the bias first (bias_rows) and the GEMMs add to it, one launch
 * more, and rounds u's sum in another order (bias + a's product + b's product against the
 * products' sum + bias), so u is the chain's within rounding, as the product of
 * add(concat_linear(a, b, W), bias). u (N, D) without the bias is saved for backward, not a
 * tensor; the bias is added again where σ(u) is recomputed.
 * Backward: the first stage of the bias gradient's column sum (cu_colsum) also stores
 * du = dL/du and adds the lerp's terms to da and db (stored where fresh), each element written
 * by the thread that adds it, then concat_linear's GEMMs on du. Kernels (besides cuBLAS's):
 * gate_fwd forward, the column sum's two backward; the unfused chain launches bias_rows and
 * sigmoid_lerp_bwd besides.
 */
#include "cu_util.cuh"

/* y = σ(u + bias) ⊙ a + (1 − σ(u + bias)) ⊙ b (bias NULL: none); u, a, b, y (N, D) */
__global__ static void gate_fwd(float *y, const float *u, const float *bias, const float *a, const float *b, int64_t n,
                                int64_t D) {
    CU_FOR(i, n) y[i] = cu_slerp(bias ? u[i] + bias[i % D] : u[i], a[i], b[i]);
}

/* f(r, c) = du[r, c], stored as it is summed (cu_colsum visits each element once), with the
 * lerp's terms of da and db (NULL: not needed; = where store_a, store_b, else +=). One thread
 * owns element (r, c) of every buffer, so a and b may share one (no __restrict__). */
struct gate_du {
    float *du, *da, *db;
    __nv_bfloat16 *du16; /* du's bf16 copy for concat_linear's products (NULL: none) */
    const float *g, *u, *bias, *a, *b;
    int64_t D;
    int store_a, store_b;
    int64_t bytes(int64_t N, int64_t C) const {
        const int64_t per = 5 + (da ? 2 - store_a : 0) + (db ? 2 - store_b : 0); /* g, u, a, b in, du out */
        return 4 * (per * N * C + (bias ? C : 0)) + (du16 ? 2 * N * C : 0);
    }
    __device__ float operator()(int64_t r, int64_t c) const {
        const int64_t i = r * D + c;
        const float w = cu_sigmoid(bias ? u[i] + bias[c] : u[i]), v = cu_slerp_dv(g[i], w, a[i], b[i]);
        du[i] = v;
        cu_bf16_put(du16, i, v);
        if (da) da[i] = (store_a ? 0.0f : da[i]) + g[i] * w;
        if (db) db[i] = (store_b ? 0.0f : db[i]) + g[i] * (1.0f - w);
        return v;
    }
};

/* du, da and db alone, where the bias needs no gradient */
__global__ static void gate_bwd(gate_du f, int64_t n) {
    CU_FOR(i, n) f(i / f.D, i % f.D);
}

static void gated_lerp_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1], *w = n->in[2], *bias = n->in[3];
    const int64_t N = gf_tensor_rows(a), D = gf_tensor_cols(a);
    float *du = gf_cuda_floats(ctx, N * D); // (N, D)
    const int need_a = gf_needs_grad(a), store_a = need_a && gf_grad_fresh(a);
    const int need_b = gf_needs_grad(b), store_b = need_b && gf_grad_fresh(b); /* a's flag is cleared first: b = a adds */
    /* bf16: du rounded as it is written, for the four products */
    const gate_du f = {du,      need_a ? a->grad : NULL, need_b ? b->grad : NULL,
                       (__nv_bfloat16 *)cu_bf16_hold_out(ctx, du, N, D, D), n->out->grad, (const float *)n->saved,
                       bias ? bias->data : NULL, a->data, b->data, D, store_a, store_b};
    if (gf_needs_grad(bias)) {
        cu_colsum(ctx, bias->grad, N, D, gf_grad_fresh(bias), f);
    } else {
        gate_bwd<<<cu_blocks(N * D, 256), 256, 0, gf_cuda_stream()>>>(f, N * D);
        GF_CUDA_LAUNCHED("gate_bwd", f.bytes(N, D));
    }
    cu_concat_linear_grads(ctx, a, b, w, du);
    cu_bf16_release(f.du16 != NULL);
}

static const gf_op_def gated_lerp_cuda = {"gated_lerp", GF_FAM_GEMM, gated_lerp_backward_cuda, 1};

/* the entry has checked the shapes */
gf_tensor *gf_gated_lerp_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias) {
    const int64_t N = gf_tensor_rows(a), D = gf_tensor_cols(a);
    float *u = gf_cuda_floats(ctx, N * D); // (N, D) the product without the bias, saved
    cu_linear_cols_into(ctx, a, w, 0, NULL, 0, u);
    cu_linear_cols_into(ctx, b, w, D, NULL, 1, u);
    gf_tensor *y = cu_tensor_like(ctx, a); // (N, D)
    gate_fwd<<<cu_blocks(N * D, 256), 256, 0, gf_cuda_stream()>>>(y->data, u, bias ? bias->data : NULL, a->data,
                                                                  b->data, N * D, D);
    GF_CUDA_LAUNCHED("gate_fwd", 4 * (4 * N * D + (bias ? D : 0))); /* u, a, b (and the bias) in, y out */
    gf_tensor *in[4] = {a, b, w, bias};
    gf_node *n = gf_tape_record(ctx, &gated_lerp_cuda, y, 4, in);
    if (n) n->saved = u;
    return y;
}
