/* cmd_sample.c — `gflow sample RUN_DIR --prompt TEXT`: generation with the incremental decoder
 * (gflow/decoder.h), one stream printed as it is generated, or --n continuations as a batch. */
#include "cli.h"
#include "gflow/data.h"
#include "gflow/session.h"
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 1000000
#define MAX_ROWS 1024
#define STR_(x) #x
#define STR(x) STR_(x) /* a limit in the help text */
#define SEGMENT 256 /* a streamed line is re-decoded in segments of at most this many ids */

enum { O_PROMPT = 1, O_TOKENS, O_N, O_TEMPERATURE, O_TOP_K, O_SEED, O_CKPT, O_RECOMPUTE };
static const gf_cli_opt k_opts[] = {
    {O_PROMPT, "prompt", "TEXT", "the text to continue (required)"},
    {O_TOKENS, "tokens", "N", "tokens to generate (default 60, at most " STR(MAX_TOKENS) ")"},
    {O_N, "n", "N", "continuations decoded as one batch (default 1, at most " STR(MAX_ROWS) "); row k draws\n"
                    "with seed S + k, all are printed when done"},
    {O_TEMPERATURE, "temperature", "T", "sampling temperature (default 1.0; 0 = greedy)"},
    {O_TOP_K, "top-k", "K", "sample from the K most likely tokens (default 40; 0 = all)"},
    {O_SEED, "seed", "S", "sampling seed (default 1)"},
    {O_CKPT, "ckpt", "best|last", "the run directory's checkpoint to load (default best)"},
    {O_RECOMPUTE, "recompute", NULL, "the reference path, a full forward over the last max_len tokens for\n"
                                     "every new token (single stream only; slow). At temperature 0 both\n"
                                     "paths print the same text while prompt + continuation fit in max_len"},
    {0},
};
static const gf_cli_spec k_spec = {
    "sample",
    "RUN_DIR|CHECKPOINT --prompt TEXT [options]",
    "  Continues TEXT with N tokens sampled at temperature T from the K most likely tokens, with\n"
    "  the incremental decoder: constant work per token for GrassmannLM, a KV cache for the\n"
    "  Transformer. One continuation is printed as it is generated.\n"
    "  Context: positions are learned up to the model's max_len. A prompt longer than max_len\n"
    "  keeps its last max_len tokens; when a continuation has used all max_len positions the\n"
    "  decoder restarts from its last max_len/2 tokens (one prefill per max_len/2 tokens), so\n"
    "  the model always sees between max_len/2 and max_len tokens of context.\n",
    k_opts,
    NULL,
};

typedef struct sample_opts {
    const char *src, *prompt, *which;
    long long n_tokens, top_k, rows;
    double temp;
    unsigned long long seed;
    int recompute;
} sample_opts;

static int parse(int argc, char **argv, sample_opts *o) {
    *o = (sample_opts){.which = "best", .n_tokens = 60, .top_k = 40, .rows = 1, .temp = 1.0, .seed = 1};
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k, ok = 1;
    long long s = 0;
    while (ok && (k = gf_cli_next(&p, &v)) > 0) {
        switch (k) {
        case O_PROMPT: o->prompt = v; break;
        case O_CKPT: ok = gf_arg_ckpt(&k_spec, v, &o->which); break;
        case O_RECOMPUTE: o->recompute = 1; break;
        case O_TOKENS: ok = gf_arg_int("sample", "--tokens", v, 1, MAX_TOKENS, &o->n_tokens); break;
        case O_N: ok = gf_arg_int("sample", "--n", v, 1, MAX_ROWS, &o->rows); break;
        case O_TOP_K: ok = gf_arg_int("sample", "--top-k", v, 0, 1LL << 31, &o->top_k); break;
        case O_TEMPERATURE: ok = gf_arg_real("sample", "--temperature", v, 0, 1e6, &o->temp); break;
        case O_SEED:
            ok = gf_arg_int("sample", "--seed", v, 0, (long long)(~0ULL >> 1), &s);
            o->seed = (unsigned long long)s;
            break;
        }
    }
    if (!ok) return GF_EXIT_USAGE; /* gf_arg_* said why */
    if (k < 0) return k == GF_CLI_HELP ? -1 : GF_EXIT_USAGE;
    if (!gf_cli_args(&p, 1, 1, "the run directory or checkpoint")) return GF_EXIT_USAGE;
    o->src = p.pos[0];
    if (!o->prompt) return gf_cli_usage(&k_spec, "missing --prompt TEXT");
    if (o->recompute && o->rows > 1) { fprintf(stderr, "gflow sample: --recompute decodes one stream; drop --n\n"); return GF_EXIT_USAGE; }
    return 0;
}

