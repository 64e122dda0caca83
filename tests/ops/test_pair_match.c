/* test_pair_match.c — the [u; v; |u - v|; u ⊙ v] matching features: gradients and a hand reference. */
#include "gf_test.h"
#include "gradcheck.h"
#include "gflow/nli.h"

static gf_tensor *b_match(gf_ctx *c, gf_tensor **in, void *u) { (void)u; return gf_pair_match(c, in[0]); }

GF_TEST(grad, pair_match) {
    int64_t s[2] = {6, 5}; /* B = 3 pairs of D = 5 */
    gf_tensor *in[1] = {gc_leaf(2, s, 51, 1.0f)};
    GF_CHECK(gc_check("pair_match", b_match, in, 1, NULL, (gc_opts){0}) == 0, "grads");
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_tensor *y = b_match(&ctx, in, NULL);
    GF_CHECK(y->shape[0] == 3 && y->shape[1] == 20, "shape");
    for (int b = 0; b < 3; b++)
        for (int d = 0; d < 5; d++) {
            float u = in[0]->data[b * 5 + d], v = in[0]->data[(3 + b) * 5 + d];
            const float *yb = y->data + b * 20;
            GF_CHECK(yb[d] == u && yb[5 + d] == v && yb[10 + d] == fabsf(u - v) && yb[15 + d] == u * v,
                     "pair %d dim %d", b, d);
        }
    gf_ctx_free(&ctx);
    gc_leaf_free(in[0]);
}
