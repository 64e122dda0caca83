/* backend_cuda.c — the CUDA backend's table (gflow/backend.h): the step arena's device memory,
 * the parameter block moved to the GPU as one cudaMalloc and back, copies and reductions on the
 * stream. Its ops are src/ops/cuda/backend_cuda.c, its optimizer loops src/optim/cuda/backend_cuda.c. */
#include "gflow/backend.h"
#include "gflow/cuda.h"

#include "../params_internal.h"

#include <stdlib.h>

/* A device block is one cudaMalloc: data, grad, m, v at a stride of n rounded up to 64 floats
 * (256 bytes: every array starts as aligned as cudaMalloc's own memory), so p->data is its
 * base. The chunk table is a second one. */
static int64_t dev_stride(int64_t n) { return (n + 63) / 64 * 64; }

static gf_status chunk_table(gf_params *p) {
    int64_t nc = 0;
    for (int64_t i = 0; i < p->n_items; i++)
        nc += (gf_tensor_numel(&p->items[i]->t) + GF_PARAM_CHUNK - 1) / GF_PARAM_CHUNK;
    gf_param_chunk *h = malloc((size_t)(nc ? nc : 1) * sizeof *h);
    if (!h) return gf_error_set(GF_E_NOMEM, "parameter chunk table (%lld chunks)", (long long)nc);
    int64_t k = 0;
    for (int64_t i = 0; i < p->n_items; i++) {
        const gf_param *q = p->items[i];
        const int64_t end = q->offset + gf_tensor_numel(&q->t);
        for (int64_t lo = q->offset; lo < end; lo += GF_PARAM_CHUNK)
            h[k++] = (gf_param_chunk){.lo = lo, .hi = lo + GF_PARAM_CHUNK < end ? lo + GF_PARAM_CHUNK : end,
                                      .kind = (int32_t)q->kind};
    }
    void *d = NULL;
    gf_status st = gf_cuda_malloc(&d, (size_t)(nc ? nc : 1) * sizeof *h);
    if (!st) st = gf_cuda_upload(d, h, (size_t)nc * sizeof *h);
    free(h);
    if (st) {
        gf_cuda_free(d);
        return st;
    }
    p->chunks = d;
    p->n_chunks = nc;
    return GF_OK;
}

static gf_status cuda_params_from_host(gf_params *p) {
    const int64_t stride = dev_stride(p->n);
    const size_t bytes = (size_t)p->n * sizeof(float);
    void *base = NULL;
    GF_TRY(gf_cuda_malloc(&base, (size_t)(GF_PP_COUNT * stride) * sizeof(float)));
    float *blk[GF_PP_COUNT];
    gf_status st = GF_OK;
    for (int i = 0; i < GF_PP_COUNT; i++) {
        blk[i] = (float *)base + i * stride;
        if (!st) st = gf_cuda_upload(blk[i], gf_params_part_ptr(p, (gf_params_part)i), bytes);
    }
    if (!st) st = chunk_table(p);
    if (st) {
        gf_cuda_free(base);
        return st;
    }
    for (int i = 0; i < GF_PP_COUNT; i++) free(gf_params_part_ptr(p, (gf_params_part)i));
    gf_params_point_into(p, blk, GF_DEV_CUDA);
    return GF_OK;
}

static void drop_bf16(gf_params *p) {
    if (!p->data16) return;
    gf_cuda_bf16_mirror_remove(p->data);
    gf_cuda_free(p->data16);
    p->data16 = NULL;
}

/* data16 = bf16(data), allocated at the first call and registered for cu_gemm_rm */
static gf_status cuda_params_keep_bf16(gf_params *p) {
    if (!p->data16) {
        void *d = NULL;
        GF_TRY(gf_cuda_malloc(&d, (size_t)(p->n ? p->n : 1) * 2));
        gf_status st = gf_cuda_bf16_mirror_add(p->data, p->n, d);
        if (st) {
            gf_cuda_free(d);
            return st;
        }
        p->data16 = d;
    }
    gf_cuda_to_bf16(p->data16, p->n, p->data, p->n, 1, p->n);
    return GF_OK;
}

static gf_status cuda_params_to_host(gf_params *p) {
    float *blk[GF_PP_COUNT] = {0};
    GF_TRY(gf_params_host_arrays(p->n, blk));
    gf_status st = GF_OK;
    for (int i = 0; i < GF_PP_COUNT && !st; i++) st = gf_params_get(p, (gf_params_part)i, blk[i]);
    if (st) {
        for (int i = 0; i < GF_PP_COUNT; i++) free(blk[i]);
        return st;
    }
    drop_bf16(p);
    gf_cuda_free(p->data);
    gf_cuda_free(p->chunks);
    p->chunks = NULL;
    p->n_chunks = 0;
    gf_params_point_into(p, blk, GF_DEV_CPU);
    return GF_OK;
}

static void cuda_zero(float *x, int64_t n) {
    GF_CUDA_NOTE(cudaMemsetAsync(x, 0, (size_t)n * sizeof(float), gf_cuda_stream()));
}

static void cuda_params_free(gf_params *p) {
    drop_bf16(p);
    gf_cuda_free(p->data); /* the base of the one allocation (cuda_params_from_host) */
    gf_cuda_free(p->chunks);
}

const gf_backend gf_backend_cuda = {
    .name = "cuda",
    .grad_zeros = gf_cuda_zeros,
    .grad_floats = gf_cuda_floats,
    .grad_acc_host = gf_cuda_acc_host,
    .grad_acc_const = gf_cuda_acc_const,
    .params_from_host = cuda_params_from_host,
    .params_to_host = cuda_params_to_host,
    .download = gf_cuda_download,
    .upload = gf_cuda_upload,
    .zero = cuda_zero,
    .sumsq = gf_cuda_sumsq,
    .params_free = cuda_params_free,
    .params_keep_bf16 = cuda_params_keep_bf16,
    .ops = &gf_backend_ops_cuda,
    .optim = &gf_backend_optim_cuda,
};
