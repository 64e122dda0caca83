/* test_util.c — see test_util.h. */
#include "test_util.h"
#include "gf_test.h"
#include "gflow/rng.h"
#include "gflow/train.h"
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef GF_SOURCE_ROOT
#define GF_SOURCE_ROOT "."
#endif

const char *gf_test_source_root(void) {
    const char *e = getenv("GF_SOURCE_ROOT");
    return e && *e ? e : GF_SOURCE_ROOT;
}

char *gf_test_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz < 0) { fclose(f); return NULL; }
    char *b = malloc((size_t)sz + 1);
    size_t got = b ? fread(b, 1, (size_t)sz, f) : 0;
    fclose(f);
    if (!b) return NULL;
    b[got] = 0;
    if (n) *n = got;
    return b;
}

int gf_test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n;
}

int gf_test_write_text(const char *path, const char *text) { return gf_test_write_file(path, text, strlen(text)); }

void gf_test_write_corpus(const char *path, int lines, unsigned seed) {
    static const char *subj[] = {"the cat", "a dog", "the old man", "my sister", "the bird", "a child"};
    static const char *verb[] = {"sees", "likes", "finds", "follows", "hears"};
    static const char *obj[] = {"the ball", "a house", "the river", "some bread", "the moon", "a tree"};
    FILE *f = fopen(path, "w");
    if (!f) return;
    gf_rng r;
    gf_rng_seed(&r, seed);
    for (int i = 0; i < lines; i++) {
        /* drawn last word first: the order in which GCC evaluated them as one fprintf's arguments,
         * whose order C leaves unspecified (clang's build wrote another corpus), so the corpus and
         * the counts the tests expect of it stay what they were */
        const char *o2 = obj[gf_rng_below(&r, 6)], *v2 = verb[gf_rng_below(&r, 5)], *s2 = subj[gf_rng_below(&r, 6)];
        const char *o1 = obj[gf_rng_below(&r, 6)], *v1 = verb[gf_rng_below(&r, 5)], *s1 = subj[gf_rng_below(&r, 6)];
        fprintf(f, " %s %s %s . and then %s %s %s . \n", s1, v1, o1, s2, v2, o2);
    }
    fclose(f);
}

void gf_test_write_splits(const char *dir, int train_lines, int eval_lines) {
    static const char *const split[3] = {"train", "valid", "test"};
    mkdir(dir, 0755);
    for (unsigned i = 0; i < 3; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s.txt", dir, split[i]);
        gf_test_write_corpus(p, i ? eval_lines : train_lines, i + 1);
    }
}

static int tiny(gf_recipe *r, const char *name, const char *family, long long steps, const char *device,
                const char *const *sets, int nsets) {
    char dir[600], p[700], text[4096];
    snprintf(dir, sizeof dir, "%s/data", gf_test_tmpdir());
    snprintf(p, sizeof p, "%s/train.txt", dir);
    if (access(p, F_OK) != 0) gf_test_write_splits(dir, 600, 60);
    snprintf(text, sizeof text,
             "[run]\nname = %s\nseed = 7\nout_dir = %s/runs\nthreads = 2\ndevice = %s\n"
             "[data]\ndataset = wikitext2\ndir = %s\ntrain_file = train.txt\nvalid_file = valid.txt\n"
             "test_file = test.txt\nseq_len = 16\n"
             "[tokenizer]\nkind = word\ntrain_file = train.txt\ncache_dir = %s/cache\n"
             "[model]\nfamily = %s\nn_layers = 2\nd_model = 32\nd_ff = 64\nr = 6\noffsets = 1,2,4\nheads = 4\n"
             "dropout = 0.1\n"
             "[optim]\nlr = 1e-2\nclip = 1.0\n"
             "[schedule]\nkind = cosine\nwarmup_steps = 5\nmin_lr = 1e-3\n"
             "[train]\nepochs = 50\nbatch_size = 8\nmax_steps = %lld\nlog_every = 1000\neval_every = 10\n"
             "eval_batches = 3\n",
             name, gf_test_tmpdir(), device, dir, gf_test_tmpdir(), family, steps);
    return gf_recipe_parse_text(text, "tiny.ini", sets, nsets, r);
}

int gf_test_tiny_recipe(gf_recipe *r, const char *name, const char *family, long long steps, const char *device) {
    return tiny(r, name, family, steps, device, NULL, 0);
}

int gf_test_tiny_recipe_sets(gf_recipe *r, const char *name, long long steps, const char *const *sets, int nsets) {
    return tiny(r, name, "grassmann", steps, "cpu", sets, nsets);
}

double gf_test_train_summary(const char *name, long long steps, const char *const *sets, int nsets, const char *key) {
    gf_recipe r;
    gf_train_opts o = {.quiet = 1};
    int intr = 0;
    if (gf_test_tiny_recipe_sets(&r, name, steps, sets, nsets) || gf_train_run(&r, &o, &intr)) {
        gf_test_fail(__FILE__, __LINE__, "run %s: %s", name, gf_last_error());
        return NAN;
    }
    char dir[700];
    snprintf(dir, sizeof dir, "%s/runs/%s", gf_test_tmpdir(), name);
    return gf_test_summary_value(dir, key);
}

double gf_test_summary_value(const char *dir, const char *key) {
    char p[800];
    snprintf(p, sizeof p, "%s/summary.tsv", dir);
    char *s = gf_test_slurp(p, NULL);
    if (!s) return NAN;
    char pat[80];
    snprintf(pat, sizeof pat, "\n%s\t", key);
    char *q = strstr(s, pat);
    double v = q ? strtod(q + strlen(pat), NULL) : NAN;
    free(s);
    return v;
}
