/* gflow/tape.h — the step context: arena, tape of node records, grad mode.
 *
 * Every op appends a node {op, inputs, output, saved, params} to the tape when
 * any input needs a gradient and grad mode is on; gf_tape_backward() walks the
 * nodes in reverse. Conventions:
 *  - backward functions ACCUMULATE (+=) into input gradients;
 *  - an input's grad buffer is allocated (zeroed) in the arena the first time a
 *    backward needs it; parameters' grads live in the parameter block;
 *  - a node whose output received no gradient is skipped;
 *  - nothing the tape saved is modified in place;
 *  - with grad mode off (evaluation) nothing is recorded at all.
 * The tape stays on the host for every device: for a GPU tensor (gflow/device.h) only the
 * buffers are on the device, its gradient comes from the device step arena, and its node's
 * backward is the op's CUDA backward (the CUDA forward records its own gf_op_def).
 */
#ifndef GFLOW_TAPE_H
#define GFLOW_TAPE_H

#include "gflow/arena.h"
#include "gflow/error.h"
#include "gflow/rng.h"
#include "gflow/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GF_NODE_MAX_IN 6

struct gf_ctx;
struct gf_node;
struct gf_cuda_arena;

/* Op families, for the per-family timings of `gflow bench`. */
typedef enum gf_op_family { GF_FAM_GEMM = 0, GF_FAM_PLUCKER, GF_FAM_ATTENTION, GF_FAM_ELEMWISE,
                            GF_FAM_COUNT } gf_op_family;
const char *gf_op_family_name(gf_op_family f);

/* What the tape knows of an op. Each op file (src/ops/<name>.c) defines its own
 * `const gf_op_def gf_op_<name>` and passes its address to gf_tape_record; the tape holds no
 * list of ops, so core depends on none. */
typedef struct gf_op_def {
    const char *name;
    gf_op_family family;
    /* accumulate input gradients from n->out->grad */
    void (*backward)(struct gf_ctx *ctx, struct gf_node *n);
    /* 1: the backward handles inputs flagged GF_T_GRAD_FRESH (gf_grad_fresh) by storing its
     * contribution, so the tape skips zeroing their buffers — each first contribution then
     * costs one write instead of a memset, a read and a write. */
    int stores_fresh;
} gf_op_def;

typedef struct gf_node {
    const gf_op_def *op;
    int32_t n_in;
    gf_tensor *out;
    gf_tensor *in[GF_NODE_MAX_IN];
    void *saved;      /* op-specific buffer in the step arena */
    void *aux;        /* op-specific pointer (e.g. int32 indices) */
    int64_t ip[8];    /* op-specific integer parameters */
    double fp[4];     /* op-specific real parameters */
    struct gf_node *prev;
} gf_node;

/* One shape of gf_gemm's products: C (M, N) = or += op(A) (M, K) op(B) (K, N) (gemm.c, with
 * ctx->profile: gflow bench --products) */
typedef struct gf_gemm_stat {
    int64_t M, N, K;
    int ta, tb, acc; /* acc: 0 C =, 1 C +=, 2 C = with the row bias (gf_gemm_bias) */
    int64_t calls;
    double s, s_round_a, s_round_b; /* seconds in all; of them, rounding A, rounding and reordering B (bf16) */
} gf_gemm_stat;

#define GF_GEMM_STATS 64

/* One op's time (gflow bench): its forward (every interval an op times for its family, named by
 * the op that records itself in it or next: gf_prof_op_fwd) and its backward (the tape's call) */
typedef struct gf_op_stat {
    const char *name; /* the gf_op_def's, or "(not attributed)" */
    double fwd_s, bwd_s;
} gf_op_stat;

#define GF_OP_STATS 48

/* Per-op-family timing, filled when ctx->profile is set (gflow bench); per op, the first
 * GF_OP_STATS ops (op_more_fwd, op_more_bwd: seconds of any further ones); and per product shape, the first
 * GF_GEMM_STATS shapes (gemm_more: the calls of any further shapes, not listed) */
typedef struct gf_profile {
    double fwd_s[64];
    double bwd_s[64];
    int64_t calls[64];
    gf_op_stat ops[GF_OP_STATS];
    int n_ops;
    double op_more_fwd, op_more_bwd;
    const char *rec_op; /* the op gf_tape_record was last called for, at rec_t */
    double rec_t;
    double pending_s;   /* forward time timed before its op recorded itself */
    gf_gemm_stat gemm[GF_GEMM_STATS];
    int n_gemm;
    int64_t gemm_more;
} gf_profile;

