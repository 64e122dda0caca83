/* cmd_probe.c — gflow probe KIND RUN_DIR [RUN_DIR_B]: geometry probes (being written, issue 11) */
#include "cli.h"
int gf_cmd_probe(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "gflow probe: not in this build yet (issue 11)\n");
    return GF_EXIT_ERROR;
}
