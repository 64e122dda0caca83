/* cmd_bench.c — `gflow bench RECIPE`: time full training steps on random tokens.
 *
 * A step is the trainer's own, gf_train_step(): zero grads, forward (dropout on), backward,
 * global-norm clipping, AdamW. Any task's recipe benches (NLI: random sentence pairs; FLOPs and
 * MFU only where the model counts them, the language models). After --warmup untimed steps, --steps steps are timed and
 * split by phase (forward / backward / optimizer) and, with ctx->profile, by op family
 * (GEMM, Plücker, attention, elementwise) and by op (`op:` lines, the families' time split). The head_ce op computes the tied head's backward
 * GEMMs (dh, dE) during forward, so those FLOPs show up in the forward phase and in the
 * GEMM family's forward column; its backward only scales and adds.
 * MFU is measured against a large cblas_sgemm timed in the same process (same BLAS, same
 * threads, same environment), FLOPs are 3 × gf_lm_flops_per_token × tokens (backward = 2 ×
 * forward). Output is `key: value` lines so tools/bench.sh can parse it.
 * Under mpirun every rank times its slice of the global batch (B / N rows) plus the gradient
 * allreduce the trainer does; rank 0 prints, with the communication time per step.
 *
 * With [run] device = cuda (--set run.device=cuda; one process) the same step runs on the GPU and
 * bench_cuda.c supplies what differs: the phases are timed by CUDA events on the stream (the
 * host waits for each step's end event, and the step once within, for its record), MFU is against cublasSgemm N^3 (default 8192) timed
 * first on the same GPU, the model's own GEMM shapes (tied head, FFN) are timed beside it, and
 * the report names the GPU, the driver and the runtime and adds device memory: the session's
 * share from cudaMemGetInfo and the device step arena's high-water mark. No op-family split on
 * the GPU (host clocks around queued work would be wrong); `--tf32` also times the GEMMs in TF32.
 */
#include "cli.h"
#include "gflow/session.h"
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_MAX_SETS 64

typedef struct bench_opts {
    const char *path;
    const char *sets[BENCH_MAX_SETS];
    int64_t n_sets, steps, warmup, L, B;
    int threads, profile, peak_n; /* peak_n -1: 2048 on the CPU, 8192 on the GPU */
    int tf32;                     /* --tf32: also time the GPU GEMMs in TF32 */
    int generate;                 /* --generate: decoder speed (bench_generate.c) instead of training steps */
    int products;                 /* --products: each matrix product shape's time (CPU) */
    long long rows, recompute_max;
} bench_opts;

/* what the timed steps measured (seconds summed over them) */
typedef struct bench_times {
    double fwd, bwd, upd, comm, cpu, loss_last;
    double host;          /* GPU: the host's wall time in gf_train_step (queueing, and its own waits) */
    long faults;
    int64_t mallocs, dev_mallocs;
    /* GPU: gflow's kernels and cuBLAS calls the host launched, the kernels' bytes (gf_bench_gpu_launches) */
    int64_t launches[3];
} bench_times;

/* GPU: the steps queued as the trainer queues them (time_queued) */
typedef struct bench_queued {
    double wall, host; /* from the first push to the last read-back; of it, in gf_train_step */
    int64_t graphs0[5], graphs1[5]; /* gf_bench_gpu_graphs before and after */
} bench_queued;

enum { O_STEPS = 1, O_WARMUP, O_THREADS, O_SEQ_LEN, O_BATCH, O_SET, O_NO_PROFILE, O_PEAK_N, O_TF32, O_GENERATE,
       O_N, O_RECOMPUTE_MAX, O_PRODUCTS };
