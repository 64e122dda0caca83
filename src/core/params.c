/* params.c — the contiguous parameter block; see gflow/params.h. */
#include "gflow/params.h"
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
        GF_ASSERT(p->items, "out of memory");
    }
    gf_param *it = calloc(1, sizeof *it);
    GF_ASSERT(it, "out of memory");
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

gf_status gf_params_alloc(gf_params *p) {
    GF_ASSERT(!p->allocated, "gf_params_alloc called twice");
    size_t bytes = (size_t)p->n * sizeof(float);
    float *blk[4] = {0};
    for (int i = 0; i < 4; i++) {
        void *q = NULL;
        if (posix_memalign(&q, 64, bytes ? bytes : 64) != 0) {
            for (int j = 0; j < i; j++) free(blk[j]);
            return gf_error_set(GF_E_NOMEM, "cannot allocate the parameter block (%lld floats x 4)",
                                (long long)p->n);
        }
        blk[i] = q;
        memset(q, 0, bytes);
    }
    p->data = blk[0];
    p->grad = blk[1];
    p->m = blk[2];
    p->v = blk[3];
    for (int64_t i = 0; i < p->n_items; i++) {
        p->items[i]->t.data = p->data + p->items[i]->offset;
        p->items[i]->t.grad = p->grad + p->items[i]->offset;
    }
    p->allocated = 1;
    return GF_OK;
}

gf_param *gf_params_find(const gf_params *p, const char *name) {
    for (int64_t i = 0; i < p->n_items; i++)
        if (strcmp(p->items[i]->name, name) == 0) return p->items[i];
    return NULL;
}

void gf_params_zero_grad(gf_params *p) { memset(p->grad, 0, (size_t)p->n * sizeof(float)); }

void gf_params_init_weights(gf_params *P, double std, gf_rng *rng) {
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

double gf_params_grad_norm(const gf_params *p) {
    return sqrt(gf_sumsq_f32(p->grad, p->n));
}

void gf_params_free(gf_params *p) {
    for (int64_t i = 0; i < p->n_items; i++) free(p->items[i]);
    free(p->items);
    free(p->data);
    free(p->grad);
    free(p->m);
    free(p->v);
    memset(p, 0, sizeof *p);
}

const char *gf_param_kind_name(gf_param_kind k) {
    static const char *n[GF_PK_COUNT] = {"weight", "bias", "norm", "embed"};
    return (k >= 0 && k < GF_PK_COUNT) ? n[k] : "?";
}
