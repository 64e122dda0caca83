/* cli.h — subcommand entry points. Exit codes: 0 ok, 1 runtime error (message on
 * stderr naming the file/line/key/tensor), 2 usage error. */
#ifndef GF_CLI_H
#define GF_CLI_H
#include "gflow.h"
#include <stdio.h>

enum { GF_EXIT_OK = 0, GF_EXIT_ERROR = 1, GF_EXIT_USAGE = 2 };

int gf_cmd_selftest(int argc, char **argv);
int gf_cmd_train(int argc, char **argv);
int gf_cmd_eval(int argc, char **argv);
int gf_cmd_compare(int argc, char **argv);
int gf_cmd_sample(int argc, char **argv);
int gf_cmd_info(int argc, char **argv);
int gf_cmd_export(int argc, char **argv);
int gf_cmd_data(int argc, char **argv);
int gf_cmd_bench(int argc, char **argv);
int gf_cmd_ablate(int argc, char **argv);
int gf_cmd_probe(int argc, char **argv);

/* Numeric option values (src/cli/args.c): parse all of v as a number in [lo, hi] (a real must
 * also be finite) into *out and return 1; else print "gflow CMD: OPT needs ..., got 'V'" and
 * return 0 (the caller exits GF_EXIT_USAGE). */
int gf_arg_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);
int gf_arg_real(const char *cmd, const char *opt, const char *v, double lo, double hi, double *out);

/* `gflow bench --generate` (bench_generate.c): decoder speed against the context length for the
 * recipe's family and the other one at the same shape, `rows` streams decoded together; the
 * recompute path is timed up to context recompute_max. */
gf_status gf_bench_generate(const gf_recipe *r, int64_t rows, int64_t recompute_max);

/* `gflow bench` with [run] device = cuda (bench_cuda.c). A build without CUDA never gets there
 * (the session refuses device = cuda first); its stubs say "built without CUDA". */
struct gf_session;
typedef struct gf_bench_gpu {
    int peak_n, tf32;               /* in: the square GEMM's size (0: none); also time it in TF32 */
    int64_t rows, d, V, d_ff;       /* in: the model's GEMMs (rows, d) x (d, V) and (rows, d) x (d, d_ff) */
    double peak, peak_tf32, head, ffn; /* out: cublasSgemm GFLOP/s (0: not measured) */
    size_t used_before, total;      /* out: device memory in use before the session (cudaMemGetInfo) */
    char gpu[512];                  /* out: name, compute capability, memory, driver and runtime */
} gf_bench_gpu;
/* initialise CUDA, describe the GPU, time the GEMMs, take the memory baseline */
gf_status gf_bench_gpu_measure(gf_bench_gpu *g);
void gf_bench_gpu_print_device(const gf_bench_gpu *g);
void gf_bench_gpu_print_mfu(const gf_bench_gpu *g, double gflops);
gf_status gf_bench_gpu_print_memory(const gf_bench_gpu *g, const struct gf_session *s, int64_t mallocs_timed);
/* cudaMalloc calls of the session's device step arena so far */
int64_t gf_bench_gpu_mallocs(const struct gf_session *s);
/* The phases of gf_train_step by CUDA events: open (wraps the session's task table), then per
 * step start, gf_train_step, stop (waits for the step; seconds per phase); close restores it. */
typedef struct gf_bench_clock gf_bench_clock;
gf_status gf_bench_clock_open(struct gf_session *s, gf_bench_clock **out);
gf_status gf_bench_clock_start(gf_bench_clock *c);
gf_status gf_bench_clock_stop(gf_bench_clock *c, double *fwd, double *bwd, double *upd);
void gf_bench_clock_close(gf_bench_clock *c);

/* print "gflow: <message>" for a failed status and return GF_EXIT_ERROR */
static inline int gf_cli_fail(gf_status s) {
    fprintf(stderr, "gflow: error (%s): %s\n", gf_status_name(s), gf_last_error());
    return GF_EXIT_ERROR;
}
#endif
