/* test_only_ops.h — ops no model uses, kept for the tests: the tape's bookkeeping tests
 * (tests/core/test_core.c) build graphs from them, whose simple backwards make the expected
 * gradients exact; their own gradient checks are in test_ops_grad.c. (gf_mean was dropped: only
 * its own test used it.) */
#ifndef GF_TEST_ONLY_OPS_H
#define GF_TEST_ONLY_OPS_H

#include "gflow/ops.h"

/* a * b elementwise, same broadcasting as gf_add. */
gf_tensor *gf_mul(gf_ctx *ctx, gf_tensor *a, gf_tensor *b);
/* Σ of all elements, shape (1) */
gf_tensor *gf_sum(gf_ctx *ctx, gf_tensor *x);

extern const gf_op_def gf_test_op_mul, gf_test_op_sum;

#endif
