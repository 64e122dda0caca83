/* gated_lerp.c — the Grassmann block's gate in one op:
 *   u (N, D) = [a ; b] · W^T + bias,  y = σ(u) ⊙ a + (1 − σ(u)) ⊙ b
 * with a, b (N, D), W (D, 2D), bias (D) or NULL: = gf_sigmoid_lerp(gf_concat_linear(a, b, W, bias),
 * a, b) with the same arithmetic in the same order (concat_linear.c's products: the first with
 * the bias, gf_gemm_bias, the second adding to it; sigmoid_lerp.c's passes), so the bits are the
 * chain's. u is no tensor: it is saved for backward, which gives du = dL/du and the bias gradient
 * Σ_rows du in one pass over the rows (gf_colsum_fill, as linear_gelu.c's dh), the lerp's terms
 * of da and db in that pass, then concat_linear's GEMMs on du. The GPU op folds the bias into its
 * gate kernel instead (src/ops/cuda/gated_lerp.cu). In `gflow bench` the GEMMs count as gemm,
 * the gate's passes as elementwise.
 */
#include "op_util.h"

typedef struct gate_rows {
    float *du, *da, *db;
    uint16_t *du16; /* du's bf16 bits for concat_linear's products (gf_gemm_round_into), or NULL */
    const float *g, *u, *a, *b;
    int64_t D;
    unsigned fresh; /* GF_SLERP_FRESH_*: du always, da and db where their buffers are fresh */
} gate_rows;

/* row r of du (stored as 0 + its term, the chain's u gradient added to zeros) and its bits, da
 * and db (added, or stored as 0 + the term where fresh) */
static void gate_row(void *arg, int64_t r) {
    const gate_rows *p = arg;
    int64_t o = r * p->D;
    gf_sigmoid_lerp_backward_piece(p->du + o, p->da ? p->da + o : NULL, p->db ? p->db + o : NULL, p->g + o,
                                   p->u + o, p->a + o, p->b + o, p->D, p->fresh);
    if (p->du16) gf_bf16_row(p->du16 + o, p->du + o, p->D);
}

/* an input's gradient to add the lerp's term to (NULL where none is needed); where it is fresh
 * (uninitialised), `bit` joins *fresh, so the term is stored as 0 + the term, the bits of the
 * chain's sigmoid_lerp adding to zeros, without zeroing the buffer first (a 4 MB memset and read a
 * layer at the paper's size). a and b one tensor: the first call takes the flag, so b's term adds. */
static float *lerp_grad(gf_tensor *x, unsigned bit, unsigned *fresh) {
    if (!gf_needs_grad(x)) return NULL;
    if (gf_grad_fresh(x)) *fresh |= bit;
    return x->grad;
}

/* backward, with G = dL/dy (N, D), α = σ(u):
 *   du = (G ⊙ (a − b)) ⊙ α ⊙ (1 − α) ;  dbias += Σ_rows du ;  da += G ⊙ α ;  db += G ⊙ (1 − α)  (one pass;
 *   in bf16 also du's bits, which the products below take)
 *   da += du · W[:, :D] ;  db += du · W[:, D:] ;  dW += du^T · [a ; b]     (gf_concat_linear_grads) */
static void gated_lerp_backward(gf_ctx *ctx, gf_node *n) {
    gf_tensor *a = n->in[0], *b = n->in[1], *w = n->in[2], *bias = n->in[3];
    int64_t N = gf_tensor_rows(a), D = gf_tensor_cols(a);
    double t0 = gf_prof_begin(ctx);
    float *du = gf_arena_floats(&ctx->arena, N * D); // (N, D), every element stored by gate_row
    uint16_t *du16 = gf_needs_grad(a) || gf_needs_grad(b) || gf_needs_grad(w) ? gf_gemm_round_into(ctx, du, N, D) : NULL;
    unsigned fresh = GF_SLERP_FRESH_DU;
    float *da = lerp_grad(a, GF_SLERP_FRESH_DA, &fresh), *db = lerp_grad(b, GF_SLERP_FRESH_DB, &fresh);
    gate_rows p = {du, da, db, du16, n->out->grad, n->saved, a->data, b->data, D, fresh};
    if (gf_needs_grad(bias)) {
        if (gf_grad_fresh(bias)) memset(bias->grad, 0, (size_t)D * sizeof(float));
        gf_colsum_fill(ctx, bias->grad, du, N, D, gate_row, &p);
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < N; r++) gate_row(&p, r);
    }
    gf_prof_bwd_as(ctx, GF_FAM_GEMM, GF_FAM_ELEMWISE, t0);
    gf_concat_linear_grads(ctx, a, b, w, du);
}

gf_tensor *gf_gated_lerp(gf_ctx *ctx, gf_tensor *a, gf_tensor *b, gf_tensor *w, gf_tensor *bias) {
    double t0 = gf_prof_begin(ctx);
    gf_concat_linear_check("gated_lerp", a, b, w, bias);
    GF_ASSERT(gf_tensor_same_shape(a, b) && w->shape[0] == gf_tensor_cols(a),
              "gated_lerp: a and b must share a shape and weight %s have as many rows as their %lld columns",
              w->name ? w->name : "?", (long long)gf_tensor_cols(a));
    gf_tensor *in[4] = {a, b, w, bias};
    const gf_backend_ops *dev = gf_op_backend("gated_lerp", 4, in);
    if (dev) return dev->gated_lerp(ctx, a, b, w, bias);
    int64_t N = gf_tensor_rows(a), D = gf_tensor_cols(a);
    float *u = gf_arena_floats(&ctx->arena, N * D); // (N, D) the gate's pre-activation, saved
    gf_linear_cols_into(ctx, a, w, 0, bias, 0, u);
    gf_linear_cols_into(ctx, b, w, D, NULL, 1, u);
    gf_prof_end(ctx, GF_FAM_GEMM, t0);
    double t1 = gf_prof_begin(ctx);
    gf_tensor *y = gf_tensor_like(ctx, a); // (N, D)
    gf_sigmoid_lerp_rows(y->data, u, a->data, b->data, N * D);
    gf_node *n = gf_tape_record(ctx, &gf_op_gated_lerp, y, 4, in);
    if (n) n->saved = u;
    gf_prof_end(ctx, GF_FAM_ELEMWISE, t1);
    return y;
}

const gf_op_def gf_op_gated_lerp = {"gated_lerp", GF_FAM_GEMM, gated_lerp_backward, 1};
