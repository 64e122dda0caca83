/* test_concat_linear.c — concat_linear(a, b, W, bias) = linear(concat(a, b), W, bias) without the
 * concatenation: finite differences, and the unfused chain within rounding. The op sums each
 * output over Da then Db where the chain sums over Da + Db at once, so the two are not the same
 * bits; instead every element of the output and of every gradient, of both, must lie within the
 * worst-case rounding bound of a K-term fp32 sum of its exact value (computed in double from the
 * same operands, rounded to bf16 first in a bf16 case):
 *   |got - exact| <= (K + 2) · 2^-24 · (|start| + Σ_k |term_k|)
 * (K terms, the bias or the gradient's start, one more addition). Gradients start non-zero and
 * the arena's memory is NaN, so a store where an add was due (or the reverse) shows. */
#include "gf_test.h"
#include "gradcheck.h"
#include <math.h>
#include <string.h>

typedef struct cl_user {
    int bias; /* 0: bias NULL */
    int same; /* concat_linear(a, a, W): b is a */
    int wrap; /* every input out of a gelu: the gradients start fresh (W's for both column blocks) */
    gf_precision precision;
} cl_user;

static gf_tensor *cl_in(gf_ctx *c, gf_tensor **in, const cl_user *u, int i) {
    if (i == 3 && !u->bias) return NULL;
    return u->wrap ? gf_gelu(c, in[i]) : in[i];
}
static gf_tensor *b_cl(gf_ctx *c, gf_tensor **in, void *uv) {
    const cl_user *u = uv;
    c->precision = u->precision;
    gf_tensor *a = cl_in(c, in, u, 0), *b = u->same ? a : cl_in(c, in, u, 1);
    return gf_concat_linear(c, a, b, cl_in(c, in, u, 2), cl_in(c, in, u, 3));
}
static gf_tensor *b_cl_chain(gf_ctx *c, gf_tensor **in, void *uv) {
    const cl_user *u = uv;
    c->precision = u->precision;
    gf_tensor *a = cl_in(c, in, u, 0), *b = u->same ? a : cl_in(c, in, u, 1);
    return gf_linear(c, gf_concat(c, a, b), cl_in(c, in, u, 2), cl_in(c, in, u, 3));
}

GF_TEST(grad, concat_linear) {
    int64_t sa[3] = {2, 3, 5}, sb[3] = {2, 3, 4}, sw[2] = {6, 9}, sb1[1] = {6}, sws[2] = {6, 10};
    gf_tensor *in[4] = {gc_leaf(3, sa, 641, 1.5f), gc_leaf(3, sb, 642, 1.5f), gc_leaf(2, sw, 643, 0.7f),
                        gc_leaf(1, sb1, 644, 0.5f)};
    const cl_user plain = {.bias = 1}, nob = {0}, wrap = {.bias = 1, .wrap = 1};
    GF_CHECK(gc_check("concat_linear", b_cl, in, 4, (void *)&plain, (gc_opts){.h = 1e-3}) == 0, "grads");
    GF_CHECK(gc_check("concat_linear(no bias)", b_cl, in, 3, (void *)&nob, (gc_opts){.h = 1e-3}) == 0, "no-bias grads");
    GF_CHECK(gc_check("concat_linear(gelu inputs)", b_cl, in, 4, (void *)&wrap, (gc_opts){.h = 1e-3}) == 0,
             "fresh grads");
    /* concat_linear(a, a, W): both column blocks' products land in a's gradient */
    gf_tensor *ws = gc_leaf(2, sws, 645, 0.7f), *ins[4] = {in[0], in[1], ws, in[3]};
    const cl_user same = {.bias = 1, .same = 1};
    in[1]->flags &= ~GF_T_REQ_GRAD; /* unused */
    GF_CHECK(gc_check("concat_linear(a, a)", b_cl, ins, 4, (void *)&same, (gc_opts){.h = 1e-3}) == 0, "shared grads");
    gc_leaf_free(ws);
    for (int i = 0; i < 4; i++) gc_leaf_free(in[i]);
}

/* the value a product multiplies: x itself, or rounded to bf16 */
static double q(float x, gf_precision p) { return p == GF_PREC_BF16 ? (double)gf_bf16_round(x) : (double)x; }

