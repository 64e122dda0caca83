/* cmd_probe.c — `gflow probe KIND RUN_DIR [RUN_DIR_B] [options]`: geometry probes (gflow/probe.h). */
#include "cli.h"
#include "gflow/probe.h"
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { O_CKPT = 1, O_WINDOWS, O_SEED, O_PAIRS, O_NULL_SAMPLES, O_POINTS, O_LANCZOS, O_TOP_K, O_HUTCHINSON,
       O_REL_STEP, O_BLOCKS, O_OUT, O_NO_PLOT, O_REPLOT, O_QUIET };
static const gf_cli_opt k_opts[] = {
    {O_CKPT, "ckpt", "best|last", "checkpoint to load (default best)"},
    {O_WINDOWS, "windows", "N", "validation windows (default: curvature 256, pca 64, hessian 2 = batch)"},
    {O_SEED, "seed", "S", "window choice, null models, random vectors (default 1)"},
    {O_PAIRS, "pairs", "FILE", "curvature: more prompt pairs, one 'prompt A<TAB>prompt B' per line\n"
                               "('#' comments); the prompts differ in exactly one word, not the last"},
    {O_NULL_SAMPLES, "null-samples", "N", "curvature: random-direction draws per layer (default 20000)"},
    {O_POINTS, "points", "N", "pca: tokens per (layer, branch) in the scatter plots (default 400)"},
    {O_LANCZOS, "lanczos-steps", "N", "hessian: Lanczos steps (default 16)"},
    {O_TOP_K, "top-k", "K", "hessian: eigenvalues reported per block (default 3)"},
    {O_HUTCHINSON, "hutchinson", "N", "hessian: Rademacher samples for the trace (default 8; 0 = none)"},
    {O_REL_STEP, "rel-step", "E", "hessian: finite-difference step relative to the block norm (default 1e-3)"},
    {O_BLOCKS, "blocks", "LIST", "hessian: only blocks whose name contains one of these comma-separated\n"
                                 "strings (names: tok_emb, pos_emb, L0.red, L0.plu, L0.gate, L0.q, L0.k,\n"
                                 "L0.v, L0.o, L0.ffn, ...)"},
    {O_OUT, "out", "DIR", "where the two-run overlay goes (default RUN_DIR)"},
    {O_NO_PLOT, "no-plot", NULL, "tables only, no gnuplot"},
    {O_REPLOT, "replot", NULL, "only redraw the plots (and overlay) from the tables already there"},
    {O_QUIET, "quiet", NULL, "no progress on stderr"},
    {0},
};
static const gf_cli_spec k_spec = {
    "probe",
    "KIND RUN_DIR [RUN_DIR_B] [options]",
    "  Geometry probes of trained language models (NLI runs are refused: no token paths over\n"
    "  text windows to follow). Each writes RUN_DIR/probe-KIND.tsv (+ side\n"
    "  tables) and RUN_DIR/probe-KIND.png. With two run directories both are probed and an overlay\n"
    "  probe-KIND-A-vs-B.{tsv,png} is written to --out (default RUN_DIR, the first).\n"
    "\n"
    "kinds:\n"
    "  curvature  turning angle of every token's path h_0..h_N through the blocks, per layer (mean,\n"
    "             median, quartiles) over validation windows, against two nulls: random directions\n"
    "             with the same step norms, and the token's own steps with the layers shuffled.\n"
    "             Also the contextual-edit deflection of the last token of prompt pairs that differ\n"
    "             in one context word (a built-in set plus --pairs). Side tables:\n"
    "             probe-curvature-deflection.tsv (per layer), probe-curvature-pairs.tsv (per pair).\n"
    "  pca        PCA (LAPACK ssyevr) of each layer's mixing-branch and FFN-branch outputs and hidden\n"
    "             state: explained variance and participation ratio per layer (probe-pca.tsv); a\n"
    "             joint 2-D/3-D scatter coloured by layer (probe-pca.png, -3d.png); the learned\n"
    "             position table's PCA (probe-pca-pos.*); hidden-state norm by position (-norm.*).\n"
    "  hessian    per parameter block (each layer's Grassmann w_red / w_plu / w_gate or attention\n"
    "             Q / K / V / O, its FFN, tok_emb, pos_emb): top-k Hessian eigenvalues of the loss on\n"
    "             a fixed validation batch by Lanczos (LAPACK dstev) and a Hutchinson trace, from\n"
    "             Hessian-vector products by central differences of gradients (step = --rel-step x\n"
    "             the block's norm, checked against twice the step and changed when the two\n"
    "             disagree by more than 1 %: columns eps, fd_check).\n",
    k_opts,
    NULL,
};

/* The int64_t numeric options, their bounds and fields (--seed and --rel-step are parsed apart). */
static const struct { int key; const char *name; long long lo, hi; size_t off; } k_ints[] = {
    {O_WINDOWS, "--windows", 1, 1000000000, offsetof(gf_probe_opts, windows)},
    {O_NULL_SAMPLES, "--null-samples", 0, 1000000000, offsetof(gf_probe_opts, null_samples)},
    {O_POINTS, "--points", 1, 1000000000, offsetof(gf_probe_opts, points)},
    {O_LANCZOS, "--lanczos-steps", 1, 1024, offsetof(gf_probe_opts, lanczos_steps)},
    {O_TOP_K, "--top-k", 1, 64, offsetof(gf_probe_opts, top_k)},
    {O_HUTCHINSON, "--hutchinson", 0, 1000000, offsetof(gf_probe_opts, hutchinson)},
};

