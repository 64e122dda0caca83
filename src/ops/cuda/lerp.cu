/* lerp.cu — gated blend y = α ⊙ a + (1 − α) ⊙ b on the GPU; the CPU op is src/ops/lerp.c.
 * α is a tensor of a's shape, or NULL: then the constant alpha_const (kept in n->fp[0], as the
 * CPU op). a, b and α have one shape (the entry asserts it): no broadcast. One thread per
 * element (grid-stride), forward and backward. */
#include "cu_util.cuh"

/* al NULL: the constant c */
__global__ static void lerp_fwd(float *y, const float *al, const float *a, const float *b, float c, int64_t n) {
    CU_FOR(i, n) {
        const float w = al ? al[i] : c;
        y[i] = w * a[i] + (1.0f - w) * b[i];
    }
}

/* backward: dα += dy ⊙ (a − b);  da += dy ⊙ α;  db += dy ⊙ (1 − α), each only where its pointer is
 * non-NULL (the input needs a gradient). One thread owns element i of every buffer and updates
 * them one after the other, so inputs that share a buffer (lerp(x, x, b)) add up as on the CPU.
 * No __restrict__: the gradient buffers may alias. */
__global__ static void lerp_bwd(float *dal, float *da, float *db, const float *g, const float *al, const float *a,
                                const float *b, float c, int64_t n) {
    CU_FOR(i, n) {
        const float w = al ? al[i] : c;
        if (dal) dal[i] += g[i] * (a[i] - b[i]);
        if (da) da[i] += g[i] * w;
        if (db) db[i] += g[i] * (1.0f - w);
    }
}

static void lerp_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *al = n->in[0], *a = n->in[1], *b = n->in[2];
    int64_t N = gf_tensor_numel(a);
    float *dal = gf_needs_grad(al) ? al->grad : NULL, *da = gf_needs_grad(a) ? a->grad : NULL,
          *db = gf_needs_grad(b) ? b->grad : NULL;
    lerp_bwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(dal, da, db, n->out->grad, al ? al->data : NULL,
                                                              a->data, b->data, (float)n->fp[0], N);
    GF_CUDA_LAUNCHED("lerp_bwd", 4 * N * (3 + (al ? 1 : 0) + 2 * ((dal != NULL) + (da != NULL) + (db != NULL))));
}

static const gf_op_def lerp_cuda = {"lerp", GF_FAM_ELEMWISE, lerp_backward_cuda, 0};

gf_tensor *gf_lerp_cuda(gf_ctx *ctx, gf_tensor *alpha, gf_tensor *a, gf_tensor *b, float alpha_const) {
    int64_t N = gf_tensor_numel(a);
    gf_tensor *y = cu_tensor_like(ctx, a);
    lerp_fwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(y->data, alpha ? alpha->data : NULL, a->data, b->data,
                                                              alpha_const, N);
    GF_CUDA_LAUNCHED("lerp_fwd", 4 * N * (3 + (alpha ? 1 : 0)));
    gf_tensor *in[3] = {alpha, a, b};
    gf_node *n = gf_tape_record(ctx, &lerp_cuda, y, 3, in);
    if (n) n->fp[0] = alpha_const;
    return y;
}
