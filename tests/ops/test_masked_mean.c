/* test_masked_mean.c — masked mean pooling: gradients, a hand reference, padding invariance and
 * the all-padding row (output 0, no gradient). */
#include "gf_test.h"
#include "gradcheck.h"
#include "gflow/nli.h"
#include <string.h>

static const float MM_MASK[3 * 5] = {1, 1, 1, 0, 0, /**/ 0, 0, 0, 0, 0, /**/ 1, 0, 1, 1, 1};
static gf_tensor *b_mm(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_masked_mean(c, in[0], MM_MASK); }

GF_TEST(grad, masked_mean) {
    int64_t s[3] = {3, 5, 4};
    gf_tensor *in[1] = {gc_leaf(3, s, 41, 1.0f)};
    GF_CHECK(gc_check("masked_mean", b_mm, in, 1, NULL, (gc_opts){0}) == 0, "grads");
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = b_mm(&ctx, in, NULL);
    GF_CHECK(y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == 4, "shape");
    for (int b = 0; b < 3; b++)
        for (int d = 0; d < 4; d++) {
            double s1 = 0, n = 0;
            for (int t = 0; t < 5; t++) { s1 += MM_MASK[b * 5 + t] * in[0]->data[(b * 5 + t) * 4 + d]; n += MM_MASK[b * 5 + t]; }
            GF_CHECK_NEAR(y->data[b * 4 + d], n > 0 ? s1 / n : 0.0, 1e-6, 1e-5);
        }
    /* padded positions never matter */
    in[0]->data[(0 * 5 + 4) * 4 + 1] += 100.0f;
    gf_tensor *y2 = b_mm(&ctx, in, NULL);
    GF_CHECK(memcmp(y->data, y2->data, 12 * sizeof(float)) == 0, "padding changed the pool");
    /* the all-padding row passes no gradient */
    gf_ctx_reset(&ctx);
    memset(in[0]->grad, 0, 60 * sizeof(float));
    gf_tensor *y3 = b_mm(&ctx, in, NULL);
    float ones[12];
    for (int i = 0; i < 12; i++) ones[i] = 1.0f;
    gf_tape_backward_from(&ctx, y3, ones);
    for (int i = 20; i < 40; i++) GF_CHECK(in[0]->grad[i] == 0.0f, "grad into an all-padding row");
    GF_CHECK_NEAR(in[0]->grad[0], 1.0 / 3.0, 1e-7, 1e-6);
    gf_ctx_free(&ctx);
    gc_leaf_free(in[0]);
}
