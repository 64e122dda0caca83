/* params.c — the contiguous parameter block on the host or on a device (its backend moves, copies
 * and frees it there: gflow/backend.h); see gflow/params.h. */
#include "gflow/params.h"
#include "gflow/arena.h"
#include "gflow/backend.h"
#include "params_internal.h"
#include "gflow/device.h"
#include "gflow/threads.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <math.h>

void gf_params_init(gf_params *p) { memset(p, 0, sizeof *p); }

gf_tensor *gf_params_add(gf_params *p, const char *name, gf_param_kind kind, int32_t ndim,
                         const int64_t *shape) {
    GF_ASSERT(!p->allocated, "gf_params_add(%s) after gf_params_alloc", name);
    GF_ASSERT(ndim >= 1 && ndim <= GF_MAX_DIMS, "parameter %s: bad ndim %d", name, ndim);
    GF_ASSERT(strlen(name) < sizeof(((gf_param *)0)->name), "parameter name too long: %s", name);
    GF_ASSERT(!gf_params_find(p, name), "duplicate parameter name %s", name);
    if (p->n_items == p->cap_items) {
        p->cap_items = p->cap_items ? 2 * p->cap_items : 64;
        p->items = realloc(p->items, (size_t)p->cap_items * sizeof *p->items);
        if (!p->items) gf_fatal(GF_E_NOMEM, "parameter table: out of memory adding %s", name);
    }
    gf_param *it = calloc(1, sizeof *it);
    if (!it) gf_fatal(GF_E_NOMEM, "parameter %s: out of memory", name);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->kind = kind;
    it->t.ndim = ndim;
    it->t.flags = GF_T_PARAM | GF_T_REQ_GRAD;
    it->t.name = it->name;
    int64_t n = 1;
    for (int32_t i = 0; i < ndim; i++) {
        GF_ASSERT(shape[i] > 0, "parameter %s: dim %d is %lld", name, i, (long long)shape[i]);
        it->t.shape[i] = shape[i];
        n *= shape[i];
    }
    it->offset = p->n;
    p->n += n;
    p->items[p->n_items++] = it;
    return &it->t;
}

gf_status gf_params_host_arrays(int64_t n, float *blk[GF_PP_COUNT]) {
    size_t bytes = (size_t)n * sizeof(float);
    for (int i = 0; i < GF_PP_COUNT; i++) {
        void *q = gf_host_alloc(bytes);
        if (!q) {
            for (int j = 0; j < i; j++) free(blk[j]);
            return gf_error_set(GF_E_NOMEM, "cannot allocate the parameter block (%lld floats x 4)", (long long)n);
        }
        blk[i] = q;
        memset(q, 0, bytes);
    }
    return GF_OK;
}

void gf_params_point_into(gf_params *p, float *const blk[GF_PP_COUNT], gf_device d) {
    p->data = blk[GF_PP_DATA];
    p->grad = blk[GF_PP_GRAD];
    p->m = blk[GF_PP_M];
    p->v = blk[GF_PP_V];
    p->device = d;
    for (int64_t i = 0; i < p->n_items; i++) {
        p->items[i]->t.data = p->data + p->items[i]->offset;
        p->items[i]->t.grad = p->grad + p->items[i]->offset;
        p->items[i]->t.device = d;
    }
}

gf_status gf_params_alloc(gf_params *p) {
    GF_ASSERT(!p->allocated, "gf_params_alloc called twice");
    float *blk[GF_PP_COUNT] = {0};
    GF_TRY(gf_params_host_arrays(p->n, blk));
    gf_params_point_into(p, blk, GF_DEV_CPU);
    p->allocated = 1;
    return GF_OK;
}

float *gf_params_part_ptr(const gf_params *p, gf_params_part part) {
    switch (part) {
    case GF_PP_DATA: return p->data;
    case GF_PP_GRAD: return p->grad;
    case GF_PP_M: return p->m;
    case GF_PP_V: return p->v;
    default: break;
    }
    GF_ASSERT(0, "parameter block part %d", (int)part);
    return NULL;
}

