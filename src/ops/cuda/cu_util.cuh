/* cu_util.cuh — helpers shared by the CUDA op files (internal to src/ops/cuda).
 *
 * Every kernel runs on the process's one stream (gf_cuda_stream), every buffer comes from the
 * device step arena (the column sums' counters from the runtime, gf_cuda_counters), and every
 * launch is followed by GF_CUDA_LAUNCHED, so a step does no host synchronisation and no
 * allocation. Reductions that decide a value (column sums of bias and
 * norm gradients) add in a fixed order that depends only on the shape: a run repeated on the
 * same GPU gives the same bits, and no floating-point atomics are used.
 */
#ifndef GF_CU_UTIL_CUH
#define GF_CU_UTIL_CUH

#include "gflow/cuda.h"

#include "../op_util.h"
#include "cuda_ops.h"

#include <cuda_bf16.h>

/* Let `kernel` use `bytes` of dynamic shared memory. Beyond the default 48 KiB a kernel must opt
 * in (cudaFuncSetAttribute), up to what the GPU allows (227 KiB on an H100); the attribute stays
 * with the kernel, so each kernel of this file is set once per size it grows to (a table keyed by
 * the kernel's address), not at every launch. `op` names the op when the GPU cannot give it. */
static inline void cu_smem_opt_in(const void *kernel, size_t bytes, const char *op) {
    if (bytes <= 48 * 1024) return;
    static struct { const void *k; size_t bytes; } set[16];
    int i = 0;
    while (i < 16 && set[i].k && set[i].k != kernel) i++;
    GF_ASSERT(i < 16, "cu_smem_opt_in: more than 16 kernels in one file");
    if (set[i].k == kernel && bytes <= set[i].bytes) return;
    int dev = 0, max = 0;
    GF_CUDA_NOTE(cudaGetDevice(&dev));
    GF_CUDA_NOTE(cudaDeviceGetAttribute(&max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    GF_ASSERT(bytes <= (size_t)max, "%s: %zu bytes of shared memory for one block, the GPU allows %d", op, bytes, max);
    GF_CUDA_NOTE(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    set[i].k = kernel;
    set[i].bytes = bytes;
}

/* grid-stride loops: enough blocks to fill any GPU, never more than the data needs */
static inline unsigned cu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

#define CU_FOR(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                          i += (int64_t)gridDim.x * blockDim.x)

/* new GPU tensors shaped after x (gf_tensor_like / gf_tensor_like_cols of op_util.h) */
static inline gf_tensor *cu_tensor_like_cols(gf_ctx *ctx, const gf_tensor *x, int64_t cols) {
    int64_t s[GF_MAX_DIMS];
    for (int32_t i = 0; i < x->ndim; i++) s[i] = x->shape[i];
    s[x->ndim - 1] = cols;
    return gf_cuda_tensor_new(ctx, x->ndim, s);
}
static inline gf_tensor *cu_tensor_like(gf_ctx *ctx, const gf_tensor *x) {
    return gf_cuda_tensor_new(ctx, x->ndim, x->shape);
}

/* a host array copied into the device step arena, through the pinned staging (gf_cuda_stage:
 * the caller may reuse `host` at once, and the host does not wait for the stream) */
static inline void *cu_stage(gf_ctx *ctx, const void *host, size_t bytes) {
    return gf_cuda_stage(ctx->cuda, host, bytes);
}

/* ---- row-major GEMM through cuBLAS (gemm.cu): C (M, N) = op(A) · op(B) + beta C, alpha 1 ----
 * The one matrix product of the CUDA ops, the CPU's gf_gemm twin (op_util.h), so a CUDA op reads
 * like its CPU op: ta/tb say whether A, B are used transposed, lda/ldb/ldc are the row-major
 * leading dimensions (row strides). A beta of 0 stores (a fresh gradient), 1 adds. In
 * ctx->precision bf16 the inputs are rounded to bfloat16 (nearest even, as the CPU rounds) and
 * multiplied on the tensor cores with fp32 accumulation and output (cublasGemmEx); fp32 is
 * cublasSgemm (TF32 when [run] tf32 set the handle's math mode). Failures are noted. */
void cu_gemm_rm(gf_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* An operand several products read, rounded once (ctx->precision bf16): cu_bf16_hold rounds
 * src (rows, cols; row stride ld) into a step-arena copy with the same stride and returns 1;
 * until cu_bf16_release, each cu_gemm_rm operand lying in src with that stride reads the copy.
 * The caller must not write src meanwhile. It returns 0 and holds nothing in fp32, with
 * gf_cuda_bf16_reuse off, or when src already has a copy (held, or a mirrored weight), so
 * `cu_bf16_release(the sum of the returns)`. cu_bf16_hold_for holds a copy without rounding into
 * it: the caller's kernel writes it, with values that are what products of src must read (the
 * head's row kernel writes its dlogits rounded, never in fp32). Held copies nest, at most
 * CU_BF16_HOLDS. */
#define CU_BF16_HOLDS 8
int cu_bf16_hold(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld);
/* cu_bf16_hold for the rest of the step: a forward's GEMM input that its backward's weight
 * gradient reads again (linear's x, the Plücker features), rounded once into the step arena and
 * reused until the arena's reset. Nothing may write src before then (activations are not
 * rewritten; gf_cuda_bf16_reuse(2) checks each reuse). Nothing in fp32, with reuse off, or when
 * CU_BF16_KEPT copies are kept (the products round their own). */
void cu_bf16_keep(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld);
/* The producer's rounding: cu_bf16_keep_out and cu_bf16_hold_out register a copy of src as
 * cu_bf16_keep and cu_bf16_hold do, without rounding into it; the kernel that writes src writes
 * each element's rounding there too (cu_bf16_put), so no pass of its own rounds src. NULL (nothing
 * registered; for hold_out nothing to release) in fp32, with reuse off, or when src has a copy. */
void *cu_bf16_keep_out(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld);
void *cu_bf16_hold_out(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld);
/* in a producer's kernel: h16[i] = v rounded, where it has a copy to fill (h16 not NULL) */
__device__ static inline void cu_bf16_put(__nv_bfloat16 *h16, int64_t i, float v) {
    if (h16) h16[i] = __float2bfloat16_rn(v);
}
void *cu_bf16_hold_for(gf_ctx *ctx, const float *src, int64_t rows, int64_t cols, int64_t ld);
void cu_bf16_release(int n);

/* linear.cu's parts, shared with the fused linear_gelu.cu so both give linear's bits (the CPU's
 * gf_linear_into, gf_linear_grads): y (N, OUT) = x W^T + b (the bias written first, the GEMM
 * adding to it; b may be NULL); dX and dW from G = dL/dY (N, OUT), each stored where fresh. */
void cu_linear_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, const gf_tensor *b, float *y);
void cu_linear_grads(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, const float *G);
/* the same on W_c = columns [c0, c0 + cols(x)) of w, in place (the CPU's gf_linear_cols_into,
 * gf_linear_dx_cols, gf_linear_dw_cols: add, no b: y += x W_c^T; fresh: w's flag, read once by
 * the caller for all of its column blocks) */
void cu_linear_cols_into(gf_ctx *ctx, const gf_tensor *x, const gf_tensor *w, int64_t c0, const gf_tensor *b, int add,
                         float *y);
void cu_linear_dx_cols(gf_ctx *ctx, gf_tensor *x, const gf_tensor *w, int64_t c0, const float *G);
void cu_linear_dw_cols(gf_ctx *ctx, const gf_tensor *x, gf_tensor *w, int64_t c0, int fresh, const float *G);
/* concat_linear.cu's input and weight gradients from G = dL/du (N, OUT), shared with the fused
 * gated_lerp.cu (the CPU's gf_concat_linear_grads; the bias's is the caller's) */
void cu_concat_linear_grads(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, const float *G);

__device__ static inline float cu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ static inline double cu_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* σ(v) without overflow: exp of a non-positive number only (sigmoid.cu and the fused
 * sigmoid_lerp.cu, so both give the same bits). The CPU's gf_sigmoidf is this formula with
 * libm's expf bit for bit (gf_expf_neg), so the emulator, whose expf is libm's, agrees with it
 * bitwise; a GPU's expf is CUDA's own (within 2 ulp). */
__device__ static inline float cu_sigmoid(float v) {
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    const float e = expf(v);
    return e / (1.0f + e);
}

/* the gated lerp σ(v) a + (1 − σ(v)) b and, with w = σ(v) and g = dL/dy, its gradient in v
 * (sigmoid_lerp.cu and the fused gated_lerp.cu, so both give the same bits; the CPU's
 * sigmoid_lerp.c spans) */
__device__ static inline float cu_slerp(float v, float a, float b) {
    const float w = cu_sigmoid(v);
    return w * a + (1.0f - w) * b;
}
__device__ static inline float cu_slerp_dv(float g, float w, float a, float b) { return g * (a - b) * w * (1.0f - w); }

/* GELU y = v Φ(v) and its slope Φ(v) + v φ(v) (gelu.cu and the fused linear_gelu.cu, so both
 * give the same bits). Φ is CUDA's normcdff (erfc-based, accurate in relative terms on both
 * tails, as the CPU's gf_normal_cdf); no fast-math intrinsics. */
__device__ static inline float cu_gelu(float v) { return v * normcdff(v); }
__device__ static inline float cu_gelu_slope(float v) {
    return normcdff(v) + v * (0.39894228040143268f * expf(-0.5f * v * v));
}

/* ---- dropout's mask (dropout.cu; the CPU's gf_dropout_mask, bit for bit) ----
 * x is (R, ...), per elements a row, R = k * nb rows: k copies of the nb batch rows
 * [row0, row0 + nb). Element i keeps when
 *   gf_rng_hash_uniform(gf_rng_hash(key, j / nb), (row0 + j % nb) * per + e) >= p,  j = i / per, e = i % per.
 * The key is drawn on the host, one gf_rng_u64 per call as the CPU draws it, or, when the step
 * drew its keys before (gf_ctx_draw_keys: a CUDA graph's replay), read on the device from
 * key_dev. */
struct cu_drop {
    uint64_t key;
    const uint64_t *key_dev;
    int64_t per, nb, row0;
    float p, scale;
};

static inline cu_drop cu_drop_draw(gf_ctx *ctx, const gf_tensor *x, float p) {
    int64_t N = gf_tensor_numel(x), R = x->shape[0];
    cu_drop d = {0, NULL, R > 0 ? N / R : 0, ctx->batch_rows > 0 ? ctx->batch_rows : R,
                 ctx->batch_rows > 0 ? ctx->batch_row0 : 0, p, 1.0f / (1.0f - p)};
    if (ctx->n_keys) {
        GF_ASSERT(ctx->key_next < ctx->n_keys, "dropout: the step drew %d keys before it, and this is one more",
                  ctx->n_keys);
        d.key_dev = ctx->key_dev + ctx->key_next++;
    } else {
        d.key = gf_rng_u64(ctx->rng);
    }
    ctx->keys_drawn++;
    return d;
}

/* the key of this launch (read once per thread) */
__device__ static inline uint64_t cu_drop_key(const cu_drop &d) { return d.key_dev ? *d.key_dev : d.key; }

__device__ static inline bool cu_drop_keeps(const cu_drop &d, uint64_t key, int64_t i) {
    const int64_t j = i / d.per, e = i % d.per;
    const uint64_t kj = gf_rng_hash(key, (uint64_t)(j / d.nb)), g0 = (uint64_t)(d.row0 + j % d.nb) * (uint64_t)d.per;
    return gf_rng_hash_uniform(kj, g0 + (uint64_t)e) >= d.p;
}

/* ---- column sums: dst_k[c] (= or +=) Σ_r f_k(r, c), r < N, c < C, k < K ----
 * The one broadcast-reduction of the CUDA ops (gf_colsum_acc's twin): bias gradients, the
 * broadcast add, LayerNorm's gain and shift. One launch, two stages, both in a fixed order: rows
 * are cut into chunks of CU_COLSUM_ROWS, a block per chunk and 32 columns; within a chunk, thread
 * row ty sums rows ty, ty + 8, ... and the 8 partials are added in ty order; then the last of a
 * column strip's blocks to finish adds the chunks' sums in chunk order. Which block finishes last
 * varies from run to run, the order of the additions does not: the blocks count themselves done
 * with an integer atomicAdd on the strip's counter (gf_cuda_counters), no floating-point atomics.
 * K sums over the same rows (LayerNorm's gain and shift: K = 2) share the launch and the reads
 * of f's inputs; each sum's order is the one it has alone, so its bits are too.
 * f is a functor with `__device__ cu_sums<K> operator()(int64_t r, int64_t c) const` (K = 1: a
 * float, through cu_one); threads of a warp read 32 consecutive columns of a row (coalesced). */
#define CU_COLSUM_TY 8
#define CU_COLSUM_ROWS 64

template <int K>
struct cu_sums {
    float v[K];
};

/* where the K sums go: dst[k] (= when store[k], else +=) */
template <int K>
struct cu_sum_dsts {
    float *dst[K];
    int store[K];
};

/* part (K, chunks, C), chunks = gridDim.y: the chunks' sums; done[blockIdx.x]: the blocks of
 * strip blockIdx.x that have written theirs, 0 at the launch and left at 0 by the last block (a
 * replayed CUDA graph launches the kernel again). With one chunk its sums are the column sums. */
template <int K, class F>
__global__ void cu_colsum_run(cu_sum_dsts<K> d, float *part, unsigned *done, int64_t N, int64_t C, int64_t rows,
                              F f) {
    static_assert(K <= CU_COLSUM_TY, "the last block adds sum k on thread row k");
    __shared__ float sh[K][CU_COLSUM_TY][32];
    __shared__ int last;
    const int64_t chunks = gridDim.y, c = (int64_t)blockIdx.x * 32 + threadIdx.x;
    const int64_t r0 = (int64_t)blockIdx.y * rows, r1 = r0 + rows < N ? r0 + rows : N;
    cu_sums<K> s;
    for (int k = 0; k < K; k++) s.v[k] = 0.0f;
    if (c < C)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += CU_COLSUM_TY) {
            const cu_sums<K> e = f(r, c);
            for (int k = 0; k < K; k++) s.v[k] += e.v[k];
        }
    for (int k = 0; k < K; k++) sh[k][threadIdx.y][threadIdx.x] = s.v[k];
    __syncthreads();
    if (threadIdx.y == 0 && c < C)
        for (int k = 0; k < K; k++) {
            float t = sh[k][0][threadIdx.x];
            for (int y = 1; y < CU_COLSUM_TY; y++) t += sh[k][y][threadIdx.x];
            if (chunks == 1) d.dst[k][c] = d.store[k] ? t : d.dst[k][c] + t;
            else ((volatile float *)part)[((int64_t)k * chunks + blockIdx.y) * C + c] = t;
        }
    if (chunks == 1) return;
    /* the CUDA guide's "last block" sum: each writer's fence orders its partials before the count
     * that the barrier puts after every writer's; the last block reads them volatile (not L1) */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(&done[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.y < K && c < C) {
        const int k = threadIdx.y;
        const volatile float *pk = part + (int64_t)k * chunks * C;
        float t = pk[c];
        for (int64_t q = 1; q < chunks; q++) t += pk[q * C + c];
        d.dst[k][c] = d.store[k] ? t : d.dst[k][c] + t;
    }
    if (threadIdx.x == 0 && threadIdx.y == 0) done[blockIdx.x] = 0;
}

/* f: a functor f(r, c) giving the K elements (r, c), with f.bytes(N, C) what reading N rows of
 * them moves (GF_CUDA_LAUNCHED's figure) */
template <int K, class F>
static void cu_colsums(gf_ctx *ctx, cu_sum_dsts<K> d, int64_t N, int64_t C, F f) {
    int64_t rows = CU_COLSUM_ROWS;
    if ((N + rows - 1) / rows > 65535) rows = (N + 65534) / 65535; /* gridDim.y limit */
    const int64_t chunks = (N + rows - 1) / rows;
    if (chunks == 0) { /* no rows: a sum of nothing (a launch of no blocks is an error) */
        for (int k = 0; k < K; k++)
            if (d.store[k]) GF_CUDA_NOTE(cudaMemsetAsync(d.dst[k], 0, (size_t)C * sizeof(float), gf_cuda_stream()));
        return;
    }
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)chunks), block(32, CU_COLSUM_TY);
    float *part = NULL;
    unsigned *done = NULL;
    if (chunks > 1) {
        part = gf_cuda_floats(ctx, K * chunks * C); // (K, chunks, C)
        done = gf_cuda_counters(grid.x);
        if (!done) return; /* noted */
    }
    cu_colsum_run<K, F><<<grid, block, 0, gf_cuda_stream()>>>(d, part, done, N, C, rows, f);
    int64_t out = 0;
    for (int k = 0; k < K; k++) out += (d.store[k] ? 1 : 2) * C;
    GF_CUDA_LAUNCHED("cu_colsum_run", f.bytes(N, C) + 4 * ((chunks > 1 ? 2 * K * chunks * C : 0) + out));
}

/* a one-element functor as cu_colsums' K = 1 */
template <class F>
struct cu_one {
    F f;
    int64_t bytes(int64_t N, int64_t C) const { return f.bytes(N, C); }
    __device__ cu_sums<1> operator()(int64_t r, int64_t c) const { return cu_sums<1>{{f(r, c)}}; }
};

/* dst[c] (= when store, else +=) Σ_r f(r, c) */
template <class F>
static void cu_colsum(gf_ctx *ctx, float *dst, int64_t N, int64_t C, int store, F f) {
    cu_colsums<1>(ctx, cu_sum_dsts<1>{{dst}, {store}}, N, C, cu_one<F>{f});
}

/* f(r, c) = g[r * C + c] */
struct cu_rows {
    const float *g;
    int64_t C;
    __device__ float operator()(int64_t r, int64_t c) const { return g[r * C + c]; }
    int64_t bytes(int64_t N, int64_t C_) const { return 4 * N * C_; }
};

#endif
