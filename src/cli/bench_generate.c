/* bench_generate.c — `gflow bench RECIPE --generate`: prefill and decode speed of the
 * incremental decoder (gflow/decoder.h) against the context length, for the recipe's model and
 * the other family at the same shape, on random weights and tokens (speed does not depend on
 * them). Beside it, today's recompute path (`gflow sample --recompute`: a full forward with the
 * (L, V) logits per token) up to --recompute-max, and what the tied head and the token choice
 * cost per decode step. Rows of `key: value` and one tab-separated table per family. */
#include "cli.h"
#include <stdlib.h>
#include <string.h>

#define GEN_MAX_CTX 64

typedef struct gen_row {
    int64_t ctx;
    double prefill_tok_s, decode_ms, decode_tok_s, state_mb, recompute_ms;
} gen_row;

/* mean seconds per call of f over at least `min_s` of calls (and at least 2) */
#define TIME_LOOP(min_s, out, body)                                                           \
    do {                                                                                      \
        int64_t n_ = 0;                                                                       \
        double t0_ = gf_time_now(), dt_ = 0;                                                  \
        do { body; n_++; dt_ = gf_time_now() - t0_; } while (dt_ < (min_s) || n_ < 2);        \
        (out) = dt_ / (double)n_;                                                             \
    } while (0)

static void fill_ids(int32_t *ids, int64_t n, int64_t V, gf_rng *rng) {
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(gf_rng_below(rng, (uint64_t)V));
}

/* One context length: prefill c tokens; decode the S = min(32, c/2) positions ending at c. */
static gf_status measure_ctx(gf_lm_decoder *d, int64_t c, int64_t rows, int32_t *ids, gf_rng *rng, gen_row *row) {
    const int64_t V = d->lm->cfg.vocab, S = c / 2 < 32 ? c / 2 : 32;
    gf_status st = GF_OK;
    double t_prefill = 0, t_dec = 0;
    fill_ids(ids, c, V, rng);
    TIME_LOOP(0.3, t_prefill, if (!st) st = gf_lm_decoder_prefill(d, ids, 1, c));
    GF_TRY(st);
    int32_t *tok = ids + c; /* (rows) */
    fill_ids(tok, rows, V, rng);
    double total = 0;
    int64_t reps = 0;
    do { /* each rep: prefill c - S untimed, then S timed steps */
        GF_TRY(gf_lm_decoder_prefill(d, ids, 1, c - S));
        double t0 = gf_time_now();
        for (int64_t k = 0; k < S; k++) GF_TRY(gf_lm_decoder_step(d, tok));
        total += gf_time_now() - t0;
        reps++;
    } while (total < 0.3 || reps < 2);
    t_dec = total / (double)(reps * S);
    *row = (gen_row){.ctx = c, .prefill_tok_s = (double)c / t_prefill, .decode_ms = 1e3 * t_dec,
                     .decode_tok_s = (double)rows / t_dec, .state_mb = (double)gf_lm_decoder_state_bytes(d) / 1048576.0,
                     .recompute_ms = -1};
    return GF_OK;
}

/* Today's `gflow sample --recompute` per token at context c: one forward over c positions with
 * the (c, V) logits. */
static double recompute_ms(gf_lm *lm, gf_ctx *ctx, int64_t c, gf_rng *rng) {
    int32_t *win = malloc((size_t)(c + 1) * sizeof(int32_t));
    if (!win) return -1;
    fill_ids(win, c, lm->cfg.vocab, rng);
    win[c] = -1;
    double t = 0;
    TIME_LOOP(0.3, t, {
        gf_lm_out out = {.want_logits = 1};
        gf_lm_forward(lm, ctx, win, 1, c, &out);
        gf_ctx_reset(ctx);
    });
    free(win);
    return 1e3 * t;
}

/* What a decode step spends outside the blocks: the tied head GEMM and the token choice. */
static void head_costs(gf_lm *lm, int64_t rows, double *head_ms, double *pick_ms) {
    const int64_t V = lm->cfg.vocab, D = lm->cfg.d_model;
    float *h = calloc((size_t)(rows * D), sizeof(float)), *lg = calloc((size_t)(rows * V), sizeof(float));
    void *scratch = malloc(gf_sample_scratch_bytes(V));
    gf_rng rng;
    gf_rng_seed(&rng, 5);
    for (int64_t i = 0; h && i < rows * D; i++) h[i] = gf_rng_uniform(&rng) - 0.5f;
    *head_ms = *pick_ms = -1;
    if (h && lg && scratch) {
        double t = 0;
        TIME_LOOP(0.2, t, gf_lm_tied_head(lm, h, rows, lg));
        *head_ms = 1e3 * t;
        TIME_LOOP(0.2, t, for (int64_t r = 0; r < rows; r++) gf_sample_token(lg + r * V, V, 1.0, 40, &rng, scratch));
        *pick_ms = 1e3 * t;
    }
    free(h);
    free(lg);
    free(scratch);
}

