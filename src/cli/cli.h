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

/* print "gflow: <message>" for a failed status and return GF_EXIT_ERROR */
static inline int gf_cli_fail(gf_status s) {
    fprintf(stderr, "gflow: error (%s): %s\n", gf_status_name(s), gf_last_error());
    return GF_EXIT_ERROR;
}
#endif
