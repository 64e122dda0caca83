/* linear_gelu.cu — a linear layer and its GELU in one op on the GPU: h = x W^T + b, y = GELU(h);
 * the CPU op is src/ops/linear_gelu.c. The product is linear.cu's GEMM (cu_linear_into without
 * the bias), then linear_gelu_fwd adds the bias and applies GELU (cu_gelu, gelu.cu's) in one
 * pass: the unfused chain writes the bias first (bias_rows) and the GEMM adds the product to
 * it, one launch more. Either way the element is one rounding of product + bias, so the bits are
 * the chain's where the GEMM keeps its sum whole (a GEMM that splits the inner dimension and adds
 * each part to the output adds the bias at another point). h (N, OUT), the biased
 * pre-activation, is saved for backward, not a tensor.
 * Backward: the first stage of the bias gradient's column sum (cu_colsum) also stores
 * dh = dy ⊙ GELU'(h), each element written by the thread that adds it, then linear's GEMMs on dh.
 * Kernels (besides cuBLAS's): linear_gelu_fwd forward, the column sum's two backward; the
 * unfused chain launches bias_rows and gelu_bwd besides.
 */
#include "cu_util.cuh"

/* h += b (b NULL: none), y = GELU(h); h (N, OUT); y16: y's bf16 copy (NULL: none) */
__global__ static void linear_gelu_fwd(float *y, __nv_bfloat16 *y16, float *h, const float *b, int64_t n, int64_t OUT) {
    CU_FOR(i, n) {
        const float v = b ? h[i] + b[i % OUT] : h[i];
        if (b) h[i] = v;
        y[i] = cu_gelu(v);
        cu_bf16_put(y16, i, y[i]);
    }
}

/* f(r, c) = dh[r, c] = dy[r, c] * GELU'(h[r, c]), stored as it is summed (cu_colsum visits each
 * element once) */
struct gelu_dh {
    float *dh;
    __nv_bfloat16 *dh16; /* dh's bf16 copy for linear's products (NULL: none) */
    const float *dy, *h;
    int64_t C;
    int64_t bytes(int64_t N, int64_t C_) const { return (dh16 ? 14 : 12) * N * C_; }
    __device__ float operator()(int64_t r, int64_t c) const {
        const int64_t i = r * C + c;
        const float v = dy[i] * cu_gelu_slope(h[i]);
        dh[i] = v;
        cu_bf16_put(dh16, i, v);
        return v;
    }
};

/* dh alone, where the bias needs no gradient */
__global__ static void linear_gelu_dh(gelu_dh f, int64_t n) {
    CU_FOR(i, n) f(i / f.C, i % f.C);
}

static void linear_gelu_backward_cuda(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t N = gf_tensor_rows(x), OUT = w->shape[0];
    const float *dy = n->out->grad, *h = (const float *)n->saved; // (N, OUT) each
    float *dh = gf_cuda_floats(ctx, N * OUT);                       // (N, OUT)
    /* bf16: dh rounded as it is written, for both of linear's products */
    const gelu_dh f = {dh, (__nv_bfloat16 *)cu_bf16_hold_out(ctx, dh, N, OUT, OUT), dy, h, OUT};
    if (gf_needs_grad(b)) {
        cu_colsum(ctx, b->grad, N, OUT, gf_grad_fresh(b), f);
    } else {
        linear_gelu_dh<<<cu_blocks(N * OUT, 256), 256, 0, gf_cuda_stream()>>>(f, N * OUT);
        GF_CUDA_LAUNCHED("linear_gelu_dh", f.bytes(N, OUT));
    }
    cu_linear_grads(ctx, x, w, dh);
    cu_bf16_release(f.dh16 != NULL);
}

static const gf_op_def linear_gelu_cuda = {"linear_gelu", GF_FAM_GEMM, linear_gelu_backward_cuda, 1};

/* the entry has checked the shapes */
gf_tensor *gf_linear_gelu_cuda(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b) {
    int64_t N = gf_tensor_rows(x), OUT = w->shape[0];
    float *h = gf_cuda_floats(ctx, N * OUT); // (N, OUT) the pre-activation, saved
    cu_linear_into(ctx, x, w, NULL, h);
    gf_tensor *y = cu_tensor_like_cols(ctx, x, OUT); // (N, OUT)
    /* bf16: y rounded as it is written, for the next product (fc2) and its weight gradient */
    __nv_bfloat16 *y16 = (__nv_bfloat16 *)cu_bf16_keep_out(ctx, y->data, N, OUT, OUT);
    linear_gelu_fwd<<<cu_blocks(N * OUT, 256), 256, 0, gf_cuda_stream()>>>(y->data, y16, h, b ? b->data : NULL,
                                                                           N * OUT, OUT);
    /* h in, y out (and its copy); with the bias: b in, h out */
    GF_CUDA_LAUNCHED("linear_gelu_fwd", 4 * (2 * N * OUT + (b ? N * OUT + OUT : 0)) + (y16 ? 2 * N * OUT : 0));
    gf_tensor *in[3] = {x, w, b};
    gf_node *n = gf_tape_record(ctx, &linear_gelu_cuda, y, 3, in);
    if (n) n->saved = h;
    return y;
}
