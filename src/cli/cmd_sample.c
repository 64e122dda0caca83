/* cmd_sample.c — `gflow sample RUN_DIR --prompt TEXT`: autoregressive generation. */
#include "cli.h"
#include "gflow/session.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: gflow sample RUN_DIR|CHECKPOINT --prompt TEXT [--tokens N] [--temperature T]\n"
           "                    [--top-k K] [--seed S] [--ckpt best|last]\n\n"
           "  Continues TEXT with N tokens (default 60) sampled at temperature T (default 1.0;\n"
           "  0 = greedy) from the K most likely tokens (default 40; 0 = all). The context is cut to\n"
           "  the model's max_len.\n");
}

static int bad_num(const char *opt, const char *v) {
    fprintf(stderr, "gflow sample: %s needs a number, got '%s'\n", opt, v);
    return GF_EXIT_USAGE;
}

/* The next token from the last position's logits lg (V): greedy at temperature 0, else drawn
 * from the softmax at temperature `temp` over the top_k most likely. order, p: (V) scratch. */
static int32_t pick_token(const float *lg, int64_t V, double temp, long top_k, int32_t *order, float *p, gf_rng *rng) {
    int32_t next = 0;
    if (temp == 0.0) {
        for (int64_t j = 1; j < V; j++) if (lg[j] > lg[next]) next = (int32_t)j;
    } else {
        /* top-k by partial selection, then softmax at temperature over the kept ids */
        int64_t K = top_k > 0 && top_k < V ? top_k : V;
        for (int64_t j = 0; j < V; j++) order[j] = (int32_t)j;
        for (int64_t a = 0; a < K; a++) {
            int64_t best = a;
            for (int64_t j = a + 1; j < V; j++) if (lg[order[j]] > lg[order[best]]) best = j;
            int32_t tmp = order[a]; order[a] = order[best]; order[best] = tmp;
            if (K == V && a > 2048) break; /* full softmax: order beyond the head does not matter */
        }
        double mx = lg[order[0]], z = 0;
        for (int64_t a = 0; a < K; a++) { p[a] = (float)exp((lg[order[a]] - mx) / temp); z += p[a]; }
        double u = gf_rng_uniform(rng) * z, c = 0;
        next = order[K - 1];
        for (int64_t a = 0; a < K; a++) { c += p[a]; if (u < c) { next = order[a]; break; } }
    }
    return next;
}

int gf_cmd_sample(int argc, char **argv) {
    const char *src = NULL, *prompt = NULL, *which = "best";
    long n_tokens = 60, top_k = 40;
    double temp = 1.0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return GF_EXIT_OK; }
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = argv[++i];
        else if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) { n_tokens = strtol(argv[++i], &end, 10); if (*end || n_tokens <= 0) return bad_num("--tokens", argv[i]); }
        else if (!strcmp(argv[i], "--top-k") && i + 1 < argc) { top_k = strtol(argv[++i], &end, 10); if (*end || top_k < 0) return bad_num("--top-k", argv[i]); }
        else if (!strcmp(argv[i], "--temperature") && i + 1 < argc) { temp = strtod(argv[++i], &end); if (*end || temp < 0) return bad_num("--temperature", argv[i]); }
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) { seed = strtoull(argv[++i], &end, 10); if (*end) return bad_num("--seed", argv[i]); }
        else if (argv[i][0] == '-') { fprintf(stderr, "gflow sample: unknown option '%s' (or missing value)\n", argv[i]); return GF_EXIT_USAGE; }
        else if (!src) src = argv[i];
        else { fprintf(stderr, "gflow sample: unexpected argument '%s'\n", argv[i]); return GF_EXIT_USAGE; }
    }
    if (!src || !prompt) { help(); return GF_EXIT_USAGE; }
    char path[1100];
    gf_recipe r;
    gf_status st = gf_run_ckpt_path(src, which, path, sizeof path);
    if (!st) st = gf_ckpt_peek_recipe(path, &r, NULL);
    const gf_task_ops *task = st ? NULL : gf_task_of(&r);
    if (task && !task->language_model)
        st = gf_error_set(GF_E_INVALID, "%s: task '%s' is not a language model; `gflow sample` generates text with "
                          "language models only", path, task->name);
    gf_session s;
    memset(&s, 0, sizeof s);
    if (!st) st = gf_session_open(&s, &r, 0);
    if (!st) st = gf_ckpt_load(path, s.params, NULL);
    gf_ids ids = {0};
    if (!st) st = gf_tokenizer_encode(s.tok, prompt, strlen(prompt), &ids);
    if (!st && ids.n == 0) st = gf_error_set(GF_E_INVALID, "--prompt: the prompt encodes to no tokens");
    if (st) { gf_ids_free(&ids); gf_session_close(&s); return gf_cli_fail(st); }

    gf_lm *lm = gf_session_lm(&s);
    int64_t Lmax = lm->cfg.max_len, V = lm->cfg.vocab, start = ids.n;
    gf_rng rng;
    gf_rng_seed(&rng, seed);
    gf_ctx_set_grad(&s.ctx, 0);
    s.ctx.training = 0;
    float *p = malloc((size_t)V * sizeof(float));
    int32_t *order = malloc((size_t)V * sizeof(int32_t));
    int32_t *win = malloc((size_t)(Lmax + 1) * sizeof(int32_t));
    for (long k = 0; k < n_tokens; k++) {
        int64_t L = ids.n < Lmax ? ids.n : Lmax;
        memcpy(win, ids.data + ids.n - L, (size_t)L * sizeof(int32_t));
        win[L] = -1; /* no target */
        gf_lm_out out = {.want_logits = 1};
        gf_lm_forward(lm, &s.ctx, win, 1, L, &out);
        int32_t next = pick_token(out.logits->data + (L - 1) * V, V, temp, top_k, order, p, &rng);
        gf_ids_push(&ids, next);
        gf_ctx_reset(&s.ctx);
    }
    char *text = NULL;
    st = gf_tokenizer_decode(s.tok, ids.data, ids.n, &text);
    if (!st) {
        char *pre = NULL;
        gf_tokenizer_decode(s.tok, ids.data, start, &pre);
        printf("%s\n", text);
        free(pre);
    }
    free(text);
    free(p);
    free(order);
    free(win);
    gf_ids_free(&ids);
    gf_session_close(&s);
    return st ? gf_cli_fail(st) : GF_EXIT_OK;
}
