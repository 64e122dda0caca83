/* cmd_export.c — `gflow export RUN_DIR|CHECKPOINT OUT.safetensors`: weights for PyTorch users. */
#include "cli.h"
#include "gflow/fs.h"
#include "gflow/session.h"
#include <stdlib.h>
#include <string.h>

static void help(void) {
    printf("usage: gflow export RUN_DIR|CHECKPOINT OUT.safetensors [--ckpt best|last]\n\n"
           "  Writes the model's weights in the safetensors format (8-byte header length, JSON header,\n"
           "  little-endian float32 blobs) under PyTorch-style names (tok_emb.weight,\n"
           "  blocks.0.mix.w_red.weight, ...; Linear weights [out, in]). The metadata holds the\n"
           "  resolved recipe. tools/torch_ref.py builds the same model and loads these names. NLI runs\n"
           "  export their classifier's tensors (tok_emb.weight, blocks.0.mix.w_plu.weight, cls.fc1.weight,\n"
           "  ...; gflow/nli.h) with format gflow-nli-1.\n");
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
    gf_session s;
    memset(&s, 0, sizeof s);
    gf_status st = gf_run_ckpt_path(src, which, path, sizeof path);
    const char *inputs[] = {path, src};
    if (!st) st = gf_output_check(out, inputs, 2);
    if (!st) st = gf_session_from_ckpt(&s, path);
    if (!st) st = gf_session_export(&s, out);
    if (st) { gf_session_close(&s); return gf_cli_fail(st); }
    printf("exported %lld parameters (%lld tensors) from %s to %s\n", (long long)s.params->n,
           (long long)s.params->n_items, path, out);
    gf_session_close(&s);
    return GF_EXIT_OK;
}