static int n_bad;
/* got within the bound of exact (K terms summing to the magnitude mag besides the start) */
static void within(const char *what, const char *part, int64_t i, float got, double exact, double mag, int64_t K) {
    double bound = (double)(K + 2) * ldexp(1.0, -24) * mag;
    if (fabs((double)got - exact) <= bound && isfinite(got)) return;
    if (n_bad++ < 5)
        gf_test_fail(__FILE__, __LINE__, "%s: %s[%lld] = %.9g, exact %.9g, bound %.3g", what, part, (long long)i,
                     (double)got, exact, bound);
}

typedef struct cl_run {
    gf_tensor *in[4];
    gf_ctx c;
    gf_tensor *y;
    float *start[4]; /* each input's gradient before backward */
} cl_run;

static void run_one(cl_run *r, gc_build_fn f, const cl_user *u, const int32_t *nd, const int64_t (*sh)[3],
                    const float *probe) {
    for (int i = 0; i < 4; i++) {
        r->in[i] = gc_leaf(nd[i], sh[i], 700 + (uint64_t)i, i == 2 ? 0.3f : 1.0f);
        int64_t n = gf_tensor_numel(r->in[i]);
        gf_rng g;
        gf_rng_seed(&g, 750 + (uint64_t)i);
        for (int64_t j = 0; j < n; j++) r->in[i]->grad[j] = 0.5f * (float)gf_rng_normal(&g);
        r->start[i] = malloc((size_t)n * sizeof(float));
        memcpy(r->start[i], r->in[i]->grad, (size_t)n * sizeof(float));
    }
    gf_ctx_init(&r->c, 0, NULL);
    float *junk = gf_arena_floats(&r->c.arena, 1 << 20); /* NaN: a fresh gradient added to shows */
    for (int64_t j = 0; j < 1 << 20; j++) junk[j] = NAN;
    gf_ctx_reset(&r->c);
    r->y = f(&r->c, r->in, (void *)u);
    gf_tape_backward_from(&r->c, r->y, probe);
}

static void run_free(cl_run *r) {
    gf_ctx_free(&r->c);
    for (int i = 0; i < 4; i++) {
        gc_leaf_free(r->in[i]);
        free(r->start[i]);
    }
}

/* every element of r's output and gradients within the bound of its exact value */
static void check_exact(const char *what, const cl_run *r, const cl_user *u, const float *G) {
    const gf_tensor *a = r->in[0], *b = u->same ? r->in[0] : r->in[1], *w = r->in[2], *bias = r->in[3];
    const gf_precision p = u->precision;
    int64_t N = gf_tensor_rows(a), Da = gf_tensor_cols(a), Db = gf_tensor_cols(b), OUT = w->shape[0], IN = Da + Db;
    /* x = [a ; b] (N, IN) */
#define X(rr, k) ((k) < Da ? a->data[(rr) * Da + (k)] : b->data[(rr) * Db + (k) - Da])
    for (int64_t rr = 0; rr < N; rr++)
        for (int64_t o = 0; o < OUT; o++) {
            double s = u->bias ? bias->data[o] : 0.0, m = fabs(s);
            for (int64_t k = 0; k < IN; k++) {
                double t = q(X(rr, k), p) * q(w->data[o * IN + k], p);
                s += t, m += fabs(t);
            }
            within(what, "u", rr * OUT + o, r->y->data[rr * OUT + o], s, m, IN);
        }
    /* da, db: start + Σ_o G W; with b = a both blocks' sums */
    for (int i = 0; i < (u->same ? 1 : 2); i++) {
        const gf_tensor *x = r->in[i];
        int64_t C = gf_tensor_cols(x);
        for (int64_t rr = 0; rr < N; rr++)
            for (int64_t k = 0; k < C; k++) {
                double s = r->start[i][rr * C + k], m = fabs(s);
                for (int blk = 0; blk < (u->same ? 2 : 1); blk++) {
                    int64_t c0 = (i == 1 || blk == 1) ? Da : 0;
                    for (int64_t o = 0; o < OUT; o++) {
                        double t = q(G[rr * OUT + o], p) * q(w->data[o * IN + c0 + k], p);
                        s += t, m += fabs(t);
                    }
                }
                within(what, i ? "db" : "da", rr * C + k, x->grad[rr * C + k], s, m, (u->same ? 2 : 1) * OUT);
            }
    }
    /* dW: start + Σ_rows G^T x ; dbias: start + Σ_rows G */
    for (int64_t o = 0; o < OUT; o++) {
        for (int64_t k = 0; k < IN; k++) {
            double s = r->start[2][o * IN + k], m = fabs(s);
            for (int64_t rr = 0; rr < N; rr++) {
                double t = q(G[rr * OUT + o], p) * q(X(rr, k), p);
                s += t, m += fabs(t);
            }
            within(what, "dW", o * IN + k, w->grad[o * IN + k], s, m, N);
        }
        double s = r->start[3][o], m = fabs(s);
        for (int64_t rr = 0; rr < N; rr++) s += G[rr * OUT + o], m += fabs(G[rr * OUT + o]);
        if (u->bias) within(what, "dbias", o, bias->grad[o], s, m, N);
    }
    if (!u->bias) GF_CHECK(!memcmp(bias->grad, r->start[3], (size_t)OUT * sizeof(float)), "%s: no bias, yet its gradient moved", what);
#undef X
}

