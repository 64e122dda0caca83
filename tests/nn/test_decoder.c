/* test_decoder.c — the incremental decoder (gflow/decoder.h) against full forwards: at every
 * position, for both families, both block kinds, both offset modes and the ablation variants,
 * every prompt length 1..max_len, several rows at once; the re-prefill at max_len; no
 * allocation per step; and token selection (greedy, top-k by selection). */
#include "gf_test.h"
#include "gflow.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 37, LMAX = 12, NSEQ = 40 };

typedef struct { const char *name; gf_family fam; gf_block_kind blk; int schedule, plucker, gate, far; } variant;
static const variant VARIANTS[] = {
    {"transformer post_ln", GF_FAMILY_TRANSFORMER, GF_BLOCK_POST_LN, 0, 1, 1, 0},
    {"transformer pre_ln", GF_FAMILY_TRANSFORMER, GF_BLOCK_PRE_LN, 0, 1, 1, 0},
    {"grassmann post_ln", GF_FAMILY_GRASSMANN, GF_BLOCK_POST_LN, 0, 1, 1, 0},
    {"grassmann pre_ln", GF_FAMILY_GRASSMANN, GF_BLOCK_PRE_LN, 0, 1, 1, 0},
    {"grassmann post_ln schedule", GF_FAMILY_GRASSMANN, GF_BLOCK_POST_LN, 1, 1, 1, 0},
    {"grassmann pre_ln schedule", GF_FAMILY_GRASSMANN, GF_BLOCK_PRE_LN, 1, 1, 1, 0},
    {"grassmann no-plucker", GF_FAMILY_GRASSMANN, GF_BLOCK_POST_LN, 0, 0, 1, 0},
    {"grassmann no-gate", GF_FAMILY_GRASSMANN, GF_BLOCK_PRE_LN, 0, 1, 0, 0},
    {"grassmann offsets beyond max_len", GF_FAMILY_GRASSMANN, GF_BLOCK_POST_LN, 0, 1, 1, 1},
};

static void make_lm(gf_lm *m, const variant *v) {
    gf_model_cfg c;
    gf_model_cfg_default(&c);
    c.family = v->fam;
    c.block = v->blk;
    c.vocab = V;
    c.d_model = 16;
    c.d_ff = 32;
    c.n_layers = 2;
    c.max_len = LMAX;
    c.r = 5;
    c.heads = 4;
    c.init_std = 0.3f;
    c.plucker = v->plucker;
    c.gate = v->gate;
    static const int64_t offs[4] = {1, 2, 5, 8}, far[4] = {3, 20, 0, 0};
    memcpy(c.offsets.v, v->far ? far : offs, sizeof offs);
    c.offsets.n = v->far ? 2 : 4;
    if (v->schedule) { c.offset_schedule.n = 2; c.offset_schedule.v[0] = 1; c.offset_schedule.v[1] = 3; }
    GF_REQUIRE_OK(gf_lm_init(m, &c));
    gf_rng rng;
    gf_rng_seed(&rng, 11);
    gf_lm_init_weights(m, &rng);
}

static void make_seq(int32_t *s, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) s[i] = (int32_t)((i * 7 + seed * 13 + (i * i) % 5) % V);
}

/* max |a - b| / max |b| over V logits */
static double rel_err(const float *a, const float *b) {
    double num = 0, den = 0;
    for (int j = 0; j < V; j++) {
        num = fmax(num, fabs((double)a[j] - b[j]));
        den = fmax(den, fabs((double)b[j]));
    }
    return num / (den > 0 ? den : 1);
}

/* Full-forward logits (rows, L, V) of windows (rows, L+1) -> out. */
static void full_logits(gf_lm *m, const int32_t *win, int64_t rows, int64_t L, float *out) {
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_ctx_set_grad(&ctx, 0);
    gf_lm_out o = {.want_logits = 1};
    gf_lm_forward(m, &ctx, win, rows, L, &o);
    memcpy(out, o.logits->data, (size_t)(rows * L * V) * sizeof(float));
    gf_ctx_free(&ctx);
}

