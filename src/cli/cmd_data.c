/* cmd_data.c — `gflow data fetch wikitext2|snli [DEST]`: runs datasets/fetch.sh. */
#include "cli.h"
#include <string.h>
#include <unistd.h>

#ifndef GF_SOURCE_ROOT
#define GF_SOURCE_ROOT "."
#endif

static void help(void) {
    printf("usage: gflow data fetch wikitext2|snli [DEST]\n\n"
           "  Copies the data set from $GFLOW_DATA_MIRROR when set, else downloads it from its\n"
           "  canonical URL, and verifies every file's sha256 (datasets/*.md list them). DEST defaults\n"
           "  to datasets/data. A file that fails its checksum is rejected and not installed.\n");
}

int gf_cmd_data(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { help(); return GF_EXIT_OK; }
    if (argc < 3 || argc > 4 || strcmp(argv[1], "fetch") != 0) { help(); return GF_EXIT_USAGE; }
    if (strcmp(argv[2], "wikitext2") && strcmp(argv[2], "snli")) {
        fprintf(stderr, "gflow data fetch: unknown data set '%s' (wikitext2 or snli)\n", argv[2]);
        return GF_EXIT_USAGE;
    }
    char script[1024];
    snprintf(script, sizeof script, "%s/datasets/fetch.sh", GF_SOURCE_ROOT);
    if (access(script, X_OK) != 0) { fprintf(stderr, "gflow data: %s not found or not executable\n", script); return GF_EXIT_ERROR; }
    fflush(stdout);
    char *args[5] = {script, argv[2], argc == 4 ? argv[3] : NULL, NULL, NULL};
    execv(script, args);
    perror("gflow data: exec");
    return GF_EXIT_ERROR;
}