/* Option k with value v when k is numeric: 1 parsed (gf_arg_int / gf_arg_real), 0 a usage error
 * (printed), -1 not a numeric option. */
static int numeric_opt(int k, const char *v, gf_probe_opts *o) {
    long long x = 0;
    if (k == O_SEED) {
        if (!gf_arg_int("probe", "--seed", v, 0, LLONG_MAX, &x)) return 0;
        o->seed = (uint64_t)x;
        return 1;
    }
    if (k == O_REL_STEP) return gf_arg_real("probe", "--rel-step", v, 1e-12, 0.5, &o->rel_step);
    for (size_t i = 0; i < sizeof k_ints / sizeof k_ints[0]; i++) {
        if (k != k_ints[i].key) continue;
        if (!gf_arg_int("probe", k_ints[i].name, v, k_ints[i].lo, k_ints[i].hi, &x)) return 0;
        *(int64_t *)((char *)o + k_ints[i].off) = x;
        return 1;
    }
    return -1;
}

int gf_cmd_probe(int argc, char **argv) {
    gf_probe_opts o;
    gf_probe_opts_default(&o);
    const char *kind = NULL, *dirs[2] = {NULL, NULL}, *out = NULL;
    const char *only_for[3] = {NULL, NULL, NULL}; /* an option given that belongs to curvature / pca / hessian */
    int nd = 0, replot = 0;
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k, num;
    while ((k = gf_cli_next(&p, &v)) > 0) {
        if (k == O_PAIRS || k == O_NULL_SAMPLES) only_for[0] = k == O_PAIRS ? "--pairs" : "--null-samples";
        else if (k == O_POINTS) only_for[1] = "--points";
        else if (k == O_LANCZOS || k == O_TOP_K || k == O_HUTCHINSON || k == O_REL_STEP || k == O_BLOCKS)
            only_for[2] = k == O_LANCZOS ? "--lanczos-steps" : k == O_TOP_K ? "--top-k" : k == O_HUTCHINSON ? "--hutchinson"
                        : k == O_REL_STEP ? "--rel-step" : "--blocks";
        if (k == O_NO_PLOT) o.plot = 0;
        else if (k == O_REPLOT) replot = 1;
        else if (k == O_QUIET) o.log = 0;
        else if (k == O_CKPT && !gf_arg_ckpt(&k_spec, v, &o.which)) return GF_EXIT_USAGE;
        else if (k == O_PAIRS) o.pairs_file = v;
        else if (k == O_BLOCKS) o.blocks = v;
        else if (k == O_OUT) out = v;
        else if ((num = numeric_opt(k, v, &o)) == 0) return GF_EXIT_USAGE;
    }
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&p, 2, 3, "the probe's KIND and a RUN_DIR")) return GF_EXIT_USAGE;
    kind = p.pos[0];
    for (int i = 1; i < p.n_pos; i++) dirs[nd++] = p.pos[i];
    if (replot && !o.plot) { fprintf(stderr, "gflow probe: --replot and --no-plot contradict each other\n"); return GF_EXIT_USAGE; }
    gf_status (*fn)(const char *, const gf_probe_opts *) = !strcmp(kind, "curvature") ? gf_probe_curvature
                                                         : !strcmp(kind, "pca")       ? gf_probe_pca
                                                         : !strcmp(kind, "hessian")   ? gf_probe_hessian : NULL;
    if (!fn) { fprintf(stderr, "gflow probe: unknown kind '%s' (curvature, pca, hessian)\n", kind); return GF_EXIT_USAGE; }
    static const char *kinds[3] = {"curvature", "pca", "hessian"};
    for (int k = 0; k < 3; k++)
        if (only_for[k] && strcmp(kind, kinds[k])) {
            fprintf(stderr, "gflow probe: %s is an option of the %s probe, not of %s\n", only_for[k], kinds[k], kind);
            return GF_EXIT_USAGE;
        }
    if (o.top_k > o.lanczos_steps) {
        fprintf(stderr, "gflow probe: --top-k (%lld) must not exceed --lanczos-steps (%lld)\n", (long long)o.top_k, (long long)o.lanczos_steps);
        return GF_EXIT_USAGE;
    }
    if (out && nd < 2) { fprintf(stderr, "gflow probe: --out is for the overlay of two run directories\n"); return GF_EXIT_USAGE; }
    if (out) {
        struct stat st;
        if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) { fprintf(stderr, "gflow probe: --out %s: no such directory\n", out); return GF_EXIT_ERROR; }
    }
    /* check the directories before spending minutes on the first */
    for (int r = 0; r < nd; r++) {
        struct stat st;
        if (stat(dirs[r], &st) != 0 || !S_ISDIR(st.st_mode)) { fprintf(stderr, "gflow: error (not found): %s: no such run directory\n", dirs[r]); return GF_EXIT_ERROR; }
    }
    gf_status cs = gf_probe_check_outputs(kind, dirs, nd, out, o.pairs_file);
    if (cs) return gf_cli_fail(cs);
    for (int r = 0; r < nd; r++) {
        gf_status st = replot ? gf_probe_replot(kind, dirs[r]) : fn(dirs[r], &o);
        if (st) return gf_cli_fail(st);
    }
    if (nd == 2) {
        gf_status st = gf_probe_overlay(kind, dirs[0], dirs[1], out ? out : dirs[0], &o);
        if (st) return gf_cli_fail(st);
    }
    return GF_EXIT_OK;
}
