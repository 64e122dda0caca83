/* gflow/probe.h — geometry probes of trained language models (`gflow probe`).
 *
 *   curvature  turning angles of each token's path h_0..h_N through the blocks (arXiv 2511.03060)
 *              against two null models, and the contextual-edit deflection of prompt pairs
 *   pca        layer-wise latent geometry (arXiv 2511.21594): PCA of the mixing- and FFN-branch
 *              outputs per layer, of the position table, and token norm by position
 *   hessian    top Hessian eigenvalues (Lanczos) and Hutchinson traces per parameter block
 *              (arXiv 2410.10986), Hessian-vector products by central differences of gradients
 *
 * Each probe writes RUN/probe-<kind>.tsv (+ side tables) and RUN/probe-<kind>.png; with two runs,
 * gf_probe_overlay() plots both from those tables. The numerical pieces (angles, PCA via LAPACK
 * ssyevr, Lanczos with LAPACK dstev, the finite-difference HVP) are exposed for the tests.
 */
#ifndef GFLOW_PROBE_H
#define GFLOW_PROBE_H

#include "gflow/error.h"
#include "gflow/rng.h"
#include <stdint.h>

/* ---- numerical pieces (src/probe/linalg.c) ---- */

/* Angle between two vectors in degrees, in [0, 180]; NAN when either is zero. Double accumulation. */
double gf_angle_deg(const float *a, const float *b, int64_t d);
/* Turning angles of a path of n points (n, d): θ_i = angle(p_{i+1} - p_i, p_{i+2} - p_{i+1}), n-2 of them. */
void gf_path_turning_angles(const float *pts, int64_t n, int64_t d, double *theta);

/* The curvature probe's two nulls for one token path of n steps (n, d):
 * random: the angle between two isotropic Gaussian directions scaled to |s0| and |s1| (u, v:
 * (d) scratch); shuffled: theta (n-1) = the turning angles of the same steps in a random order
 * (perm: (n) scratch). */
double gf_null_random_angle(const float *s0, const float *s1, int64_t d, gf_rng *rng, float *u, float *v);
void gf_null_shuffled_angles(const float *steps, int64_t n, int64_t d, gf_rng *rng, int64_t *perm, double *theta);

typedef struct gf_quartiles { int64_t n; double mean, median, q1, q3; } gf_quartiles;
/* Mean, median and quartiles (linear interpolation between order statistics); sorts x in place. */
void gf_quartiles_of(double *x, int64_t n, gf_quartiles *s);

/* PCA of n rows of dimension d (row-major): centres the rows, forms the d×d covariance (BLAS
 * ssyrk) and takes its eigen-decomposition with LAPACK ssyevr. Outputs (each may be NULL):
 * comp (k, d) the top-k unit components (sign fixed: largest-|.| entry positive), var (d) every
 * eigenvalue of the covariance in descending order (explained variance), mean (d). */
gf_status gf_pca(const float *x, int64_t n, int64_t d, int64_t k, float *comp, double *var, float *mean);

/* y = A v for a symmetric operator of size n (v, y: (n)). */
typedef gf_status (*gf_matvec_fn)(void *u, const double *v, double *y, int64_t n);
/* Lanczos with full re-orthogonalisation: m steps from a seeded random start, then the
 * tridiagonal eigenproblem by LAPACK dstev. evals (k) gets the k largest Ritz values in
 * descending order, *lowest (if non-NULL) the smallest (negative curvature); *m_done the steps
 * taken (fewer when an invariant subspace is found). */
gf_status gf_lanczos(gf_matvec_fn f, void *u, int64_t n, int64_t m, int64_t k, uint64_t seed, double *evals,
                     double *lowest, int64_t *m_done);

/* A set of float ranges inside one parameter array: a Hessian block (e.g. the Q rows of qkv
 * plus the Q part of its bias). */
#define GF_PBLOCK_MAX_RANGES 8
typedef struct gf_pblock {
    char name[64];       /* "L2.mix.w_red", "L0.attn.q", "tok_emb", ... */
    char group[16];      /* kind for the plot: red, plu, gate, q, k, v, o, ffn, emb */
    int64_t layer;       /* -1 for the embeddings */
    int32_t n_ranges;
    int64_t off[GF_PBLOCK_MAX_RANGES], len[GF_PBLOCK_MAX_RANGES];
    int64_t n;           /* total floats */
} gf_pblock;