static void print_table(const gf_model_cfg *c, int64_t rows, const gen_row *g, int n, double head_ms, double pick_ms) {
    printf("generate: family=%s block=%s layers=%lld d=%lld V=%lld max_len=%lld rows=%lld threads=%d\n",
           gf_family_name(c->family), gf_block_name(c->block), (long long)c->n_layers, (long long)c->d_model,
           (long long)c->vocab, (long long)c->max_len, (long long)rows, gf_threads_get());
    printf("ctx\tprefill_tok_s\tdecode_ms_per_step\tdecode_tok_s\tstate_mb\trecompute_ms_per_token\n");
    for (int i = 0; i < n; i++) {
        printf("%lld\t%.0f\t%.3f\t%.1f\t%.3f\t", (long long)g[i].ctx, g[i].prefill_tok_s, g[i].decode_ms,
               g[i].decode_tok_s, g[i].state_mb);
        if (g[i].recompute_ms >= 0) printf("%.2f\n", g[i].recompute_ms);
        else printf("-\n");
    }
    int at = 0; /* the decode step at ctx 128, or the first */
    for (int i = 0; i < n; i++) if (g[i].ctx == 128) at = i;
    printf("head_ms_per_step: %.3f (%.0f%% of a decode step at ctx %lld)\n", head_ms, 100.0 * head_ms / g[at].decode_ms,
           (long long)g[at].ctx);
    printf("pick_ms_per_step: %.3f (top-k 40 by selection, %lld rows)\n", pick_ms, (long long)rows);
    printf("decode_ms_ratio_last_over_first: %.3f (ctx %lld / ctx %lld)\n", g[n - 1].decode_ms / g[0].decode_ms,
           (long long)g[n - 1].ctx, (long long)g[0].ctx);
}

static gf_status bench_family(const gf_model_cfg *cfg, int64_t rows, int64_t recompute_max) {
    gf_lm lm;
    GF_TRY(gf_lm_init(&lm, cfg));
    gf_rng rng;
    gf_rng_seed(&rng, 1);
    gf_lm_init_weights(&lm, &rng);
    gf_lm_decoder d;
    gf_status st = gf_lm_decoder_init(&d, &lm, rows);
    int32_t *ids = st ? NULL : malloc((size_t)(cfg->max_len + rows) * sizeof(int32_t));
    if (!st && !ids) st = gf_error_set(GF_E_NOMEM, "bench: out of memory");
    gen_row g[GEN_MAX_CTX];
    int n = 0;
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_ctx_set_grad(&ctx, 0);
    /* contexts 16, 32, 64, ... and max_len itself */
    for (int64_t c = cfg->max_len < 16 ? cfg->max_len : 16; !st && n < GEN_MAX_CTX; c = c * 2 < cfg->max_len ? c * 2 : cfg->max_len) {
        st = measure_ctx(&d, c, rows, ids, &rng, &g[n]);
        if (!st && c <= recompute_max) g[n].recompute_ms = recompute_ms(&lm, &ctx, c, &rng);
        if (!st) n++;
        if (c == cfg->max_len) break;
    }
    double head_ms = 0, pick_ms = 0;
    if (!st) head_costs(&lm, rows, &head_ms, &pick_ms);
    if (!st && n > 0) print_table(cfg, rows, g, n, head_ms, pick_ms);
    gf_ctx_free(&ctx);
    free(ids);
    gf_lm_decoder_free(&d);
    gf_lm_free(&lm);
    return st;
}

gf_status gf_bench_generate(const gf_recipe *r, int64_t rows, int64_t recompute_max) {
    gf_model_cfg cfg;
    gf_recipe_model_cfg(r, r->tokenizer.vocab_size, &cfg);
    cfg.dropout = 0;
    GF_TRY(bench_family(&cfg, rows, recompute_max));
    cfg.family = cfg.family == GF_FAMILY_GRASSMANN ? GF_FAMILY_TRANSFORMER : GF_FAMILY_GRASSMANN;
    printf("\n");
    return bench_family(&cfg, rows, recompute_max);
}
