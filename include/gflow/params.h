/* gflow/params.h — the parameter block.
 *
 * All parameters live in one contiguous float array with three parallel arrays of
 * the same length: grad, and AdamW's m and v. zero_grad is one memset, the global
 * gradient norm one loop, AdamW one loop, a checkpoint one table plus one write.
 * Models declare tensors (name, kind, shape) first, then gf_params_alloc() lays
 * them out in declaration order and points each tensor into the block.
 *
 * The block lives on one device. gf_params_alloc makes it on the host; a GPU run draws the
 * weights there (the same rng draws as a CPU run, so both start from the same bits) and then
 * moves it (gf_params_to_device): the four arrays become device memory with the host layout,
 * every parameter tensor points into it with device GF_DEV_CUDA. Whatever reads or writes the
 * block from the host (checkpoints, export, the trainer) goes through gf_params_get/set.
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

/* A device block's kernels (AdamW) walk it in chunks of at most GF_PARAM_CHUNK floats that
 * never straddle two parameters: [lo, hi) in floats from the block start, and the parameter's
 * kind. gf_params_to_device builds the table once. */
#define GF_PARAM_CHUNK 4096
typedef struct gf_param_chunk {
    int64_t lo, hi;
    int32_t kind, pad;
} gf_param_chunk;

typedef struct gf_params {
    gf_param **items;  /* stable pointers (each item is its own allocation) */
    int64_t n_items, cap_items;
    int64_t n;         /* total floats */
    float *data;       /* (n) on `device` */
    float *grad;       /* (n) */
    float *m;          /* (n) AdamW first moment */
    float *v;          /* (n) AdamW second moment */
    int allocated;
    gf_device device;  /* where the four arrays are (GF_DEV_CPU after gf_params_alloc) */
    gf_param_chunk *chunks; /* a device block: its chunk table, in device memory */
    int64_t n_chunks;
    void *data16;      /* a device block in a bf16 run: bf16(data), n bfloat16 (gf_params_keep_bf16); else NULL */
} gf_params;

/* The four arrays of the block, for gf_params_get/set. */
typedef enum gf_params_part { GF_PP_DATA = 0, GF_PP_GRAD, GF_PP_M, GF_PP_V, GF_PP_COUNT } gf_params_part;

void gf_params_init(gf_params *p);
/* Declare a parameter; returns its tensor (data NULL until gf_params_alloc). */
gf_tensor *gf_params_add(gf_params *p, const char *name, gf_param_kind kind, int32_t ndim,
                         const int64_t *shape);
gf_status gf_params_alloc(gf_params *p);
gf_param *gf_params_find(const gf_params *p, const char *name);
/* The name of the parameter that holds block index i (parameters lie in table order); NULL past
 * the block */
const char *gf_params_name_at(const gf_params *p, int64_t i);
/* grad = 0: a memset (a device block: one cudaMemsetAsync on the stream) */
void gf_params_zero_grad(gf_params *p);
/* Training init, in table order from one stream: weights and embeddings N(0, std), biases 0,
 * norm gains 1 and shifts 0 (the models' gf_*_init_weights). On the host: init, then move. */
void gf_params_init_weights(gf_params *p, double std, gf_rng *rng);
/* sqrt(sum grad^2) accumulated in double; NAN when a device block's reduction failed
 * (gf_params_grad_sumsq says why) */
double gf_params_grad_norm(const gf_params *p);
/* sum grad^2 accumulated in double. A device block: a deterministic two-stage reduction on the
 * device (gf_cuda_sumsq), read back, which waits for the stream and so also reports a CUDA
 * failure noted before it (GF_E_EXTERNAL). Not finite iff some gradient is not (a finite
 * float's square cannot overflow a double). */
gf_status gf_params_grad_sumsq(const gf_params *p, double *out);

/* Move the block (all four arrays, contents kept) to device d: new arrays there, copies, the old
 * ones freed, every parameter tensor repointed with t.device = d. GF_OK at once when it is there
 * already; GF_E_INVALID "cannot move to cuda: gflow was built without it" for a device whose
 * backend the build lacks (gflow/backend.h); on failure the block stays where it was (between
 * two devices other than the host it goes through the host, and may stay there). */
gf_status gf_params_to_device(gf_params *p, gf_device d);
/* The whole array `part` (n floats) to or from host memory, whatever the block's device (a device
 * block: synchronous copies). */
gf_status gf_params_get(const gf_params *p, gf_params_part part, float *dst);
gf_status gf_params_set(gf_params *p, gf_params_part part, const float *src);
/* A device block whose products take bf16 inputs ([run] precision = bf16): data16 = data rounded
 * to bfloat16, made now and kept equal from then on (AdamW writes both, gf_params_set(GF_PP_DATA)
 * rounds the block again), so the products read the weights' rounded copy instead of rounding
 * them each time (docs/cuda.md "bf16 operands"). Called again it rounds the block anew. A host
 * block: nothing (the CPU rounds at each product). Moving the block to the host drops the copy. */
gf_status gf_params_keep_bf16(gf_params *p);
/* The array `part` where the block lives */
float *gf_params_part_ptr(const gf_params *p, gf_params_part part);
void gf_params_free(gf_params *p);
const char *gf_param_kind_name(gf_param_kind k);

#endif
