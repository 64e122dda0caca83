/* main.c — `gflow <command> [args]`: dispatch to one file per subcommand. */
#include "cli.h"
#include "gflow/version.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } gf_command;

static const gf_command commands[] = {
    {"train", gf_cmd_train, "train a model from a recipe, or resume a run"},
    {"eval", gf_cmd_eval, "evaluate a run's checkpoint on a split (perplexity / accuracy)"},
    {"compare", gf_cmd_compare, "table and plot comparing runs"},
    {"sample", gf_cmd_sample, "generate text from a language-model run"},
    {"info", gf_cmd_info, "parameter count and per-tensor table of a recipe or checkpoint"},
    {"export", gf_cmd_export, "write a checkpoint's weights as safetensors"},
    {"data", gf_cmd_data, "fetch and verify data sets, show a tokenizer's ids (gflow data fetch|dir|encode)"},
    {"selftest", gf_cmd_selftest, "train a tiny model on synthetic data end to end (core demo)"},
    {"bench", gf_cmd_bench, "time training steps of a recipe's model on random tokens (tokens/s, MFU, RSS)"},
    {"ablate", gf_cmd_ablate, "run an ablation study (base recipe + variants), resumable, with a summary table and plot"},
    {"probe", gf_cmd_probe, "geometry probes of trained runs: curvature, pca, hessian (one run, or two overlaid)"},
};

static void usage(FILE *f) {
    fprintf(f, "gflow — training framework for Grassmann sequence models\n\n"
               "usage: gflow <command> [options]   (gflow <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nexit codes: 0 success, 1 runtime error (message names the file/line/key/tensor), 2 usage error\n");
}

int main(int argc, char **argv) {
    /* Past a file-size limit (ulimit -f) the kernel's default for SIGXFSZ kills the process
     * mid-write, leaving a .tmp and no message. Ignored, the write fails with EFBIG and the
     * writer's error path reports the file and removes its .tmp. */
    signal(SIGXFSZ, SIG_IGN);
    /* libgomp reads OMP_WAIT_POLICY and OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, at load
     * time. Their defaults spin: idle OpenMP workers burn the cores OpenBLAS's threads need, and
     * OpenBLAS's workers spin 2^28 cycles after every GEMM while gflow's OpenMP loops want the
     * cores. Passive OpenMP measured ~30 % less CPU per step on 2 busy cores; a 2^4-cycle BLAS
     * timeout a further ~10 % less CPU and 5–10 % more tokens/s (docs/performance.md). Set what
     * the user did not, and re-exec once so the runtimes see it. */
    int set = 0;
    if (!getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "passive", 1) == 0) set = 1;
    if (!getenv("OPENBLAS_THREAD_TIMEOUT") && setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0) set = 1;
    /* OpenBLAS below this CPU (gf_blas_better_core): its kernel choice too is made at load */
    const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : gf_blas_better_core();
    if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0) set = 1;
    if (set) {
        execv("/proc/self/exe", argv);
        /* exec failed: carry on with the defaults */
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? GF_EXIT_USAGE : GF_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("gflow %s\nbuild: %s\noptions: %s\nbf16: %s\nattention: %s\n", gf_version(), gf_build_describe(),
               gf_build_options(), gf_gemm_bf16_path(), gf_attention_products());
        return GF_EXIT_OK;
    }
    const char *gb = getenv("GF_GEMM_BF16"); /* src/ops/gemm.c reads it at each product */
    if (gb && strcmp(gb, "blas") && strcmp(gb, "dnnl")) {
        fprintf(stderr, "gflow: environment variable GF_GEMM_BF16 is '%s': blas or dnnl (or unset)\n", gb);
        return GF_EXIT_USAGE;
    }
    /* N copies of any other command would each write the same outputs */
    if (gf_dist_launcher_size() > 1 && strcmp(argv[1], "train") && strcmp(argv[1], "bench")) {
        fprintf(stderr, "gflow %s: started by an MPI launcher with %d ranks; only `train` and `bench` run data-parallel. "
                "Run it without mpirun\n", argv[1], gf_dist_launcher_size());
        return GF_EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gflow: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return GF_EXIT_USAGE;
}
