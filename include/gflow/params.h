/* gflow/params.h — the parameter block.
 *
 * All parameters live in one contiguous float array with three parallel arrays of
 * the same length: grad, and AdamW's m and v. zero_grad is one memset, the global
 * gradient norm one loop, AdamW one loop, a checkpoint one table plus one write.
 * Models declare tensors (name, kind, shape) first, then gf_params_alloc() lays
 * them out in declaration order and points each tensor into the block.
 */
#ifndef GFLOW_PARAMS_H
#define GFLOW_PARAMS_H

#include "gflow/error.h"
#include "gflow/tensor.h"
#include "gflow/rng.h"

/* Parameter kinds, so weight decay can be switched per kind (recipe keys). */
typedef enum gf_param_kind {
    GF_PK_WEIGHT = 0, /* matrices of linear layers */
    GF_PK_BIAS,
    GF_PK_NORM,       /* LayerNorm gain and shift */
    GF_PK_EMBED,      /* token and position tables */
    GF_PK_COUNT
} gf_param_kind;

typedef struct gf_param {
    gf_tensor t;       /* t.data/t.grad point into the block after alloc */
    char name[96];
    gf_param_kind kind;
    int64_t offset;    /* in floats from the block start */
} gf_param;

typedef struct gf_params {
    gf_param **items;  /* stable pointers (each item is its own allocation) */
    int64_t n_items, cap_items;
    int64_t n;         /* total floats */
    float *data;       /* (n) */
    float *grad;       /* (n) */
    float *m;          /* (n) AdamW first moment */
    float *v;          /* (n) AdamW second moment */
    int allocated;
} gf_params;

void gf_params_init(gf_params *p);
/* Declare a parameter; returns its tensor (data NULL until gf_params_alloc). */
gf_tensor *gf_params_add(gf_params *p, const char *name, gf_param_kind kind, int32_t ndim,
                         const int64_t *shape);
gf_status gf_params_alloc(gf_params *p);
gf_param *gf_params_find(const gf_params *p, const char *name);
void gf_params_zero_grad(gf_params *p);
/* Training init, in table order from one stream: weights and embeddings N(0, std), biases 0,
 * norm gains 1 and shifts 0 (the models' gf_*_init_weights). */
void gf_params_init_weights(gf_params *p, double std, gf_rng *rng);
/* sqrt(sum grad^2) accumulated in double */
double gf_params_grad_norm(const gf_params *p);
void gf_params_free(gf_params *p);
const char *gf_param_kind_name(gf_param_kind k);

#endif
