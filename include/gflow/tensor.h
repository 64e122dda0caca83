/* gflow/tensor.h — the tensor struct: explicit shape, contiguous row-major floats.
 *
 * Dimension letters used project-wide in shape comments:
 *   B batch, L sequence length (time), D model width, R reduced width (Grassmann r),
 *   P Plücker width R(R-1)/2, F FFN width, V vocabulary, H heads, N rows (B*L), K classes.
 * A tensor never owns its memory: data and grad point into the parameter block
 * (parameters) or the step arena (activations). grad is NULL until backward
 * first needs it.
 * A tensor lives on one device (gf_device): on the CPU (the zero value, so a zeroed tensor is a
 * CPU tensor) or on the GPU, where data and grad are device pointers into the device step arena
 * or a device parameter block (gflow/device.h, docs/cuda.md). An op's inputs share one device.
 */
#ifndef GFLOW_TENSOR_H
#define GFLOW_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GF_MAX_DIMS 4

/* Where a tensor's data and grad live. */
typedef enum gf_device { GF_DEV_CPU = 0, GF_DEV_CUDA = 1 } gf_device;
/* What the matrix products take as inputs ([run] precision): fp32, or bf16 (inputs rounded to
 * bfloat16, round to nearest even; products accumulated and returned in fp32). Everything else
 * (weights, gradients, AdamW, norms, softmax, the loss) is fp32 either way. */
typedef enum gf_precision { GF_PREC_FP32 = 0, GF_PREC_BF16 = 1 } gf_precision;

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
    gf_device device; /* GF_DEV_CPU unless created on the GPU */
} gf_tensor;

int64_t gf_tensor_numel(const gf_tensor *t);
/* size of the last dimension and the number of rows before it */
static inline int64_t gf_tensor_cols(const gf_tensor *t) { return t->shape[t->ndim - 1]; }
static inline int64_t gf_tensor_rows(const gf_tensor *t) { return gf_tensor_numel(t) / gf_tensor_cols(t); }
int gf_tensor_same_shape(const gf_tensor *a, const gf_tensor *b);
/* "[2, 12, 16]" into buf */
const char *gf_tensor_shape_str(const gf_tensor *t, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
