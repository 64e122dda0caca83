/* linear_gelu.c — a linear layer and its GELU in one op (the FFN's first layer, the NLI
 * classifier's hidden layer):
 *   h (N, OUT) = x (N, IN) · W^T + b,  y = GELU(h)
 * = gf_gelu(gf_linear(x, w, b)) with the same arithmetic in the same order: the product is
 * linear.c's (gf_linear_into: gf_gemm_bias, the bias added by the product), GELU gelu.c's passes, so the bits are the unfused
 * chain's. h is no tensor: it is saved for backward, which gives dh = dy ⊙ GELU'(h) and the bias
 * gradient Σ_rows dh in one pass over the rows (gf_colsum_fill: dh's row is summed while it is
 * in cache, not read again), then linear's two GEMMs on dh. In `gflow bench` the GEMMs count as
 * gemm, the GELU passes (forward and backward) as elementwise.
 */
#include "op_util.h"

typedef struct dh_rows {
    float *dh;
    uint16_t *d16; /* dh's bf16 bits for the products (gf_gemm_round_into), or NULL */
    const float *dy, *h, *y;
    int64_t C;
} dh_rows;

/* row r of dh = dy ⊙ GELU'(h), stored (dh is the op's own scratch) */
static void dh_row(void *arg, int64_t r) {
    const dh_rows *a = arg;
    gf_gelu_backward_span(a->dh + r * a->C, a->d16 ? a->d16 + r * a->C : NULL, a->dy + r * a->C, a->h + r * a->C,
                          a->y + r * a->C, a->C, 1);
}

/* backward, with dy = dL/dy (N, OUT):
 *   dh = dy ⊙ (Φ(h) + h φ(h)) ;  db += Σ_rows dh      (one pass; Φ(h) = y / h, gelu.c)
 *   dX += dh · W ;  dW += dh^T · X                      (gf_linear_grads) */
static void linear_gelu_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t N = gf_tensor_rows(x), OUT = w->shape[0];
    double t0 = gf_prof_begin(ctx);
    float *dh = gf_arena_floats(&ctx->arena, N * OUT); // (N, OUT)
    /* bf16: both products' A, rounded as it is written */
    uint16_t *d16 = gf_needs_grad(x) || gf_needs_grad(w) ? gf_gemm_round_into(ctx, dh, N, OUT) : NULL; // (N, OUT)
    if (gf_needs_grad(b)) {
        if (gf_grad_fresh(b)) memset(b->grad, 0, (size_t)OUT * sizeof(float));
        dh_rows a = {dh, d16, n->out->grad, n->saved, n->out->data, OUT};
        gf_colsum_fill(ctx, b->grad, dh, N, OUT, dh_row, &a);
    } else {
        gf_gelu_backward_rows(dh, d16, n->out->grad, n->saved, n->out->data, N * OUT, 1);
    }
    gf_prof_bwd_as(ctx, GF_FAM_GEMM, GF_FAM_ELEMWISE, t0);
    gf_linear_grads(ctx, x, w, dh);
}

gf_tensor *gf_linear_gelu(gf_ctx *ctx, gf_tensor *x, gf_tensor *w, gf_tensor *b) {
    double t0 = gf_prof_begin(ctx);
    gf_linear_check("linear_gelu", x, w, b);
    gf_tensor *in[3] = {x, w, b};
    const gf_backend_ops *dev = gf_op_backend("linear_gelu", 3, in);
    if (dev) return dev->linear_gelu(ctx, x, w, b);
    int64_t N = gf_tensor_rows(x), OUT = w->shape[0];
    float *h = gf_arena_floats(&ctx->arena, N * OUT); // (N, OUT) the pre-activation, saved
    gf_linear_into(ctx, x, w, b, h);
    gf_prof_end(ctx, GF_FAM_GEMM, t0);
    double t1 = gf_prof_begin(ctx);
    gf_tensor *y = gf_tensor_like_cols(ctx, x, OUT); // (N, OUT)
    /* bf16: y's bits for the next linear's products, in GELU's pass (rounding y there read it again) */
    gf_gelu_forward_rows(y->data, gf_gemm_round_into(ctx, y->data, N, OUT), h, N * OUT);
    gf_node *n = gf_tape_record(ctx, &gf_op_linear_gelu, y, 3, in);
    if (n) n->saved = h;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t1);
    return y;
}

const gf_op_def gf_op_linear_gelu = {"linear_gelu", GF_FAM_GEMM, linear_gelu_backward, 1};
