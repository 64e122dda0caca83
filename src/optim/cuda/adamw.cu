/* adamw.cu — AdamW and the clipping scale over a device parameter block (the CUDA twins of the
 * loops in src/optim/adamw.c, whose comment and code are the spec).
 *
 * AdamW: one kernel, one thread block per chunk of the block's chunk table (gf_params.chunks:
 * at most GF_PARAM_CHUNK floats of one parameter, and its kind), its threads striding over the
 * chunk. Per element, the CPU's fp32 expression in the CPU's order, every operation an explicitly
 * rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn), so nvcc cannot fuse a multiply
 * and an add into an fma that the CPU (C11: -ffp-contract=off) does not do:
 *     w  = data·keep[kind]
 *     m' = b1·m + (1-b1)·g                v' = b2·v + ((1-b2)·g)·g
 *     data = w - step_size·(m' / (sqrt(v')/sqrt(bc2) + eps))
 * The scalars come from the host, computed in double and rounded to float as the CPU does. With
 * the same inputs, every element gets the CPU's bits. Elements are independent: no reduction,
 * deterministic.
 * Scale (clipping): grad·c per element, a grid-stride loop.
 */
#include "gflow/cuda.h"

#include "optim_cuda.h"

#define ADAMW_THREADS 256

__global__ static void adamw_chunks(float *__restrict__ data, const float *__restrict__ grad, float *__restrict__ m,
                                    float *__restrict__ v, const gf_param_chunk *__restrict__ chunks,
                                    gf_adamw_scalars s) {
    const gf_param_chunk c = chunks[blockIdx.x];
    const float keep = s.keep[c.kind];
    for (int64_t i = c.lo + threadIdx.x; i < c.hi; i += blockDim.x) {
        const float g = grad[i];
        float w = __fmul_rn(data[i], keep);
        const float mi = __fadd_rn(__fmul_rn(s.b1, m[i]), __fmul_rn(s.omb1, g));
        const float vi = __fadd_rn(__fmul_rn(s.b2, v[i]), __fmul_rn(__fmul_rn(s.omb2, g), g));
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
        w = __fsub_rn(w, __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
        data[i] = w;
    }
}

__global__ static void scale(float *__restrict__ g, int64_t n, float c) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        g[i] = __fmul_rn(g[i], c);
}

extern "C" void gf_adamw_step_cuda(gf_params *p, const gf_adamw_scalars *s) {
    GF_ASSERT(p->device == GF_DEV_CUDA && p->chunks, "gf_adamw_step_cuda: not a device block");
    GF_ASSERT(p->n_chunks <= 0x7fffffff, "gf_adamw_step_cuda: %lld chunks", (long long)p->n_chunks);
    if (p->n_chunks == 0) return;
    adamw_chunks<<<(unsigned)p->n_chunks, ADAMW_THREADS, 0, gf_cuda_stream()>>>(p->data, p->grad, p->m, p->v,
                                                                                 p->chunks, *s);
    GF_CUDA_LAUNCHED("adamw_chunks");
}

extern "C" void gf_grad_scale_cuda(gf_params *p, float c) {
    if (p->n == 0) return;
    int64_t b = (p->n + 255) / 256;
    if (b > 65536) b = 65536;
    scale<<<(unsigned)b, 256, 0, gf_cuda_stream()>>>(p->grad, p->n, c);
    GF_CUDA_LAUNCHED("scale");
}

extern "C" void gf_adamw_reset_cuda(gf_params *p) {
    GF_CUDA_NOTE(cudaMemsetAsync(p->m, 0, (size_t)p->n * sizeof(float), gf_cuda_stream()));
    GF_CUDA_NOTE(cudaMemsetAsync(p->v, 0, (size_t)p->n * sizeof(float), gf_cuda_stream()));
}