gf_status gf_params_to_device(gf_params *p, gf_device d) {
    GF_ASSERT(p->allocated, "gf_params_to_device: parameters not allocated");
    if (p->device == d) return GF_OK;
    const gf_backend *to = gf_backend_find(d), *from = gf_backend_of(p->device);
    if (!to)
        return gf_error_set(GF_E_INVALID, "the parameter block cannot move to %s: gflow was built without it "
                            "(docs/cuda.md)", gf_device_name(d));
    if (from->params_to_host) GF_TRY(from->params_to_host(p)); /* through the host */
    return to->params_from_host ? to->params_from_host(p) : GF_OK;
}

gf_status gf_params_get(const gf_params *p, gf_params_part part, float *dst) {
    const float *src = gf_params_part_ptr(p, part);
    return gf_backend_of(p->device)->download(dst, src, (size_t)p->n * sizeof(float));
}

gf_status gf_params_set(gf_params *p, gf_params_part part, const float *src) {
    float *dst = gf_params_part_ptr(p, part);
    GF_TRY(gf_backend_of(p->device)->upload(dst, src, (size_t)p->n * sizeof(float)));
    return part == GF_PP_DATA && p->data16 ? gf_params_keep_bf16(p) : GF_OK; /* the mirror follows */
}

gf_status gf_params_keep_bf16(gf_params *p) {
    const gf_backend *b = gf_backend_of(p->device);
    return b->params_keep_bf16 ? b->params_keep_bf16(p) : GF_OK;
}

gf_param *gf_params_find(const gf_params *p, const char *name) {
    for (int64_t i = 0; i < p->n_items; i++)
        if (strcmp(p->items[i]->name, name) == 0) return p->items[i];
    return NULL;
}

const char *gf_params_name_at(const gf_params *p, int64_t i) {
    for (int64_t k = 0; k < p->n_items; k++) {
        const gf_param *q = p->items[k];
        if (i >= q->offset && i < q->offset + gf_tensor_numel(&q->t)) return q->name;
    }
    return NULL;
}

void gf_params_zero_grad(gf_params *p) { gf_backend_of(p->device)->zero(p->grad, p->n); }

void gf_params_init_weights(gf_params *P, double std, gf_rng *rng) {
    GF_ASSERT(P->device == GF_DEV_CPU, "gf_params_init_weights: the block is on %s; draw the weights on the host, "
              "then move it (gf_params_to_device)", gf_device_name(P->device));
    for (int64_t i = 0; i < P->n_items; i++) {
        gf_param *p = P->items[i];
        int64_t n = gf_tensor_numel(&p->t);
        switch (p->kind) {
        case GF_PK_WEIGHT:
        case GF_PK_EMBED:
            for (int64_t j = 0; j < n; j++) p->t.data[j] = (float)(std * gf_rng_normal(rng));
            break;
        case GF_PK_BIAS:
            memset(p->t.data, 0, (size_t)n * sizeof(float));
            break;
        case GF_PK_NORM: { /* gain 1, shift 0 */
            float v = strstr(p->name, ".weight") ? 1.0f : 0.0f;
            for (int64_t j = 0; j < n; j++) p->t.data[j] = v;
            break;
        }
        default:
            break;
        }
    }
}

gf_status gf_params_grad_sumsq(const gf_params *p, double *out) {
    *out = NAN;
    return gf_backend_of(p->device)->sumsq(p->grad, p->n, out);
}

double gf_params_grad_norm(const gf_params *p) {
    double s = NAN;
    return gf_params_grad_sumsq(p, &s) ? NAN : sqrt(s);
}

void gf_params_free(gf_params *p) {
    for (int64_t i = 0; i < p->n_items; i++) free(p->items[i]);
    free(p->items);
    gf_backend_of(p->device)->params_free(p);
    memset(p, 0, sizeof *p);
}

const char *gf_param_kind_name(gf_param_kind k) {
    static const char *n[GF_PK_COUNT] = {"weight", "bias", "norm", "embed"};
    return (k >= 0 && k < GF_PK_COUNT) ? n[k] : "?";
}
