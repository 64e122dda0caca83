/* decoder.c — incremental decoding for both LM families (gflow/decoder.h): the blocks of
 * gflow/blocks.h run with a gf_block_cache, the head on the last position only. */
#include "gflow/decoder.h"
#include "gflow/ops.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GF_DECODE_SERIAL_ROWS 64 /* up to this many new positions, the ops run on one thread */

/* floats of one row's cache of layer l */
static int64_t cache_row_floats(const gf_model_cfg *c, int64_t l, int64_t *cap) {
    if (c->family == GF_FAMILY_TRANSFORMER) {
        *cap = c->max_len;
        return 2 * c->max_len * c->d_model; /* K and V, every head */
    }
    if (!c->plucker) { *cap = 0; return 0; } /* the linear stand-in mixes no positions */
    const int64_t *offs;
    int32_t n;
    gf_lm_layer_offsets(c, l, &offs, &n);
    int64_t W = 1;
    for (int32_t q = 0; q < n; q++) W = offs[q] > W ? offs[q] : W;
    W = W < c->max_len ? W : c->max_len; /* an offset >= max_len never finds its partner */
    *cap = W;
    return 2 * W * c->r;
}

gf_status gf_lm_decoder_init(gf_lm_decoder *d, gf_lm *lm, int64_t B) {
    memset(d, 0, sizeof *d);
    const gf_model_cfg *c = &lm->cfg;
    if (B < 1) return gf_error_set(GF_E_INVALID, "decoder: need at least one row, got %lld", (long long)B);
    d->lm = lm;
    gf_ctx_init(&d->ctx, (size_t)1 << 20, NULL);
    gf_ctx_set_grad(&d->ctx, 0);
    d->ctx.training = 0;
    d->B = B;
    d->keep = c->max_len / 2;
    int64_t per_row[GF_MAX_LAYERS], total = 0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        per_row[l] = cache_row_floats(c, l, &d->cache[l].cap);
        total += per_row[l] * B;
    }
    d->state_floats = total;
    d->state = calloc((size_t)(total > 0 ? total : 1), sizeof(float));
    d->logits = calloc((size_t)(B * c->vocab), sizeof(float));
    d->window = calloc((size_t)(B * c->max_len), sizeof(int32_t));
    d->scratch_ids = calloc((size_t)(B * c->max_len), sizeof(int32_t));
    if (!d->state || !d->logits || !d->window || !d->scratch_ids) {
        gf_lm_decoder_free(d);
        return gf_error_set(GF_E_NOMEM, "decoder: cannot allocate the state of %lld rows", (long long)B);
    }
    float *p = d->state;
    for (int64_t l = 0; l < c->n_layers; l++) {
        d->cache[l].buf = p;
        p += per_row[l] * B;
    }
    return GF_OK;
}

/* Copy row 0 of every per-row buffer to rows 1..B-1 (a prompt computed once for all rows). */
static void broadcast_row0(gf_lm_decoder *d) {
    const gf_model_cfg *c = &d->lm->cfg;
    for (int64_t l = 0; l < c->n_layers; l++) {
        int64_t cap, n = cache_row_floats(c, l, &cap);
        for (int64_t b = 1; b < d->B; b++)
            memcpy(d->cache[l].buf + b * n, d->cache[l].buf, (size_t)n * sizeof(float));
    }
    for (int64_t b = 1; b < d->B; b++) {
        memcpy(d->logits + b * c->vocab, d->logits, (size_t)c->vocab * sizeof(float));
        memcpy(d->window + b * c->max_len, d->window, (size_t)d->pos * sizeof(int32_t));
    }
}

