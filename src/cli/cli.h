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

/* print "gflow: <message>" for a failed status and return GF_EXIT_ERROR */
static inline int gf_cli_fail(gf_status s) {
    fprintf(stderr, "gflow: error (%s): %s\n", gf_status_name(s), gf_last_error());
    return GF_EXIT_ERROR;
}
#endif
