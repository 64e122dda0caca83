/* cmd_export.c — `gflow export RUN_DIR|CHECKPOINT OUT.safetensors`: weights for PyTorch users. */
#include "cli.h"
#include "gflow/train.h"
#include "../train/session.h"
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: gflow export RUN_DIR|CHECKPOINT OUT.safetensors [--ckpt best|last]\n\n"
           "  Writes the model's weights in the safetensors format (8-byte header length, JSON header,\n"
           "  little-endian float32 blobs) under PyTorch-style names (tok_emb.weight,\n"
           "  blocks.0.mix.w_red.weight, ...; Linear weights [out, in]). The metadata holds the\n"
           "  resolved recipe. tools/torch_ref.py builds the same model and loads these names.\n");
}

int gf_cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *which = "best";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return GF_EXIT_OK; }
        else if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) which = argv[++i];
        else if (argv[i][0] == '-') { fprintf(stderr, "gflow export: unknown option '%s'\n", argv[i]); return GF_EXIT_USAGE; }
        else if (!src) src = argv[i];
        else if (!out) out = argv[i];
        else { fprintf(stderr, "gflow export: unexpected argument '%s'\n", argv[i]); return GF_EXIT_USAGE; }
    }
    if (!src || !out) { help(); return GF_EXIT_USAGE; }
    char path[1100];
    gf_recipe r;
    gf_lm lm;
    gf_status st = gf_run_ckpt_path(src, which, path, sizeof path);
    if (!st) st = gf_session_model_from_ckpt(path, &r, &lm);
    if (st) return gf_cli_fail(st);
    st = gf_lm_export(&lm, &r, out);
    if (st) { gf_lm_free(&lm); return gf_cli_fail(st); }
    printf("exported %lld parameters (%lld tensors) from %s to %s\n", (long long)lm.params.n,
           (long long)lm.params.n_items, path, out);
    gf_lm_free(&lm);
    return GF_EXIT_OK;
}