static const gf_cli_opt k_opts[] = {
    {O_STEPS, "steps", "N", "timed steps (default 5)"},
    {O_WARMUP, "warmup", "W", "untimed steps first (default 2)"},
    {O_THREADS, "threads", "T", "threads (default: the recipe's)"},
    {O_SEQ_LEN, "seq-len", "L", "sequence length (default: the recipe's)"},
    {O_BATCH, "batch", "B", "batch rows (default: the recipe's)"},
    {O_SET, "set", "section.key=value", "override one recipe key (repeatable)"},
    {O_NO_PROFILE, "no-profile", NULL, "no op-family or op split"},
    {O_PRODUCTS, "products", NULL, "CPU: also each matrix product shape's calls, ms and GFLOP/s per step"},
    {O_PEAK_N, "peak-n", "N", "size of the square GEMM timed for MFU (CPU default 2048, GPU 8192; 0: none)"},
    {O_TF32, "tf32", NULL, "GPU: also time the GEMMs in TF32"},
    {O_GENERATE, "generate", NULL, "time generation instead of training steps"},
    {O_N, "n", "N", "generate: streams decoded as one batch (default 1)"},
    {O_RECOMPUTE_MAX, "recompute-max", "C", "generate: time the recompute path up to context C (default 512)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "bench",
    "RECIPE [--steps N] [--warmup W] [--threads T] [--seq-len L] [--batch B] [--set section.key=value]...\n"
    "RECIPE --generate [--n N] [--recompute-max C] [--threads T] [--set section.key=value]...",
    "  Times full training steps (forward, backward, clip, AdamW) of the recipe's model on\n"
    "  random tokens and prints tokens/s, ms/step by phase, by op family and by op, model\n"
    "  FLOPs per token, achieved GFLOPS, MFU against a cblas_sgemm N^3 (default 2048) timed\n"
    "  first, and peak RSS.\n"
    "  With --set run.device=cuda: phases timed by CUDA events, MFU against cublasSgemm N^3\n"
    "  (default 8192), the model's head and FFN GEMMs timed too (--tf32: also in TF32), the\n"
    "  GPU and its driver named, device memory; no op-family split. Then --steps more steps\n"
    "  pushed as `gflow train` pushes them (no wait per step, CUDA graphs unless\n"
    "  run.cuda_graph=false): queued tokens/s, the host's ms per queued step, and the graphs\n"
    "  launched, instantiated, updated.\n"
    "  With --generate: prefill tokens/s, decode ms per step and tokens/s, and decoder state\n"
    "  memory at contexts 16, 32, ... up to the model's max_len, for the recipe's family and the\n"
    "  other one at the same shape (random weights); N streams decoded as one batch; today's\n"
    "  recompute path (`gflow sample --recompute`) timed up to context C.\n",
    k_opts,
    NULL,
};

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

/* Parse the command line; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.steps = 5, .warmup = 2, .threads = -1, .profile = 1, .peak_n = -1, .rows = 1,
                      .recompute_max = 512};
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *a;
    int k, ok = 1;
    long long v = 0;
    /* numeric options: parsed whole and range-checked (gf_arg_int), a usage error otherwise */
#define NUM(name, lo, hi, dst) if ((ok = gf_arg_int("bench", name, a, lo, hi, &v))) dst = v
    while (ok && (k = gf_cli_next(&p, &a)) > 0) {
        switch (k) {
        case O_STEPS: NUM("--steps", 1, 1000000000, o->steps); break;
        case O_WARMUP: NUM("--warmup", 0, 1000000000, o->warmup); break;
        case O_THREADS: NUM("--threads", 0, 1024, o->threads); break;
        case O_SEQ_LEN: NUM("--seq-len", 1, GF_RECIPE_MAX_LEN, o->L); break;
        case O_BATCH: NUM("--batch", 1, 1 << 20, o->B); break;
        case O_PEAK_N: NUM("--peak-n", 0, 16384, o->peak_n); break;
        case O_N: NUM("--n", 1, 4096, o->rows); break;
        case O_RECOMPUTE_MAX: NUM("--recompute-max", 0, 1 << 20, o->recompute_max); break;
        case O_NO_PROFILE: o->profile = 0; break;
        case O_PRODUCTS: o->products = 1; break;
        case O_TF32: o->tf32 = 1; break;
        case O_GENERATE: o->generate = 1; break;
        case O_SET:
            if (o->n_sets == BENCH_MAX_SETS) return gf_cli_usage(&k_spec, "more than %d --set", BENCH_MAX_SETS);
            o->sets[o->n_sets++] = a;
            break;
        }
    }
#undef NUM
    if (!ok) return GF_EXIT_USAGE;
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&p, 1, 1, "a recipe file")) return GF_EXIT_USAGE;
    o->path = p.pos[0];
    return -1;
}

