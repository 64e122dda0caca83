/* test_probe.c — the geometry probes' numerical pieces against known answers (turning angles of
 * hand-made paths, the nulls' expected values, PCA of data with planted components, Lanczos on
 * a matrix with a known spectrum, the finite-difference HVP against an analytic Hessian and
 * against the exact Hessian of a tiny model), the prompt-pair parser's errors, and the
 * `gflow probe` command end to end on a tiny trained run. */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/probe.h"
#include "../reliability/rel_util.h"
#include <string.h>
#include <sys/stat.h>

GF_TEST(unit, probe_turning_angle_hand_path) {
    /* square in 2-D: right, up, left -> two 90° turns; then straight on; then a reversal */
    const float sq[4 * 2] = {0, 0, 1, 0, 1, 1, 0, 1};
    double th[4];
    gf_path_turning_angles(sq, 4, 2, th);
    GF_CHECK_NEAR(th[0], 90.0, 1e-9, 0);
    GF_CHECK_NEAR(th[1], 90.0, 1e-9, 0);
    const float line[4 * 3] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 5, 5, 5};
    gf_path_turning_angles(line, 4, 3, th);
    GF_CHECK_NEAR(th[0], 0.0, 1e-4, 0);
    GF_CHECK_NEAR(th[1], 0.0, 1e-4, 0);
    const float zig[3 * 3] = {0, 0, 0, 1, 0, 0, 2, 1, 0}; /* steps (1,0,0), (1,1,0): 45° */
    gf_path_turning_angles(zig, 3, 3, th);
    GF_CHECK_NEAR(th[0], 45.0, 1e-6, 0);
    const float back[3 * 2] = {0, 0, 2, 0, 1, 0};
    gf_path_turning_angles(back, 3, 2, th);
    GF_CHECK_NEAR(th[0], 180.0, 1e-6, 0);
    const float stay[3 * 2] = {0, 0, 0, 0, 1, 0}; /* a zero step has no direction */
    gf_path_turning_angles(stay, 3, 2, th);
    GF_CHECK(isnan(th[0]), "zero step -> NAN, got %g", th[0]);
}

GF_TEST(unit, probe_dist_quartiles) {
    double x[9] = {9, 1, 8, 2, 7, 3, 6, 4, 5}, y[3] = {NAN, 2, 4};
    gf_quartiles d;
    gf_quartiles_of(x, 9, &d);
    GF_CHECK(d.n == 9, "n %lld", (long long)d.n);
    GF_CHECK_NEAR(d.mean, 5.0, 1e-12, 0);
    GF_CHECK_NEAR(d.median, 5.0, 1e-12, 0);
    GF_CHECK_NEAR(d.q1, 3.0, 1e-12, 0);
    GF_CHECK_NEAR(d.q3, 7.0, 1e-12, 0);
    gf_quartiles_of(y, 3, &d); /* NaNs dropped */
    GF_CHECK(d.n == 2, "n %lld", (long long)d.n);
    GF_CHECK_NEAR(d.median, 3.0, 1e-12, 0);
}

