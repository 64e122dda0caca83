/* linalg.c — the numerical pieces of the probes: angles, distribution summaries, PCA (LAPACK
 * ssyevr on the covariance), Lanczos (LAPACK dstev on the tridiagonal), and Hessian-vector
 * products by central differences of gradients. Accumulations are in double. */
#include "gflow/probe.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double RAD2DEG = 57.295779513082320876798;

double gf_angle_deg(const float *a, const float *b, int64_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < d; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 || bb == 0) return NAN;
    double c = ab / sqrt(aa * bb);
    c = c > 1 ? 1 : c < -1 ? -1 : c; /* rounding can push |c| past 1 for (anti)parallel steps */
    return acos(c) * RAD2DEG;
}

void gf_path_turning_angles(const float *pts, int64_t n, int64_t d, double *theta) {
    float *s0 = malloc((size_t)d * sizeof(float)), *s1 = malloc((size_t)d * sizeof(float)); // (D) steps
    for (int64_t i = 0; i + 2 < n; i++) {
        for (int64_t j = 0; j < d; j++) {
            s0[j] = pts[(i + 1) * d + j] - pts[i * d + j];
            s1[j] = pts[(i + 2) * d + j] - pts[(i + 1) * d + j];
        }
        theta[i] = gf_angle_deg(s0, s1, d);
    }
    free(s0);
    free(s1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile_sorted(const double *x, int64_t n, double q) {
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    if (i >= n - 1) return x[n - 1];
    double f = pos - (double)i;
    return x[i] + f * (x[i + 1] - x[i]);
}

void gf_quartiles_of(double *x, int64_t n, gf_quartiles *s) {
    /* NaNs (zero-length steps) are dropped, not counted */
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) if (!isnan(x[i])) x[m++] = x[i];
    s->n = m;
    if (m == 0) { s->mean = s->median = s->q1 = s->q3 = NAN; return; }
    qsort(x, (size_t)m, sizeof(double), cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < m; i++) sum += x[i];
    s->mean = sum / (double)m;
    s->q1 = quantile_sorted(x, m, 0.25);
    s->median = quantile_sorted(x, m, 0.5);
    s->q3 = quantile_sorted(x, m, 0.75);
}

gf_status gf_pca(const float *x, int64_t n, int64_t d, int64_t k, float *comp, double *var, float *mean) {
    if (n < 2 || d < 1 || k < 0 || k > d)
        return gf_error_set(GF_E_INVALID, "pca: need n >= 2 rows and 0 <= k <= d (n %lld, d %lld, k %lld)",
                            (long long)n, (long long)d, (long long)k);
    double *mu = calloc((size_t)d, sizeof(double));   // (D)
    float *xc = malloc((size_t)(n * d) * sizeof(float)); // (N, D) centred rows
    float *cov = calloc((size_t)(d * d), sizeof(float)); // (D, D) upper triangle
    float *w = malloc((size_t)d * sizeof(float));       // (D) eigenvalues, ascending
    float *z = malloc((size_t)(d * d) * sizeof(float));  // (D, D) eigenvectors in columns
    lapack_int *isuppz = malloc((size_t)(2 * d) * sizeof(lapack_int));
    gf_status st = GF_OK;
    if (!mu || !xc || !cov || !w || !z || !isuppz) { st = gf_error_set(GF_E_NOMEM, "pca: %lld x %lld", (long long)n, (long long)d); goto out; }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) mu[j] += x[i * d + j];
    for (int64_t j = 0; j < d; j++) mu[j] /= (double)n;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) xc[i * d + j] = (float)(x[i * d + j] - mu[j]);
    /* covariance = Xcᵀ Xc / (n - 1) */
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)n, 1.0f / (float)(n - 1), xc, (int)d, 0.0f, cov,
                (int)d);
    lapack_int m_found = 0;
    lapack_int info = LAPACKE_ssyevr(LAPACK_ROW_MAJOR, 'V', 'A', 'U', (lapack_int)d, cov, (lapack_int)d, 0, 0, 0, 0,
                                     0.0f, &m_found, w, z, (lapack_int)d, isuppz);
    if (info != 0) { st = gf_error_set(GF_E_EXTERNAL, "pca: LAPACKE_ssyevr failed (info %d)", (int)info); goto out; }
    for (int64_t c = 0; c < k && comp; c++) {
        int64_t col = d - 1 - c; /* descending */
        int64_t big = 0;
        for (int64_t j = 1; j < d; j++) if (fabsf(z[j * d + col]) > fabsf(z[big * d + col])) big = j;
        float sgn = z[big * d + col] < 0 ? -1.0f : 1.0f;
        for (int64_t j = 0; j < d; j++) comp[c * d + j] = sgn * z[j * d + col];
    }
    if (var)
        for (int64_t c = 0; c < d; c++) var[c] = w[d - 1 - c] > 0 ? (double)w[d - 1 - c] : 0.0; /* clamp -0 rounding */
    if (mean)
        for (int64_t j = 0; j < d; j++) mean[j] = (float)mu[j];