/* a bench step: this rank's B rows of the global batch; the norm always paid for (a clip of 1
 * where the recipe has none); defer: left on the device, as gflow train queues GPU steps */
static gf_step_in bench_step_in(const gf_session *s, int64_t B, double lr, int defer) {
    return (gf_step_in){.rows = B * gf_dist_size(), .lo = 0, .n = B, .lr = lr,
                        .clip = s->r.optim.clip > 0 ? s->r.optim.clip : 1.0, .defer = defer};
}

/* --warmup untimed then --steps timed training steps of this rank's B rows of random ids */
static gf_status time_steps(gf_session *s, const bench_opts *o, int64_t B, gf_adamw_state *opt,
                            const gf_adamw_cfg *acfg, double lr, gf_bench_clock *clock, bench_times *bt) {
    *bt = (bench_times){0};
    double cpu0 = 0;
    long flt0 = 0;
    int64_t mallocs_before = 0, dev_mallocs_before = 0, launches0[3] = {0, 0, 0};
    gf_step_in in = bench_step_in(s, B, lr, 0);
    for (int64_t it = 0; it < o->warmup + o->steps; it++) {
        int timed = it >= o->warmup;
        if (it == o->warmup) {
            memset(&s->ctx.prof, 0, sizeof s->ctx.prof);
            mallocs_before = s->ctx.arena.n_chunk_allocs;
            dev_mallocs_before = gf_bench_gpu_mallocs(s);
            gf_bench_gpu_launches(launches0);
            gf_bench_gpu_peak_reset();
            cpu0 = cpu_now();
            flt0 = minor_faults();
        }
        s->ctx.profile = timed && (o->profile || o->products) && !clock;
        GF_TRY(s->task->random_batch(s, B, &s->rng));
        gf_step_out out;
        if (clock) GF_TRY(gf_bench_clock_start(clock));
        double h0 = gf_time_now();
        GF_TRY(gf_train_step(s, opt, acfg, &in, &out));
        double host = gf_time_now() - h0;
        if (clock) GF_TRY(gf_bench_clock_stop(clock, &out.s_forward, &out.s_backward, &out.s_update));
        bt->loss_last = out.loss;
        if (timed) {
            bt->fwd += out.s_forward, bt->bwd += out.s_backward, bt->upd += out.s_update, bt->comm += out.s_comm;
            bt->host += host;
        }
    }
    bt->cpu = cpu_now() - cpu0;
    bt->faults = minor_faults() - flt0;
    bt->mallocs = s->ctx.arena.n_chunk_allocs - mallocs_before;
    bt->dev_mallocs = gf_bench_gpu_mallocs(s) - dev_mallocs_before;
    gf_bench_gpu_launches(bt->launches);
    for (int k = 0; k < 3; k++) bt->launches[k] -= launches0[k];
    return GF_OK;
}

/* GPU: --steps more steps pushed as `gflow train` pushes them (no wait per step, each a CUDA graph
 * under [run] cuda_graph, the records read back every GF_STEP_RING steps and after the last): the
 * wall time from the first push to the last read-back, and the graph counts over those steps */
static gf_status time_queued(gf_session *s, const bench_opts *o, int64_t B, gf_adamw_state *opt,
                             const gf_adamw_cfg *acfg, double lr, bench_queued *q) {
    gf_step_in in = bench_step_in(s, B, lr, 1);
    gf_step_out outs[GF_STEP_RING], out;
    int n = 0;
    s->ctx.profile = 0;
    gf_bench_gpu_graphs(s, q->graphs0);
    double t0 = gf_time_now();
    for (int64_t it = 0; it < o->steps; it++) {
        GF_TRY(s->task->random_batch(s, B, &s->rng));
        const double h0 = gf_time_now();
        GF_TRY(gf_train_step(s, opt, acfg, &in, &out));
        q->host += gf_time_now() - h0;
        if (gf_train_pending(s) == GF_STEP_RING) GF_TRY(gf_train_flush(s, opt, outs, &n));
    }
    GF_TRY(gf_train_flush(s, opt, outs, &n));
    q->wall = gf_time_now() - t0;
    gf_bench_gpu_graphs(s, q->graphs1);
    return GF_OK;
}

