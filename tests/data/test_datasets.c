/* test_datasets.c — the data set table (gflow/datasets.def): datasets/fetch.sh lists the same
 * files and sums, the recipe takes its names and file defaults, and text's [data] keys are
 * checked where they are set. */
#include "gf_test.h"
#include "gflow/data.h"
#include "gflow/recipe.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

GF_TEST(unit, dataset_table_matches_fetch_script) {
    int fetched = 0;
    for (int i = 0; i < GF_DS_COUNT; i++) {
        const gf_dataset_info *d = gf_dataset_get((gf_dataset)i);
        GF_REQUIRE(d && gf_dataset_by_name(d->name) == d, "row %d", i);
        if (!d->fetch) continue;
        fetched++;
        char want[4096] = "", cmd[1400];
        for (int k = 0; k < 4; k++) {
            const gf_dataset_file *f = k < 3 ? &d->split[k] : &d->extra;
            if (!f->name) continue;
            size_t n = strlen(want);
            snprintf(want + n, sizeof want - n, "%s/%s %s %d\n", d->dir, f->name, f->sha256 ? f->sha256 : "-", k < 3);
        }
        snprintf(cmd, sizeof cmd, "bash '%s/datasets/fetch.sh' --list %s", gf_test_source_root(), d->fetch);
        FILE *p = popen(cmd, "r");
        GF_REQUIRE(p, "%s", cmd);
        char got[4096];
        size_t n = fread(got, 1, sizeof got - 1, p);
        got[n] = '\0';
        GF_CHECK(pclose(p) == 0, "%s failed", cmd);
        GF_CHECK(!strcmp(got, want), "%s: datasets/fetch.sh lists\n%s\nthe table (gflow/datasets.def) has\n%s", d->name,
                 got, want);
    }
    GF_CHECK(fetched >= 2, "wikitext2 and snli are fetched");
}

static const char *k_text_recipe =
    "[run]\nname = t\n[data]\ndataset = text\n[optim]\nlr = 1e-3\n[train]\nepochs = 1\nbatch_size = 4\n"
    "[model]\nfamily = grassmann\nn_layers = 1\nd_model = 32\nd_ff = 64\nr = 4\n";

GF_TEST(unit, recipe_text_keys_name_the_key) {
    gf_recipe r;
    static const struct { const char *sets[5]; const char *needle; } bad[] = {
        {{NULL}, "[data] train_file: required for dataset = text"},
        {{"data.train_file=a.txt", NULL}, "[data] valid_file: required"},
        {{"data.file=c.txt", "data.test_fraction=0.1", NULL}, "[data] valid_fraction: must be > 0 with [data] file"},
        {{"data.file=c.txt", "data.valid_fraction=0.1", NULL}, "[data] test_fraction: must be > 0"},
        {{"data.file=c.txt", "data.valid_fraction=0.5", "data.test_fraction=0.5"}, "[data] test_fraction: valid_fraction + test_fraction = 1"},
        {{"data.file=c.txt", "data.valid_fraction=1", NULL}, "[data] valid_fraction: must be < 1"},
        {{"data.file=c.txt", "data.valid_fraction=-0.1", NULL}, "[data] valid_fraction: must be >= 0"},
        {{"data.file=c.txt", "data.train_file=a.txt", "data.valid_fraction=0.1", "data.test_fraction=0.1"},
         "[data] train_file: set beside [data] file"},
        {{"data.train_file=a", "data.valid_file=b", "data.valid_fraction=0.1"}, "[data] valid_fraction: applies to [data] file only"},
        {{"data.dataset=wikitext2", "data.file=c.txt", NULL}, "[data] file: applies to dataset = text only"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n = 0;
        while (n < 5 && bad[i].sets[n]) n++;
        GF_CHECK_ERR(gf_recipe_parse_text(k_text_recipe, "x.ini", bad[i].sets, n, &r), GF_E_INVALID, bad[i].needle);
    }
    /* three files, or one with fractions; the tokenizer's corpus is then the train split */
    const char *three[] = {"data.train_file=a.txt", "data.valid_file=b.txt", "data.test_file=/abs/c.txt"};
    GF_REQUIRE_OK(gf_recipe_parse_text(k_text_recipe, "x.ini", three, 3, &r));
    char p[4096], q[4096];
    gf_recipe_split_path(&r, GF_SPLIT_TEST, p, sizeof p);
    gf_recipe_tokenizer_path(&r, q, sizeof q);
    GF_CHECK(!strcmp(p, "/abs/c.txt") && strstr(q, "/a.txt") && !r.tokenizer.train_file[0], "paths %s, %s", p, q);
    const char *one[] = {"data.file=c.txt", "data.valid_fraction=0.1", "data.test_fraction=0.05"};
    GF_REQUIRE_OK(gf_recipe_parse_text(k_text_recipe, "x.ini", one, 3, &r));
    gf_recipe_split_path(&r, GF_SPLIT_VALID, p, sizeof p);
    gf_recipe_tokenizer_path(&r, q, sizeof q);
    GF_CHECK(strstr(p, "/text/c.txt.") && strstr(p, ".v0.1.t0.05/valid.txt") && strstr(q, ".v0.1.t0.05/train.txt"),
             "parts %s, %s", p, q);
    /* the table's defaults for a fetched data set */
    const char *wt[] = {"data.dataset=wikitext2"};
    GF_REQUIRE_OK(gf_recipe_parse_text(k_text_recipe, "x.ini", wt, 1, &r));
    GF_CHECK(!strcmp(r.data.valid_file, "wikitext-2/wiki.valid.tokens") &&
                 !strcmp(r.tokenizer.train_file, "wikitext-2/wiki.train.tokens"), "wikitext2 defaults: %s, %s",
             r.data.valid_file, r.tokenizer.train_file);
}
