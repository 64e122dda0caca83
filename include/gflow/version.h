/* gflow/version.h — which build this is. The build id goes into every run's recipe.ini header,
 * checkpoint metadata and summary.tsv, so a results table can say which build made each row. */
#ifndef GFLOW_VERSION_H
#define GFLOW_VERSION_H

/* "0.1.0" */
const char *gf_version(void);
/* `git describe --always --dirty` of the source tree at build time ("unknown" outside git) */
const char *gf_build_describe(void);
/* "0.1.0+<describe>": one token naming the build */
const char *gf_build_id(void);
/* one line of the build's options: target CPU, buildtype, BLAS (its version and threading, asked
 * at run time), OpenMP, MPI, CUDA */
const char *gf_build_options(void);

/* The OpenBLAS kernel ("SkylakeX", "Haswell") this CPU allows when OpenBLAS chose one below it
 * (a processor newer than its tables: then it falls back to SSE3), else NULL. main() sets it as
 * OPENBLAS_CORETYPE, unless the user did, before OpenBLAS starts (src/cli/main.c). */
const char *gf_blas_better_core(void);

#endif