/* Consume n tokens of each of `rows` rows (ids (rows, n)) at positions pos..pos+n-1. */
static gf_status consume(gf_lm_decoder *d, const int32_t *ids, int64_t rows, int64_t n) {
    gf_lm *m = d->lm;
    const gf_model_cfg *c = &m->cfg;
    const int64_t D = c->d_model, V = c->vocab;
    for (int64_t k = 0; k < rows * n; k++)
        if (ids[k] < 0 || ids[k] >= V)
            return gf_error_set(GF_E_INVALID, "decoder: token id %d outside [0, %lld)", ids[k], (long long)V);
    gf_ctx *ctx = &d->ctx;
    gf_ctx_reset(ctx);
    gf_tensor *h = gf_tensor_new3(ctx, rows, n, D); // (rows, n, D) token + position embeddings
    for (int64_t b = 0; b < rows; b++)
        for (int64_t i = 0; i < n; i++) {
            const float *e = m->tok_emb->data + (int64_t)ids[b * n + i] * D, *p = m->pos_emb->data + (d->pos + i) * D;
            float *o = h->data + (b * n + i) * D;
            for (int64_t k = 0; k < D; k++) o[k] = e[k] + p[k];
            d->window[b * c->max_len + d->pos + i] = ids[b * n + i];
        }
    /* a decode step of a few rows is ~100 tiny ops: a fork/join per op costs more than it saves
     * (and spinning workers starve on a loaded machine); the BLAS keeps its own threads */
    const int T = omp_get_max_threads();
    if (rows * n <= GF_DECODE_SERIAL_ROWS) omp_set_num_threads(1);
    const gf_block_cfg bc = gf_lm_block_cfg(c);
    for (int64_t l = 0; l < c->n_layers; l++) {
        d->cache[l].pos = d->pos;
        gf_block_in in = {.cache = &d->cache[l]};
        gf_lm_layer_offsets(c, l, &in.offsets, &in.n_offsets);
        h = gf_block_forward(ctx, &bc, &m->blocks[l], h, &in);
    }
    gf_tensor *last = gf_tensor_new3(ctx, rows, 1, D); // (rows, 1, D) the last position of each row
    for (int64_t b = 0; b < rows; b++)
        memcpy(last->data + b * D, h->data + (b * n + n - 1) * D, (size_t)D * sizeof(float));
    last = gf_layernorm(ctx, last, m->ln_f_w, m->ln_f_b, c->ln_eps);
    omp_set_num_threads(T);
    gf_lm_tied_head(m, last->data, rows, d->logits); /* the last position only */
    d->pos += n;
    return GF_OK;
}

void gf_lm_tied_head(const gf_lm *m, const float *h, int64_t rows, float *logits) {
    const int V = (int)m->cfg.vocab, D = (int)m->cfg.d_model;
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, V, D, 1.0f, m->tok_emb->data, D, h, 1, 0.0f, logits, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, V, D, 1.0f, h, D, m->tok_emb->data, D, 0.0f,
                    logits, V);
}

gf_status gf_lm_decoder_prefill(gf_lm_decoder *d, const int32_t *ids, int64_t n_rows, int64_t n) {
    const int64_t Lmax = d->lm->cfg.max_len;
    if (n_rows != 1 && n_rows != d->B)
        return gf_error_set(GF_E_INVALID, "decoder: a prompt for %lld rows, the decoder has %lld", (long long)n_rows,
                            (long long)d->B);
    if (n < 1 || n > Lmax)
        return gf_error_set(GF_E_INVALID, "decoder: prompt of %lld tokens, need 1..max_len (%lld)", (long long)n,
                            (long long)Lmax);
    d->pos = 0;
    GF_TRY(consume(d, ids, n_rows, n));
    if (n_rows == 1 && d->B > 1) broadcast_row0(d);
    return GF_OK;
}