GF_TEST(unit, probe_null_models_expected_values) {
    enum { D = 256, S = 4000, N = 6 };
    gf_rng rng;
    gf_rng_seed(&rng, 11);
    static float s0[D], s1[D], u[D], v[D];
    for (int j = 0; j < D; j++) { s0[j] = (float)(j % 7) - 3.0f; s1[j] = 0.01f * (float)(j % 5); }
    /* random directions in high dimension: ~90° with spread 57.3°/√D (IQR = 1.349 σ ≈ 4.83°) */
    static double a[S];
    for (int k = 0; k < S; k++) a[k] = gf_null_random_angle(s0, s1, D, &rng, u, v);
    gf_quartiles d;
    gf_quartiles_of(a, S, &d);
    GF_CHECK_NEAR(d.mean, 90.0, 0.3, 0);
    GF_CHECK_NEAR(d.median, 90.0, 0.4, 0);
    GF_CHECK_NEAR(d.q3 - d.q1, 1.349 * 57.29578 / 16.0, 0.5, 0);
    /* in 2-D the angle between random directions is uniform on [0, 180]: IQR 90° */
    for (int k = 0; k < S; k++) a[k] = gf_null_random_angle(s0, s1, 2, &rng, u, v);
    gf_quartiles_of(a, S, &d);
    GF_CHECK_NEAR(d.mean, 90.0, 3.0, 0);
    GF_CHECK_NEAR(d.q3 - d.q1, 90.0, 6.0, 0);
    /* shuffled null of a zig-zag path (steps +e, −e, +e, −e, +e, −e): the model turns 180° at every
     * layer; a random order keeps 3 of each, so P(consecutive steps differ) = 2·3·3/(6·5) = 0.6
     * and the expected angle is 108° */
    static float steps[N * 4];
    for (int l = 0; l < N; l++) for (int j = 0; j < 4; j++) steps[l * 4 + j] = j == 1 ? (l % 2 ? -1.0f : 1.0f) : 0.0f;
    double th[N], sum = 0, model[N];
    int64_t perm[N];
    gf_path_turning_angles((const float[]){0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, 4, 4, model);
    GF_CHECK_NEAR(model[0], 180.0, 1e-6, 0);
    for (int k = 0; k < S; k++) {
        gf_null_shuffled_angles(steps, N, 4, &rng, perm, th);
        for (int l = 0; l + 1 < N; l++) {
            GF_CHECK(th[l] < 1e-3 || th[l] > 180 - 1e-3, "angle %g is neither 0 nor 180", th[l]);
            sum += th[l];
        }
    }
    GF_CHECK_NEAR(sum / (S * (N - 1)), 108.0, 2.0, 0);
    /* a straight path stays straight however its steps are shuffled */
    for (int l = 0; l < N; l++) for (int j = 0; j < 4; j++) steps[l * 4 + j] = (float)(l + 1) * (j == 2 ? 1.0f : 0.5f);
    gf_null_shuffled_angles(steps, N, 4, &rng, perm, th);
    for (int l = 0; l + 1 < N; l++) GF_CHECK_NEAR(th[l], 0.0, 1e-3, 0);
}

GF_TEST(unit, probe_pca_planted_components) {
    enum { n = 3000, d = 12 };
    gf_rng rng;
    gf_rng_seed(&rng, 3);
    /* two orthonormal directions: u1 = (e0 + e3)/√2, u2 = (e5 − e7 + e8 − e11)/2 */
    double u1[d] = {0}, u2[d] = {0};
    u1[0] = u1[3] = 1 / sqrt(2.0);
    u2[5] = u2[8] = 0.5; u2[7] = u2[11] = -0.5;
    static float x[n * d];
    for (int i = 0; i < n; i++) {
        double a = 5 * gf_rng_normal(&rng), b = 2 * gf_rng_normal(&rng);
        for (int j = 0; j < d; j++) x[i * d + j] = (float)(3.0 + a * u1[j] + b * u2[j] + 0.1 * gf_rng_normal(&rng));
    }
    float comp[3 * d], mean[d];
    double var[d];
    GF_REQUIRE_OK(gf_pca(x, n, d, 3, comp, var, mean));
    double c1 = 0, c2 = 0, n1 = 0;
    for (int j = 0; j < d; j++) { c1 += comp[j] * u1[j]; c2 += comp[d + j] * u2[j]; n1 += comp[j] * comp[j]; }
    GF_CHECK_NEAR(fabs(c1), 1.0, 1e-3, 0);
    GF_CHECK_NEAR(fabs(c2), 1.0, 1e-3, 0);
    GF_CHECK_NEAR(n1, 1.0, 1e-5, 0);
    GF_CHECK(c1 > 0, "sign convention: the largest entry of a component is positive (dot %g)", c1);
    GF_CHECK_NEAR(var[0], 25.0, 0, 0.08);
    GF_CHECK_NEAR(var[1], 4.0, 0, 0.08);
    for (int j = 2; j < d; j++) GF_CHECK_NEAR(var[j], 0.01, 0, 0.2);
    for (int j = 0; j + 1 < d; j++) GF_CHECK(var[j] >= var[j + 1], "descending at %d", j);
    GF_CHECK_NEAR(mean[4], 3.0, 0.02, 0);
    GF_CHECK_ERR(gf_pca(x, 1, d, 1, NULL, NULL, NULL), GF_E_INVALID, "n >= 2");
}

typedef struct { int n; double *a; } dense_op;
static gf_status dense_mv(void *u, const double *v, double *y, int64_t n) {
    dense_op *o = u;
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int64_t j = 0; j < n; j++) s += o->a[i * n + j] * v[j];
        y[i] = s;
    }
    return GF_OK;
}

