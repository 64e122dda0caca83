/* gflow/tensor.h — the tensor struct: explicit shape, contiguous row-major floats.
 *
 * Dimension letters used project-wide in shape comments:
 *   B batch, L sequence length (time), D model width, R reduced width (Grassmann r),
 *   P Plücker width R(R-1)/2, F FFN width, V vocabulary, H heads, N rows (B*L), K classes.
 * A tensor never owns its memory: data and grad point into the parameter block
 * (parameters) or the step arena (activations). grad is NULL until backward
 * first needs it.
 */
#ifndef GFLOW_TENSOR_H
#define GFLOW_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#define GF_MAX_DIMS 4

enum {
    GF_T_REQ_GRAD = 1 << 0, /* gradient flows into this tensor */
    GF_T_PARAM = 1 << 1,    /* lives in the parameter block */
    GF_T_GRAD_FRESH = 1 << 2, /* grad allocated but not yet written: the backward stores, not adds */
};

typedef struct gf_tensor {
    float *data;
    float *grad;
    int32_t ndim;
    int32_t flags;
    int64_t shape[GF_MAX_DIMS];
    const char *name; /* parameters: their checkpoint name; activations: op name */
} gf_tensor;

int64_t gf_tensor_numel(const gf_tensor *t);
/* size of the last dimension and the number of rows before it */
static inline int64_t gf_tensor_cols(const gf_tensor *t) { return t->shape[t->ndim - 1]; }
static inline int64_t gf_tensor_rows(const gf_tensor *t) { return gf_tensor_numel(t) / gf_tensor_cols(t); }
int gf_tensor_same_shape(const gf_tensor *a, const gf_tensor *b);
/* "[2, 12, 16]" into buf */
const char *gf_tensor_shape_str(const gf_tensor *t, char *buf, size_t n);

#endif
