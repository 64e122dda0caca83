/* cmd_bench.c — `gflow bench RECIPE`: time full training steps on random tokens.
 *
 * A step is what the trainer does: zero grads, forward (dropout on), backward, global-norm
 * clipping, AdamW, arena reset. After --warmup untimed steps, --steps steps are timed and
 * split by phase (forward / backward / optimizer) and, with ctx->profile, by op family
 * (GEMM, Plücker, attention, elementwise). The head_ce op computes the tied head's backward
 * GEMMs (dh, dE) during forward, so those FLOPs show up in the forward phase and in the
 * GEMM family's forward column; its backward only scales and adds.
 * MFU is measured against a large cblas_sgemm timed in the same process (same BLAS, same
 * threads, same environment), FLOPs are 3 × gf_lm_flops_per_token × tokens (backward = 2 ×
 * forward). Output is `key: value` lines so tools/bench.sh can parse it.
 * Under mpirun every rank times its slice of the global batch (B / N rows) plus the gradient
 * allreduce the trainer does; rank 0 prints, with the communication time per step.
 */
#include "cli.h"
#include "../train/session.h"
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_MAX_SETS 64

static void help(void) {
    printf("usage: gflow bench RECIPE [--steps N] [--warmup W] [--threads T] [--seq-len L] [--batch B]\n"
           "                         [--set section.key=value]... [--no-profile] [--peak-n N]\n"
           "  Times full training steps (forward, backward, clip, AdamW) of the recipe's model on\n"
           "  random tokens and prints tokens/s, ms/step by phase and by op family, model FLOPs per\n"
           "  token, achieved GFLOPS, MFU against a cblas_sgemm N^3 (default 2048) timed first, and\n"
           "  peak RSS. Defaults: --steps 5, --warmup 2, threads/seq-len/batch from the recipe.\n");
}

/* best-of-reps GFLOPS of C (n, n) = A (n, n) · Bᵀ, row-major, like the model's linear layers */
static double sgemm_peak(int n) {
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    if (!a || !b || !c) { free(a); free(b); free(c); return 0.0; }
    for (size_t i = 0; i < nn; i++) { a[i] = (float)(i % 17) * 0.01f; b[i] = (float)(i % 13) * 0.01f; }
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = gf_time_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = gf_time_now() - t0;
        if (rep > 0 && dt < best) best = dt; /* first call warms up threads and pages */
    }
    free(a); free(b); free(c);
    return 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
}

/* process CPU seconds (all threads): with the wall time it shows spinning and oversubscription */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss; /* KiB on Linux */
}

