/* emu_kernels.cu — kernels with deliberate faults, for the emulator's own tests
 * (test_cuda_emu.c; built only with -Demulate_cuda=true). Each entry point launches one kernel
 * on gflow's stream and returns cudaGetLastError(). */
#include "gflow/cuda.h"

/* out[t] = in[(t + 1) % n] through shared memory; sync = 0 leaves out the barrier between the
 * writes and the reads (the bug the emulator must expose) */
__global__ static void ek_neighbour(float *out, const float *in, int n, int sync) {
    __shared__ float sh[256];
    const int t = threadIdx.x;
    sh[t] = in[t];
    if (sync) __syncthreads();
    out[t] = sh[(t + 1) % n];
}

/* every lane gets the sum of its warp's values (a butterfly of xor shuffles) */
__global__ static void ek_warp_sum(float *out, const float *in) {
    float v = in[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

/* half a warp waits at __syncthreads, the other half at a shuffle: no GPU gets past this */
__global__ static void ek_mixed_barriers(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) __syncthreads();
    else v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

/* out[t] = t through dynamic shared memory */
__global__ static void ek_dynamic(float *out, int n) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    if ((int)threadIdx.x < n) out[threadIdx.x] = dyn[threadIdx.x];
}

/* out[t] = in[t + 1]: thread n-1 reads one float past the end of `in` */
__global__ static void ek_read_past(float *out, const float *in, int n) {
    if ((int)threadIdx.x < n) out[threadIdx.x] = in[threadIdx.x + 1];
}

/* each thread takes a ticket: out[global thread] = atomicAdd(count, 1), its turn among all */
__global__ static void ek_tickets(unsigned *out, unsigned *count) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = atomicAdd(count, 1u);
    __threadfence();
}

/* out[t] = x + 100 y + 10000 z of the thread numbered t, x fastest, as a GPU numbers a block's threads */
__global__ static void ek_thread_index(float *out) {
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[t] = (float)(threadIdx.x + 100 * threadIdx.y + 10000 * threadIdx.z);
}

/* the lanes from `live` on exit before the others' shuffle (the emulator aborts: exited lanes) */
__global__ static void ek_exited_lanes(float *out, int live) {
    float v = (float)threadIdx.x;
    if ((int)threadIdx.x >= live) return;
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

/* 64 threads: the second warp exits whole, the first sums its values with shuffles */
__global__ static void ek_warp_exits(float *out, const float *in) {
    if (threadIdx.x >= 32) return;
    float v = in[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

extern "C" {

cudaError_t gf_ek_neighbour(float *out, const float *in, int n, int sync) {
    ek_neighbour<<<1, n, 0, gf_cuda_stream()>>>(out, in, n, sync);
    return cudaGetLastError();
}
/* n threads: a multiple of 32, or a partial warp (the emulator aborts) */
cudaError_t gf_ek_warp_sum(float *out, const float *in, int n) {
    ek_warp_sum<<<1, n, 0, gf_cuda_stream()>>>(out, in);
    return cudaGetLastError();
}
cudaError_t gf_ek_mixed_barriers(float *out) {
    ek_mixed_barriers<<<1, 32, 0, gf_cuda_stream()>>>(out);
    return cudaGetLastError();
}
/* bytes of dynamic shared memory; optin: raise the kernel's limit to them first */
cudaError_t gf_ek_dynamic(float *out, int n, size_t bytes, int optin) {
    if (optin) {
        cudaError_t e = cudaFuncSetAttribute(ek_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        if (e) return e;
    }
    ek_dynamic<<<1, n, bytes, gf_cuda_stream()>>>(out, n);
    return cudaGetLastError();
}
cudaError_t gf_ek_read_past(float *out, const float *in, int n) {
    ek_read_past<<<1, n, 0, gf_cuda_stream()>>>(out, in, n);
    return cudaGetLastError();
}
/* blocks x threads tickets from *count (device memory, or not: the emulator aborts) */
cudaError_t gf_ek_tickets(unsigned *out, unsigned *count, int blocks, int threads) {
    ek_tickets<<<blocks, threads, 0, gf_cuda_stream()>>>(out, count);
    return cudaGetLastError();
}
/* a launch of 2048 threads per block: over every GPU's limit */
cudaError_t gf_ek_too_many_threads(float *out) {
    ek_dynamic<<<1, 2048, 2048 * sizeof(float), gf_cuda_stream()>>>(out, 2048);
    return cudaGetLastError();
}
/* one block of x × y × z threads */
cudaError_t gf_ek_thread_index(float *out, int x, int y, int z) {
    ek_thread_index<<<1, dim3((unsigned)x, (unsigned)y, (unsigned)z), 0, gf_cuda_stream()>>>(out);
    return cudaGetLastError();
}
/* one warp, of which lanes 0..live-1 shuffle */
cudaError_t gf_ek_exited_lanes(float *out, int live) {
    ek_exited_lanes<<<1, 32, 0, gf_cuda_stream()>>>(out, live);
    return cudaGetLastError();
}
cudaError_t gf_ek_warp_exits(float *out, const float *in) {
    ek_warp_exits<<<1, 64, 0, gf_cuda_stream()>>>(out, in);
    return cudaGetLastError();
}
}