out:
    free(mu); free(xc); free(cov); free(w); free(z); free(isuppz);
    return st;
}

gf_status gf_lanczos(gf_matvec_fn f, void *u, int64_t n, int64_t m, int64_t k, uint64_t seed, double *evals,
                     double *lowest, int64_t *m_done) {
    if (m > n) m = n;
    if (m < 1 || k < 1 || k > m)
        return gf_error_set(GF_E_INVALID, "lanczos: need 1 <= k <= steps <= n (k %lld, steps %lld, n %lld)",
                            (long long)k, (long long)m, (long long)n);
    double *Q = malloc((size_t)((m + 1) * n) * sizeof(double)); // (m+1, n) orthonormal basis
    double *w = malloc((size_t)n * sizeof(double));             // (n)
    double *al = calloc((size_t)m, sizeof(double)), *be = calloc((size_t)m + 1, sizeof(double));
    if (!Q || !w || !al || !be) { free(Q); free(w); free(al); free(be); return gf_error_set(GF_E_NOMEM, "lanczos: n %lld", (long long)n); }
    gf_rng rng;
    gf_rng_seed(&rng, seed);
    double nrm = 0;
    for (int64_t i = 0; i < n; i++) { Q[i] = gf_rng_normal(&rng); nrm += Q[i] * Q[i]; }
    nrm = sqrt(nrm);
    for (int64_t i = 0; i < n; i++) Q[i] /= nrm;
    gf_status st = GF_OK;
    int64_t j = 0;
    for (; j < m; j++) {
        double *q = Q + j * n;
        if ((st = f(u, q, w, n))) break;
        double a = 0;
        for (int64_t i = 0; i < n; i++) a += w[i] * q[i];
        al[j] = a;
        /* full re-orthogonalisation, twice: the HVP is noisy, so plain three-term recurrences
         * would lose orthogonality after a few steps and produce ghost eigenvalues */
        for (int pass = 0; pass < 2; pass++)
            for (int64_t p = 0; p <= j; p++) {
                double *qp = Q + p * n, c = 0;
                for (int64_t i = 0; i < n; i++) c += w[i] * qp[i];
                for (int64_t i = 0; i < n; i++) w[i] -= c * qp[i];
            }
        double b = 0;
        for (int64_t i = 0; i < n; i++) b += w[i] * w[i];
        b = sqrt(b);
        be[j] = b;
        if (j + 1 == m) { j++; break; }
        if (b < 1e-12 * (fabs(a) + 1e-30)) { j++; break; } /* invariant subspace: T is exact */
        for (int64_t i = 0; i < n; i++) Q[(j + 1) * n + i] = w[i] / b;
    }
    if (!st) {
        int64_t mm = j;
        double *d = malloc((size_t)mm * sizeof(double)), *e = malloc((size_t)(mm > 1 ? mm - 1 : 1) * sizeof(double));
        memcpy(d, al, (size_t)mm * sizeof(double));
        for (int64_t i = 0; i + 1 < mm; i++) e[i] = be[i];
        lapack_int info = LAPACKE_dstev(LAPACK_ROW_MAJOR, 'N', (lapack_int)mm, d, e, NULL, (lapack_int)mm);
        if (info != 0) st = gf_error_set(GF_E_EXTERNAL, "lanczos: LAPACKE_dstev failed (info %d)", (int)info);
        else {
            for (int64_t i = 0; i < k; i++) evals[i] = i < mm ? d[mm - 1 - i] : NAN; /* dstev sorts ascending */
            if (lowest) *lowest = d[0];
        }
        if (m_done) *m_done = mm;
        free(d);
        free(e);
    }
    free(Q); free(w); free(al); free(be);
    return st;
}

