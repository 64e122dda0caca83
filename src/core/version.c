/* version.c — the build's identity (see gflow/version.h). GF_VERSION, GF_BUILD_BLAS, GF_BUILD_CPU,
 * GF_BUILD_TYPE and (with the CUDA backend) GF_BUILD_CUDA come from meson; the git description
 * from the generated describe.c; the BLAS library's own description (version, kernel, threading)
 * is asked at run time, since the shared library a binary loads is the one that runs. */
#include "gflow/version.h"
#include <cblas.h>
#include <stdio.h>

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

const char *gf_build_options(void) {
    static char opts[512];
    if (!opts[0])
        snprintf(opts, sizeof opts, "cpu %s%s, %s, blas %s (%s; %s), openmp, %s, %s", GF_BUILD_CPU,
                 GF_BUILD_CLONES, GF_BUILD_TYPE, GF_BUILD_BLAS, openblas_get_config(), blas_threading(),
                 GF_BUILD_MPI, GF_BUILD_CUDA_OPT);
    return opts;
}
