/* cmd_export.c — `gflow export RUN_DIR|CHECKPOINT OUT.safetensors`: weights for PyTorch users. */
#include "cli.h"
#include "gflow/fs.h"
#include "gflow/session.h"
#include <stdlib.h>
#include <string.h>

enum { O_CKPT = 1 };
static const gf_cli_opt k_opts[] = {
    {O_CKPT, "ckpt", "best|last", "the run directory's checkpoint to export (default best)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "export",
    "RUN_DIR|CHECKPOINT OUT.safetensors [--ckpt best|last]",
    "  Writes the model's weights in the safetensors format (8-byte header length, JSON header,\n"
    "  little-endian float32 blobs) under PyTorch-style names (tok_emb.weight,\n"
    "  blocks.0.mix.w_red.weight, ...; Linear weights [out, in]). The metadata holds the\n"
    "  resolved recipe. tools/torch_ref.py builds the same model and loads these names. NLI runs\n"
    "  export their classifier's tensors (tok_emb.weight, blocks.0.mix.w_plu.weight, cls.fc1.weight,\n"
    "  ...; gflow/nli.h) with format gflow-nli-1.\n",
    k_opts,
    NULL,
};

int gf_cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *which = "best";
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0)
        if (k == O_CKPT && !gf_arg_ckpt(&k_spec, v, &which)) return GF_EXIT_USAGE;
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&p, 2, 2, "the checkpoint and the output file (RUN_DIR|CHECKPOINT OUT.safetensors)")) return GF_EXIT_USAGE;
    src = p.pos[0];
    out = p.pos[1];
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