/* Hessian-vector products of a loss restricted to one block, by central differences of the
 * gradient: Hv ≈ |v| (g(θ + ε v̂) − g(θ − ε v̂)) / 2ε with ε = rel_step · max(|θ_block|, 1),
 * so the step is the same relative size for every block (and not zero for a zero block). The
 * parameters are perturbed in place and restored bit for bit. */
typedef gf_status (*gf_grad_fn)(void *u); /* evaluate the gradient at the current theta into grad */
typedef struct gf_hvp {
    float *theta;        /* (n_total) parameters */
    const float *grad;   /* (n_total) where grad_fn leaves the gradient */
    gf_grad_fn grad_fn;
    void *u;
    gf_pblock blk;
    double eps;          /* the absolute step used */
    float *saved;        /* (blk.n) */
    double *gp;          /* (blk.n) gradient at θ + εv̂ */
    int64_t n_grads;     /* gradient evaluations so far */
} gf_hvp;
gf_status gf_hvp_init(gf_hvp *h, float *theta, const float *grad, gf_grad_fn fn, void *u, const gf_pblock *b,
                      double rel_step);
gf_status gf_hvp_apply(gf_hvp *h, const double *v, double *hv); /* v, hv: (blk.n) */
/* gf_matvec_fn adapter: u is a gf_hvp. */
gf_status gf_hvp_matvec(void *u, const double *v, double *y, int64_t n);
void gf_hvp_free(gf_hvp *h);

/* ---- the probes ---- */

typedef struct gf_probe_opts {
    const char *which;        /* checkpoint: "best" (default) or "last" */
    int64_t windows;          /* validation windows (curvature, pca) or batch windows (hessian) */
    uint64_t seed;            /* window choice, null models, Lanczos/Hutchinson vectors */
    int64_t null_samples;     /* curvature: random-direction null draws per layer */
    const char *pairs_file;   /* curvature: extra prompt pairs (TSV "prompt A<TAB>prompt B") */
    int64_t lanczos_steps, top_k, hutchinson;
    double rel_step;          /* hessian: ε relative to the block norm */
    const char *blocks;       /* hessian: comma-separated substrings of block names (NULL: all) */
    int64_t points;           /* pca: points per (layer, component) in the scatter plots */
    int plot;                 /* run gnuplot (PNG) */
    int log;                  /* progress on stderr */
} gf_probe_opts;

void gf_probe_opts_default(gf_probe_opts *o);

gf_status gf_probe_curvature(const char *run_dir, const gf_probe_opts *o);
gf_status gf_probe_pca(const char *run_dir, const gf_probe_opts *o);
gf_status gf_probe_hessian(const char *run_dir, const gf_probe_opts *o);
/* Overlay plot (and a joined TSV) of two runs already probed with `kind`; written to
 * out_dir/probe-<kind>-<name A>-vs-<name B>.{tsv,png}. */
gf_status gf_probe_overlay(const char *kind, const char *run_a, const char *run_b, const char *out_dir,
                           const gf_probe_opts *o);

/* Before a probe of `kind` writes into the n dirs (run directories, and the overlay's out_dir
 * when not NULL): every existing probe-<kind>* entry there is checked with gf_output_check
 * against the pairs file (may be NULL) and the run files, so a symlink to last.ckpt or a
 * --pairs file named like an output is refused before any work (gnuplot follows symlinks). */
gf_status gf_probe_check_outputs(const char *kind, const char *const *dirs, int n, const char *out_dir,
                                 const char *pairs_file);

/* Redraw a run's plots of `kind` from its existing tables (no model, no data). */
gf_status gf_probe_replot(const char *kind, const char *run_dir);

/* Read prompt pairs: one "prompt A<TAB>prompt B" per line; blank lines and '#' comments are
 * skipped. The two prompts must have the same number of words and differ in exactly one, not
 * the last (the target). The message of a bad line names FILE:LINE. Caller frees with
 * gf_prompt_pairs_free. */
typedef struct gf_prompt_pairs { int64_t n; char **a, **b; int64_t *line; } gf_prompt_pairs;
gf_status gf_prompt_pairs_read(const char *path, gf_prompt_pairs *p);
gf_status gf_prompt_pairs_add(gf_prompt_pairs *p, const char *a, const char *b, const char *where, int64_t line);
void gf_prompt_pairs_free(gf_prompt_pairs *p);

#endif
