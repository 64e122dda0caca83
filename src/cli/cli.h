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

/* One command's command line (src/cli/args.c): getopt_long's table and the --help text are both
 * made from this, so the parser and the help cannot disagree. `--opt value` and `--opt=value`,
 * unique prefixes of a long name, options before or after the arguments, `--` ends the options;
 * -h/--help is every command's. */
typedef struct gf_cli_opt {
    int key;          /* > 0: what gf_cli_next returns for this option */
    const char *name; /* long name without "--" */
    const char *arg;  /* placeholder of its value ("N", "RUN_DIR", "best|last"); NULL: a flag */
    const char *help; /* one line, or more separated by '\n' (aligned under the first in --help) */
} gf_cli_opt;

typedef struct gf_cli_spec {
    const char *name;       /* the command: "train" */
    const char *usage;      /* synopsis lines, each printed after "gflow NAME ", '\n' between them */
    const char *about;      /* description, printed as it is after the synopsis (NULL: none) */
    const gf_cli_opt *opts; /* ends with {0} */
    const char *more;       /* printed after the option list (NULL: none) */
} gf_cli_spec;

#define GF_CLI_MAX_OPTS 32
enum { GF_CLI_END = 0, GF_CLI_HELP = -1, GF_CLI_USAGE = -2 };

typedef struct gf_cli {
    const gf_cli_spec *spec;
    int argc;
    char **argv;
    int n_opts, started;
    char **pos; /* the arguments that are not options, in order, once gf_cli_next returned GF_CLI_END */
    int n_pos;
} gf_cli;

void gf_cli_begin(gf_cli *p, const gf_cli_spec *spec, int argc, char **argv);
/* The next option: its key (> 0) and *val (NULL for a flag); GF_CLI_END when none is left
 * (p->pos then holds the arguments); GF_CLI_HELP once --help has been printed; GF_CLI_USAGE once
 * a message naming the option has been printed (unknown, ambiguous, a value missing, empty or
 * given to a flag). */
int gf_cli_next(gf_cli *p, const char **val);
/* after GF_CLI_END: between lo and hi arguments, none of them empty, else a usage message naming
 * the extra one, the empty one or what is missing (`what`, e.g. "a recipe file"); 1 when they are
 * there. (An empty option value is refused by gf_cli_next: every value is a path, a number or a
 * word, and an empty output path would make the atomic writer's tmp file "./.tmp".) */
int gf_cli_args(const gf_cli *p, int lo, int hi, const char *what);
/* print "gflow NAME: <message>" and the pointer to --help on stderr; returns GF_EXIT_USAGE */
int gf_cli_usage(const gf_cli_spec *spec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_cli_help(const gf_cli_spec *spec, FILE *f);
/* `gflow data encode TARGET` with a recipe's --set overrides (cmd_data_encode.c; spec: data's, for
 * its usage errors); the exit code */
int gf_cmd_data_encode(const gf_cli_spec *spec, const char *target, const char *const *sets, int64_t n_sets);
/* the exit code for gf_cli_next's GF_CLI_HELP and GF_CLI_USAGE */
static inline int gf_cli_exit(int k) { return k == GF_CLI_HELP ? GF_EXIT_OK : GF_EXIT_USAGE; }

/* Numeric option values (src/cli/args.c): parse all of v as a number in [lo, hi] (a real must
 * also be finite) into *out and return 1; else print "gflow CMD: OPT needs ..., got 'V'" and
 * return 0 (the caller exits GF_EXIT_USAGE). */
int gf_arg_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);
int gf_arg_real(const char *cmd, const char *opt, const char *v, double lo, double hi, double *out);
/* --ckpt best|last (eval, export, probe, sample): *which = v and 1; else a usage message naming
 * the command (spec) and 0. The word becomes part of a path, so nothing else is taken. */
int gf_arg_ckpt(const gf_cli_spec *spec, const char *v, const char **which);
/* --stop-after N (train, ablate): N >= 1 optimizer steps in total into *steps, as gf_arg_int */
int gf_arg_stop_after(const char *cmd, const char *v, int64_t *steps);

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
/* launches the host made so far: gflow's kernels, cuBLAS calls (gf_cuda_launches), and the bytes
 * gflow's kernels moved (gf_cuda_launch_bytes) */
void gf_bench_gpu_launches(int64_t counts[3]);
/* the high-water mark of gflow's device memory from now on (gf_cuda_mem_peak_reset) */
void gf_bench_gpu_peak_reset(void);
/* the session's CUDA graph so far: launched, instantiated, updated in place, captures dropped and
 * run again uncaptured, replayed (gf_cuda_graph, gflow/cuda.h); zeros before the first capture */
void gf_bench_gpu_graphs(const struct gf_session *s, int64_t counts[5]);
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
