/* cuda_emu.h — the CUDA C++ kernel language on the host, for gflow's CUDA emulator
 * (docs/cuda.md "The emulator"). Force-included (-include) before every .cu file of an emulator
 * build, which src/core/cuda/emu/cucc.sh compiles with the host C++ compiler after rewriting
 * each launch `k<<<grid, block, smem, stream>>>(args)` into `k | cfg(grid, block, smem, stream) *
 * args(args)`: operator| below runs the kernel, block after block, each CUDA thread a fiber
 * (emu.cc), so __syncthreads and warp shuffles wait for the threads they wait for on a GPU.
 *
 * What it checks that a GPU would fault on: kernel pointer arguments that are not device memory
 * (cudaMalloc'd), launch configurations over the limits, dynamic shared memory over the
 * function's limit, threads that wait at different barriers, shuffles in a partial warp. Shared
 * and fresh device memory start as NaN bytes (0xff), not zero. Within a barrier phase the threads
 * of a block run one after another (GF_CUDA_EMU_ORDER=reverse: last first), so a read of shared
 * memory another thread writes without a barrier between sees the NaN or the old value. Blocks
 * run one after another, in index order or (reverse) last first, so a kernel that takes the
 * highest block for the last to finish (instead of counting, atomicAdd) fails in one of them. */
#ifndef GF_CUDA_EMU_H
#define GF_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda_runtime_api.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* static shared arrays live in one section, set to NaN bytes before each block (emu.cc) */
#define __shared__ __attribute__((section("gf_emu_shared"))) static

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* the running fiber's indices, set by the scheduler before it switches to a thread */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
static const int warpSize = 32;

extern "C" {
void gf_emu_syncthreads(void);
/* lane's value of v for this shuffle; all 32 lanes of the warp take part (a full mask) */
uint64_t gf_emu_shfl_xor(unsigned mask, uint64_t v, int lane_mask);
void *gf_emu_dyn_smem(void);
/* an atomic's address must be device memory, aligned to its size (else abort) */
void gf_emu_check_atomic(const void *p, size_t bytes);
}

static inline void __syncthreads(void) { gf_emu_syncthreads(); }
static inline float __shfl_xor_sync(unsigned mask, float v, int m) {
    uint32_t u;
    __builtin_memcpy(&u, &v, 4);
    u = (uint32_t)gf_emu_shfl_xor(mask, u, m);
    __builtin_memcpy(&v, &u, 4);
    return v;
}
static inline double __shfl_xor_sync(unsigned mask, double v, int m) {
    uint64_t u;
    __builtin_memcpy(&u, &v, 8);
    u = gf_emu_shfl_xor(mask, u, m);
    __builtin_memcpy(&v, &u, 8);
    return v;
}
static inline int __shfl_xor_sync(unsigned mask, int v, int m) { return (int)gf_emu_shfl_xor(mask, (uint32_t)v, m); }

/* Integer atomics and the device-wide fence, as a GPU has them: the read-modify-write is one
 * atomic operation and the fence orders a thread's memory accesses before it against those
 * after it, for every thread of the device. The emulator runs one thread at a time (blocks one
 * after another, a block's threads switching only at barriers), so these hold by construction;
 * the host's atomics keep them true for any schedule. */
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
    gf_emu_check_atomic(p, sizeof *p);
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* IEEE round-to-nearest arithmetic: the emulator compiles with -ffp-contract=off, so these are
 * the plain operators */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
/* CUDA's standard normal CDF (not in C's libm): Φ(x) = erfc(-x/√2)/2, in double, rounded once */
static inline float normcdff(float x) { return (float)(0.5 * erfc(-(double)x * 0.70710678118654752440)); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }

namespace gf_emu {

struct cfg {
    dim3 grid, block;
    size_t smem;
    const char *file;
    int line;
};
static inline cfg make_cfg(const char *file, int line, dim3 grid, dim3 block, size_t smem = 0,
                           cudaStream_t s = NULL) {
    (void)s; /* one stream, and the emulator runs everything at once */
    return cfg{grid, block, smem, file, line};
}
template <class... A> struct args_t {
    std::tuple<A...> t;
};
template <class... A> static inline args_t<A...> args(A... a) { return args_t<A...>{std::tuple<A...>(a...)}; }
template <class... A> struct launch_t {
    cfg c;
    std::tuple<A...> t;
};
template <class... A> static inline launch_t<A...> operator*(cfg c, args_t<A...> a) { return launch_t<A...>{c, a.t}; }

/* emu.cc: check the configuration, then run body(ctx) for every thread of every block.
 * A configuration error is returned (and kept for cudaGetLastError); faults abort. */
typedef void (*body_fn)(void *ctx);
extern "C" cudaError_t gf_emu_launch(const void *kernel, const cfg *c, body_fn body, void *ctx);
/* while the stream captures (a graph, emu.cc): 1, and gf_emu_capture_launch keeps the launch, its
 * configuration and its arguments (ctx, deleted by drop with the last graph holding it) to run at
 * each launch of the graph; a configuration error is returned as gf_emu_launch would */
extern "C" int gf_emu_capturing(void);
extern "C" cudaError_t gf_emu_capture_launch(const void *kernel, const cfg *c, body_fn body, void *ctx,
                                             void (*drop)(void *));
/* a kernel argument that is a pointer must be NULL or point into device memory (else abort) */
extern "C" void gf_emu_check_arg(const cfg *c, int index, const void *p);

template <class T> static inline void check_arg(const cfg &c, int i, const T &a) {
    if constexpr (std::is_pointer<T>::value) gf_emu_check_arg(&c, i, (const void *)a);
}

/* k<<<...>>>(args...): the arguments converted to the kernel's parameter types as nvcc does */
template <class... P, class... A> static inline void operator|(void (*k)(P...), launch_t<A...> l) {
    std::apply([&l](const A &...a) {
        int i = 0;
        (check_arg(l.c, i++, a), ...);
    }, l.t);
    if (gf_emu_capturing()) { /* the arguments by value, for every launch of the graph */
        struct held_t {
            void (*k)(P...);
            std::tuple<A...> t;
            static void run(void *ctx) {
                held_t *x = (held_t *)ctx;
                std::apply([x](A &...a) { x->k(a...); }, x->t);
            }
            static void drop(void *ctx) { delete (held_t *)ctx; }
        };
        gf_emu_capture_launch((const void *)k, &l.c, &held_t::run, new held_t{k, l.t}, &held_t::drop);
        return;
    }
    struct ctx_t {
        void (*k)(P...);
        std::tuple<A...> *t;
        static void run(void *ctx) {
            ctx_t *x = (ctx_t *)ctx;
            std::apply([x](A &...a) { x->k(a...); }, *x->t);
        }
    } ctx{k, &l.t};
    gf_emu_launch((const void *)k, &l.c, &ctx_t::run, &ctx);
}

} // namespace gf_emu

#endif