GF_TEST(unit, decoder_matches_full_forward_every_position) {
    for (size_t vi = 0; vi < sizeof VARIANTS / sizeof VARIANTS[0]; vi++) {
        const variant *v = &VARIANTS[vi];
        gf_lm m;
        make_lm(&m, v);
        enum { ROWS = 2 };
        int32_t seq[ROWS][LMAX + 1], win[ROWS * (LMAX + 1)];
        for (int b = 0; b < ROWS; b++) {
            make_seq(seq[b], LMAX + 1, (unsigned)(b + 1));
            memcpy(win + b * (LMAX + 1), seq[b], sizeof seq[b]);
        }
        float *ref = malloc(sizeof(float) * ROWS * LMAX * V); // (ROWS, LMAX, V)
        full_logits(&m, win, ROWS, LMAX, ref);
        gf_lm_decoder d;
        GF_REQUIRE_OK(gf_lm_decoder_init(&d, &m, ROWS));
        double worst = 0;
        for (int64_t p = 1; p <= LMAX; p++) {
            int32_t prompt[ROWS * LMAX];
            for (int b = 0; b < ROWS; b++) memcpy(prompt + b * p, seq[b], (size_t)p * sizeof(int32_t));
            GF_REQUIRE_OK(gf_lm_decoder_prefill(&d, prompt, ROWS, p));
            for (int64_t t = p - 1; t < LMAX; t++) {
                if (t >= p) {
                    int32_t tok[ROWS] = {seq[0][t], seq[1][t]};
                    GF_REQUIRE_OK(gf_lm_decoder_step(&d, tok));
                }
                for (int b = 0; b < ROWS; b++)
                    worst = fmax(worst, rel_err(gf_lm_decoder_logits(&d) + b * V, ref + (b * LMAX + t) * V));
            }
        }
        GF_CHECK(worst <= 1e-5, "%s: decoder logits differ from the full forward by %.3g (relative)", v->name, worst);
        gf_lm_decoder_free(&d);
        free(ref);
        gf_lm_free(&m);
    }
}

GF_TEST(unit, decoder_one_prompt_for_many_rows) {
    gf_lm m;
    make_lm(&m, &VARIANTS[3]);
    int32_t seq[LMAX + 1];
    make_seq(seq, LMAX + 1, 3);
    gf_lm_decoder one, many;
    GF_REQUIRE_OK(gf_lm_decoder_init(&one, &m, 1));
    GF_REQUIRE_OK(gf_lm_decoder_init(&many, &m, 3));
    GF_REQUIRE_OK(gf_lm_decoder_prefill(&one, seq, 1, 5));
    GF_REQUIRE_OK(gf_lm_decoder_prefill(&many, seq, 1, 5));
    for (int64_t t = 5; t < LMAX; t++) {
        int32_t tok3[3] = {seq[t], seq[t], seq[t]};
        GF_REQUIRE_OK(gf_lm_decoder_step(&one, &seq[t]));
        GF_REQUIRE_OK(gf_lm_decoder_step(&many, tok3));
        for (int b = 0; b < 3; b++)
            GF_CHECK(rel_err(gf_lm_decoder_logits(&many) + b * V, gf_lm_decoder_logits(&one)) <= 1e-6,
                     "row %d at %lld", b, (long long)t);
    }
    gf_lm_decoder_free(&one);
    gf_lm_decoder_free(&many);
    gf_lm_free(&m);
}

/* Past max_len the decoder restarts from the last max_len/2 tokens: from then on its logits are
 * a full forward's over the window that starts at the restart. */
GF_TEST(unit, decoder_wraps_at_max_len) {
    const int pick[3] = {0, 3, 4}; /* transformer, grassmann pre_ln, schedule */
    for (int k = 0; k < 3; k++) {
        gf_lm m;
        make_lm(&m, &VARIANTS[pick[k]]);
        int32_t seq[NSEQ], win[LMAX + 1];
        make_seq(seq, NSEQ, 9);
        float ref[LMAX * V];
        gf_lm_decoder d;
        GF_REQUIRE_OK(gf_lm_decoder_init(&d, &m, 1));
        GF_REQUIRE_OK(gf_lm_decoder_prefill(&d, seq, 1, 3));
        int64_t start = 0, refills = 0; /* the window the decoder's positions 0.. hold */
        double worst = 0;
        for (int64_t e = 3; e < NSEQ; e++) {
            if (e - start == LMAX) { start = e - LMAX / 2; refills++; }
            GF_REQUIRE_OK(gf_lm_decoder_step(&d, &seq[e]));
            int64_t L = e - start + 1;
            memcpy(win, seq + start, (size_t)L * sizeof(int32_t));
            win[L] = -1;
            full_logits(&m, win, 1, L, ref);
            worst = fmax(worst, rel_err(gf_lm_decoder_logits(&d), ref + (L - 1) * V));
        }
        GF_CHECK(refills >= 4 && d.n_refills == refills, "%s: %lld refills, expected %lld", VARIANTS[pick[k]].name,
                 (long long)d.n_refills, (long long)refills);
        GF_CHECK(worst <= 1e-5, "%s: after wrapping, logits differ by %.3g", VARIANTS[pick[k]].name, worst);
        gf_lm_decoder_free(&d);
        gf_lm_free(&m);
    }
}