GF_TEST(unit, probe_lanczos_known_spectrum) {
    enum { n = 60 };
    static double a[n * n], q[n * n], lam[n];
    /* A = Q diag(λ) Qᵀ with Q a product of three Householder reflections (orthogonal) */
    for (int i = 0; i < n; i++) lam[i] = i == 0 ? 100 : i == 1 ? 60 : i == 2 ? 35 : -2.0 + 10.0 * i / n;
    for (int i = 0; i < n * n; i++) q[i] = i % (n + 1) == 0;
    gf_rng rng;
    gf_rng_seed(&rng, 5);
    for (int h = 0; h < 3; h++) {
        double w[n], nn = 0;
        for (int i = 0; i < n; i++) { w[i] = gf_rng_normal(&rng); nn += w[i] * w[i]; }
        for (int i = 0; i < n; i++) w[i] /= sqrt(nn);
        for (int c = 0; c < n; c++) { /* Q ← (I − 2wwᵀ) Q, column by column */
            double s = 0;
            for (int i = 0; i < n; i++) s += w[i] * q[i * n + c];
            for (int i = 0; i < n; i++) q[i * n + c] -= 2 * w[i] * s;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += q[i * n + k] * lam[k] * q[j * n + k];
            a[i * n + j] = s;
        }
    dense_op op = {n, a};
    double ev[3];
    int64_t md = 0;
    double lo = 0;
    GF_REQUIRE_OK(gf_lanczos(dense_mv, &op, n, 25, 3, 9, ev, &lo, &md));
    GF_CHECK(md == 25, "steps %lld", (long long)md);
    GF_CHECK_NEAR(ev[0], 100.0, 0, 1e-8);
    GF_CHECK_NEAR(ev[1], 60.0, 0, 1e-6);
    GF_CHECK_NEAR(ev[2], 35.0, 0, 1e-4);
    GF_CHECK(lo >= -2.0 - 1e-9 && lo < -1.0, "lowest Ritz value %g within the spectrum's low end", lo);
    /* three distinct eigenvalues: the Krylov space is 3-dimensional, Lanczos stops there, exact */
    memset(a, 0, sizeof a);
    for (int i = 0; i < n; i++) a[i * n + i] = i % 3 == 0 ? 5 : i % 3 == 1 ? 2 : -1;
    GF_REQUIRE_OK(gf_lanczos(dense_mv, &op, n, 20, 3, 9, ev, &lo, &md));
    GF_CHECK(md == 3, "invariant subspace after 3 steps, took %lld", (long long)md);
    GF_CHECK_NEAR(ev[0], 5.0, 1e-9, 0);
    GF_CHECK_NEAR(ev[1], 2.0, 1e-9, 0);
    GF_CHECK_NEAR(ev[2], -1.0, 1e-9, 0);
    GF_CHECK_NEAR(lo, -1.0, 1e-9, 0);
    GF_CHECK_ERR(gf_lanczos(dense_mv, &op, n, 2, 3, 9, ev, NULL, &md), GF_E_INVALID, "k <= steps");
}

/* f(θ) = ½ θᵀAθ + ¼ Σ c_i θ_i⁴: g = Aθ + c ⊙ θ³, H = A + 3 diag(c ⊙ θ²) */
enum { QN = 12 };
typedef struct { float theta[QN], grad[QN]; double a[QN * QN], c[QN]; } quartic;
static gf_status quartic_grad(void *u) {
    quartic *q = u;
    for (int i = 0; i < QN; i++) {
        double s = q->c[i] * q->theta[i] * q->theta[i] * q->theta[i];
        for (int j = 0; j < QN; j++) s += q->a[i * QN + j] * q->theta[j];
        q->grad[i] = (float)s;
    }
    return GF_OK;
}

GF_TEST(unit, probe_hvp_analytic_hessian) {
    quartic q;
    gf_rng rng;
    gf_rng_seed(&rng, 17);
    for (int i = 0; i < QN; i++) {
        q.theta[i] = (float)(0.5 + gf_rng_normal(&rng));
        q.c[i] = 0.5 + 0.1 * i;
        for (int j = 0; j <= i; j++) q.a[i * QN + j] = q.a[j * QN + i] = gf_rng_normal(&rng);
    }
    /* the block: two ranges, θ[2..5) and θ[7..10) */
    gf_pblock b = {.name = "test", .n_ranges = 2, .off = {2, 7}, .len = {3, 3}, .n = 6};
    const int idx[6] = {2, 3, 4, 7, 8, 9};
    float before[QN];
    memcpy(before, q.theta, sizeof before);
    gf_hvp h;
    GF_REQUIRE_OK(gf_hvp_init(&h, q.theta, q.grad, quartic_grad, &q, &b, 1e-3));
    for (int trial = 0; trial < 3; trial++) {
        double v[6], hv[6], ref[6], err = 0, nrm = 0;
        for (int i = 0; i < 6; i++) v[i] = 3.0 * gf_rng_normal(&rng); /* not unit: |v| is scaled back */
        GF_REQUIRE_OK(gf_hvp_apply(&h, v, hv));
        for (int i = 0; i < 6; i++) {
            int r = idx[i];
            ref[i] = 3 * q.c[r] * before[r] * before[r] * v[i];
            for (int k = 0; k < 6; k++) ref[i] += q.a[r * QN + idx[k]] * v[k];
            err += (hv[i] - ref[i]) * (hv[i] - ref[i]);
            nrm += ref[i] * ref[i];
        }
        GF_CHECK(sqrt(err / nrm) < 2e-3, "trial %d: relative error of Hv %g", trial, sqrt(err / nrm));
    }
    GF_CHECK(memcmp(before, q.theta, sizeof before) == 0, "parameters restored bit for bit");
    GF_CHECK(h.n_grads == 6, "two gradients per product, got %lld", (long long)h.n_grads);
    gf_hvp_free(&h);
}

/* ---- a tiny model: the exact block Hessian by finite differences of gradients per coordinate ---- */

typedef struct { gf_lm m; gf_ctx ctx; int32_t w[2 * 7]; } tiny_lm;

static gf_status tiny_grad(void *u) {
    tiny_lm *t = u;
    gf_params_zero_grad(&t->m.params);
    gf_tensor *loss = gf_lm_forward(&t->m, &t->ctx, t->w, 2, 6, NULL);
    gf_tape_backward(&t->ctx, loss);
    gf_ctx_reset(&t->ctx);
    return GF_OK;
}

static double tiny_loss(tiny_lm *t) {
    int old = gf_ctx_set_grad(&t->ctx, 0);
    gf_lm_out o = {0};
    gf_lm_forward(&t->m, &t->ctx, t->w, 2, 6, &o);
    gf_ctx_reset(&t->ctx);
    gf_ctx_set_grad(&t->ctx, old);
    return o.nll_sum / (double)o.n_tokens;
}

static void tiny_block_check(gf_family fam) {
    gf_model_cfg c;
    gf_model_cfg_default(&c);
    c.family = fam;
    c.vocab = 13; c.d_model = 8; c.d_ff = 16; c.n_layers = 1; c.max_len = 6; c.r = 3; c.heads = 2;
    c.offsets.v[0] = 1; c.offsets.v[1] = 2; c.offsets.n = 2;
    c.dropout = 0; c.init_std = 0.5f;
    tiny_lm t;
    GF_REQUIRE_OK(gf_lm_init(&t.m, &c));
    gf_rng rng;
    gf_rng_seed(&rng, 23);
    gf_lm_init_weights(&t.m, &rng);
    gf_ctx_init(&t.ctx, 0, NULL);
    for (int i = 0; i < 14; i++) t.w[i] = (int32_t)((i * 5 + 2) % 13);
    /* block: Grassmann w_red (3×8) + b_red; Transformer the K rows of qkv (8×8) + their bias */
    const char *wn = fam == GF_FAMILY_GRASSMANN ? "blocks.0.mix.w_red.weight" : "blocks.0.attn.qkv.weight";
    const char *bn = fam == GF_FAMILY_GRASSMANN ? "blocks.0.mix.w_red.bias" : "blocks.0.attn.qkv.bias";
    gf_param *pw = gf_params_find(&t.m.params, wn), *pb = gf_params_find(&t.m.params, bn);
    GF_REQUIRE(pw && pb, "parameters");
    int64_t r0 = fam == GF_FAMILY_GRASSMANN ? 0 : 8, nr = fam == GF_FAMILY_GRASSMANN ? 3 : 8;
    gf_pblock b = {.name = "tiny", .n_ranges = 2, .off = {pw->offset + r0 * 8, pb->offset + r0}, .len = {nr * 8, nr}};
    b.n = b.len[0] + b.len[1];
    const int64_t n = b.n;
    float *theta = t.m.params.data;
    const float *grad = t.m.params.grad;
    double *H = calloc((size_t)(n * n), sizeof(double)), *gp = malloc((size_t)n * sizeof(double));
    /* exact Hessian, column j: (g(θ + h e_j) − g(θ − h e_j)) / 2h, h small and absolute */
    const double hstep = 1e-3;
    for (int64_t j = 0; j < n; j++) {
        int64_t at = j < b.len[0] ? b.off[0] + j : b.off[1] + (j - b.len[0]);
        float keep = theta[at];
        theta[at] = (float)(keep + hstep);
        double hp = (double)theta[at] - keep;
        tiny_grad(&t);
        for (int64_t i = 0; i < n; i++) gp[i] = grad[i < b.len[0] ? b.off[0] + i : b.off[1] + (i - b.len[0])];
        theta[at] = (float)(keep - hstep);
        double hm = keep - (double)theta[at];
        tiny_grad(&t);
        for (int64_t i = 0; i < n; i++)
            H[i * n + j] = (gp[i] - grad[i < b.len[0] ? b.off[0] + i : b.off[1] + (i - b.len[0])]) / (hp + hm);
        theta[at] = keep;
    }
    double asym = 0, hn = 0;
    for (int64_t i = 0; i < n * n; i++) { asym += pow(H[i] - H[(i % n) * n + i / n], 2); hn += H[i] * H[i]; }
    GF_CHECK(sqrt(asym / hn) < 2e-3, "family %d: exact Hessian asymmetric: %g", (int)fam, sqrt(asym / hn));
    /* a diagonal entry from second differences of the loss alone (no gradients involved) */
    {
        int64_t at = b.off[0] + 1;
        float keep = theta[at];
        double f0 = tiny_loss(&t), hh = 3e-2;
        theta[at] = (float)(keep + hh);
        double fp = tiny_loss(&t);
        theta[at] = (float)(keep - hh);
        double fm = tiny_loss(&t);
        theta[at] = keep;
        GF_CHECK_NEAR((fp - 2 * f0 + fm) / (hh * hh), H[1 * n + 1], 2e-3, 0.03);
    }
    gf_hvp h;
    GF_REQUIRE_OK(gf_hvp_init(&h, theta, grad, tiny_grad, &t, &b, 1e-3));
    double *v = malloc((size_t)n * sizeof(double)), *hv = malloc((size_t)n * sizeof(double));
    for (int trial = 0; trial < 3; trial++) {
        for (int64_t i = 0; i < n; i++) v[i] = gf_rng_normal(&rng);
        GF_REQUIRE_OK(gf_hvp_apply(&h, v, hv));
        double err = 0, nrm = 0;
        for (int64_t i = 0; i < n; i++) {
            double r = 0;
            for (int64_t j = 0; j < n; j++) r += H[i * n + j] * v[j];
            err += (hv[i] - r) * (hv[i] - r);
            nrm += r * r;
        }
        GF_CHECK(sqrt(err / nrm) < 5e-3, "family %d trial %d: |Hv - H_exact v| / |H_exact v| = %g", (int)fam, trial,
                 sqrt(err / nrm));
    }
    /* Lanczos over the HVP with as many steps as the block has dimensions: H's top eigenvalue */
    double ev[1], top = -INFINITY;
    int64_t md;
    GF_REQUIRE_OK(gf_lanczos(gf_hvp_matvec, &h, n, n, 1, 4, ev, NULL, &md));
    {   /* reference: power iteration on the shifted exact Hessian (H + sI has the same top eigenvector if λ_top > |λ_min|) */
        double *x = malloc((size_t)n * sizeof(double)), *y = malloc((size_t)n * sizeof(double)), shift = sqrt(hn);
        for (int64_t i = 0; i < n; i++) x[i] = 1.0 + 0.01 * (double)i;
        for (int it = 0; it < 3000; it++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) {
                y[i] = shift * x[i];
                for (int64_t j = 0; j < n; j++) y[i] += 0.5 * (H[i * n + j] + H[j * n + i]) * x[j];
                s += y[i] * y[i];
            }
            s = sqrt(s);
            for (int64_t i = 0; i < n; i++) x[i] = y[i] / s;
            top = s - shift;
        }
        free(x); free(y);
    }
    GF_CHECK_NEAR(ev[0], top, 1e-4, 0.01);
    gf_hvp_free(&h);
    free(v); free(hv); free(H); free(gp);
    gf_ctx_free(&t.ctx);
    gf_lm_free(&t.m);
}

