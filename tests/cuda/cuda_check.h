/* cuda_check.h — the harness of suite cuda (tests/cuda/test_cuda_*.c).
 *
 * An op case holds the same inputs on both devices; check_case runs the op on the CPU and twice
 * on the GPU, then compares the output and, after backward from the probe loss
 * S = Σ out ⊙ r (the same random r on both devices), every input gradient. Input gradients
 * start non-zero, so a CUDA backward must accumulate as the CPU one does; the contribution
 * (gradient minus its start) is compared too, on its own scale. Agreement is normwise:
 * max|gpu - cpu| <= TOL · max|cpu| per tensor (FP32), a NaN or infinity only where the CPU has
 * the same; the second GPU run must give the same bits. Both contexts draw from one rng stream seeded alike and share
 * `training`, so dropout draws the same keys on both devices.
 */
#ifndef GF_CUDA_CHECK_H
#define GF_CUDA_CHECK_H

#include "gf_test.h"
#include "gradcheck.h"

#ifdef GF_HAVE_CUDA
#include "gflow/cuda.h"
#include "gflow/params.h"

#define TOL 1e-4
/* bf16 cases ([run] precision = bf16): BF16_TOL for outputs and gradients. Both devices round the
 * same inputs alike and accumulate in fp32, but a GEMM input computed on each device (Plücker
 * features, upstream gradients) differs in its last fp32 bits, which now and then flips its bf16
 * rounding by one bf16 step (2^-8 relative): measured worst 2.4e-4 (Plücker weight gradients) and
 * 1.8e-4 (a Plücker forward, emulator under ASan). Where every GEMM input is a leaf (linear's
 * forward) the rounding is the same on both devices: there the forward stays at TOL, which a GPU
 * that ignored bf16 fails (3e-3). */
#define BF16_TOL 1e-3
#define MAX_IN 6 /* the gate chain: n, g, the gate weight and bias, the norm gain and shift */

typedef struct op_case {
    const char *what;
    gc_build_fn f;
    void *user;
    int training; /* ctx.training on both devices (dropout) */
    gf_precision precision; /* ctx.precision on both devices (bf16: both round the GEMM inputs) */
    double tol;             /* the tolerance of the forward and the gradients (0: TOL) */
    double fwd_tol;         /* the forward's, when it is tighter (0: tol) */
    int n_in;
    gf_tensor *cpu[MAX_IN]; /* gc_leaf: data and (non-zero) grad on the host */
    gf_tensor *gpu[MAX_IN]; /* the same on the device */
} op_case;

/* a device twin of a host leaf (data and grad copied; free with dev_free) */
gf_tensor *dev_copy(const gf_tensor *h);
void dev_free(gf_tensor *t);
/* a leaf on both devices: data N(0, scale) from seed, grad N(0, 0.5) (backward must add to it) */
void add_input(op_case *c, int32_t ndim, const int64_t *shape, uint64_t seed, float scale);
void case_free(op_case *c);
/* the device buffer's contents (malloc'd) */
float *download(const float *dev, int64_t n);
/* normwise relative error of got against want; reports and counts a failure over TOL (non-finite
 * elements fail unless equal on both sides) */
int compare(const char *what, const char *part, const float *got, const float *want, int64_t n);
/* the same for got - base against want - base (what was accumulated into base) */
int compare_from_tol(const char *what, const char *part, const float *got, const float *want, const float *base,
                     int64_t n, double tol);
int compare_from(const char *what, const char *part, const float *got, const float *want, const float *base,
                 int64_t n);
/* run a case on the CPU and (twice) on the GPU and compare; returns the failure count */
int check_case(op_case *c);

/* elements whose bits differ; *first the first one (-1: none) */
int64_t bits_differ(const float *a, const float *b, int64_t n, int64_t *first);
/* the parameter block's array `part`, a malloc'd host copy */
float *get_part(const gf_params *p, gf_params_part part);
#endif

#endif
