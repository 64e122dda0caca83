/* wikitext.c — WikiText-2 word counts, a split's token stream in memory and the LM window
 * loader (see gflow/data.h for the window definition); the token cache is tokcache.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "gflow/data.h"
#include "gflow/fs.h"

/* ---- word count ---- */

static gf_status count_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    (void)lineno;
    int64_t *n = ctx;
    int in_word = 0;
    for (size_t i = 0; i < len; i++) {
        char c = line[i];
        int ws = c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
        if (!ws && !in_word) (*n)++;
        in_word = !ws;
    }
    (*n)++; /* the line's <eos> */
    return GF_OK;
}

gf_status gf_wikitext_word_count(const char *path, int64_t *n_words) {
    *n_words = 0;
    return gf_data_for_each_line(path, count_line, n_words);
}

/* ---- token stream ---- */

typedef struct { const gf_tokenizer *tok; gf_ids *out; const char *path; } tok_ctx;

static gf_status tok_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    tok_ctx *c = ctx;
    gf_status s = gf_tokenizer_encode(c->tok, line, len, c->out);
    if (s != GF_OK) return gf_error_wrap(s, "%s:%lld: ", c->path, (long long)lineno);
    return gf_ids_push(c->out, gf_tokenizer_eol_id(c->tok));
}

gf_status gf_lm_tokenize_file(const gf_tokenizer *tok, const char *path, gf_ids *out) {
    tok_ctx c = {tok, out, path};
    return gf_data_for_each_line(path, tok_line, &c);
}

/* ---- LM loader ---- */

struct gf_lm_loader {
    const gf_tokens *tokens; /* (n_tokens) */
    int64_t n_tokens, L, n_windows;
    gf_sampler smp;
};

gf_status gf_lm_loader_new(gf_lm_loader **out, const gf_tokens *tokens, int64_t L, int shuffle, int keep_tail,
                           uint64_t seed) {
    *out = NULL;
    const int64_t n_tokens = tokens->n;
    if (L < 1) return gf_error_set(GF_E_INVALID, "LM window length L=%lld must be >= 1", (long long)L);
    int64_t full = n_tokens > 1 ? (n_tokens - 1) / L : 0;
    int64_t nw = full + ((keep_tail && n_tokens > 1 && (n_tokens - 1) % L) ? 1 : 0);
    if (nw == 0)
        return gf_error_set(GF_E_INVALID, "LM stream of %lld tokens has no window of L+1=%lld tokens",
                            (long long)n_tokens, (long long)(L + 1));
    gf_lm_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return gf_error_set(GF_E_NOMEM, "LM loader: out of memory");
    ld->tokens = tokens;
    ld->n_tokens = n_tokens;
    ld->L = L;
    ld->n_windows = nw;
    gf_status s = gf_sampler_init(&ld->smp, nw, shuffle, seed);
    if (s != GF_OK) {
        free(ld);
        return s;
    }
    *out = ld;
    return GF_OK;
}

void gf_lm_loader_free(gf_lm_loader *ld) {
    if (!ld) return;
    gf_sampler_free(&ld->smp);
    free(ld);
}

int64_t gf_lm_loader_n_windows(const gf_lm_loader *ld) { return ld->n_windows; }

gf_status gf_lm_loader_next(gf_lm_loader *ld, int32_t *batch, int64_t B, int64_t *n_rows) {
    const int64_t W = ld->L + 1;
    int64_t r = 0;
    if (!gf_sampler_has_next(&ld->smp)) {
        (void)gf_sampler_next(&ld->smp); /* end of epoch: start the next one */
    } else {
        for (; r < B && gf_sampler_has_next(&ld->smp); r++) {
            int64_t w = gf_sampler_next(&ld->smp);
            int64_t start = w * ld->L;
            int64_t avail = ld->n_tokens - start;
            int64_t take = avail < W ? avail : W;
            gf_tokens_copy(ld->tokens, start, take, batch + r * W);
            for (int64_t k = take; k < W; k++) batch[r * W + k] = GF_IGNORE_ID;
        }
    }
    for (int64_t k = r * W; k < B * W; k++) batch[k] = GF_IGNORE_ID;
    gf_tokens_release(ld->tokens);
    *n_rows = r;
    return GF_OK;
}

void gf_lm_loader_get_state(const gf_lm_loader *ld, gf_loader_state *st) { *st = ld->smp.st; }

gf_status gf_lm_loader_set_state(gf_lm_loader *ld, const gf_loader_state *st) {
    return gf_sampler_set_state(&ld->smp, st);
}
