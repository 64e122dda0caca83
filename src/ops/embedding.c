/* embedding.c — row lookup y[i, :] = table[ids[i], :].
 * ids are data, not tensors: they are copied into the arena so the caller's
 * buffer may be reused before backward runs.
 */
#include "op_util.h"
#include <omp.h>

/* backward: dtable[ids[i], :] += dy[i, :]. Parallel over columns, not rows, so two
 * rows with the same id never race and the sum order is fixed. */
static void embedding_backward(gf_ctx *ctx, gf_node *n) {
    (void)ctx;
    gf_tensor *table = n->in[0];
    const int32_t *ids = n->aux;
    int64_t cnt = n->ip[0], D = table->shape[1];
    const float *g = n->out->grad; // (cnt, D)
#pragma omp parallel
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t lo = D * t / T, hi = D * (t + 1) / T;
        for (int64_t i = 0; i < cnt; i++) {
            float *dst = table->grad + (int64_t)ids[i] * D;
            const float *src = g + i * D;
            for (int64_t c = lo; c < hi; c++) dst[c] += src[c];
        }
    }
}

/* a counted id outside [0, V) aborts, naming the table */
static void check_ids(const gf_tensor *table, const int32_t *ids, int64_t cnt) {
    const int64_t V = table->shape[0];
    for (int64_t i = 0; i < cnt; i++)
        GF_ASSERT(ids[i] >= 0 && ids[i] < V, "embedding %s: id %d at %lld outside [0, %lld)",
                  table->name ? table->name : "?", ids[i], (long long)i, (long long)V);
}

void gf_embedding_feed(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int64_t cnt) {
    GF_ASSERT(table->ndim == 2 && cnt >= 0 && cnt <= INT32_MAX, "embedding feed: bad shapes");
    gf_tensor *in[1] = {table};
    const gf_backend_ops *dev = gf_op_backend("embedding", 1, in);
    if (!dev) return;
    check_ids(table, ids, cnt);
    dev->embedding_feed(ctx, table, ids, cnt);
}

gf_tensor *gf_embedding(gf_ctx *ctx, gf_tensor *table, const int32_t *ids, int32_t ids_ndim,
                        const int64_t *ids_shape) {
    double t0 = gf_prof_begin(ctx);
    GF_ASSERT(table->ndim == 2 && ids_ndim >= 1 && ids_ndim < GF_MAX_DIMS, "embedding: bad shapes");
    int64_t D = table->shape[1], cnt = 1, s[GF_MAX_DIMS];
    for (int32_t i = 0; i < ids_ndim; i++) { s[i] = ids_shape[i]; cnt *= ids_shape[i]; }
    s[ids_ndim] = D;
    check_ids(table, ids, cnt);
    gf_tensor *in[1] = {table};
    const gf_backend_ops *dev = gf_op_backend("embedding", 1, in);
    if (dev) return dev->embedding(ctx, table, ids, ids_ndim, ids_shape);
    gf_tensor *y = gf_tensor_new(ctx, ids_ndim + 1, s); // (ids..., D)
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < cnt; i++)
        memcpy(y->data + i * D, table->data + (int64_t)ids[i] * D, (size_t)D * sizeof(float));
    gf_node *n = gf_tape_record(ctx, &gf_op_embedding, y, 1, in);
    if (n) {
        int32_t *copy = gf_arena_alloc(&ctx->arena, (size_t)cnt * sizeof(int32_t));
        memcpy(copy, ids, (size_t)cnt * sizeof(int32_t));
        n->aux = copy;
        n->ip[0] = cnt;
    }
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t0);
    return y;
}

const gf_op_def gf_op_embedding = {"embedding", GF_FAM_ELEMWISE, embedding_backward, 0};
