/* backend_cpu.c — the CPU's backend table (gflow/backend.h): host memory from ctx's arena and the
 * parameter block's malloc'd arrays. Its ops are the op entries themselves (src/ops/backend_cpu.c),
 * its optimizer loops adamw.c's own. */
#include "gflow/backend.h"
#include "gflow/tape.h"
#include "gflow/threads.h"

#include <stdlib.h>
#include <string.h>

static float *cpu_grad_zeros(gf_ctx *ctx, int64_t n) {
    return gf_arena_calloc(&ctx->arena, (size_t)n * sizeof(float));
}

static float *cpu_grad_floats(gf_ctx *ctx, int64_t n) { return gf_arena_floats(&ctx->arena, n); }

static void cpu_grad_acc(gf_ctx *ctx, float *dst, const float *src, int64_t n) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

static gf_status cpu_copy(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    return GF_OK;
}

static void cpu_zero(float *x, int64_t n) { memset(x, 0, (size_t)n * sizeof(float)); }

static gf_status cpu_sumsq(const float *x, int64_t n, double *out) {
    *out = gf_sumsq_f32(x, n);
    return GF_OK;
}

static void cpu_params_free(gf_params *p) {
    free(p->data);
    free(p->grad);
    free(p->m);
    free(p->v);
}

const gf_backend gf_backend_cpu = {
    .name = "cpu",
    .grad_zeros = cpu_grad_zeros,
    .grad_floats = cpu_grad_floats,
    .grad_acc_host = cpu_grad_acc,
    .grad_acc_const = cpu_grad_acc,
    .params_from_host = NULL,
    .params_to_host = NULL,
    .download = cpu_copy,
    .upload = cpu_copy,
    .zero = cpu_zero,
    .sumsq = cpu_sumsq,
    .params_free = cpu_params_free,
    .params_keep_bf16 = NULL, /* the CPU's products round their operands as they pack them */
    .ops = &gf_backend_ops_cpu,
    .optim = NULL,
};
