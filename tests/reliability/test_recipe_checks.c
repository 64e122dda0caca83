/* test_recipe_checks.c — recipe values that parse but cannot mean what they say are refused at
 * parse time, through the real `gflow` binary, with the first stderr line naming file:line (or
 * the --set option) and the key (issue 20 items 9, 10, 13, 20): NUL bytes in a line, run names
 * that are not one path component, offsets that never pair, sizes beyond the stated limits,
 * floats that underflow, and model constraints on a key left at its default. */
#include "gf_test.h"
#include "rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct recipe_case {
    const char *text;   /* appended to "[run]\nbase = BASE\n" (so its first line is line 3) */
    const char *set;    /* or a --set on the base recipe (text NULL) */
    const char *needle1, *needle2; /* both on the first stderr line */
} recipe_case;

/* `gflow train` on bad.ini (n bytes of text after the base line) or on the base recipe with one
 * --set: exit 1, one stderr line holding both needles. */
static void check_case(const recipe_case *c, size_t n) {
    char bad[800], text[2048];
    snprintf(bad, sizeof bad, "%s/../checks.ini", rel_runs_dir());
    /* one step at most, should a case be accepted (before its fix) */
    const char *args[] = {"train", bad, "--quiet", "--stop-after", "1", NULL, NULL, NULL};
    if (c->text) {
        int k = snprintf(text, sizeof text, "[run]\nbase = %s\n", rel_base_recipe());
        memcpy(text + k, c->text, n);
        gf_test_write_file(bad, text, (size_t)k + n);
    } else {
        args[1] = rel_base_recipe();
        args[5] = "--set";
        args[6] = c->set;
    }
    rel_result res;
    rel_gflow(&res, 0, args);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.first, c->needle1) && strstr(res.first, c->needle2),
             "%s%.60s: exit %d (signal %d), want 1 and one line with '%s' and '%s': %s", c->text ? "" : "--set ",
             c->text ? c->text : c->set, res.exit_code, res.signal, c->needle1, c->needle2, res.err);
}

static void check_cases(const recipe_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) check_case(&cases[i], cases[i].text ? strlen(cases[i].text) : 0);
}

/* Item 13: a NUL byte ends the C string inih sees, so "d_model = 64\0 junk" read as 64. */
GF_TEST(unit, rel_recipe_nul_byte_refused) {
    static const char t1[] = "[model]\nd_model = 64\0 junk\n";
    static const char t2[] = "[model]\nd_model = 32\n[train]\0\nepochs = 2\n";
    recipe_case c1 = {t1, NULL, "checks.ini:4", "NUL"}, c2 = {t2, NULL, "checks.ini:5", "NUL"};
    check_case(&c1, sizeof t1 - 1);
    check_case(&c2, sizeof t2 - 1);
    /* ablation files share the line reader */
    char abl[800];
    snprintf(abl, sizeof abl, "%s/../nul-ablation.ini", rel_runs_dir());
    static const char a[] = "[ablation]\nname = nul\nbase = base.ini\n[variant v]\nmodel.r = 4\0 junk\n";
    gf_test_write_file(abl, a, sizeof a - 1);
    const char *args[] = {"ablate", abl, "--dry-run", NULL};
    rel_result res;
    rel_gflow(&res, 0, args);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, "nul-ablation.ini:5") && strstr(res.err, "NUL"),
             "ablation file with a NUL byte: exit %d: %s", res.exit_code, res.err);
}

/* Issue 35 item 1: a recipe is read with a size limit and refused at its first bad line, so
 * `gflow train /dev/zero` (a NUL line without end) and /dev/urandom (a NUL or a syntax error on
 * an early line, then more forever) stop at once instead of reading and growing forever. */
static void check_bounded(const char *cmd, const char *path, const char *needle) {
    const char *args[] = {cmd, path, "--quiet", cmd[0] == 'a' ? "--dry-run" : "--stop-after", cmd[0] == 'a' ? NULL : "1",
                          NULL};
#if defined(__SANITIZE_ADDRESS__) /* ASan reserves terabytes of address space: the deadline alone */
    rel_limits lim = {.seconds = 30};
#else
    rel_limits lim = {.as_bytes = (int64_t)4 << 30, .seconds = 30};
#endif
    rel_result res;
    rel_gflow_limited(&res, &lim, args);
    char want[900];
    snprintf(want, sizeof want, "%s:", path);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, want) && strstr(res.err, needle),
             "gflow %s %s: exit %d (signal %d), want 1 and one line naming '%s' and '%s': %.300s", cmd, path,
             res.exit_code, res.signal, want, needle, res.err);
}

