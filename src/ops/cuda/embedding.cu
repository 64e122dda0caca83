/* embedding.cu — row lookup y[i, :] = table[ids[i], :] on the GPU; the CPU op is
 * src/ops/embedding.c. ids are host data (the entry has checked them against V): they are
 * copied into the device step arena, so the caller's buffer may be reused at once.
 *
 * Backward is deterministic without atomics: when the node is recorded, the forward sorts the
 * row indices by id on the host (a stable counting sort) into a compressed list — the distinct
 * ids, and for each the rows that used it in increasing order — and copies it to the device; or
 * gf_embedding_feed made both copies before the step's capture (docs/cuda.md "Captured once").
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
 * grid (umax, column blocks): the blocks past the batch's U (in device memory) return, so the grid
 * is the same for every batch of this size and a captured step can be replayed on the next */
__global__ static void emb_bwd(float *dtable, const float *g, const int32_t *uniq, const int32_t *off,
                               const int32_t *rows, const int32_t *U, int64_t D) {
    const int64_t u = blockIdx.x, c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (u >= *U || c >= D) return;
    float *dst = dtable + (int64_t)uniq[u] * D + c;
    float acc = *dst;
    for (int32_t k = off[u]; k < off[u + 1]; k++) acc += g[(int64_t)rows[k] * D + c];
    *dst = acc;
}

/* the most distinct ids cnt ids of a vocabulary of V can hold: the index's fixed layout */
static int64_t emb_umax(int64_t cnt, int64_t V) { return cnt < V ? cnt : V; }

/* The backward's index of ids in one host buffer of 2 umax + 2 + cnt ints, the same layout for
 * every batch of cnt ids: [uniq (umax) | off (umax + 1) | rows (cnt) | U], staged to the device.
 * Returns the device copy. */
static int32_t *sort_rows_by_id(gf_ctx *ctx, const int32_t *ids, int64_t cnt, int64_t V) {
    const int64_t umax = emb_umax(cnt, V), n = 2 * umax + 2 + cnt;
    int32_t *start = (int32_t *)gf_arena_calloc(&ctx->arena, (size_t)(V + 1) * sizeof(int32_t)); // (V + 1)
    for (int64_t i = 0; i < cnt; i++) start[ids[i] + 1]++;
    for (int64_t v = 0; v < V; v++) start[v + 1] += start[v]; /* rows of id v: [start[v], start[v+1]) */
    int32_t *buf = (int32_t *)gf_arena_calloc(&ctx->arena, (size_t)n * sizeof(int32_t)); // (n)
    int32_t *uniq = buf, *off = buf + umax, *rows = buf + 2 * umax + 1;
    int64_t u = 0;
    for (int64_t v = 0; v < V; v++)
        if (start[v + 1] > start[v]) {
            uniq[u] = (int32_t)v;
            off[u++] = start[v];
        }
    off[u] = (int32_t)cnt;
    for (int64_t i = 0; i < cnt; i++) rows[start[ids[i]]++] = (int32_t)i; /* stable: rows in increasing order */
    buf[n - 1] = (int32_t)u;
    return (int32_t *)cu_stage(ctx, buf, (size_t)n * sizeof(int32_t));
}

static void embedding_backward_cuda(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *table = n->in[0];
    const int32_t *idx = (const int32_t *)n->aux; // [uniq (umax) | off (umax + 1) | rows (cnt) | U]
    int64_t cnt = n->ip[0], umax = n->ip[1], D = table->shape[1];
    if (umax == 0 || D == 0) return; /* no ids: nothing to add (and no grid of 0 blocks) */
    dim3 grid((unsigned)umax, (unsigned)((D + 127) / 128));
    emb_bwd<<<grid, 128, 0, gf_cuda_stream()>>>(table->grad, n->out->grad, idx, idx + umax, idx + 2 * umax + 1,
                                                idx + 2 * umax + 1 + cnt, D);
    GF_CUDA_LAUNCHED("emb_bwd", 4 * (cnt * D + 2 * umax * D + 2 * umax + 1 + cnt));
}

void gf_embedding_feed_cuda(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int64_t cnt) {
    gf_cuda_fed *f = gf_cuda_feed_into(ctx->cuda, ids, (size_t)cnt * sizeof(int32_t));
    f->aux = sort_rows_by_id(ctx, ids, cnt, table->shape[0]); /* before the capture too */
}

static const gf_op_def embedding_cuda = {"embedding", GF_FAM_ELEMWISE, embedding_backward_cuda, 0};

gf_tensor *gf_embedding_cuda(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int32_t ids_ndim,
                             const int64_t *ids_shape) {
    int64_t V = table->shape[0], D = table->shape[1], cnt = 1, s[GF_MAX_DIMS];
    for (int32_t i = 0; i < ids_ndim; i++) { s[i] = ids_shape[i]; cnt *= ids_shape[i]; }
    s[ids_ndim] = D;
    GF_ASSERT(cnt <= INT32_MAX, "embedding: %lld ids", (long long)cnt);
    gf_tensor *y = gf_cuda_tensor_new(ctx, ids_ndim + 1, s); // (ids..., D)
    const gf_cuda_fed *fed = gf_cuda_fed_find(ctx->cuda, ids, (size_t)cnt * sizeof(int32_t));
    const int32_t *d_ids = fed ? (const int32_t *)fed->dev : (const int32_t *)cu_stage(ctx, ids, (size_t)cnt * sizeof(int32_t));
    emb_fwd<<<cu_blocks(cnt * D, 256), 256, 0, gf_cuda_stream()>>>(y->data, table->data, d_ids, cnt, D);
    GF_CUDA_LAUNCHED("emb_fwd", 4 * (2 * cnt * D + cnt));
    gf_tensor *in[1] = {table};
    gf_node *n = gf_tape_record(ctx, &embedding_cuda, y, 1, in);
    if (n) {
        /* the fed index is of exactly these ids (not of a longer array they begin) */
        const int whole = fed && fed->aux && fed->bytes == (size_t)cnt * sizeof(int32_t);
        n->aux = whole ? fed->aux : sort_rows_by_id(ctx, ids, cnt, V);
        n->ip[0] = cnt;
        n->ip[1] = emb_umax(cnt, V);
    }
    return y;
}