gf_status gf_hvp_init(gf_hvp *h, float *theta, const float *grad, gf_grad_fn fn, void *u, const gf_pblock *b,
                      double rel_step) {
    memset(h, 0, sizeof *h);
    if (b->n <= 0 || rel_step <= 0) return gf_error_set(GF_E_INVALID, "hvp: empty block %s or step %g <= 0", b->name, rel_step);
    h->theta = theta;
    h->grad = grad;
    h->grad_fn = fn;
    h->u = u;
    h->blk = *b;
    double nrm = 0;
    for (int32_t r = 0; r < b->n_ranges; r++)
        for (int64_t i = 0; i < b->len[r]; i++) nrm += (double)theta[b->off[r] + i] * theta[b->off[r] + i];
    nrm = sqrt(nrm);
    h->eps = rel_step * (nrm > 1.0 ? nrm : 1.0);
    h->saved = malloc((size_t)b->n * sizeof(float));
    h->gp = malloc((size_t)b->n * sizeof(double));
    if (!h->saved || !h->gp) { gf_hvp_free(h); return gf_error_set(GF_E_NOMEM, "hvp: block %s", b->name); }
    int64_t k = 0;
    for (int32_t r = 0; r < b->n_ranges; r++)
        for (int64_t i = 0; i < b->len[r]; i++) h->saved[k++] = theta[b->off[r] + i];
    return GF_OK;
}

/* theta_block = saved + s·v̂ (s = ±eps), or restore when s == 0 */
static void perturb(gf_hvp *h, const double *vhat, double s) {
    int64_t k = 0;
    for (int32_t r = 0; r < h->blk.n_ranges; r++)
        for (int64_t i = 0; i < h->blk.len[r]; i++, k++)
            h->theta[h->blk.off[r] + i] = s == 0 ? h->saved[k] : (float)((double)h->saved[k] + s * vhat[k]);
}

gf_status gf_hvp_apply(gf_hvp *h, const double *v, double *hv) {
    const gf_pblock *b = &h->blk;
    double vn = 0;
    for (int64_t i = 0; i < b->n; i++) vn += v[i] * v[i];
    vn = sqrt(vn);
    if (vn == 0) { memset(hv, 0, (size_t)b->n * sizeof(double)); return GF_OK; }
    double *vhat = malloc((size_t)b->n * sizeof(double)); // (n) unit direction
    if (!vhat) return gf_error_set(GF_E_NOMEM, "hvp");
    for (int64_t i = 0; i < b->n; i++) vhat[i] = v[i] / vn;
    gf_status st = GF_OK;
    perturb(h, vhat, h->eps);
    st = h->grad_fn(h->u);
    h->n_grads++;
    int64_t k = 0;
    for (int32_t r = 0; r < b->n_ranges && !st; r++)
        for (int64_t i = 0; i < b->len[r]; i++) h->gp[k++] = h->grad[b->off[r] + i];
    if (!st) {
        perturb(h, vhat, -h->eps);
        st = h->grad_fn(h->u);
        h->n_grads++;
    }
    k = 0;
    for (int32_t r = 0; r < b->n_ranges && !st; r++)
        for (int64_t i = 0; i < b->len[r]; i++, k++)
            hv[k] = vn * (h->gp[k] - (double)h->grad[b->off[r] + i]) / (2.0 * h->eps);
    perturb(h, NULL, 0.0); /* bit-exact restore */
    free(vhat);
    return st;
}

gf_status gf_hvp_matvec(void *u, const double *v, double *y, int64_t n) {
    gf_hvp *h = u;
    if (n != h->blk.n) return gf_error_set(GF_E_INVALID, "hvp: vector of %lld for block %s of %lld", (long long)n, h->blk.name, (long long)h->blk.n);
    return gf_hvp_apply(h, v, y);
}

void gf_hvp_free(gf_hvp *h) {
    free(h->saved);
    free(h->gp);
    h->saved = NULL;
    h->gp = NULL;
}
