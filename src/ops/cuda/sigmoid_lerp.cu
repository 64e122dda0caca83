/* sigmoid_lerp.cu — the Grassmann block's gated fusion on the GPU in one kernel each way:
 * y = σ(u) ⊙ a + (1 − σ(u)) ⊙ b; the CPU op is src/ops/sigmoid_lerp.c. σ is cu_sigmoid (the
 * unfused sigmoid.cu's), recomputed from u in the backward instead of stored; the arithmetic is
 * cu_slerp's, shared with the gate's gated_lerp.cu. One thread per element (grid-stride). */
#include "cu_util.cuh"

__global__ static void sigmoid_lerp_fwd(float *y, const float *u, const float *a, const float *b, int64_t n) {
    CU_FOR(i, n) y[i] = cu_slerp(u[i], a[i], b[i]);
}

/* backward, α = σ(u): du += (dy ⊙ (a − b)) ⊙ α ⊙ (1 − α);  da += dy ⊙ α;  db += dy ⊙ (1 − α), each
 * only where its pointer is non-NULL. One thread owns element i of every buffer and updates them
 * one after the other, so inputs that share a buffer add up as on the CPU (no __restrict__). */
__global__ static void sigmoid_lerp_bwd(float *du, float *da, float *db, const float *g, const float *u,
                                        const float *a, const float *b, int64_t n) {
    CU_FOR(i, n) {
        const float w = cu_sigmoid(u[i]);
        if (du) du[i] += cu_slerp_dv(g[i], w, a[i], b[i]);
        if (da) da[i] += g[i] * w;
        if (db) db[i] += g[i] * (1.0f - w);
    }
}

static void sigmoid_lerp_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *u = n->in[0], *a = n->in[1], *b = n->in[2];
    int64_t N = gf_tensor_numel(a);
    float *du = gf_needs_grad(u) ? u->grad : NULL, *da = gf_needs_grad(a) ? a->grad : NULL,
          *db = gf_needs_grad(b) ? b->grad : NULL;
    sigmoid_lerp_bwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(du, da, db, n->out->grad, u->data, a->data,
                                                                      b->data, N);
    GF_CUDA_LAUNCHED("sigmoid_lerp_bwd", 4 * N * (4 + 2 * ((du != NULL) + (da != NULL) + (db != NULL))));
}

static const gf_op_def sigmoid_lerp_cuda = {"sigmoid_lerp", GF_FAM_ELEMWISE, sigmoid_lerp_backward_cuda, 0};

gf_tensor *gf_sigmoid_lerp_cuda(gf_ctx *ctx, gf_tensor *u, gf_tensor *a, gf_tensor *b) {
    int64_t N = gf_tensor_numel(a);
    gf_tensor *y = cu_tensor_like(ctx, a);
    sigmoid_lerp_fwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(y->data, u->data, a->data, b->data, N);
    GF_CUDA_LAUNCHED("sigmoid_lerp_fwd", 4 * 4 * N);
    gf_tensor *in[3] = {u, a, b};
    gf_tape_record(ctx, &sigmoid_lerp_cuda, y, 3, in);
    return y;
}