/* GPU: what a timed (uncaptured) step launches and what its kernels move */
static void print_launches(const bench_times *bt, int64_t steps) {
    /* the count a fused kernel lowers */
    printf("kernel_launches_per_step: %.1f (gflow's kernels %.1f, cuBLAS calls %.1f; the timed steps, "
           "uncaptured: a replayed graph launches the same kernels without the host)\n",
           (double)(bt->launches[0] + bt->launches[1]) / (double)steps, (double)bt->launches[0] / (double)steps,
           (double)bt->launches[1] / (double)steps);
    /* from the shapes at each launch, not measured: what fusing two kernels saves shows here */
    printf("elementwise_bytes_per_step: %.0f (%.1f MB: what gflow's own kernels read plus write, each buffer once, "
           "from their shapes at launch; cuBLAS's and the copies' not counted)\n",
           (double)bt->launches[2] / (double)steps, (double)bt->launches[2] / (double)steps / 1e6);
}

/* --products: gf_gemm's products by shape over the timed steps, the longest first (a product
 * inside another op's family, as the Plücker projection, is listed here too) */
static int by_time(const void *a, const void *b) {
    const double x = ((const gf_gemm_stat *)a)->s, y = ((const gf_gemm_stat *)b)->s;
    return (x < y) - (x > y);
}

static int by_op_time(const void *a, const void *b) {
    const gf_op_stat *p = a, *q = b;
    const double x = p->fwd_s + p->bwd_s, y = q->fwd_s + q->bwd_s;
    return (x < y) - (x > y);
}

/* one line per op, longest first: the op families' time split by op (they add up to it) */
static void print_ops(const gf_profile *pr, int64_t steps) {
    gf_op_stat o[GF_OP_STATS];
    memcpy(o, pr->ops, (size_t)pr->n_ops * sizeof o[0]);
    qsort(o, (size_t)pr->n_ops, sizeof o[0], by_op_time);
    const double st = (double)steps;
    printf("ops: %d (name ms_forward/step ms_backward/step; the families' time by op, products included)\n",
           pr->n_ops);
    for (int i = 0; i < pr->n_ops; i++)
        printf("op: %s %.2f %.2f\n", o[i].name, 1e3 * o[i].fwd_s / st, 1e3 * o[i].bwd_s / st);
    if (pr->op_more_fwd + pr->op_more_bwd + pr->pending_s > 0) /* past the table, or timed with no op after */
        printf("op: (not attributed) %.2f %.2f\n", 1e3 * (pr->op_more_fwd + pr->pending_s) / st,
               1e3 * pr->op_more_bwd / st);
}

static void print_products(const gf_profile *pr, int64_t steps) {
    gf_gemm_stat g[GF_GEMM_STATS];
    memcpy(g, pr->gemm, (size_t)pr->n_gemm * sizeof g[0]);
    qsort(g, (size_t)pr->n_gemm, sizeof g[0], by_time);
    double ms = 0.0, ra = 0.0, rb = 0.0, flops = 0.0;
    const double st = (double)steps;
    printf("gemm_products: %d shapes (M N K op(A) op(B) C calls/step ms/step GFLOP/s ms_rounding_A/step "
           "ms_rounding_B/step; op N or T, C =, += or =+bias (the product adds the row bias); B's rounding includes its reorder)\n", pr->n_gemm);
    for (int i = 0; i < pr->n_gemm; i++) {
        const double f = 2.0 * (double)g[i].M * (double)g[i].N * (double)g[i].K * (double)g[i].calls;
        printf("gemm_product: %lld %lld %lld %c %c %s %.1f %.2f %.1f %.2f %.2f\n", (long long)g[i].M,
               (long long)g[i].N, (long long)g[i].K, g[i].ta ? 'T' : 'N', g[i].tb ? 'T' : 'N', g[i].acc == 2 ? "=+bias" : g[i].acc ? "+=" : "=",
               (double)g[i].calls / st, 1e3 * g[i].s / st, g[i].s > 0 ? f / g[i].s * 1e-9 : 0.0,
               1e3 * g[i].s_round_a / st, 1e3 * g[i].s_round_b / st);
        ms += g[i].s, ra += g[i].s_round_a, rb += g[i].s_round_b, flops += f;
    }
    printf("gemm_products_total: %.1f ms/step, %.1f GFLOP/s, %.2f ms rounding/step (A %.2f, B %.2f), %.6g "
           "FLOPs/step%s\n", 1e3 * ms / st, ms > 0 ? flops / ms * 1e-9 : 0.0, 1e3 * (ra + rb) / st, 1e3 * ra / st,
           1e3 * rb / st, flops / st, pr->gemm_more ? " (more shapes than listed: their calls not counted)" : "");
}

