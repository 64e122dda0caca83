/* cmd_eval.c — `gflow eval RUN_DIR [--split valid|test] [--ckpt best|last]`. */
#include "cli.h"
#include "gflow/train.h"
#include <math.h>
#include <string.h>

enum { O_SPLIT = 1, O_CKPT };
static const gf_cli_opt k_opts[] = {
    {O_SPLIT, "split", "valid|test", "the split to evaluate (default: the recipe's [eval] split)"},
    {O_CKPT, "ckpt", "best|last", "the run directory's checkpoint to load (default best)"},
    {0},
};
static const gf_cli_spec k_spec = {
    "eval",
    "RUN_DIR|CHECKPOINT [--split valid|test] [--ckpt best|last]",
    "  Evaluates a checkpoint (default: RUN_DIR/best.ckpt) on a split (default: the recipe's\n"
    "  [eval] split). Language models: loss, perplexity per model token and per word (total NLL\n"
    "  over the split / its word count with one <eos> per line). NLI: accuracy, per-class\n"
    "  accuracy, confusion matrix.\n",
    k_opts,
    NULL,
};

int gf_cmd_eval(int argc, char **argv) {
    const char *dir = NULL, *split = NULL, *which = "best";
    gf_cli p;
    gf_cli_begin(&p, &k_spec, argc, argv);
    const char *v;
    int k;
    while ((k = gf_cli_next(&p, &v)) > 0) {
        if (k == O_SPLIT) {
            split = v;
            gf_split sp;
            /* the train split has no word count (no per-word perplexity) and is not a held-out score */
            if (gf_split_parse(split, &sp) || sp == GF_SPLIT_TRAIN)
                return gf_cli_usage(&k_spec, "--split '%s': expected valid or test", split);
        } else if (k == O_CKPT && !gf_arg_ckpt(&k_spec, v, &which)) {
            return GF_EXIT_USAGE;
        }
    }
    if (k < 0) return gf_cli_exit(k);
    if (!gf_cli_args(&p, 1, 1, "the run directory or checkpoint")) return GF_EXIT_USAGE;
    dir = p.pos[0];
    gf_eval_result res;
    gf_status st = gf_eval_run_dir(dir, which, split, &res);
    if (st) return gf_cli_fail(st);
    if (!isnan(res.acc)) {
        static const char *lab[3] = {"entailment", "neutral", "contradiction"};
        printf("split %s: %lld examples, loss %.4f, accuracy %.4f\n", split ? split : "(recipe)",
               (long long)res.n_tokens, res.loss, res.acc);
        printf("%-14s %8s | confusion (rows gold, columns predicted)\n", "class", "acc");
        for (int g = 0; g < 3; g++) {
            int64_t n = res.confusion[g][0] + res.confusion[g][1] + res.confusion[g][2];
            char acc[16] = "-"; /* a class the split lacks has no accuracy (not "nan") */
            if (n) snprintf(acc, sizeof acc, "%.4f", (double)res.confusion[g][g] / (double)n);
            printf("%-14s %8s | %6lld %6lld %6lld\n", lab[g], acc, (long long)res.confusion[g][0],
                   (long long)res.confusion[g][1], (long long)res.confusion[g][2]);
        }
    } else {
        printf("split %s: %lld predicted tokens, loss %.4f, perplexity %.2f per token", split ? split : "(recipe)",
               (long long)res.n_tokens, res.loss, res.ppl);
        if (!isnan(res.ppl_word)) printf(", %.2f per word", res.ppl_word); /* none without a word count */
        printf("\n");
    }
    return GF_EXIT_OK;
}