GF_TEST(grad, probe_hvp_matches_exact_hessian_grassmann) { tiny_block_check(GF_FAMILY_GRASSMANN); }
GF_TEST(grad, probe_hvp_matches_exact_hessian_transformer) { tiny_block_check(GF_FAMILY_TRANSFORMER); }

GF_TEST(unit, probe_capture_is_the_branch_output) {
    /* pre-LN: h_{l+1} = h_l + mix_l + ffn_l exactly (the residual adds of the block) */
    for (int fam = 0; fam < 2; fam++) {
        gf_model_cfg c;
        gf_model_cfg_default(&c);
        c.family = fam ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN;
        c.block = GF_BLOCK_PRE_LN;
        c.vocab = 11; c.d_model = 8; c.d_ff = 16; c.n_layers = 2; c.max_len = 5; c.r = 3; c.heads = 2; c.dropout = 0;
        gf_lm m;
        GF_REQUIRE_OK(gf_lm_init(&m, &c));
        gf_rng rng;
        gf_rng_seed(&rng, 2);
        gf_lm_init_weights(&m, &rng);
        gf_ctx ctx;
        gf_ctx_init(&ctx, 0, NULL);
        int32_t w[6] = {1, 4, 2, 9, 3, 5};
        gf_tensor *hid[3], *mix[2], *ffn[2];
        gf_lm_out o = {.hidden = hid, .mix_out = mix, .ffn_out = ffn};
        gf_lm_forward(&m, &ctx, w, 1, 5, &o);
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < 5 * 8; i++)
                GF_CHECK_NEAR(hid[l + 1]->data[i], hid[l]->data[i] + mix[l]->data[i] + ffn[l]->data[i], 1e-5, 1e-5);
        gf_ctx_free(&ctx);
        gf_lm_free(&m);
    }
}

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(s, f); fclose(f); }
}