static gf_status report(gf_session *s, const bench_opts *o, const bench_times *bt, int64_t B, double per,
                        double comm, double rss_mb, double peak, const gf_bench_gpu *gpu, const bench_queued *q) {
    int world = gf_dist_size();
    int64_t L = gf_session_tokens_per_row(s), Bg = B * world, steps = o->steps;
    const gf_params *P = s->params;
    double tok = (double)(Bg * L);
    printf("bench: %s family=%s block=%s layers=%lld d=%lld V=%lld L=%lld B=%lld threads=%d\n", o->path,
           gf_family_name(s->r.model.family), gf_block_name(s->r.model.block), (long long)s->r.model.n_layers,
           (long long)s->r.model.d_model, (long long)s->vocab, (long long)L, (long long)Bg, gf_threads_get());
    if (gpu) gf_bench_gpu_print_device(gpu);
    printf("ranks: %d (%lld rows each, %d threads each)\n", world, (long long)B, gf_threads_get());
    if (s->r.run.precision == GF_PREC_BF16) /* only then: an fp32 bench prints what it always printed */
        printf("precision: bf16 (%s)\n", gf_gemm_bf16_path_on(s->r.run.device));
    printf("params: %lld\n", (long long)P->n);
    printf("steps: %lld (after %lld warmup)\n", (long long)steps, (long long)o->warmup);
    printf("loss_last: %.4f\n", bt->loss_last);
    printf("tokens_per_s: %.1f\n", tok / per);
    /* a GPU step takes milliseconds: three decimals there */
    int prec = gpu ? 3 : 1;
    printf("ms_per_step: %.*f\n", prec, 1e3 * per);
    if (gpu) printf("host_ms_per_step: %.3f (the host's wall time in gf_train_step)\n", 1e3 * bt->host / (double)steps);
    if (gpu) print_launches(bt, steps);
    if (q) {
        const int64_t *a = q->graphs0, *b = q->graphs1;
        printf("queued_tokens_per_s: %.1f\n", tok * (double)steps / q->wall);
        printf("queued_ms_per_step: %.3f (%lld more steps pushed as gflow train pushes them: no wait per step, the "
               "records read back every %d steps and after the last)\n", 1e3 * q->wall / (double)steps,
               (long long)steps, GF_STEP_RING);
        /* the host's pass (a captured step: tape, ops' host work, capture and graph update; a
         * replayed one: its feed) against the GPU's: as long as a queued step, it is what limits it
         * (docs/cuda.md, "Measuring it") */
        printf("queued_host_ms_per_step: %.3f (the host's time pushing one of them: its feed, then its forward and "
               "backward pass with the capture and the graph update, or the replay of the graph; the GPU waits for "
               "the host when this is as long as queued_ms_per_step)\n", 1e3 * q->host / (double)steps);
        if (s->r.run.cuda_graph)
            printf("cuda_graphs: %lld launched, %lld instantiated, %lld updated in place, %lld replayed without the "
                   "host's pass, %lld captures dropped and run uncaptured (in the queued steps)\n",
                   (long long)(b[0] - a[0]), (long long)(b[1] - a[1]), (long long)(b[2] - a[2]),
                   (long long)(b[4] - a[4]), (long long)(b[3] - a[3]));
        else
            printf("cuda_graphs: off ([run] cuda_graph = false)\n");
    }
    printf("cpu_ms_per_step: %.*f\n", prec, 1e3 * bt->cpu / (double)steps);
    printf("ms_forward: %.*f\n", prec, 1e3 * bt->fwd / (double)steps);
    printf("ms_backward: %.*f\n", prec, 1e3 * bt->bwd / (double)steps);
    printf("ms_optimizer: %.*f\n", prec, 1e3 * bt->upd / (double)steps);
    printf("ms_allreduce: %.1f (%.1f MB per rank per step)\n", 1e3 * comm / (double)steps,
           world > 1 ? 4e-6 * (double)P->n : 0.0);
    if (o->profile && gpu) {
        printf("ms_by_family: not measured on cuda (CUDA events time the phases; per kernel: ncu, nsys)\n");
    } else if (o->profile) {
        for (int f = 0; f < GF_FAM_COUNT; f++)
            printf("ms_%s: fwd %.1f bwd %.1f\n", gf_op_family_name((gf_op_family)f),
                   1e3 * s->ctx.prof.fwd_s[f] / (double)steps, 1e3 * s->ctx.prof.bwd_s[f] / (double)steps);
    }
    if (o->profile && !gpu) print_ops(&s->ctx.prof, steps);
    if (o->products && !gpu) print_products(&s->ctx.prof, steps);
    const gf_lm *lm = gf_session_lm(s);
    if (lm) { /* FLOPs are counted for the language models */
        double fpt = gf_lm_flops_per_token(&lm->cfg, L), gflops = 3.0 * fpt * tok / per * 1e-9;
        printf("flops_per_token_fwd: %.6g\n", fpt);
        printf("flops_per_step_train: %.6g\n", 3.0 * fpt * tok);
        printf("achieved_gflops: %.1f\n", gflops);
        if (gpu) {
            gf_bench_gpu_print_mfu(gpu, gflops);
        } else if (peak > 0) {
            printf("sgemm_peak_gflops: %.1f (%d^3)\n", peak, o->peak_n);
            printf("mfu_pct: %.1f\n", 100.0 * gflops / peak);
        }
    }
    printf("arena_mb: %.1f\n", (double)gf_arena_capacity(&s->ctx.arena) / 1048576.0);
    printf("page_faults_per_step: %.0f\n", (double)bt->faults / (double)steps);
    printf("arena_mallocs_timed: %lld\n", (long long)bt->mallocs);
    if (gpu) GF_TRY(gf_bench_gpu_print_memory(gpu, s, bt->dev_mallocs));
    printf("peak_rss_mb: %.1f%s\n", rss_mb, world > 1 ? " (sum over ranks)" : "");
    return GF_OK;
}

