/* backend_ops.h — a backend's ops (internal to src/ops): the forward function of each op of
 * gflow/ops.def, with the op entry's signature, and the few per-device services of the ops.
 *
 * The op entry gf_<op> (src/ops/<op>.c) checks the shapes, then hands inputs that are not on the
 * host to the table of their device (gf_op_backend) and runs its host code. So the CPU's entries
 * are the op entries themselves (src/ops/backend_cpu.c), and another backend's are its kernels'
 * entries (src/ops/cuda/backend_cuda.c). Registering an op: one line in each backend's table;
 * tests/arch/check_backend.py checks that every op of ops.def has one. */
#ifndef GF_BACKEND_OPS_H
#define GF_BACKEND_OPS_H

#include "gflow/backend.h"
#include "gflow/ops.h"

typedef struct gf_backend_ops {
    /* one field per op, typed as its entry gf_<op> (gflow/ops.h) */
#define GF_OP(name) __typeof__(gf_##name) *name;
#include "gflow/ops.def"
#undef GF_OP
    __typeof__(gf_embedding_feed) *embedding_feed; /* a step's ids to the device before its capture */
    const char *(*gemm_bf16_path)(void);           /* what computes the bf16 products (gf_gemm_bf16_path_on) */
} gf_backend_ops;

#endif