/* Prints one stream's text as ids arrive: the current line is re-decoded (SentencePiece decodes
 * a line as a whole) and what it adds is printed; lines longer than SEGMENT ids continue in a
 * new segment, joined by a space when its first piece starts a word. */
typedef struct text_stream {
    const gf_tokenizer *tok;
    gf_ids seg;
    size_t shown;
} text_stream;

static gf_status stream_put(text_stream *ts, int32_t id) {
    if (id == gf_tokenizer_eol_id(ts->tok)) {
        putchar('\n');
        ts->seg.n = 0;
        ts->shown = 0;
        return GF_OK;
    }
    if (ts->seg.n >= SEGMENT) {
        if (gf_tokenizer_starts_word(ts->tok, id)) putchar(' ');
        ts->seg.n = 0;
        ts->shown = 0;
    }
    GF_TRY(gf_ids_push(&ts->seg, id));
    char *text = NULL;
    GF_TRY(gf_tokenizer_decode(ts->tok, ts->seg.data, ts->seg.n, &text));
    size_t len = strlen(text);
    if (len > ts->shown) fputs(text + ts->shown, stdout);
    ts->shown = len > ts->shown ? len : ts->shown;
    free(text);
    fflush(stdout);
    return GF_OK;
}

/* The reference path: a full forward over the last max_len tokens for every new token. */
static gf_status run_recompute(gf_session *s, const sample_opts *o, gf_ids *ids, text_stream *ts) {
    gf_lm *lm = gf_session_lm(s);
    const int64_t Lmax = lm->cfg.max_len, V = lm->cfg.vocab;
    gf_rng rng;
    gf_rng_seed(&rng, o->seed);
    gf_ctx_set_grad(&s->ctx, 0);
    s->ctx.training = 0;
    void *scratch = malloc(gf_sample_scratch_bytes(V));
    int32_t *win = malloc((size_t)(Lmax + 1) * sizeof(int32_t));
    gf_status st = scratch && win ? GF_OK : gf_error_set(GF_E_NOMEM, "sample: out of memory");
    for (long long k = 0; !st && k < o->n_tokens; k++) {
        int64_t L = ids->n < Lmax ? ids->n : Lmax;
        memcpy(win, ids->data + ids->n - L, (size_t)L * sizeof(int32_t));
        win[L] = -1; /* no target */
        gf_lm_out out = {.want_logits = 1};
        gf_lm_forward(lm, &s->ctx, win, 1, L, &out);
        int32_t next = gf_sample_token(out.logits->data + (L - 1) * V, V, o->temp, o->top_k, &rng, scratch);
        gf_ctx_reset(&s->ctx);
        st = gf_ids_push(ids, next);
        if (!st) st = stream_put(ts, next);
    }
    free(scratch);
    free(win);
    return st;
}

/* Decoder path: rows continuations of the prompt; row 0 is streamed when rows == 1. */
static gf_status run_decoder(gf_session *s, const sample_opts *o, const gf_ids *prompt, int32_t *out, text_stream *ts) {
    gf_lm *lm = gf_session_lm(s);
    const int64_t V = lm->cfg.vocab, R = o->rows, Lmax = lm->cfg.max_len;
    const int64_t np = prompt->n < Lmax ? prompt->n : Lmax;
    gf_lm_decoder d;
    GF_TRY(gf_lm_decoder_init(&d, lm, R));
    gf_rng *rng = malloc((size_t)R * sizeof(gf_rng));
    void *scratch = malloc(gf_sample_scratch_bytes(V));
    int32_t *tok = malloc((size_t)R * sizeof(int32_t));
    gf_status st = rng && scratch && tok ? GF_OK : gf_error_set(GF_E_NOMEM, "sample: out of memory");
    for (int64_t r = 0; r < R && rng; r++) gf_rng_seed(&rng[r], o->seed + (unsigned long long)r);
    if (!st) st = gf_lm_decoder_prefill(&d, prompt->data + prompt->n - np, 1, np);
    for (long long k = 0; !st && k < o->n_tokens; k++) {
        for (int64_t r = 0; r < R; r++) {
            tok[r] = gf_sample_token(gf_lm_decoder_logits(&d) + r * V, V, o->temp, o->top_k, &rng[r], scratch);
            out[r * o->n_tokens + k] = tok[r];
        }
        if (R == 1) st = stream_put(ts, tok[0]);
        if (!st && k + 1 < o->n_tokens) st = gf_lm_decoder_step(&d, tok);
    }
    free(rng);
    free(scratch);
    free(tok);
    gf_lm_decoder_free(&d);
    return st;
}

