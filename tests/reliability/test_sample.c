/* test_sample.c — `gflow sample` through the real binary on a tiny trained run of each family:
 * the decoder's greedy text equals the recompute path's while prompt + continuation fit in
 * max_len; continuations past max_len and batched continuations (--n) are produced; --seed
 * reproduces, --top-k 1 is greedy; numeric flags are checked. */
#include "gf_test.h"
#include "rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Run `gflow sample ARGS` with stdout to out_path; returns the exit status. */
static int sample_to(const char *out_path, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' sample %s > '%s' 2>&1", rel_gflow_exe(), args, out_path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void train_tiny(const char *name, const char *family, char *run, size_t cap) {
    char sn[64], sf[64];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    snprintf(sf, sizeof sf, "model.family=%s", family);
    const char *a[] = {"train", rel_base_recipe(), "--set", sn, "--set", sf, "--set", "train.max_steps=30",
                       "--set", "model.dropout=0", "--overwrite", NULL};
    rel_result res;
    rel_gflow(&res, 0, a);
    GF_CHECK(res.exit_code == 0, "train %s: %s", name, res.err);
    snprintf(run, cap, "%s/%s", rel_runs_dir(), name);
}

/* the first n words of line k of the training text, as a prompt */
static void prompt_of(int k, int n, char *out, size_t cap) {
    char p[800];
    snprintf(p, sizeof p, "%s/train.txt", rel_data_dir());
    FILE *f = fopen(p, "r");
    char line[1024] = "";
    for (int i = 0; f && i <= k; i++)
        if (!fgets(line, sizeof line, f)) break;
    if (f) fclose(f);
    out[0] = '\0';
    char *save = NULL, *w = strtok_r(line, " \n", &save);
    for (int i = 0; w && i < n; i++, w = strtok_r(NULL, " \n", &save))
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", w);
}

GF_TEST(smoke, sample_decoder_equals_recompute_greedy) {
    const char *fams[2] = {"grassmann", "transformer"};
    for (int fi = 0; fi < 2; fi++) {
        char run[800], name[32], o1[900], o2[900], args[2048], prompt[256];
        snprintf(name, sizeof name, "sample-%s", fams[fi]);
        train_tiny(name, fams[fi], run, sizeof run);
        snprintf(o1, sizeof o1, "%s/dec.txt", run);
        snprintf(o2, sizeof o2, "%s/rec.txt", run);
        for (int k = 0; k < 6; k++) {
            prompt_of(k * 37, 1 + k % 4, prompt, sizeof prompt); /* 1..4 words, + 10 tokens <= max_len 16 */
            snprintf(args, sizeof args, "'%s' --prompt '%s' --tokens 10 --temperature 0", run, prompt);
            GF_CHECK(sample_to(o1, args) == 0, "%s: decoder sample failed", fams[fi]);
            strncat(args, " --recompute", sizeof args - strlen(args) - 1);
            GF_CHECK(sample_to(o2, args) == 0, "%s: recompute sample failed", fams[fi]);
            size_t n1 = 0;
            char *t1 = gf_test_slurp(o1, &n1);
            GF_CHECK(n1 > strlen(prompt), "%s: no continuation: %s", fams[fi], t1 ? t1 : "");
            free(t1);
            GF_CHECK(rel_files_equal(o1, o2), "%s: prompt '%s': decoder and recompute texts differ", fams[fi], prompt);
        }
        /* past max_len (the decoder re-prefills) and a batch of continuations */
        snprintf(args, sizeof args, "'%s' --prompt '%s' --tokens 50 --n 3 --temperature 0.8", run, prompt);
        GF_CHECK(sample_to(o1, args) == 0, "%s: --n 3 failed", fams[fi]);
        size_t n = 0;
        char *t = gf_test_slurp(o1, &n);
        GF_CHECK(t && strstr(t, "=== continuation 1/3 ===") && strstr(t, "=== continuation 3/3 ==="),
                 "%s: --n 3 output: %s", fams[fi], t ? t : "");
        free(t);
    }
}

GF_TEST(smoke, sample_numeric_flags_checked) {
    char run[800], out[900];
    train_tiny("sample-flags", "grassmann", run, sizeof run);
    snprintf(out, sizeof out, "%s/flags.txt", run);
    const char *bad[] = {"--temperature nan", "--temperature inf", "--temperature -1", "--tokens 2147483647",
                         "--tokens 0", "--tokens 5x", "--n 0", "--n 5000", "--top-k -1", "--seed abc",
                         "--n 2 --recompute"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[1200];
        snprintf(args, sizeof args, "'%s' --prompt 'the' %s", run, bad[i]);
        GF_CHECK(sample_to(out, args) == 2, "'%s' must be a usage error", bad[i]);
        size_t n = 0;
        char *t = gf_test_slurp(out, &n);
        GF_CHECK(t && strstr(t, "gflow sample: ") == t && strchr(t, '\n') == t + n - 1, "'%s': one line: %s", bad[i],
                 t ? t : "");
        free(t);
    }
}

/* --seed makes sampling reproducible and different seeds differ; --top-k 1 keeps only the most
 * likely token, so at any temperature it is the greedy (--temperature 0) text */
GF_TEST(smoke, sample_seed_and_top_k) {
    char run[700], o[3][800], args[1400];
    train_tiny("sample-seed", "grassmann", run, sizeof run);
    for (int i = 0; i < 3; i++) snprintf(o[i], sizeof o[i], "%s/s%d.txt", run, i);
    static const char *const opts[3] = {"--seed 7", "--seed 7", "--seed 8"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "'%s' --prompt 'the' --tokens 40 --temperature 2 %s", run, opts[i]);
        GF_CHECK(sample_to(o[i], args) == 0, "sample %s failed", opts[i]);
    }
    GF_CHECK(rel_files_equal(o[0], o[1]), "--seed 7 twice gave different texts");
    GF_CHECK(!rel_files_equal(o[0], o[2]), "--seed 7 and --seed 8 gave the same 40 tokens at temperature 2");
    snprintf(args, sizeof args, "'%s' --prompt 'the' --tokens 20 --temperature 0", run);
    GF_CHECK(sample_to(o[0], args) == 0, "greedy sample failed");
    snprintf(args, sizeof args, "'%s' --prompt 'the' --tokens 20 --temperature 2 --top-k 1 --seed 3", run);
    GF_CHECK(sample_to(o[1], args) == 0, "--top-k 1 sample failed");
    GF_CHECK(rel_files_equal(o[0], o[1]), "--top-k 1 at temperature 2 is not the greedy text");
}