/* normwise: max |got - want| <= tol · max |want|, everything finite */
static void near_norm(const char *what, const char *part, const float *got, const float *want, int64_t n, double tol) {
    double d = 0.0, m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) d = INFINITY;
        d = fmax(d, fabs((double)got[i] - want[i]));
        m = fmax(m, fabs((double)want[i]));
    }
    GF_CHECK(d <= tol * m, "%s: %s differs from the chain by %.3g (max %.3g)", what, part, d, m);
}

static void check_case(const char *what, const cl_user *u, const int32_t *nd, const int64_t (*sh)[3]) {
    int64_t rows = 1;
    for (int32_t i = 0; i < nd[0] - 1; i++) rows *= sh[0][i];
    int64_t n_out = rows * sh[2][0];
    float *G = malloc((size_t)n_out * sizeof(float));
    gf_rng g;
    gf_rng_seed(&g, 790);
    for (int64_t j = 0; j < n_out; j++) G[j] = (float)gf_rng_normal(&g);
    cl_run f, c;
    run_one(&f, b_cl, u, nd, sh, G);
    run_one(&c, b_cl_chain, u, nd, sh, G);
    GF_REQUIRE(gf_tensor_numel(f.y) == n_out && gf_tensor_numel(c.y) == n_out, "%s: output sizes", what);
    n_bad = 0;
    if (!u->wrap) {
        check_exact(what, &f, u, G);
        check_exact(what, &c, u, G); /* the bound holds for the chain too: it is no looser than the chain needs */
    } else { /* through GELU: against the chain, normwise within a K-term fp32 sum's rounding
              * (K u <= 120 · 2^-24 = 7.2e-6 of the terms' scale; K is at most 120 rows here) */
        near_norm(what, "u", f.y->data, c.y->data, n_out, 1e-5);
        for (int i = 0; i < 4; i++)
            near_norm(what, "a gradient", f.in[i]->grad, c.in[i]->grad, gf_tensor_numel(f.in[i]), 1e-5);
    }
    GF_CHECK(n_bad == 0, "%s: %d elements outside the bound", what, n_bad);
    run_free(&f);
    run_free(&c);
    free(G);
}

GF_TEST(unit, concat_linear_is_the_chain_within_rounding) {
    static const int32_t nd[4] = {3, 3, 2, 1}, nd2[4] = {2, 2, 2, 1};
    /* a (rows, Da), b (rows, Db), W (OUT, Da + Db), bias (OUT): unequal widths; the gate's shape
     * (Da = Db = OUT) over 120 rows (the column sum's per-thread partials); one row (the GEMV
     * path); a width of one */
    static const int64_t s1[4][3] = {{3, 7, 40}, {3, 7, 24}, {50, 64}, {50}};
    static const int64_t s2[4][3] = {{4, 30, 32}, {4, 30, 32}, {32, 64}, {32}};
    static const int64_t s3[4][3] = {{1, 33}, {1, 20}, {17, 53}, {17}};
    static const int64_t s4[4][3] = {{5, 1}, {5, 37}, {9, 38}, {9}};
    const int64_t (*shapes[])[3] = {s1, s2, s3, s4};
    const int32_t *nds[] = {nd, nd, nd2, nd2};
    const cl_user cases[] = {{.bias = 1}, {0}, {.bias = 1, .precision = GF_PREC_BF16}, {.bias = 1, .wrap = 1}};
    for (size_t k = 0; k < 4; k++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "concat_linear shape %zu case %zu", k, i);
            check_case(what, &cases[i], nds[k], shapes[k]);
        }
    static const int64_t ss[4][3] = {{4, 30, 32}, {4, 30, 32}, {32, 64}, {32}};
    const cl_user same = {.bias = 1, .same = 1};
    check_case("concat_linear(a, a)", &same, nd, ss);
}
