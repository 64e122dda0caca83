/* test_util.h — file plumbing shared by the tests: read a whole file, write bytes or text, and
 * the small synthetic corpus the training, ablation and reliability tests train on. */
#ifndef GF_TEST_UTIL_H
#define GF_TEST_UTIL_H

#include <stddef.h>

#include "gflow/recipe.h"

/* the source tree the fixtures are read from: $GF_SOURCE_ROOT when set (a test binary run from a
 * moved tree, as on the GPU machine), else the tree this runner was built from */
const char *gf_test_source_root(void);
/* malloc'd contents of path, NUL-terminated, or NULL; *n (when non-NULL) gets the size */
char *gf_test_slurp(const char *path, size_t *n);
/* 1 when path now holds exactly the n bytes of data (created or truncated), else 0 */
int gf_test_write_file(const char *path, const void *data, size_t n);
/* gf_test_write_file of a NUL-terminated text */
int gf_test_write_text(const char *path, const char *text);
/* `lines` sentences of a small grammar (learnable structure), one per line, from `seed` */
void gf_test_write_corpus(const char *path, int lines, unsigned seed);
/* dir (created) with train.txt of train_lines and valid.txt, test.txt of eval_lines such
 * sentences (seeds 1, 2, 3) */
void gf_test_write_splits(const char *dir, int train_lines, int eval_lines);
/* the training tests' tiny recipe (2 layers, d 32, word tokenizer, seq_len 16, batch 8, cosine,
 * eval every 10 steps) on the splits of gf_test_write_splits under the test's tmpdir/data
 * (written once), named `name`, family `family`, at most `steps` steps, on `device` ("cpu",
 * "cuda"), runs in tmpdir/runs */
int gf_test_tiny_recipe(gf_recipe *r, const char *name, const char *family, long long steps, const char *device);
/* gf_test_tiny_recipe (grassmann, cpu) with "section.key=value" overrides on top */
int gf_test_tiny_recipe_sets(gf_recipe *r, const char *name, long long steps, const char *const *sets, int nsets);
/* train that recipe to its end and return `key` of its summary.tsv (NAN, test failed, when it fails) */
double gf_test_train_summary(const char *name, long long steps, const char *const *sets, int nsets, const char *key);
/* the value of `key` in run directory dir's summary.tsv, NAN when absent */
double gf_test_summary_value(const char *dir, const char *key);

#endif
