/* fault_kernels.cu — a kernel that faults on a GPU, for the GPU-only test of the debug sync mode
 * (test_cuda_device.c, cuda/sync_mode_names_the_faulting_kernel; built with the real nvcc only:
 * the emulator stops at such a store itself). */
#include "gflow/cuda.h"

/* a store through the pointer it is given (NULL: an illegal address on every GPU) */
__global__ static void fk_store(float *p) { p[threadIdx.x] = 1.0f; }

extern "C" void gf_test_launch_fault(float *p) {
    fk_store<<<1, 32, 0, gf_cuda_stream()>>>(p);
    GF_CUDA_LAUNCHED("fk_store", 4 * 32); /* 32 floats written */
}
