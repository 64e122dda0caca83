/* cmd_selftest.c — `gflow selftest`: a tiny next-token model (embedding -> linear ->
 * GELU -> layernorm -> tied head, dropout) trained by plain SGD on a synthetic
 * sequence, to show the core end to end: parameter block, tape, backward, reset. */
#include "cli.h"
#include <limits.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

enum { O_STEPS = 1, O_SEED, O_THREADS };
static const gf_cli_opt k_opts[] = {
    {O_STEPS, "steps", "N", "SGD steps (default 300)"},
    {O_SEED, "seed", "S", "data, initialisation and dropout seed (default 1)"},
    {O_THREADS, "threads", "T", "threads (default 0: all cores)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "selftest",
    "[--steps N] [--seed S] [--threads T]",
    "  Trains a tiny next-token model on a synthetic periodic sequence with SGD and\n"
    "  prints the loss; succeeds when the final loss is below 10% of ln(V).\n",
    k_opts,
    NULL,
};

int gf_cmd_selftest(int argc, char **argv) {
    int64_t steps = 300;
    uint64_t seed = 1;
    int threads = 0;
    gf_cli cl;
    gf_cli_begin(&cl, &k_spec, argc, argv);
    const char *val;
    int k;
    long long v = 0;
    while ((k = gf_cli_next(&cl, &val)) > 0) {
        if (k == O_STEPS && gf_arg_int("selftest", "--steps", val, 1, 1000000000, &v)) steps = v;
        else if (k == O_SEED && gf_arg_int("selftest", "--seed", val, 0, LLONG_MAX, &v)) seed = (uint64_t)v;
        else if (k == O_THREADS && gf_arg_int("selftest", "--threads", val, 0, 1024, &v)) threads = (int)v;
        else return GF_EXIT_USAGE; /* gf_arg_int said why */
    }
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&cl, 0, 0, "")) return GF_EXIT_USAGE;
    gf_threads_set(threads);
    const int64_t V = 16, D = 32, N = 64; /* vocabulary, width, tokens per step */
    gf_rng rng;
    gf_rng_seed(&rng, seed);
    gf_params p;
    gf_params_init(&p);
    int64_t se[2] = {V, D}, sw[2] = {D, D}, sd[1] = {D};
    gf_tensor *emb = gf_params_add(&p, "tok_emb.weight", GF_PK_EMBED, 2, se);
    gf_tensor *w = gf_params_add(&p, "fc.weight", GF_PK_WEIGHT, 2, sw);
    gf_tensor *b = gf_params_add(&p, "fc.bias", GF_PK_BIAS, 1, sd);
    gf_tensor *g = gf_params_add(&p, "ln.weight", GF_PK_NORM, 1, sd);
    gf_tensor *be = gf_params_add(&p, "ln.bias", GF_PK_NORM, 1, sd);
    gf_status s = gf_params_alloc(&p);
    if (s) return gf_cli_fail(s);
    for (int64_t i = 0; i < V * D; i++) emb->data[i] = (float)(0.1 * gf_rng_normal(&rng));
    for (int64_t i = 0; i < D * D; i++) w->data[i] = (float)(0.1 * gf_rng_normal(&rng));
    for (int64_t i = 0; i < D; i++) g->data[i] = 1.0f;
    (void)b; (void)be;

    gf_ctx ctx;
    gf_ctx_init(&ctx, 1 << 20, &rng);
    ctx.training = 1;
    int32_t x[64], y[64];
    double first = 0, last = 0;
    for (int64_t step = 0; step < steps; step++) {
        /* the sequence t -> (3t + 1) mod V: the next token is a function of the current one */
        for (int64_t i = 0; i < N; i++) {
            x[i] = (int32_t)gf_rng_below(&rng, (uint64_t)V);
            y[i] = (int32_t)((3 * x[i] + 1) % V);
        }
        gf_params_zero_grad(&p);
        int64_t shp[1] = {N};
        gf_tensor *h = gf_embedding(&ctx, emb, x, 1, shp);
        h = gf_dropout(&ctx, gf_gelu(&ctx, gf_linear(&ctx, h, w, b)), 0.1f);
        h = gf_layernorm(&ctx, h, g, be, 1e-5f);
        gf_tensor *loss = gf_cross_entropy(&ctx, gf_linear(&ctx, h, emb, NULL), y, -1, NULL, NULL);
        gf_tape_backward(&ctx, loss);
        for (int64_t i = 0; i < p.n; i++) p.data[i] -= 0.5f * p.grad[i];
        if (step == 0) first = loss->data[0];
        last = loss->data[0];
        if (step % 50 == 0 || step == steps - 1)
            fprintf(stderr, "step %lld/%lld | loss %.4f | nodes %lld | arena high-water %.1f KiB\n",
                    (long long)step + 1, (long long)steps, loss->data[0], (long long)ctx.n_nodes,
                    (double)ctx.arena.high_water / 1024.0);
        gf_ctx_reset(&ctx);
    }
    double target = 0.1 * log((double)V);
    printf("selftest: %lld parameters, loss %.4f -> %.4f (ln V = %.4f), %s\n", (long long)p.n, first, last,
           log((double)V), last < target ? "PASS" : "FAIL");
    gf_ctx_free(&ctx);
    gf_params_free(&p);
    return last < target ? GF_EXIT_OK : GF_EXIT_ERROR;
}