/* --seq-len beyond the recipe's max_len grows the position table (language models) */
static void apply_seq_len(gf_recipe *r, int64_t L) {
    const gf_task_ops *task = gf_task_of(r);
    if (L <= 0 || !task || !task->language_model) return;
    r->data.seq_len = L;
    if (r->model.max_len < L) r->model.max_len = L;
}

static void set_threads(const bench_opts *o, const gf_recipe *r) {
    int threads = o->threads;
    if (threads < 0) threads = (int)r->run.threads;
    if (threads <= 0 && gf_dist_local_size() > 1) threads = omp_get_num_procs() / gf_dist_local_size();
    gf_threads_set(threads);
}

/* Time the steps, then rank 0 reports; times are means over ranks (the allreduce synchronises
 * them every step, so they agree), memory the job's total (every rank holds a whole model). */
static gf_status bench(gf_session *s, const bench_opts *o, int64_t B, double peak, const gf_bench_gpu *gpu) {
    gf_adamw_cfg acfg;
    gf_schedule_cfg scfg;
    gf_recipe_optim_cfg(&s->r, &acfg, &scfg);
    gf_adamw_state opt;
    gf_adamw_reset(s->params, &opt);
    s->ctx.training = 1;
    bench_times bt;
    gf_bench_clock *clock = NULL;
    if (gpu) GF_TRY(gf_bench_clock_open(s, &clock));
    gf_status st = time_steps(s, o, B, &opt, &acfg, scfg.lr, clock, &bt);
    gf_bench_clock_close(clock);
    GF_TRY(st);
    bench_queued queued = {0};
    if (gpu) GF_TRY(time_queued(s, o, B, &opt, &acfg, scfg.lr, &queued));
    int world = gf_dist_size();
    double per = (bt.fwd + bt.bwd + bt.upd) / (double)o->steps, comm = bt.comm;
    double rss_mb = (double)peak_rss_kib() / 1024.0;
    if (world > 1) {
        double red[3] = {per, comm, rss_mb};
        GF_TRY(gf_dist_sum_f64(red, 3));
        per = red[0] / world, comm = red[1] / world, rss_mb = red[2];
    }
    if (gf_dist_rank() == 0) GF_TRY(report(s, o, &bt, B, per, comm, rss_mb, peak, gpu, gpu ? &queued : NULL));
    return GF_OK;
}

