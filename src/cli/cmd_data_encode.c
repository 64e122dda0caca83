/* cmd_data_encode.c — `gflow data encode RECIPE|RUN_DIR|CHECKPOINT` (parsed, with its --help, by
 * cmd_data.c): the token ids of each line of standard input, as the recipe's (or the run's)
 * tokenizer makes them, so a user sees what the model sees. */
#include "cli.h"
#include "gflow/checkpoint.h"
#include "gflow/session.h"
#include "gflow/train.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* the tokenizer of a recipe (with --set) or of a run directory or checkpoint (checked against it) */
static gf_status open_tok(const char *target, const char *const *sets, int64_t n_sets, gf_tokenizer **tok) {
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

int gf_cmd_data_encode(const gf_cli_spec *spec, const char *target, const char *const *sets, int64_t n_sets) {
    struct stat sb;
    if (n_sets && stat(target, &sb) == 0 && (S_ISDIR(sb.st_mode) || strstr(target, ".ckpt")))
        return gf_cli_usage(spec, "encode: --set applies to a recipe, not to the run '%s' (its checkpoint holds its "
                            "recipe)", target);
    gf_tokenizer *tok = NULL;
    gf_status st = open_tok(target, sets, n_sets, &tok);
    if (!st) st = encode_stdin(tok);
    gf_tokenizer_free(tok);
    return st ? gf_cli_fail(st) : GF_EXIT_OK;
}