gf_status gf_lm_decoder_step(gf_lm_decoder *d, const int32_t *tok) {
    const int64_t Lmax = d->lm->cfg.max_len, B = d->B;
    if (d->pos == 0) return gf_error_set(GF_E_INVALID, "decoder: step before prefill");
    if (d->pos == Lmax) {
        /* every learned position is used: restart at position 0 from the last `keep` tokens */
        for (int64_t b = 0; b < B; b++)
            memcpy(d->scratch_ids + b * d->keep, d->window + b * Lmax + Lmax - d->keep,
                   (size_t)d->keep * sizeof(int32_t));
        d->pos = 0;
        d->n_refills++;
        if (d->keep > 0) GF_TRY(consume(d, d->scratch_ids, B, d->keep));
    }
    return consume(d, tok, B, 1);
}

int64_t gf_lm_decoder_state_bytes(const gf_lm_decoder *d) {
    const gf_model_cfg *c = &d->lm->cfg;
    return (int64_t)sizeof(float) * (d->state_floats + d->B * c->vocab) +
           (int64_t)sizeof(int32_t) * 2 * d->B * c->max_len;
}

void gf_lm_decoder_free(gf_lm_decoder *d) {
    if (d->lm) gf_ctx_free(&d->ctx);
    free(d->state);
    free(d->logits);
    free(d->window);
    free(d->scratch_ids);
    memset(d, 0, sizeof *d);
}

/* ---- choosing the next token ---- */

typedef struct { float v; int32_t id; } scored;

/* a ranks before b: the larger logit, then the lower id */
static inline int before(scored a, scored b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

static int cmp_scored(const void *x, const void *y) {
    const scored *a = x, *b = y;
    return before(*a, *b) ? -1 : before(*b, *a) ? 1 : 0;
}

/* The k best of lg (V) into s[0..k) (in no order): one pass with a min-heap of the kept ones, the
 * worst at s[0]; most ids lose the single comparison with s[0], so this is ~V comparisons. */
static void select_top(const float *lg, int64_t V, scored *s, int64_t k) {
    for (int64_t j = 0; j < V; j++) {
        scored x = {lg[j], (int32_t)j};
        int64_t i;
        if (j < k) { /* sift up */
            for (i = j; i > 0 && before(s[(i - 1) / 2], x); i = (i - 1) / 2) s[i] = s[(i - 1) / 2];
            s[i] = x;
            continue;
        }
        if (!before(x, s[0])) continue;
        for (i = 0;;) { /* replace the worst, sift down */
            int64_t c = 2 * i + 1;
            if (c >= k) break;
            if (c + 1 < k && before(s[c], s[c + 1])) c++;
            if (!before(x, s[c])) break;
            s[i] = s[c];
            i = c;
        }
        s[i] = x;
    }
}

size_t gf_sample_scratch_bytes(int64_t V) { return (size_t)V * (sizeof(scored) + sizeof(double)); }

int32_t gf_sample_token(const float *lg, int64_t V, double temperature, int64_t top_k, gf_rng *rng, void *scratch) {
    if (temperature == 0.0) {
        int64_t best = 0;
        for (int64_t j = 1; j < V; j++) if (lg[j] > lg[best]) best = j;
        return (int32_t)best;
    }
    scored *s = scratch;
    double *p = (double *)(s + V);
    const int64_t K = top_k > 0 && top_k < V ? top_k : V;
    if (K < V) {
        select_top(lg, V, s, K);
        qsort(s, (size_t)K, sizeof *s, cmp_scored); /* a fixed order of the kept ids */
    } else {
        for (int64_t j = 0; j < V; j++) s[j] = (scored){lg[j], (int32_t)j};
    }
    double mx = -INFINITY, z = 0;
    for (int64_t a = 0; a < K; a++) mx = s[a].v > mx ? s[a].v : mx;
    for (int64_t a = 0; a < K; a++) z += p[a] = exp((s[a].v - mx) / temperature);
    double u = (double)gf_rng_uniform(rng) * z, acc = 0;
    for (int64_t a = 0; a < K; a++) {
        acc += p[a];
        if (u < acc) return s[a].id;
    }
    return s[K - 1].id;
}
