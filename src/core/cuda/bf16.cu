/* bf16.cu — bfloat16 copies of fp32 device arrays for the products of a bf16 run
 * ([run] precision = bf16; docs/cuda.md "bf16 operands").
 *
 * gf_cuda_to_bf16 is the one rounding kernel (nearest even, the CPU's pack in src/ops/gemm.c):
 * cu_gemm_rm's operand copies and the weights' mirrors use it.
 *
 * A mirror is a device parameter block's weights rounded once: data16 = bf16(data), the same
 * layout (gf_params_keep_bf16). It is registered here, and cu_gemm_rm reads a weight operand
 * that lies in a registered block from its mirror instead of rounding it at every product (a
 * layer's weights were rounded twice a step, the tied head's table twice per chunk of logits).
 * Every write of the weights keeps it equal: AdamW writes both (src/optim/cuda/adamw.cu), a host
 * write (gf_params_set) rounds the block again; so the products read the values they rounded
 * before, and the bits do not change (cuda/bf16_reuse_keeps_the_bits).
 */
#include "gflow/cuda.h"

#include <cuda_bf16.h>

/* dst (rows, cols; row stride ldd) = src (rows, cols; row stride lds) rounded to bf16 */
__global__ static void to_bf16(__nv_bfloat16 *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                               int64_t cols) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[(i / cols) * ldd + i % cols] = __float2bfloat16_rn(src[(i / cols) * lds + i % cols]);
}

extern "C" void gf_cuda_to_bf16(void *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    if (n <= 0) return;
    int64_t b = (n + 255) / 256;
    to_bf16<<<(unsigned)(b > 65536 ? 65536 : b), 256, 0, gf_cuda_stream()>>>((__nv_bfloat16 *)dst, ldd, src, lds,
                                                                              rows, cols);
    GF_CUDA_LAUNCHED("to_bf16", 6 * n);
}

/* the registered mirrors: few blocks live at once (a model; compare's two) */
#define MIRRORS 8
static struct {
    const float *base;
    int64_t n;
    const void *m16;
} mirrors[MIRRORS];
static int reuse_mode = 1; /* gf_cuda_bf16_reuse */
static int64_t n_checked, n_stale; /* gf_cuda_bf16_checked */

extern "C" gf_status gf_cuda_bf16_mirror_add(const float *base, int64_t n, const void *m16) {
    for (int i = 0; i < MIRRORS; i++)
        if (!mirrors[i].base || mirrors[i].base == base) {
            mirrors[i].base = base, mirrors[i].n = n, mirrors[i].m16 = m16;
            return GF_OK;
        }
    return gf_error_set(GF_E_INVALID, "gf_cuda_bf16_mirror_add: more than %d parameter blocks with bf16 weights",
                        MIRRORS);
}

extern "C" void gf_cuda_bf16_mirror_remove(const float *base) {
    for (int i = 0; i < MIRRORS; i++)
        if (mirrors[i].base == base) mirrors[i].base = NULL, mirrors[i].n = 0, mirrors[i].m16 = NULL;
}

extern "C" const void *gf_cuda_bf16_mirror_of(const float *p, int64_t extent) {
    if (!reuse_mode) return NULL;
    for (int i = 0; i < MIRRORS; i++)
        if (mirrors[i].base && p >= mirrors[i].base && p + extent <= mirrors[i].base + mirrors[i].n)
            return (const __nv_bfloat16 *)mirrors[i].m16 + (p - mirrors[i].base);
    return NULL;
}

extern "C" int gf_cuda_bf16_reuse(int mode) {
    const int was = reuse_mode;
    if (mode >= 0) reuse_mode = mode > 2 ? 2 : mode;
    return was;
}

/* *differ += the elements of copy (row stride ldc) that are not src's (row stride lds) rounding */
__global__ static void count_stale(const __nv_bfloat16 *copy, int64_t ldc, const float *src, int64_t lds, int64_t rows,
                                   int64_t cols, unsigned *differ) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        const __nv_bfloat16 want = __float2bfloat16_rn(src[(i / cols) * lds + i % cols]);
        if (__bfloat16_as_ushort(want) != __bfloat16_as_ushort(copy[(i / cols) * ldc + i % cols])) atomicAdd(differ, 1u);
    }
}

extern "C" void gf_cuda_bf16_check(const void *copy, int64_t ldc, const float *src, int64_t lds, int64_t rows,
                                   int64_t cols) {
    if (reuse_mode != 2 || rows * cols <= 0 || gf_cuda_capturing()) return; /* a capture cannot wait */
    static unsigned *differ; /* one counter, kept */
    if (!differ && gf_cuda_malloc((void **)&differ, sizeof *differ)) return;
    unsigned got = 0;
    GF_CUDA_NOTE(cudaMemsetAsync(differ, 0, sizeof *differ, gf_cuda_stream()));
    int64_t b = (rows * cols + 255) / 256;
    count_stale<<<(unsigned)(b > 65536 ? 65536 : b), 256, 0, gf_cuda_stream()>>>(
        (const __nv_bfloat16 *)copy, ldc, src, lds, rows, cols, differ);
    GF_CUDA_NOTE(cudaGetLastError());
    if (gf_cuda_download(&got, differ, sizeof got)) return;
    n_checked++;
    n_stale += got != 0;
}

extern "C" int64_t gf_cuda_bf16_checked(int64_t *stale) {
    if (stale) *stale = n_stale;
    return n_checked;
}