int gf_cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    gf_recipe *r = calloc(1, sizeof *r);
    if (!r) { fprintf(stderr, "gflow bench: out of memory\n"); return GF_EXIT_ERROR; }
    gf_status status = gf_recipe_load(o.path, o.sets, o.n_sets, r);
    if (!status) status = gf_session_device_check(r);
    if (!status) status = gf_dist_init(&argc, &argv);
    if (status) { free(r); return gf_cli_fail(status); }
    int world = gf_dist_size();
    int64_t B = o.B > 0 ? o.B : r->train.batch_size;
    set_threads(&o, r);
    if (B % world != 0) {
        if (gf_dist_rank() == 0) fprintf(stderr, "gflow bench: batch %lld does not divide among %d ranks\n", (long long)B, world);
        free(r);
        gf_dist_finalize();
        return GF_EXIT_USAGE;
    }
    B /= world; /* the global batch stays the recipe's; this rank runs B / N rows of it */
    apply_seq_len(r, o.L);
    if (o.products && (o.generate || r->run.device == GF_DEV_CUDA)) { /* the host times gf_gemm's calls */
        fprintf(stderr, "gflow bench: --products times the CPU's matrix products in training steps: not with %s\n",
                o.generate ? "--generate" : "run.device=cuda");
        free(r);
        gf_dist_finalize();
        return GF_EXIT_USAGE;
    }
    if (o.generate) {
        status = world > 1 ? gf_error_set(GF_E_INVALID, "bench --generate runs in one process") : gf_bench_generate(r, o.rows, o.recompute_max);
        free(r);
        gf_dist_finalize();
        return status ? gf_cli_fail(status) : GF_EXIT_OK;
    }
    if (o.tf32 && r->run.device != GF_DEV_CUDA) {
        fprintf(stderr, "gflow bench: --tf32 times the GPU's GEMMs: it needs --set run.device=cuda\n");
        free(r);
        gf_dist_finalize();
        return GF_EXIT_USAGE;
    }
    double peak = 0.0;
    gf_bench_gpu gpu_m = {0}, *gpu = NULL;
    if (r->run.device == GF_DEV_CUDA) { /* the GEMMs and the memory baseline before the session */
        if (world > 1) status = gf_error_set(GF_E_INVALID, "bench on cuda runs in one process");
        gpu = &gpu_m;
        gpu->peak_n = o.peak_n < 0 ? 8192 : o.peak_n;
        gpu->tf32 = o.tf32;
        const gf_task_ops *task = gf_task_of(r);
        gpu->rows = B * (task ? task->tokens_per_row(r) : 0);
        gpu->d = r->model.d_model, gpu->V = r->tokenizer.vocab_size, gpu->d_ff = r->model.d_ff;
        if (!status) status = gf_bench_gpu_measure(gpu);
    } else {
        o.peak_n = o.peak_n < 0 ? 2048 : o.peak_n;
        peak = o.peak_n > 0 ? sgemm_peak(o.peak_n) : 0.0;
        if (world > 1) { double p = peak; gf_dist_sum_f64(&p, 1); peak = p; } /* the job's peak: every rank's */
    }
    if (status) {
        free(r);
        gf_dist_finalize();
        return gf_cli_fail(status);
    }
    gf_session s;
    status = gf_session_open_model(&s, r, r->tokenizer.vocab_size, GF_SESSION_INIT);
    free(r);
    if (!status) status = gf_session_memory_check(&s, B);
    if (!status) status = bench(&s, &o, B, peak, gpu);
    gf_session_close(&s);
    if (status && world > 1) {
        fprintf(stderr, "gflow bench: %s\n", gf_last_error());
        gf_dist_abort(GF_EXIT_ERROR);
    }
    if (status) return gf_cli_fail(status);
    gf_dist_finalize();
    return GF_EXIT_OK;
}
