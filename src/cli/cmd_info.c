/* cmd_info.c — `gflow info RECIPE|RUN_DIR|CHECKPOINT`: model size and per-tensor table. */
#include "cli.h"
#include "gflow/session.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(void) {
    printf("usage: gflow info RECIPE|RUN_DIR|CHECKPOINT [--set k=v]... [--recipe]\n"
           "       gflow info --keys      (every recipe key, as docs/recipe-keys.md)\n\n"
           "  Prints the model's parameter count, a per-tensor table (name, kind, shape, count) and\n"
           "  forward FLOPs per token. With --recipe, also the fully resolved recipe. For a recipe\n"
           "  the vocabulary is [tokenizer] vocab_size (spm); a checkpoint records its own.\n");
}

int gf_cmd_info(int argc, char **argv) {
    const char *target = NULL;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int64_t n_sets = 0;
    int show_recipe = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); free(sets); return GF_EXIT_OK; }
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
        else if (!strcmp(argv[i], "--recipe")) show_recipe = 1;
        else if (!strcmp(argv[i], "--keys")) { gf_recipe_write_keys_md(stdout); free(sets); return GF_EXIT_OK; }
        else if (argv[i][0] == '-') { fprintf(stderr, "gflow info: unknown option '%s'\n", argv[i]); free(sets); return GF_EXIT_USAGE; }
        else if (!target) target = argv[i];
        else { fprintf(stderr, "gflow info: unexpected argument '%s'\n", argv[i]); free(sets); return GF_EXIT_USAGE; }
    }
    if (!target) { help(); free(sets); return GF_EXIT_USAGE; }
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
        if (!st) { /* the table and the sizes need no GPU: the model on the host, the recipe as given */
            const gf_device dev = r.run.device;
            r.run.device = GF_DEV_CPU;
            st = gf_session_open_model(&s, &r, r.tokenizer.vocab_size, 0);
            s.r.run.device = dev;
        }
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
