/* params_internal.h — the parameter block's pieces a backend's move reuses (internal to src/core;
 * params.c defines them, src/core/<dev>/backend_<dev>.c moves a block with them). */
#ifndef GF_PARAMS_INTERNAL_H
#define GF_PARAMS_INTERNAL_H

#include "gflow/params.h"

/* four zeroed host arrays of n floats, 64-byte aligned (the block on the host) */
gf_status gf_params_host_arrays(int64_t n, float *blk[GF_PP_COUNT]);
/* the block's arrays are blk[], on device d: point every parameter tensor into them */
void gf_params_point_into(gf_params *p, float *const blk[GF_PP_COUNT], gf_device d);

#endif