typedef struct gf_ctx {
    gf_arena arena;
    gf_node *last;        /* most recent node; ->prev walks back */
    int64_t n_nodes;
    int grad_enabled;     /* 0: no-grad mode, nothing recorded */
    int training;         /* dropout active */
    gf_rng *rng;          /* dropout draws one key per op from here */
    /* The forward computes rows [batch_row0, batch_row0 + batch_rows) of a global batch (0, 0:
     * all of it); dropout keys its masks by global row, so a data-parallel rank draws the masks
     * the single process draws for those rows. */
    int64_t batch_row0, batch_rows;
    /* dropout keys drawn before the step (gf_ctx_draw_keys, gflow/device.h): the GPU ops take
     * key_next of n_keys from device memory instead of drawing; keys_drawn counts the step's
     * dropout keys either way. Cleared by gf_ctx_reset. */
    const uint64_t *key_dev;
    int32_t n_keys, key_next, keys_drawn;
    int profile;
    gf_profile prof;
    struct gf_cuda_arena *cuda; /* the device step arena (gf_ctx_use_cuda); NULL: CPU only */
    gf_precision precision;     /* the matrix products' inputs (gf_gemm); GF_PREC_FP32 after init */
    /* bf16: the rounded copies of gf_gemm's B operands made in this step (weights, saved
     * activations: constant until the next reset), so the tied head's E is rounded once a step
     * and orientation, not once a chunk; emptied by gf_ctx_reset with the arena that holds them */
    struct gf_bf16_pack {
        const float *src;
        int64_t rows, cols, ld; /* as stored */
        int widen;
        const void *layout; /* NULL: the stored layout; else the oneDNN matmul whose weights layout it is in (gemm.c) */
        void *packed;
    } bf16_packs[512]; /* a 12-layer GrassmannLM step keeps 226 (oneDNN without AMX: a weight once per orientation) */
    int n_bf16_packs;
    /* unique to this context between two resets, across every context (gf_ctx_init and
     * gf_ctx_reset draw a new one): gemm.c reuses its last rounded A operand only within one */
    uint64_t pack_epoch;
} gf_ctx;

void gf_ctx_init(gf_ctx *ctx, size_t arena_bytes, gf_rng *rng);
/* Drop the tape and every activation (on the host and, with gf_ctx_use_cuda, on the device);
 * keeps the arenas' memory for the next step. */
void gf_ctx_reset(gf_ctx *ctx);
void gf_ctx_free(gf_ctx *ctx);
/* Set grad mode; returns the previous one so callers can restore it. */
int gf_ctx_set_grad(gf_ctx *ctx, int enabled);

/* The record of a new tensor in the step arena: shape checked, no data yet (gf_tensor_new and
 * its device twin gf_cuda_tensor_new give it its buffer). */
gf_tensor *gf_tensor_header(gf_ctx *ctx, int32_t ndim, const int64_t *shape);
/* New activation tensor in the arena (uninitialised data, no grad). */
gf_tensor *gf_tensor_new(gf_ctx *ctx, int32_t ndim, const int64_t *shape);
gf_tensor *gf_tensor_zeros(gf_ctx *ctx, int32_t ndim, const int64_t *shape);
/* Convenience: shape from arguments. */
gf_tensor *gf_tensor_new2(gf_ctx *ctx, int64_t d0, int64_t d1);
gf_tensor *gf_tensor_new3(gf_ctx *ctx, int64_t d0, int64_t d1, int64_t d2);
/* A view of a parameter's first `rows` rows (e.g. positions 0..L-1 of the position table):
 * shares data and the parameter's grad, so backward accumulates straight into the block. */
gf_tensor *gf_param_rows_view(gf_ctx *ctx, gf_tensor *param, int64_t rows);
/* Ensure t->grad exists (zeroed, on t's device) and return it. */
float *gf_tensor_grad(gf_ctx *ctx, gf_tensor *t);

/* For op implementations: does an op on these inputs need a tape record?
 * Sets GF_T_REQ_GRAD on `out` and returns the new node (or NULL: nothing recorded). */
gf_node *gf_tape_record(gf_ctx *ctx, const gf_op_def *op, gf_tensor *out, int32_t n_in, gf_tensor *const *in);
static inline int gf_needs_grad(const gf_tensor *t) { return t && (t->flags & GF_T_REQ_GRAD); }

/* ctx->profile: the forward interval [t0, t1) an op timed (gf_prof_end): the op's that called
 * gf_tape_record inside it, else held and given to the next op that does (a fused op times its
 * product before it records itself) */
void gf_prof_op_fwd(struct gf_ctx *ctx, double t0, double t1);

/* Backward from a scalar loss (d loss = 1). */
void gf_tape_backward(gf_ctx *ctx, gf_tensor *loss);
/* Backward from any output with a given upstream gradient dout (same numel as out; dout is a
 * host array whatever out's device). */
void gf_tape_backward_from(gf_ctx *ctx, gf_tensor *out, const float *dout);

#ifdef __cplusplus
}
#endif

#endif
