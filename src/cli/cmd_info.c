/* cmd_info.c — `gflow info RECIPE|RUN_DIR|CHECKPOINT`: model size and per-tensor table. */
#include "cli.h"
#include "gflow/session.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { O_SET = 1, O_RECIPE, O_KEYS };
static const gf_cli_opt k_opts[] = {
    {O_SET, "set", "section.key=value", "override one recipe key (repeatable)"},
    {O_RECIPE, "recipe", NULL, "also print the fully resolved recipe"},
    {O_KEYS, "keys", NULL, "print every recipe key, as docs/recipe-keys.md, and exit"},
    {0},
};
static const gf_cli_spec k_spec = {
    "info",
    "RECIPE|RUN_DIR|CHECKPOINT [--set section.key=value]... [--recipe]\n"
    "--keys",
    "  Prints the model's parameter count, a per-tensor table (name, kind, shape, count) and\n"
    "  forward FLOPs per token. For a recipe the vocabulary is [tokenizer] vocab_size (spm); a\n"
    "  checkpoint records its own.\n",
    k_opts,
    NULL,
};

int gf_cmd_info(int argc, char **argv) {
    const char *target = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int64_t n_sets = 0;
    int show_recipe = 0, keys = 0;
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0) {
        if (k == O_SET) sets[n_sets++] = v;
        else if (k == O_RECIPE) show_recipe = 1;
        else if (k == O_KEYS) keys = 1;
    }
    if (k < 0 || !gf_cli_args(&p, keys ? 0 : 1, keys ? 0 : 1, "a recipe, run directory or checkpoint")) {
        free(sets);
        return k < 0 ? gf_cli_exit(k) : GF_EXIT_USAGE;
    }
    if (keys) { gf_recipe_write_keys_md(stdout); free(sets); return GF_EXIT_OK; }
    target = p.pos[0];
    gf_session s;
    memset(&s, 0, sizeof s);
    gf_status st;
    struct stat sb;
    int is_ckpt = stat(target, &sb) == 0 && (S_ISDIR(sb.st_mode) || strstr(target, ".ckpt"));
    if (is_ckpt) {
        char path[1100];
        st = gf_run_ckpt_path(target, S_ISDIR(sb.st_mode) ? "last" : NULL, path, sizeof path);
        if (!st) st = gf_session_from_ckpt(&s, path);
    } else {
        gf_recipe r;
        st = gf_recipe_load(target, sets, n_sets, &r);
        /* the table and the sizes need no GPU: the model on the host, the recipe as given */
        if (!st) st = gf_session_open_model(&s, &r, r.tokenizer.vocab_size, GF_SESSION_HOST);
    }
    free(sets);
    if (st) { gf_session_close(&s); return gf_cli_fail(st); }
    printf("%-40s %-6s %-14s %12s\n", "tensor", "kind", "shape", "params");
    for (int64_t i = 0; i < s.params->n_items; i++) {
        gf_param *p = s.params->items[i];
        char shp[64];
        printf("%-40s %-6s %-14s %12lld\n", p->name, gf_param_kind_name(p->kind), gf_tensor_shape_str(&p->t, shp, sizeof shp),
               (long long)gf_tensor_numel(&p->t));
    }
    s.task->describe(&s, stdout);
    if (show_recipe) {
        char *text = NULL;
        if (!gf_recipe_resolved_text(&s.r, &text)) { printf("\n%s", text); free(text); }
    }
    gf_session_close(&s);
    return GF_EXIT_OK;
}
