/* dropout.cu — inverted dropout on the GPU: y = x * keep / (1 - p); the CPU op is src/ops/dropout.c,
 * and the mask is its mask bit for bit. The key is drawn on the host from ctx->rng, one
 * gf_rng_u64 per call as the CPU op draws it; element e of row j (x is (R, ...), R = k * n rows,
 * k copies of the n batch rows [batch_row0, batch_row0 + n)) keeps when
 *   gf_rng_hash_uniform(gf_rng_hash(key, j / n), (batch_row0 + j % n) * per + e) >= p,
 * with the hash of gflow/rng.h itself (compiled for the device, GF_HOST_DEVICE). The products
 * x * scale and dy * scale are __fmul_rn (never fused into an add), so y and dx are the CPU's
 * bits too. One thread per element (grid-stride); the mask (uint8, N) is kept in the device
 * step arena for backward. */
#include "cu_util.cuh"

__global__ static void dropout_fwd(float *y, uint8_t *keep, const float *x, int64_t N, int64_t per, int64_t nb,
                                   int64_t row0, uint64_t key, const uint64_t *key_dev, float p, float scale) {
    if (key_dev) key = *key_dev; /* drawn before the step (gf_ctx_draw_keys): a replay reads the next */
    CU_FOR(i, N) {
        const int64_t j = i / per, e = i % per;
        const uint64_t kj = gf_rng_hash(key, (uint64_t)(j / nb)), g0 = (uint64_t)(row0 + j % nb) * (uint64_t)per;
        const uint8_t k = gf_rng_hash_uniform(kj, g0 + (uint64_t)e) >= p;
        keep[i] = k;
        y[i] = k ? __fmul_rn(x[i], scale) : 0.0f;
    }
}

/* backward: dx (= if fresh, else +=) keep ? dy * scale : 0 */
template <bool Fresh>
__global__ void dropout_bwd(float *dx, const float *g, const uint8_t *keep, float scale, int64_t N) {
    CU_FOR(i, N) {
        const float t = keep[i] ? __fmul_rn(g[i], scale) : 0.0f;
        dx[i] = Fresh ? t : __fadd_rn(dx[i], t);
    }
}

static void dropout_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *x = n->in[0];
    const uint8_t *keep = (const uint8_t *)n->saved; // (N) on the device
    float scale = (float)n->fp[0];
    int64_t N = gf_tensor_numel(x);
    cudaStream_t s = gf_cuda_stream();
    if (gf_grad_fresh(x)) dropout_bwd<true><<<cu_blocks(N, 256), 256, 0, s>>>(x->grad, n->out->grad, keep, scale, N);
    else dropout_bwd<false><<<cu_blocks(N, 256), 256, 0, s>>>(x->grad, n->out->grad, keep, scale, N);
    GF_CUDA_LAUNCHED("dropout_bwd");
}

static const gf_op_def dropout_cuda = {"dropout", GF_FAM_ELEMWISE, dropout_backward_cuda, 1};

/* the entry has returned x when not training or p == 0, and checked p, ctx->rng and the rows */
gf_tensor *gf_dropout_cuda(gf_ctx *ctx, gf_tensor *x, float p) {
    int64_t N = gf_tensor_numel(x), R = x->shape[0], per = R > 0 ? N / R : 0;
    int64_t nb = ctx->batch_rows > 0 ? ctx->batch_rows : R, row0 = ctx->batch_rows > 0 ? ctx->batch_row0 : 0;
    uint64_t key = 0;
    const uint64_t *key_dev = NULL;
    if (ctx->n_keys) {
        GF_ASSERT(ctx->key_next < ctx->n_keys, "dropout: the step drew %d keys before it, and this is one more",
                  ctx->n_keys);
        key_dev = ctx->key_dev + ctx->key_next++;
    } else {
        key = gf_rng_u64(ctx->rng);
    }
    ctx->keys_drawn++;
    float scale = 1.0f / (1.0f - p);
    uint8_t *keep = (uint8_t *)gf_cuda_arena_alloc(ctx->cuda, (size_t)N); // (N)
    gf_tensor *y = cu_tensor_like(ctx, x);
    if (N > 0) {
        dropout_fwd<<<cu_blocks(N, 256), 256, 0, gf_cuda_stream()>>>(y->data, keep, x->data, N, per, nb, row0, key,
                                                                     key_dev, p, scale);
        GF_CUDA_LAUNCHED("dropout_fwd");
    }
    gf_tensor *in[1] = {x};
    gf_node *n = gf_tape_record(ctx, &dropout_cuda, y, 1, in);
    if (n) {
        n->saved = keep;
        n->fp[0] = scale;
    }
    return y;
}
