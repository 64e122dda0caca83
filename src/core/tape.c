/* tape.c — node records in the step arena, walked in reverse; see gflow/tape.h. */
#include "gflow/tape.h"
#include "gflow/backend.h"
#include "gflow/device.h"
#include "gflow/threads.h"
#include <string.h>

/* a pack epoch never handed out before (0 is none) */
static uint64_t next_pack_epoch(void) {
    static _Atomic uint64_t epochs;
    return ++epochs;
}

void gf_ctx_init(gf_ctx *ctx, size_t arena_bytes, gf_rng *rng) {
    memset(ctx, 0, sizeof *ctx);
    ctx->pack_epoch = next_pack_epoch();
    gf_arena_init(&ctx->arena, arena_bytes);
    ctx->grad_enabled = 1;
    ctx->training = 0;
    ctx->rng = rng;
}

void gf_ctx_reset(gf_ctx *ctx) {
    gf_arena_reset(&ctx->arena);
    if (ctx->cuda) gf_cuda_arena_reset(ctx->cuda);
    ctx->last = NULL;
    ctx->n_nodes = 0;
    ctx->n_bf16_packs = 0; /* their copies were in the arena */
    ctx->key_dev = NULL;
    ctx->n_keys = ctx->key_next = ctx->keys_drawn = 0;
    ctx->pack_epoch = next_pack_epoch();
}

void gf_ctx_free(gf_ctx *ctx) {
    gf_arena_free(&ctx->arena);
    if (ctx->cuda) gf_cuda_arena_free(ctx->cuda);
    ctx->cuda = NULL;
}

int gf_ctx_set_grad(gf_ctx *ctx, int enabled) {
    int old = ctx->grad_enabled;
    ctx->grad_enabled = enabled;
    return old;
}

gf_tensor *gf_tensor_header(gf_ctx *ctx, int32_t ndim, const int64_t *shape) {
    GF_ASSERT(ndim >= 1 && ndim <= GF_MAX_DIMS, "bad ndim %d", ndim);
    gf_tensor *t = gf_arena_alloc(&ctx->arena, sizeof *t);
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) {
        GF_ASSERT(shape[i] > 0, "tensor dim %d is %lld", i, (long long)shape[i]);
        t->shape[i] = shape[i];
    }
    return t;
}

gf_tensor *gf_tensor_new(gf_ctx *ctx, int32_t ndim, const int64_t *shape) {
    gf_tensor *t = gf_tensor_header(ctx, ndim, shape);
    t->data = gf_arena_floats(&ctx->arena, gf_tensor_numel(t));
    return t;
}

gf_tensor *gf_tensor_zeros(gf_ctx *ctx, int32_t ndim, const int64_t *shape) {
    gf_tensor *t = gf_tensor_new(ctx, ndim, shape);
    memset(t->data, 0, (size_t)gf_tensor_numel(t) * sizeof(float));
    return t;
}

gf_tensor *gf_tensor_new2(gf_ctx *ctx, int64_t d0, int64_t d1) {
    int64_t s[2] = {d0, d1};
    return gf_tensor_new(ctx, 2, s);
}

gf_tensor *gf_tensor_new3(gf_ctx *ctx, int64_t d0, int64_t d1, int64_t d2) {
    int64_t s[3] = {d0, d1, d2};
    return gf_tensor_new(ctx, 3, s);
}

gf_tensor *gf_param_rows_view(gf_ctx *ctx, gf_tensor *param, int64_t rows) {
    GF_ASSERT(rows >= 1 && rows <= param->shape[0], "view of %lld rows of %s with %lld rows", (long long)rows,
              param->name ? param->name : "?", (long long)param->shape[0]);
    gf_tensor *v = gf_arena_alloc(&ctx->arena, sizeof *v);
    *v = *param;
    v->shape[0] = rows;
    return v;
}

float *gf_tensor_grad(gf_ctx *ctx, gf_tensor *t) {
    if (t->grad) return t->grad;
    t->grad = gf_backend_of(t->device)->grad_zeros(ctx, gf_tensor_numel(t));
    return t->grad;
}

const char *gf_op_family_name(gf_op_family f) {
    static const char *n[GF_FAM_COUNT] = {"gemm", "plucker", "attention", "elementwise"};
    return (f >= 0 && f < GF_FAM_COUNT) ? n[f] : "?";
}

