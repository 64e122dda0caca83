/* version.c — the build's identity (see gflow/version.h). GF_VERSION, GF_BUILD_BLAS, GF_BUILD_CPU,
 * GF_BUILD_TYPE and (with the CUDA backend) GF_BUILD_CUDA come from meson; the git description
 * from the generated describe.c; the BLAS library's own description (version, kernel, threading)
 * is asked at run time, since the shared library a binary loads is the one that runs. */
#include "gflow/version.h"
#include <cblas.h>
#include <stdio.h>
#include <string.h>

const char *gf_version(void) { return GF_VERSION; }

const char *gf_build_id(void) {
    static char id[160];
    if (!id[0]) snprintf(id, sizeof id, "%s+%s", GF_VERSION, gf_build_describe());
    return id;
}

static const char *blas_threading(void) {
    switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthreads";
    case 2: return "openmp";
    default: return "unknown threading";
    }
}

#ifdef GF_HAVE_MPI
#define GF_BUILD_MPI "mpi"
#else
#define GF_BUILD_MPI "no mpi"
#endif
#ifdef GF_HAVE_CUDA
#define GF_BUILD_CUDA_OPT "cuda " GF_BUILD_CUDA /* "cuda 13.0 (sm_80/sm_90, PTX compute_90)" from meson */
#else
#define GF_BUILD_CUDA_OPT "cuda no"
#endif
#ifdef GF_KERNEL_CLONES_ON
#define GF_BUILD_CLONES " (kernels also for x86-64-v3/v4, chosen at load)"
#else
#define GF_BUILD_CLONES ""
#endif

/* OpenBLAS 0.3.21 (Debian 12) does not know every processor its DYNAMIC_ARCH build runs on: on a
 * Xeon it does not recognise (seen: family 6, model 207, with AVX-512 and AMX) it takes its
 * Prescott (SSE3) kernels, 33 GFLOP/s at 2048^3 where SkylakeX's give 216-297 on the same two
 * cores. The kernel this CPU's features allow when OpenBLAS picked one below them, else NULL. */
const char *gf_blas_better_core(void) {
    static const char *const old[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai",
                                      "Coppermine", "Northwood", "Banias", "Sandybridge", NULL};
    const char *now = openblas_get_corename();
    int generic = 0;
    for (int i = 0; old[i]; i++) generic |= now && !strcmp(now, old[i]);
    if (!generic) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

const char *gf_build_options(void) {
    static char opts[512];
    if (!opts[0])
        snprintf(opts, sizeof opts, "cpu %s%s, %s, blas %s (%s; kernel %s; %s), openmp, %s, %s", GF_BUILD_CPU,
                 GF_BUILD_CLONES, GF_BUILD_TYPE, GF_BUILD_BLAS, openblas_get_config(), openblas_get_corename(),
                 blas_threading(),
                 GF_BUILD_MPI, GF_BUILD_CUDA_OPT);
    return opts;
}
