/* registry.c — the op table, generated from ops.def. */
#include "gflow/ops.h"

#define GF_OP(name, fam) extern const gf_op_def gf_op_##name;
#include "ops.def"
#undef GF_OP

const gf_op_def *const gf_op_table[GF_OP_COUNT] = {
#define GF_OP(name, fam) &gf_op_##name,
#include "ops.def"
#undef GF_OP
};

/* every listed op is defined exactly once: the array size and the enum count agree */
_Static_assert(sizeof gf_op_table / sizeof gf_op_table[0] == GF_OP_COUNT, "op table out of sync");

const char *gf_op_family_name(gf_op_family f) {
    static const char *n[GF_FAM_COUNT] = {"gemm", "plucker", "attention", "elementwise"};
    return (f >= 0 && f < GF_FAM_COUNT) ? n[f] : "?";
}
