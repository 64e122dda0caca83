/* embedding.cu — row lookup y[i, :] = table[ids[i], :] on the GPU; the CPU op is
 * src/ops/embedding.c. ids are host data (the entry has checked them against V): they are
 * copied into the device step arena, so the caller's buffer may be reused at once.
 *
 * Backward is deterministic without atomics: when the node is recorded, the forward sorts the
 * row indices by id on the host (a stable counting sort) into a compressed list — the distinct
 * ids, and for each the rows that used it in increasing order — and copies it to the device.
 * The backward kernel gives each (distinct id, column) to one thread, which adds that id's rows
 * in increasing row order: the same sums, in the same order, as the CPU loop, so the result is
 * bitwise the CPU's and the same run to run.
 */
#include "cu_util.cuh"

/* y[i, c] = table[ids[i], c] */
__global__ static void emb_fwd(float *y, const float *table, const int32_t *ids, int64_t cnt, int64_t D) {
    CU_FOR(k, cnt * D) {
        int64_t i = k / D, c = k % D;
        y[k] = table[(int64_t)ids[i] * D + c];
    }
}

/* backward: dtable[uniq[u], c] += sum over k in [off[u], off[u+1]) of dy[rows[k], c], in k order.
 * grid (U, column blocks) */
__global__ static void emb_bwd(float *dtable, const float *g, const int32_t *uniq, const int32_t *off,
                               const int32_t *rows, int64_t D) {
    const int64_t u = blockIdx.x, c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= D) return;
    float *dst = dtable + (int64_t)uniq[u] * D + c;
    float acc = *dst;
    for (int32_t k = off[u]; k < off[u + 1]; k++) acc += g[(int64_t)rows[k] * D + c];
    *dst = acc;
}

/* The backward's index: in one host buffer [uniq (U) | off (U + 1) | rows (cnt)], staged to the
 * device. Returns the device copy and sets *U. */
static int32_t *sort_rows_by_id(gf_ctx *ctx, const int32_t *ids, int64_t cnt, int64_t V, int64_t *U) {
    int32_t *start = (int32_t *)gf_arena_calloc(&ctx->arena, (size_t)(V + 1) * sizeof(int32_t)); // (V + 1)
    for (int64_t i = 0; i < cnt; i++) start[ids[i] + 1]++;
    int64_t u = 0;
    for (int64_t v = 0; v < V; v++) u += start[v + 1] > 0;
    for (int64_t v = 0; v < V; v++) start[v + 1] += start[v]; /* rows of id v: [start[v], start[v+1]) */
    int32_t *buf = (int32_t *)gf_arena_alloc(&ctx->arena, (size_t)(2 * u + 1 + cnt) * sizeof(int32_t));
    int32_t *uniq = buf, *off = buf + u, *rows = buf + 2 * u + 1;
    int64_t k = 0;
    for (int64_t v = 0; v < V; v++)
        if (start[v + 1] > start[v]) {
            uniq[k] = (int32_t)v;
            off[k++] = start[v];
        }
    off[u] = (int32_t)cnt;
    for (int64_t i = 0; i < cnt; i++) rows[start[ids[i]]++] = (int32_t)i; /* stable: rows in increasing order */
    *U = u;
    /* the device copy is sized for the most distinct ids a batch can hold, not for u: the step
     * arena then asks for the same bytes every step and stays one chunk (no cudaMalloc in a step) */
    int64_t umax = cnt < V ? cnt : V;
    int32_t *d = (int32_t *)gf_cuda_arena_alloc(ctx->cuda, (size_t)(2 * umax + 1 + cnt) * sizeof(int32_t));
    gf_cuda_stage_into(ctx->cuda, d, buf, (size_t)(2 * u + 1 + cnt) * sizeof(int32_t));
    return d;
}

static void embedding_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *table = n->in[0];
    const int32_t *idx = (const int32_t *)n->aux; // [uniq (U) | off (U + 1) | rows (cnt)]
    int64_t U = n->ip[1], D = table->shape[1];
    if (U == 0 || D == 0) return; /* no ids: nothing to add (and no grid of 0 blocks) */
    dim3 grid((unsigned)U, (unsigned)((D + 127) / 128));
    emb_bwd<<<grid, 128, 0, gf_cuda_stream()>>>(table->grad, n->out->grad, idx, idx + U, idx + 2 * U + 1, D);
    GF_CUDA_LAUNCHED("emb_bwd");
}

static const gf_op_def embedding_cuda = {"embedding", GF_FAM_ELEMWISE, embedding_backward_cuda, 0};

gf_tensor *gf_embedding_cuda(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int32_t ids_ndim,
                             const int64_t *ids_shape) {
    int64_t V = table->shape[0], D = table->shape[1], cnt = 1, s[GF_MAX_DIMS];
    for (int32_t i = 0; i < ids_ndim; i++) { s[i] = ids_shape[i]; cnt *= ids_shape[i]; }
    s[ids_ndim] = D;
    GF_ASSERT(cnt <= INT32_MAX, "embedding: %lld ids", (long long)cnt);
    gf_tensor *y = gf_cuda_tensor_new(ctx, ids_ndim + 1, s); // (ids..., D)
    const int32_t *d_ids = (const int32_t *)cu_stage(ctx, ids, (size_t)cnt * sizeof(int32_t));
    emb_fwd<<<cu_blocks(cnt * D, 256), 256, 0, gf_cuda_stream()>>>(y->data, table->data, d_ids, cnt, D);
    GF_CUDA_LAUNCHED("emb_fwd");
    gf_tensor *in[1] = {table};
    gf_node *n = gf_tape_record(ctx, &embedding_cuda, y, 1, in);
    if (n) {
        int64_t U = 0;
        n->aux = sort_rows_by_id(ctx, ids, cnt, V, &U);
        n->ip[0] = cnt;
        n->ip[1] = U;
    }
    return y;
}
