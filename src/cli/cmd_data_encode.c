/* cmd_data_encode.c — `gflow data encode RECIPE|RUN_DIR|CHECKPOINT`: the token ids of each line of
 * standard input, as the recipe's (or the run's) tokenizer makes them, so a user sees what the
 * model sees. */
#include "cli.h"
#include "gflow/checkpoint.h"
#include "gflow/session.h"
#include "gflow/train.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { O_SET = 1 };
static const gf_cli_opt k_opts[] = {
    {O_SET, "set", "section.key=value", "override one recipe key (repeatable; a recipe only)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "data encode",
    "RECIPE|RUN_DIR|CHECKPOINT [--set section.key=value]...",
    "  Reads UTF-8 text on standard input and prints the token ids of each line, space-separated, a\n"
    "  line of ids per input line (an empty line for a line without tokens), with the tokenizer of the\n"
    "  recipe or of the run's checkpoint (any [tokenizer] kind; it must be the one the checkpoint was\n"
    "  trained with). The end-of-line id a language model's stream adds after each line is not printed.\n",
    k_opts,
    NULL,
};

/* the tokenizer of a recipe (with --set) or of a run directory or checkpoint (checked against it) */
static gf_status open_tok(const char *target, const char **sets, int64_t n_sets, gf_tokenizer **tok) {
    struct stat sb;
    gf_recipe r;
    if (stat(target, &sb) == 0 && (S_ISDIR(sb.st_mode) || strstr(target, ".ckpt"))) {
        char path[1100];
        GF_TRY(gf_run_ckpt_path(target, S_ISDIR(sb.st_mode) ? "last" : NULL, path, sizeof path));
        gf_ckpt_meta m;
        gf_ckpt_meta_init(&m);
        gf_status st = gf_ckpt_peek_recipe(path, &r, &m);
        if (!st) st = gf_session_open_tokenizer(&r, tok, 0);
        gf_session s; /* the check reads only the session's tokenizer */
        memset(&s, 0, sizeof s);
        s.tok = *tok;
        if (!st) st = gf_session_check_tokenizer(&s, path, &m);
        gf_ckpt_meta_free(&m);
        return st;
    }
    GF_TRY(gf_recipe_load(target, sets, n_sets, &r));
    return gf_session_open_tokenizer(&r, tok, 0);
}

static gf_status encode_stdin(const gf_tokenizer *tok) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    gf_ids ids = {0};
    gf_status st = GF_OK;
    for (long long lineno = 1; !st && (n = getline(&line, &cap, stdin)) >= 0; lineno++) {
        if (n > 0 && line[n - 1] == '\n') n--;
        ids.n = 0;
        st = gf_tokenizer_encode(tok, line, (size_t)n, &ids);
        if (st) st = gf_error_wrap(st, "<stdin>:%lld: ", lineno);
        for (int64_t i = 0; !st && i < ids.n; i++) printf(i ? " %d" : "%d", ids.data[i]);
        if (!st) putchar('\n');
    }
    if (!st && ferror(stdin)) st = gf_error_set(GF_E_IO, "<stdin>: read error");
    if (!st && (fflush(stdout) != 0 || ferror(stdout))) st = gf_error_set(GF_E_IO, "<stdout>: write error");
    free(line);
    gf_ids_free(&ids);
    return st;
}

int gf_cmd_data_encode(int argc, char **argv) {
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int64_t n_sets = 0;
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0)
        if (k == O_SET) sets[n_sets++] = v;
    if (k < 0 || !gf_cli_args(&p, 1, 1, "a recipe, run directory or checkpoint")) {
        free(sets);
        return k < 0 ? gf_cli_exit(k) : GF_EXIT_USAGE;
    }
    struct stat sb;
    if (n_sets && stat(p.pos[0], &sb) == 0 && (S_ISDIR(sb.st_mode) || strstr(p.pos[0], ".ckpt"))) {
        free(sets);
        return gf_cli_usage(&k_spec, "--set applies to a recipe, not to the run '%s' (its checkpoint holds its recipe)",
                            p.pos[0]);
    }
    gf_tokenizer *tok = NULL;
    gf_status st = open_tok(p.pos[0], sets, n_sets, &tok);
    free(sets);
    if (!st) st = encode_stdin(tok);
    gf_tokenizer_free(tok);
    return st ? gf_cli_fail(st) : GF_EXIT_OK;
}