/* Print continuation r of R (prompt ids + its tokens). */
static gf_status print_row(const gf_tokenizer *tok, const gf_ids *prompt, const int32_t *gen, long long n, int64_t r,
                           int64_t R) {
    gf_ids all = {0};
    gf_status st = GF_OK;
    for (int64_t i = 0; !st && i < prompt->n; i++) st = gf_ids_push(&all, prompt->data[i]);
    for (long long i = 0; !st && i < n; i++) st = gf_ids_push(&all, gen[i]);
    char *text = NULL;
    if (!st) st = gf_tokenizer_decode(tok, all.data, all.n, &text);
    if (!st) printf("=== continuation %lld/%lld ===\n%s\n", (long long)r + 1, (long long)R, text);
    free(text);
    gf_ids_free(&all);
    return st;
}

static gf_status open_lm(const sample_opts *o, gf_session *s, gf_ids *ids) {
    char path[1100];
    gf_recipe r;
    GF_TRY(gf_text_check("--prompt", 0, 0, o->prompt, strlen(o->prompt))); /* text as the corpora are */
    GF_TRY(gf_run_ckpt_path(o->src, o->which, path, sizeof path));
    GF_TRY(gf_ckpt_peek_recipe(path, &r, NULL));
    const gf_task_ops *task = gf_task_of(&r);
    if (!task->language_model)
        return gf_error_set(GF_E_INVALID, "%s: task '%s' is not a language model; `gflow sample` generates text with "
                            "language models only", path, task->name);
    GF_TRY(gf_session_open_ckpt(s, &r, path)); /* generation (gflow/decoder.h) runs on the host */
    gf_status st = gf_tokenizer_encode(s->tok, o->prompt, strlen(o->prompt), ids);
    if (st) return gf_error_wrap(st, "--prompt: "); /* the tokenizer's message names no input */
    if (ids->n == 0) return gf_error_set(GF_E_INVALID, "--prompt: the prompt encodes to no tokens");
    return GF_OK;
}

int gf_cmd_sample(int argc, char **argv) {
    sample_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? GF_EXIT_OK : rc;
    gf_session s;
    memset(&s, 0, sizeof s);
    gf_ids ids = {0};
    gf_status st = open_lm(&o, &s, &ids);
    text_stream ts = {.tok = s.tok};
    int32_t *gen = st ? NULL : malloc((size_t)(o.rows * o.n_tokens) * sizeof(int32_t)); // (rows, n_tokens)
    if (!st && !gen) st = gf_error_set(GF_E_NOMEM, "sample: cannot hold %lld x %lld tokens", o.rows, o.n_tokens);
    if (!st && o.rows == 1) { /* the prompt as the model reads it, then the stream */
        char *text = NULL;
        for (int64_t i = 0; !st && i < ids.n; i++) st = gf_ids_push(&ts.seg, ids.data[i]);
        if (!st) st = gf_tokenizer_decode(s.tok, ids.data, ids.n, &text);
        if (!st) { fputs(text, stdout); ts.shown = strlen(text); fflush(stdout); }
        free(text);
    }
    if (!st) st = o.recompute ? run_recompute(&s, &o, &ids, &ts) : run_decoder(&s, &o, &ids, gen, &ts);
    if (!st && o.rows == 1) putchar('\n');
    for (int64_t r = 0; !st && o.rows > 1 && r < o.rows; r++) st = print_row(s.tok, &ids, gen + r * o.n_tokens, o.n_tokens, r, o.rows);
    free(gen);
    gf_ids_free(&ts.seg);
    gf_ids_free(&ids);
    gf_session_close(&s);
    return st ? gf_cli_fail(st) : GF_EXIT_OK;
}