GF_TEST(unit, decoder_steps_allocate_nothing) {
    for (int k = 0; k < 2; k++) {
        gf_lm m;
        make_lm(&m, &VARIANTS[k ? 3 : 1]);
        int32_t seq[NSEQ];
        make_seq(seq, NSEQ, 4);
        gf_lm_decoder d;
        GF_REQUIRE_OK(gf_lm_decoder_init(&d, &m, 2));
        GF_REQUIRE_OK(gf_lm_decoder_prefill(&d, seq, 1, 2));
        int32_t tok[2] = {1, 2};
        GF_REQUIRE_OK(gf_lm_decoder_step(&d, tok));
        GF_REQUIRE_OK(gf_lm_decoder_step(&d, tok));
        int64_t allocs = d.ctx.arena.n_chunk_allocs;
        int64_t bytes = gf_lm_decoder_state_bytes(&d);
        for (int i = 0; i < 25; i++) GF_REQUIRE_OK(gf_lm_decoder_step(&d, tok)); /* wraps twice */
        GF_CHECK(d.ctx.arena.n_chunk_allocs == allocs, "family %d: %lld arena mallocs during steps", k,
                 (long long)(d.ctx.arena.n_chunk_allocs - allocs));
        GF_CHECK(gf_lm_decoder_state_bytes(&d) == bytes, "state size changed");
        gf_lm_decoder_free(&d);
        gf_lm_free(&m);
    }
}

GF_TEST(unit, decoder_refuses_bad_input) {
    gf_lm m;
    make_lm(&m, &VARIANTS[2]);
    gf_lm_decoder d;
    GF_REQUIRE_OK(gf_lm_decoder_init(&d, &m, 2));
    int32_t ids[LMAX + 1] = {0}, bad[2] = {1, V};
    GF_CHECK(gf_lm_decoder_step(&d, ids) != GF_OK, "step before prefill");
    GF_CHECK(gf_lm_decoder_prefill(&d, ids, 1, LMAX + 1) != GF_OK, "prompt longer than max_len");
    GF_CHECK(gf_lm_decoder_prefill(&d, ids, 1, 0) != GF_OK, "empty prompt");
    GF_CHECK(gf_lm_decoder_prefill(&d, ids, 3, 2) != GF_OK, "3 prompt rows for 2");
    GF_CHECK(gf_lm_decoder_prefill(&d, bad, 1, 2) != GF_OK, "id V");
    GF_CHECK(strstr(gf_last_error(), "outside [0, 37)") != NULL, "message: %s", gf_last_error());
    gf_lm_decoder_free(&d);
    gf_lm_free(&m);
}

GF_TEST(unit, sample_token_greedy_and_top_k) {
    enum { NV = 1000 };
    float lg[NV];
    gf_rng rng;
    gf_rng_seed(&rng, 3);
    for (int j = 0; j < NV; j++) lg[j] = (float)((j * 37) % 101) * 0.01f; /* many ties */
    void *scratch = malloc(gf_sample_scratch_bytes(NV));
    int first_max = 0;
    for (int j = 0; j < NV; j++) if ((j * 37) % 101 == 100) { first_max = j; break; }
    GF_CHECK(gf_sample_token(lg, NV, 0.0, 40, &rng, scratch) == first_max, "greedy: the first largest");
    GF_CHECK(gf_sample_token(lg, NV, 1.0, 1, &rng, scratch) == first_max, "top-1 is greedy");
    /* top-5: the five best under (logit desc, id asc) are the ids with the largest value, lowest first */
    int allowed[NV] = {0}, seen[NV] = {0}, n_allowed = 0;
    for (int j = 0; j < NV && n_allowed < 5; j++)
        if ((j * 37) % 101 == 100) { allowed[j] = 1; n_allowed++; }
    int outside = 0;
    for (int i = 0; i < 2000; i++) {
        int32_t t = gf_sample_token(lg, NV, 0.7, 5, &rng, scratch);
        outside += !allowed[t];
        seen[t] = 1;
    }
    int distinct = 0;
    for (int j = 0; j < NV; j++) distinct += seen[j];
    GF_CHECK(outside == 0 && distinct == 5, "top-5 drew %d outside, %d distinct", outside, distinct);
    /* all ids (top_k 0) at a high temperature: most of the vocabulary appears */
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 20000; i++) seen[gf_sample_token(lg, NV, 50.0, 0, &rng, scratch)] = 1;
    distinct = 0;
    for (int j = 0; j < NV; j++) distinct += seen[j];
    GF_CHECK(distinct > 900, "top_k 0 covers the vocabulary: %d distinct", distinct);
    free(scratch);
}
