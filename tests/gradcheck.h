/* gradcheck.h — finite-difference gradient checks for ops and small graphs.
 *
 * The probe loss is S = Σ out ⊙ r with a fixed random r (a plain Σ out cannot see
 * softmax or layernorm errors), accumulated in double. The analytic gradient comes
 * from gf_tape_backward_from(out, r); the numerical one from central differences
 * (S(x+h) - S(x-h)) / 2h on each input element (or a strided sample of them).
 * An element passes when |num - ana| <= atol + rtol * max(|num|, |ana|).
 */
#ifndef GF_GRADCHECK_H
#define GF_GRADCHECK_H

#include "gflow.h"

/* Leaf tensor owned by the test (malloc'd data and grad), filled N(0, scale) from seed. */
gf_tensor *gc_leaf(int32_t ndim, const int64_t *shape, uint64_t seed, float scale);
void gc_leaf_free(gf_tensor *t);

/* The first n floats of ctx's step arena set to v, then the arena reset: the step's next
 * allocations read v where nothing wrote them (NaN: an op that adds to memory it should store
 * into, or reads scratch it never wrote, shows). Filled twice: a first fill past the arena's
 * first chunk is freed by the reset that joins the chunks into one. */
void gc_arena_fill(gf_ctx *ctx, int64_t n, float v);

typedef gf_tensor *(*gc_build_fn)(gf_ctx *ctx, gf_tensor **in, void *user);

typedef struct gc_opts {
    double h;          /* finite-difference step (default 1e-2 for float32 forward) */
    double atol, rtol; /* default 2e-3, 2e-2 */
    int64_t max_elems; /* per input; 0 = all */
    uint64_t seed;     /* for r */
} gc_opts;

/* Returns the number of mismatching elements (0 = pass) and reports them via
 * gf_test_fail. Inputs whose flags lack GF_T_REQ_GRAD are not checked. */
int gc_check(const char *what, gc_build_fn f, gf_tensor **in, int n_in, void *user, gc_opts o);

/* The double-precision reference of f's output over the same inputs (test_plucker_*.c). */
typedef void (*gc_ref_fn)(gf_tensor **in, void *user, double *ref);
/* f's output (in ctx) checked element by element against ref within 1e-5 + 1e-4 |ref|; returned
 * for further checks. */
gf_tensor *gc_forward_vs_ref(gf_ctx *ctx, gc_build_fn f, gf_tensor **in, void *user, gc_ref_fn ref);
/* The Plücker coordinates p_ij = x_i y_j - x_j y_i (i < j, row-major; R(R-1)/2 of them) of x and
 * y (R each) in double, into p; returns the scale of p: 1 / max(|p|, eps) where normalize, else 1. */
double gc_plucker_p(const float *x, const float *y, int64_t R, double *p, float eps, int normalize);
/* One case of a Plücker op: leaves z (zs: B, L, R) N(0, 1), w (D, Pw) and b (D) N(0, 0.5) from
 * seed, f's finite-difference check (h 1e-3, atol 1e-3, rtol 1e-2), then gc_forward_vs_ref. The
 * gradient check's mismatches. */
int gc_plucker_case(const char *what, gc_build_fn f, gc_ref_fn ref, void *user, const int64_t zs[3], int64_t D,
                    int64_t Pw, uint64_t seed);

/* max |a-b| and max relative error helpers for reference comparisons */
double gc_max_abs_diff(const float *a, const float *b, int64_t n);

#endif
