/* concat.cu — join along the last dim on the GPU: (R, Da) ++ (R, Db) -> (R, Da + Db); the CPU op
 * is src/ops/concat.c. Forward: one thread per output element (grid-stride), reading a or b.
 * Backward: one launch per input that needs a gradient, a thread per element of that input;
 * two launches rather than one so that concat(x, x), whose two halves add into one buffer,
 * needs no atomics (the launches are ordered on the stream). */
#include "cu_util.cuh"

/* y[r, c] = c < Da ? a[r, c] : b[r, c - Da] */
__global__ static void concat_fwd(float *y, const float *a, const float *b, int64_t R, int64_t Da, int64_t Db) {
    const int64_t Dy = Da + Db;
    CU_FOR(i, R * Dy) {
        const int64_t r = i / Dy, c = i % Dy;
        y[i] = c < Da ? a[r * Da + c] : b[r * Db + (c - Da)];
    }
}

/* backward of one half: dx[r, c] += dy[r, off + c], c < Dx (a: off 0; b: off Da) */
__global__ static void concat_bwd(float *dx, const float *g, int64_t R, int64_t Dx, int64_t Dy, int64_t off) {
    CU_FOR(i, R * Dx) {
        const int64_t r = i / Dx, c = i % Dx;
        dx[i] += g[r * Dy + off + c];
    }
}

static void concat_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *a = n->in[0], *b = n->in[1];
    int64_t R = gf_tensor_rows(a), Da = gf_tensor_cols(a), Db = gf_tensor_cols(b), Dy = Da + Db;
    const float *g = n->out->grad;
    cudaStream_t s = gf_cuda_stream();
    if (gf_needs_grad(a)) {
        concat_bwd<<<cu_blocks(R * Da, 256), 256, 0, s>>>(a->grad, g, R, Da, Dy, 0);
        GF_CUDA_LAUNCHED("concat_bwd", 4 * 3 * R * Da);
    }
    if (gf_needs_grad(b)) {
        concat_bwd<<<cu_blocks(R * Db, 256), 256, 0, s>>>(b->grad, g, R, Db, Dy, Da);
        GF_CUDA_LAUNCHED("concat_bwd", 4 * 3 * R * Db);
    }
}

static const gf_op_def concat_cuda = {"concat", GF_FAM_ELEMWISE, concat_backward_cuda, 0};

gf_tensor *gf_concat_cuda(gf_ctx *ctx, gf_tensor *a, gf_tensor *b) {
    int64_t R = gf_tensor_rows(a), Da = gf_tensor_cols(a), Db = gf_tensor_cols(b);
    gf_tensor *y = cu_tensor_like_cols(ctx, a, Da + Db);
    concat_fwd<<<cu_blocks(R * (Da + Db), 256), 256, 0, gf_cuda_stream()>>>(y->data, a->data, b->data, R, Da, Db);
    GF_CUDA_LAUNCHED("concat_fwd", 4 * 2 * R * (Da + Db));
    gf_tensor *in[2] = {a, b};
    gf_tape_record(ctx, &concat_cuda, y, 2, in);
    return y;
}