int gf_cmd_bench(int argc, char **argv) {
    const char *path = NULL;
    const char *sets[BENCH_MAX_SETS];
    int64_t n_sets = 0, steps = 5, warmup = 2, L = 0, B = 0;
    int threads = -1, profile = 1, peak_n = 2048;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); return GF_EXIT_OK; }
        else if (!strcmp(a, "--steps") && has) steps = atoll(argv[++i]);
        else if (!strcmp(a, "--warmup") && has) warmup = atoll(argv[++i]);
        else if (!strcmp(a, "--threads") && has) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--seq-len") && has) L = atoll(argv[++i]);
        else if (!strcmp(a, "--batch") && has) B = atoll(argv[++i]);
        else if (!strcmp(a, "--peak-n") && has) peak_n = atoi(argv[++i]);
        else if (!strcmp(a, "--no-profile")) profile = 0;
        else if (!strcmp(a, "--set") && has) {
            if (n_sets == BENCH_MAX_SETS) { fprintf(stderr, "gflow bench: too many --set\n"); return GF_EXIT_USAGE; }
            sets[n_sets++] = argv[++i];
        } else if (a[0] != '-' && !path) path = a;
        else { fprintf(stderr, "gflow bench: unknown or incomplete option '%s'\n", a); help(); return GF_EXIT_USAGE; }
    }
    if (!path) { fprintf(stderr, "gflow bench: a recipe file is required\n"); help(); return GF_EXIT_USAGE; }
    if (steps < 1 || warmup < 0) { fprintf(stderr, "gflow bench: --steps must be >= 1, --warmup >= 0\n"); return GF_EXIT_USAGE; }
    if (peak_n < 0) { fprintf(stderr, "gflow bench: --peak-n must be >= 0\n"); return GF_EXIT_USAGE; }

    gf_recipe *rc = calloc(1, sizeof *rc);
    if (!rc) { fprintf(stderr, "gflow bench: out of memory\n"); return GF_EXIT_ERROR; }
    gf_status s = gf_recipe_load(path, sets, n_sets, rc);
    if (s) { free(rc); return gf_cli_fail(s); }
    s = gf_dist_init(&argc, &argv);
    if (s) { free(rc); return gf_cli_fail(s); }
    int rank = gf_dist_rank(), world = gf_dist_size();
    if (L <= 0) L = rc->data.seq_len;
    if (B <= 0) B = rc->train.batch_size;
    if (threads < 0) threads = (int)rc->run.threads;
    if (threads <= 0 && gf_dist_local_size() > 1) threads = omp_get_num_procs() / gf_dist_local_size();
    gf_threads_set(threads);
    if (B % world != 0) {
        if (rank == 0) fprintf(stderr, "gflow bench: batch %lld does not divide among %d ranks\n", (long long)B, world);
        free(rc);
        gf_dist_finalize();
        return GF_EXIT_USAGE;
    }
    int64_t Bg = B; /* the global batch; this rank runs B / N rows of it */
    B /= world;
    gf_model_cfg cfg;
    gf_session_model_cfg(rc, rc->tokenizer.vocab_size, &cfg);
    if (cfg.max_len < L) cfg.max_len = L; /* --seq-len beyond the recipe's max_len grows the position table */
    gf_adamw_cfg acfg;
    gf_schedule_cfg scfg;
    gf_recipe_optim_cfg(rc, &acfg, &scfg);
    double lr = scfg.lr, clip = rc->optim.clip > 0 ? rc->optim.clip : 1.0; /* always pay for the norm */
    uint64_t seed = (uint64_t)rc->run.seed;
    free(rc);

    double peak = peak_n > 0 ? sgemm_peak(peak_n) : 0.0;
    if (world > 1) { double p = peak; gf_dist_sum_f64(&p, 1); peak = p; } /* the job's peak: every rank's */

    gf_lm *m = calloc(1, sizeof *m);
    if (!m) { fprintf(stderr, "gflow bench: out of memory\n"); return GF_EXIT_ERROR; }
    s = gf_lm_init(m, &cfg);
    if (s) { free(m); return gf_cli_fail(s); }
    gf_rng rng;
    gf_rng_seed(&rng, seed);
    gf_lm_init_weights(m, &rng);
    gf_adamw_state ast;
    gf_adamw_reset(&m->params, &ast);
    int32_t *win = malloc((size_t)(B * (L + 1)) * sizeof(int32_t)); // (B, L+1)
    if (!win) { gf_lm_free(m); free(m); fprintf(stderr, "gflow bench: out of memory\n"); return GF_EXIT_ERROR; }
    gf_ctx ctx;
    gf_ctx_init(&ctx, (size_t)64 << 20, &rng);
    ctx.training = 1;

    double t_fwd = 0, t_bwd = 0, t_opt = 0, t_comm = 0, loss_last = 0, cpu0 = 0, cpu = 0;
    long flt0 = 0;
    int64_t mallocs_before = 0;
    for (int64_t it = 0; it < warmup + steps; it++) {
        int timed = it >= warmup;
        if (it == warmup) {
            memset(&ctx.prof, 0, sizeof ctx.prof);
            mallocs_before = ctx.arena.n_chunk_allocs;
            cpu0 = cpu_now();
            flt0 = minor_faults();
        }
        ctx.profile = timed && profile;
        for (int64_t i = 0; i < B * (L + 1); i++) win[i] = (int32_t)gf_rng_below(&rng, (uint64_t)cfg.vocab);
        double t0 = gf_time_now();
        gf_params_zero_grad(&m->params);
        gf_tensor *loss = gf_lm_forward(m, &ctx, win, B, L, NULL);
        double t1 = gf_time_now();
        gf_tape_backward(&ctx, loss);
        double t2 = gf_time_now();
        double c_step = 0.0;
        if (world > 1) { /* what the trainer does: pre-scale by this rank's share, sum */
            double c0 = gf_time_now();
            s = gf_dist_sum_scaled_f32(m->params.grad, m->params.n, 1.0f / (float)world);
            if (s) { fprintf(stderr, "gflow bench: %s\n", gf_last_error()); gf_dist_abort(GF_EXIT_ERROR); }
            c_step = gf_time_now() - c0;
            if (timed) t_comm += c_step;
        }
        gf_clip_grad_norm(&m->params, clip);
        gf_adamw_step(&m->params, &ast, &acfg, lr);
        loss_last = loss->data[0];
        gf_ctx_reset(&ctx);
        double t3 = gf_time_now();
        if (timed) { t_fwd += t1 - t0; t_bwd += t2 - t1; t_opt += t3 - t2 - c_step; }
    }
    cpu = cpu_now() - cpu0;
    int64_t mallocs = ctx.arena.n_chunk_allocs - mallocs_before;
    double total = t_fwd + t_bwd + t_opt, per = total / (double)steps;
    double tok = (double)(Bg * L), fpt = gf_lm_flops_per_token(&cfg, L);
    /* times: mean over ranks (the allreduce synchronises them every step, so they agree);
     * memory: the job's total, every rank holds a whole model */
    double rss_mb = (double)peak_rss_kib() / 1024.0;
    if (world > 1) {
        double red[3] = {per, t_comm, rss_mb};
        gf_dist_sum_f64(red, 3);
        per = red[0] / world, t_comm = red[1] / world, rss_mb = red[2];
    }
    if (rank != 0) {
        gf_ctx_free(&ctx); free(win); gf_lm_free(m); free(m);
        gf_dist_finalize();
        return GF_EXIT_OK;
    }
    double gflops = 3.0 * fpt * tok / per * 1e-9;

    printf("bench: %s family=%s block=%s layers=%lld d=%lld V=%lld L=%lld B=%lld threads=%d\n", path,
           gf_family_name(cfg.family), gf_block_name(cfg.block), (long long)cfg.n_layers, (long long)cfg.d_model,
           (long long)cfg.vocab, (long long)L, (long long)Bg, gf_threads_get());
    printf("ranks: %d (%lld rows each, %d threads each)\n", world, (long long)B, gf_threads_get());
    printf("params: %lld\n", (long long)m->params.n);
    printf("steps: %lld (after %lld warmup)\n", (long long)steps, (long long)warmup);
    printf("loss_last: %.4f\n", loss_last);
    printf("tokens_per_s: %.1f\n", tok / per);
    printf("ms_per_step: %.1f\n", 1e3 * per);
    printf("cpu_ms_per_step: %.1f\n", 1e3 * cpu / (double)steps);
    printf("ms_forward: %.1f\n", 1e3 * t_fwd / (double)steps);
    printf("ms_backward: %.1f\n", 1e3 * t_bwd / (double)steps);
    printf("ms_optimizer: %.1f\n", 1e3 * t_opt / (double)steps);
    printf("ms_allreduce: %.1f (%.1f MB per rank per step)\n", 1e3 * t_comm / (double)steps,
           world > 1 ? 4e-6 * (double)m->params.n : 0.0);
    if (profile) {
        for (int f = 0; f < GF_FAM_COUNT; f++)
            printf("ms_%s: fwd %.1f bwd %.1f\n", gf_op_family_name((gf_op_family)f),
                   1e3 * ctx.prof.fwd_s[f] / (double)steps, 1e3 * ctx.prof.bwd_s[f] / (double)steps);
    }
    printf("flops_per_token_fwd: %.4g\n", fpt);
    printf("flops_per_step_train: %.4g\n", 3.0 * fpt * tok);
    printf("achieved_gflops: %.1f\n", gflops);
    if (peak > 0) {
        printf("sgemm_peak_gflops: %.1f (%d^3)\n", peak, peak_n);
        printf("mfu_pct: %.1f\n", 100.0 * gflops / peak);
    }
    printf("arena_mb: %.1f\n", (double)gf_arena_capacity(&ctx.arena) / 1048576.0);
    printf("page_faults_per_step: %.0f\n", (double)(minor_faults() - flt0) / (double)steps);
    printf("arena_mallocs_timed: %lld\n", (long long)mallocs);
    printf("peak_rss_mb: %.1f%s\n", rss_mb, world > 1 ? " (sum over ranks)" : "");
    gf_ctx_free(&ctx);
    free(win);
    gf_lm_free(m);
    free(m);
    gf_dist_finalize();
    return GF_EXIT_OK;
}
