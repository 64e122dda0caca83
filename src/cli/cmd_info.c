/* cmd_info.c — `gflow info RECIPE|RUN_DIR|CHECKPOINT`: model size and per-tensor table. */
#include "cli.h"
#include "gflow/train.h"
#include "../train/session.h"
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
    gf_recipe r;
    gf_lm lm;
    gf_status st;
    struct stat sb;
    int is_ckpt = stat(target, &sb) == 0 && (S_ISDIR(sb.st_mode) || strstr(target, ".ckpt"));
    if (is_ckpt) {
        char path[1100];
        st = gf_run_ckpt_path(target, S_ISDIR(sb.st_mode) ? "last" : NULL, path, sizeof path);
        if (!st) st = gf_session_model_from_ckpt(path, &r, &lm);
    } else {
        st = gf_recipe_load(target, sets, n_sets, &r);
        if (!st && r.data.dataset == GF_DS_SNLI)
            st = gf_error_set(GF_E_INVALID, "%s: NLI recipes are described by `gflow train`'s start-up table", target);
        if (!st) {
            gf_model_cfg mc;
            gf_session_model_cfg(&r, r.tokenizer.vocab_size, &mc);
            st = gf_lm_init(&lm, &mc);
        }
    }
    free(sets);
    if (st) return gf_cli_fail(st);
    printf("%-40s %-6s %-14s %12s\n", "tensor", "kind", "shape", "params");
    for (int64_t i = 0; i < lm.params.n_items; i++) {
        gf_param *p = lm.params.items[i];
        char shp[64];
        printf("%-40s %-6s %-14s %12lld\n", p->name, gf_param_kind_name(p->kind), gf_tensor_shape_str(&p->t, shp, sizeof shp),
               (long long)gf_tensor_numel(&p->t));
    }
    printf("\nmodel: %s LM, block %s, %lld layers, d_model %lld, vocab %lld\n", gf_family_name(lm.cfg.family),
           gf_block_name(lm.cfg.block), (long long)lm.cfg.n_layers, (long long)lm.cfg.d_model, (long long)lm.cfg.vocab);
    printf("parameters: %lld\n", (long long)lm.params.n);
    double f = gf_lm_flops_per_token(&lm.cfg, r.data.seq_len);
    printf("FLOPs per token at L=%lld: forward %.1f M, training step (x3) %.1f M\n", (long long)r.data.seq_len, f / 1e6,
           3 * f / 1e6);
    if (show_recipe) {
        char *text = NULL;
        if (!gf_recipe_resolved_text(&r, &text)) { printf("\n%s", text); free(text); }
    }
    gf_lm_free(&lm);
    return GF_EXIT_OK;
}
