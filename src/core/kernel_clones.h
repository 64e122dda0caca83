/* kernel_clones.h — GF_KERNEL_CLONES, for the ops' vector kernels (src/ops/op_util.h includes it)
 * and core's (gf_sumsq_f32).
 *
 * GF_KERNEL_CLONES before a hot vector kernel (a function without OpenMP threading inside: call
 * it from the parallel loop): in a portable build (-Dcpu=x86-64 or x86-64-v3, meson.build sets
 * GF_KERNEL_CLONES_ON) GCC compiles it also for x86-64-v4 (AVX-512) and x86-64-v3 (AVX2, FMA)
 * and picks the best the CPU has at load time. A native build (-Dcpu=native) needs no clones:
 * it is compiled for the build machine, and its code and results are what they were. */
#ifndef GF_KERNEL_CLONES_H
#define GF_KERNEL_CLONES_H

#ifdef GF_KERNEL_CLONES_ON
#define GF_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GF_KERNEL_CLONES
#endif

#endif