GF_TEST(unit, rel_recipe_read_is_bounded) {
    check_bounded("train", "/dev/zero", "NUL");
    check_bounded("train", "/dev/urandom", "");
    check_bounded("ablate", "/dev/zero", "NUL");
    char p[800];
    snprintf(p, sizeof p, "%s/../long-line.ini", rel_runs_dir());
    size_t n = 100000;
    char *t = malloc(2 * 1024 * 1024 + 16);
    GF_REQUIRE(t != NULL, "malloc");
    memset(t, '#', n); /* a comment line, harmless but for its length */
    t[n] = '\n';
    gf_test_write_file(p, t, n + 1);
    check_bounded("train", p, "long-line.ini:1: line longer than 65536 bytes");
    snprintf(p, sizeof p, "%s/../huge.ini", rel_runs_dir());
    for (size_t i = 0; i < 2 * 1024 * 1024; i += 8) memcpy(t + i, "# line.\n", 8);
    gf_test_write_file(p, t, 2 * 1024 * 1024);
    check_bounded("train", p, "huge.ini:131073: file larger than 1 MiB");
    free(t);
}

/* Item 10: run.name is one path component; "../x" would write beside out_dir, "/x" under it. */
GF_TEST(unit, rel_run_name_one_component) {
    static const recipe_case cases[] = {
        {"[run]\nname = ../escaped-name\n", NULL, "checks.ini:4", "[run] name"},
        {"[run]\nname = /tmp/abs-name\n", NULL, "checks.ini:4", "[run] name"},
        {"[run]\nname = a/b\n", NULL, "checks.ini:4", "[run] name"},
        {"[run]\nname = ..\n", NULL, "checks.ini:4", "[run] name"},
        {"[run]\nname = .\n", NULL, "checks.ini:4", "[run] name"},
        {NULL, "run.name=../escaped-name", "--set run.name=../escaped-name", "[run] name"},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
    char p[900];
    snprintf(p, sizeof p, "%s/../escaped-name", rel_runs_dir());
    GF_CHECK(access(p, F_OK) != 0, "%s was created", p);
}

/* Item 9: an offset >= seq_len never pairs (t - δ < 0 for every position of a window), so a
 * layer whose offsets all are that large has no mixing at all. */
GF_TEST(unit, rel_offsets_that_never_pair_refused) {
    static const recipe_case cases[] = {
        {"[model]\noffsets = 16,32\n", NULL, "checks.ini:4", "[model] offsets"},  /* base seq_len 16 */
        {"[data]\nseq_len = 4\n[model]\noffsets = 4,8\n", NULL, "checks.ini:6", "[model] offsets"},
        {"[model]\noffset_schedule = 1,16\n", NULL, "checks.ini:4", "[model] offset_schedule"},
        {NULL, "model.offset_schedule=20,1", "--set model.offset_schedule=20,1", "offset_schedule"},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
    /* some offsets beyond seq_len are no-ops, not errors (documented): this trains */
    const char *ok[] = {"info", rel_base_recipe(), "--set", "model.offsets=1,2,64", NULL};
    rel_result res;
    rel_gflow(&res, 0, ok);
    GF_CHECK(res.exit_code == 0, "offsets 1,2,64 with seq_len 16: exit %d: %s", res.exit_code, res.err);
}

/* Item 20: sizes beyond what the model can hold are refused at the key; n_layers' limit is the
 * documented one; a float that underflows is "out of range", not "not a number"; a model
 * constraint on a key left at its default points at the line of the key it conflicts with. */
GF_TEST(unit, rel_recipe_limits_name_the_key) {
    static const recipe_case cases[] = {
        {"[data]\nseq_len = 1000000000\n", NULL, "checks.ini:4", "[data] seq_len"},
        {"[model]\nmax_len = 1000000000\n", NULL, "checks.ini:4", "[model] max_len"},
        {"[model]\nn_layers = 65\n", NULL, "checks.ini:4", "[model] n_layers"},
        {"[optim]\nlr = 1e-320\n", NULL, "checks.ini:4: [optim] lr", "out of range"},
        {"[optim]\nlr = 1e999\n", NULL, "checks.ini:4: [optim] lr", "out of range"},
        {"[model]\nd_model = 99999999999999999999\n", NULL, "checks.ini:4: [model] d_model", "out of range"},
        /* NLI: mix_heads (default 4) must divide C(6,2) = 15: shown at r's line */
        {"[data]\ndataset = snli\n[model]\nr = 6\n", NULL, "checks.ini:6", "mix_heads"},
        /* transformer: heads (default 4) must divide d_model = 30: shown at d_model's line */
        {"[model]\nfamily = transformer\nd_model = 30\n", NULL, "checks.ini:5", "heads"},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
    /* the limits are in docs/recipe-keys.md (gflow info --keys) */
    char out[900], cmd[2000];
    snprintf(out, sizeof out, "%s/../keys.md", rel_runs_dir());
    snprintf(cmd, sizeof cmd, "'%s' info --keys > '%s'", rel_gflow_exe(), out);
    GF_REQUIRE(system(cmd) == 0, "%s", cmd);
    char *md = gf_test_slurp(out, NULL);
    GF_REQUIRE(md, "keys.md");
    const char *rows[] = {"| `n_layers` | int | **required** | >= 1, <= 64 |", "| `seq_len` | int | `128` | >= 1, <= 65536 |"};
    for (int i = 0; i < 2; i++) GF_CHECK(strstr(md, rows[i]) != NULL, "gflow info --keys lacks '%s'", rows[i]);
    free(md);
}