/* the row of op `name` in ctx's per-op table (NULL when the table is full) */
static gf_op_stat *op_stat(gf_profile *pr, const char *name) {
    for (int i = 0; i < pr->n_ops; i++)
        if (pr->ops[i].name == name || !strcmp(pr->ops[i].name, name)) return &pr->ops[i];
    if (pr->n_ops == GF_OP_STATS) return NULL;
    gf_op_stat *o = &pr->ops[pr->n_ops++];
    *o = (gf_op_stat){.name = name};
    return o;
}

void gf_prof_op_fwd(gf_ctx *ctx, double t0, double t1) {
    gf_profile *pr = &ctx->prof;
    if (!pr->rec_op || pr->rec_t < t0) {
        pr->pending_s += t1 - t0;
        return;
    }
    gf_op_stat *o = op_stat(pr, pr->rec_op);
    if (o) o->fwd_s += t1 - t0;
    else pr->op_more_fwd += t1 - t0;
}

gf_node *gf_tape_record(gf_ctx *ctx, const gf_op_def *op, gf_tensor *out, int32_t n_in, gf_tensor *const *in) {
    GF_ASSERT(n_in <= GF_NODE_MAX_IN, "op %s: %d inputs", op->name, n_in);
    out->name = op->name;
    if (ctx->profile) { /* the forward time held for this op (gf_prof_op_fwd) is its own */
        gf_profile *pr = &ctx->prof;
        gf_op_stat *o = op_stat(pr, op->name);
        if (o) o->fwd_s += pr->pending_s;
        else pr->op_more_fwd += pr->pending_s;
        pr->pending_s = 0.0;
        pr->rec_op = op->name;
        pr->rec_t = gf_time_now();
    }
    if (!ctx->grad_enabled) return NULL;
    int need = 0;
    for (int32_t i = 0; i < n_in; i++) need |= gf_needs_grad(in[i]);
    if (!need) return NULL; /* no input needs a gradient: nothing to record */
    gf_node *n = gf_arena_alloc(&ctx->arena, sizeof *n);
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_in = n_in;
    n->out = out;
    for (int32_t i = 0; i < n_in; i++) n->in[i] = in[i];
    n->prev = ctx->last;
    ctx->last = n;
    ctx->n_nodes++;
    out->flags |= GF_T_REQ_GRAD;
    return n;
}

static void run_backward(gf_ctx *ctx) {
    for (gf_node *n = ctx->last; n; n = n->prev) {
        if (!n->out->grad) continue; /* no gradient reached this node's output */
        const gf_op_def *def = n->op;
        /* parameters already point into the grad block; activations get zeroed buffers, or
         * uninitialised ones flagged fresh when the op stores its first contribution itself */
        for (int32_t i = 0; i < n->n_in; i++) {
            gf_tensor *x = n->in[i];
            if (!gf_needs_grad(x) || x->grad) continue;
            if (def->stores_fresh) {
                x->grad = gf_backend_of(x->device)->grad_floats(ctx, gf_tensor_numel(x));
                x->flags |= GF_T_GRAD_FRESH;
            } else {
                gf_tensor_grad(ctx, x);
            }
        }
        if (ctx->profile) {
            double t0 = gf_time_now();
            def->backward(ctx, n);
            const double t = gf_time_now() - t0;
            ctx->prof.bwd_s[def->family] += t;
            gf_op_stat *o = op_stat(&ctx->prof, def->name);
            if (o) o->bwd_s += t;
            else ctx->prof.op_more_bwd += t;
        } else {
            def->backward(ctx, n);
        }
        for (int32_t i = 0; i < n->n_in; i++)
            GF_ASSERT(!n->in[i] || !(n->in[i]->flags & GF_T_GRAD_FRESH), "op %s left the gradient of input %d unwritten", def->name, i);
    }
}

void gf_tape_backward(gf_ctx *ctx, gf_tensor *loss) {
    GF_ASSERT(gf_tensor_numel(loss) == 1, "gf_tape_backward: loss has %lld elements",
              (long long)gf_tensor_numel(loss));
    const float one = 1.0f;
    gf_backend_of(loss->device)->grad_acc_const(ctx, gf_tensor_grad(ctx, loss), &one, 1);
    run_backward(ctx);
}

void gf_tape_backward_from(gf_ctx *ctx, gf_tensor *out, const float *dout) {
    float *g = gf_tensor_grad(ctx, out);
    gf_backend_of(out->device)->grad_acc_host(ctx, g, dout, gf_tensor_numel(out));
    run_backward(ctx);
}