GF_TEST(unit, probe_prompt_pairs_file) {
    char p[700];
    snprintf(p, sizeof p, "%s/pairs.tsv", gf_test_tmpdir());
    gf_prompt_pairs pp = {0};
    write_text(p, "# comment\n\nthe cat sees the ball\tthe dog sees the ball\na b c\ta x c\n");
    GF_CHECK_OK(gf_prompt_pairs_read(p, &pp));
    GF_CHECK(pp.n == 2 && pp.line[0] == 3 && pp.line[1] == 4, "n %lld", (long long)pp.n);
    gf_prompt_pairs_free(&pp);
    struct { const char *text, *needle; } bad[] = {
        {"a b c\ta x c\nno tab here\n", "pairs.tsv:2: expected"},
        {"a b c\ta x c\tz\n", "pairs.tsv:1: more than one tab"},
        {"a b c\tx y c\n", "pairs.tsv:1: the prompts differ in 2 words"},
        {"a b c\ta b d\n", "pairs.tsv:1: the last word"},
        {"a b c\ta b c d\n", "pairs.tsv:1: the prompts have 3 and 4 words"},
        {"a b c\ta b c\n", "differ in 0 words"},
        {"\t a b\n", "pairs.tsv:1: empty prompt"},
        {"# only a comment\n", "no prompt pairs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(p, bad[i].text);
        GF_CHECK_ERR(gf_prompt_pairs_read(p, &pp), GF_E_PARSE, bad[i].needle);
        gf_prompt_pairs_free(&pp);
    }
    snprintf(p, sizeof p, "%s/no-such-pairs.tsv", gf_test_tmpdir());
    GF_CHECK_ERR(gf_prompt_pairs_read(p, &pp), GF_E_NOTFOUND, "no-such-pairs.tsv");
}

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

GF_TEST(smoke, probe_cli_end_to_end) {
    rel_result res;
    const char *tr[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.name=probe", "--set", "train.max_steps=6", "--overwrite", NULL};
    rel_gflow(&res, 0, tr);
    GF_REQUIRE(res.exit_code == 0, "train: %s", res.err);
    char run[800], pairs[800], badp[800], f[1000];
    snprintf(run, sizeof run, "%s/probe", rel_runs_dir());
    snprintf(pairs, sizeof pairs, "%s/pairs-ok.tsv", gf_test_tmpdir());
    snprintf(badp, sizeof badp, "%s/pairs-bad.tsv", gf_test_tmpdir());
    write_text(pairs, "the cat sees the ball\tthe bird sees the ball\na dog likes the moon\ta child likes the moon\n");
    write_text(badp, "the cat sees the ball\tthe bird sees the ball\nthe cat sees the ball\n");
    const char *cv[] = {"probe", "curvature", run, "--ckpt", "last", "--windows", "3", "--null-samples", "300", "--pairs", pairs, "--no-plot", "--quiet", NULL};
    rel_gflow(&res, 0, cv);
    GF_CHECK(res.exit_code == 0, "curvature: %s", res.err);
    snprintf(f, sizeof f, "%s/probe-curvature.tsv", run);
    GF_CHECK(count_lines(f) == 1 + 3 * 1, "curvature rows: 3 series x (2 layers - 1), got %d lines", count_lines(f));
    snprintf(f, sizeof f, "%s/probe-curvature-pairs.tsv", run);
    GF_CHECK(count_lines(f) == 1 + 2, "both user pairs used (built-in words are unknown to the tiny vocabulary): %d lines", count_lines(f));
    const char *pc[] = {"probe", "pca", run, "--ckpt", "last", "--windows", "2", "--points", "20", "--no-plot", "--quiet", NULL};
    rel_gflow(&res, 0, pc);
    GF_CHECK(res.exit_code == 0, "pca: %s", res.err);
    snprintf(f, sizeof f, "%s/probe-pca.tsv", run);
    GF_CHECK(count_lines(f) == 1 + 1 + 2 * 3 + 1, "pca rows: h0 + 3 per layer + position table, got %d", count_lines(f));
    const char *hs[] = {"probe", "hessian", run, run, "--ckpt", "last", "--blocks", "L1.red,pos_emb", "--lanczos-steps", "4", "--top-k", "2",
                        "--hutchinson", "2", "--no-plot", "--quiet", NULL};
    rel_gflow(&res, 0, hs);
    GF_CHECK(res.exit_code == 0, "hessian: %s", res.err);
    snprintf(f, sizeof f, "%s/probe-hessian.tsv", run);
    GF_CHECK(count_lines(f) == 1 + 2, "hessian rows: 2 blocks, got %d", count_lines(f));
    snprintf(f, sizeof f, "%s/probe-hessian-probe-vs-probe.tsv", run);
    GF_CHECK(count_lines(f) == 1 + 4, "overlay rows: 2 runs x 2 blocks, got %d", count_lines(f));
    /* the plots, redrawn from the tables alone (gnuplot) */
    const char *rp[] = {"probe", "curvature", run, "--replot", "--quiet", NULL};
    rel_gflow(&res, 0, rp);
    GF_CHECK(res.exit_code == 0, "replot: %s", res.err);
    snprintf(f, sizeof f, "%s/probe-curvature.png", run);
    struct stat sb;
    GF_CHECK(stat(f, &sb) == 0 && sb.st_size > 1000, "%s written", f);
    /* errors: usage 2, runtime 1, each message naming what is at fault */
    struct { const char *args[12]; int code; const char *needle; } bad[] = {
        {{"probe", "wobble", run, NULL}, 2, "unknown kind 'wobble'"},
        {{"probe", "curvature", "/no/such/run", NULL}, 1, "/no/such/run"},
        {{"probe", "curvature", run, "--windows", "0", NULL}, 2, "--windows"},
        {{"probe", "curvature", run, "--frobnicate", NULL}, 2, "--frobnicate"},
        {{"probe", "hessian", run, "--top-k", "9", "--lanczos-steps", "4", NULL}, 2, "--top-k"},
        {{"probe", "pca", run, "--pairs", pairs, NULL}, 2, "--pairs is an option of the curvature probe"},
        {{"probe", "curvature", run, "--ckpt", "last", "--pairs", "/no/such/pairs.tsv", NULL}, 1, "/no/such/pairs.tsv"},
        {{"probe", "curvature", run, "--ckpt", "last", "--windows", "1", "--pairs", badp, NULL}, 1, "pairs-bad.tsv:2"},
        {{"probe", "hessian", run, "--ckpt", "last", "--blocks", "nothing", "--no-plot", NULL}, 1, "--blocks"},
        {{"probe", "hessian", rel_runs_dir(), "--replot", NULL}, 1, "probe-hessian.tsv"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rel_gflow(&res, 0, bad[i].args);
        GF_CHECK(res.exit_code == bad[i].code, "case %zu: exit %d, expected %d (%s)", i, res.exit_code, bad[i].code, res.err);
        GF_CHECK(strstr(res.err, bad[i].needle) != NULL, "case %zu: stderr lacks '%s': %s", i, bad[i].needle, res.err);
    }
}
