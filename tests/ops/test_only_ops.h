/* test_only_ops.h — ops no model uses, kept for the tests: their gradient checks exercise the
 * tape (broadcast reductions, scalar outputs) on the simplest possible backward functions. */
#ifndef GF_TEST_ONLY_OPS_H
#define GF_TEST_ONLY_OPS_H

#include "gflow/ops.h"

/* a * b elementwise, same broadcasting as gf_add. */
gf_tensor *gf_mul(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
/* reductions of all elements to shape (1) */
gf_tensor *gf_sum(gf_ctx *ctx, gf_tensor *x);
gf_tensor *gf_mean(gf_ctx *ctx, gf_tensor *x);

extern const gf_op_def gf_test_op_mul, gf_test_op_sum, gf_test_op_mean;

#endif
