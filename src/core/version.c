/* version.c — the build's identity (see gflow/version.h). GF_VERSION and GF_BUILD_OPTS come
 * from meson; the git description from the generated describe.c. */
#include "gflow/version.h"
#include <stdio.h>

const char *gf_version(void) { return GF_VERSION; }

const char *gf_build_id(void) {
    static char id[160];
    if (!id[0]) snprintf(id, sizeof id, "%s+%s", GF_VERSION, gf_build_describe());
    return id;
}

const char *gf_build_options(void) {
#ifdef GF_HAVE_MPI
    return GF_BUILD_OPTS ", mpi";
#else
    return GF_BUILD_OPTS ", no mpi";
#endif
}
