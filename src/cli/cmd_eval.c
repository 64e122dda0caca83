/* cmd_eval.c — `gflow eval RUN_DIR [--split valid|test] [--ckpt best|last]`. */
#include "cli.h"
#include "gflow/train.h"
#include <math.h>
#include <string.h>

static void help(void) {
    printf("usage: gflow eval RUN_DIR|CHECKPOINT [--split valid|test] [--ckpt best|last]\n\n"
           "  Evaluates a checkpoint (default: RUN_DIR/best.ckpt) on a split (default: the recipe's\n"
           "  [eval] split). Language models: loss, perplexity per model token and per word (total NLL\n"
           "  over the split / its word count with one <eos> per line). NLI: accuracy, per-class\n"
           "  accuracy, confusion matrix.\n");
}

int gf_cmd_eval(int argc, char **argv) {
    const char *dir = NULL, *split = NULL, *which = "best";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return GF_EXIT_OK; }
        else if (!strcmp(argv[i], "--split") && i + 1 < argc) {
            split = argv[++i];
            gf_split sp;
            /* the train split has no word count (no per-word perplexity) and is not a held-out score */
            if (gf_split_parse(split, &sp) || sp == GF_SPLIT_TRAIN) {
                fprintf(stderr, "gflow eval: --split '%s': expected valid or test\n", split);
                return GF_EXIT_USAGE;
            }
        }
        else if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) {
            which = argv[++i];
            if (strcmp(which, "best") && strcmp(which, "last")) { fprintf(stderr, "gflow eval: --ckpt must be best or last\n"); return GF_EXIT_USAGE; }
        }
        else if (argv[i][0] == '-') { fprintf(stderr, "gflow eval: unknown option '%s'\n", argv[i]); return GF_EXIT_USAGE; }
        else if (!dir) dir = argv[i];
        else { fprintf(stderr, "gflow eval: unexpected argument '%s'\n", argv[i]); return GF_EXIT_USAGE; }
    }
    if (!dir) { help(); return GF_EXIT_USAGE; }
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
