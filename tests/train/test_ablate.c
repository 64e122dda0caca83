/* test_ablate.c — ablation studies end to end on a tiny synthetic corpus: a hand-made base run
 * is recognised, variants run once and are skipped after, an interrupted study resumes to the
 * same metrics bytes as an uninterrupted one, seeds name their runs, --only and --dry-run do what
 * they say, malformed files name file:line before anything runs. */
#include "gf_test.h"
#include "test_util.h"
#include "gflow.h"
#include "gflow/ablate.h"
#include "gflow/train.h"
#include "reliability/rel_util.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* <tmp>/abl/base.ini (a tiny recipe) and <tmp>/abl/studies/ for ablation files */
static const char *setup(void) {
    static char root[600];
    snprintf(root, sizeof root, "%s/abl", gf_test_tmpdir());
    char p[800];
    snprintf(p, sizeof p, "%s/base.ini", root);
    if (access(p, F_OK) == 0) return root;
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/studies", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/data", root);
    gf_test_write_splits(p, 300, 40);
    char text[4096];
    snprintf(text, sizeof text,
             "[run]\nname = unused\nseed = 7\nout_dir = %s/unused\nthreads = 2\n"
             "[data]\ndataset = wikitext2\ndir = %s/data\ntrain_file = train.txt\nvalid_file = valid.txt\n"
             "test_file = test.txt\nseq_len = 16\n"
             "[tokenizer]\nkind = word\ntrain_file = train.txt\ncache_dir = %s/cache\n"
             "[model]\nfamily = grassmann\nn_layers = 1\nd_model = 16\nd_ff = 32\nr = 6\noffsets = 1,2\nheads = 2\n"
             "dropout = 0.1\n"
             "[optim]\nlr = 1e-2\nclip = 1.0\n"
             "[schedule]\nkind = cosine\nwarmup_steps = 2\nmin_lr = 1e-3\n"
             "[train]\nepochs = 50\nbatch_size = 4\nmax_steps = 10\nlog_every = 1000\neval_every = 4\n"
             "eval_batches = 2\n",
             root, root, root);
    snprintf(p, sizeof p, "%s/base.ini", root);
    gf_test_write_text(p, text);
    return root;
}

/* an ablation file <root>/studies/<file> for study `name` with variant r4 (+ extra text) */
static void study_file(char *path, size_t cap, const char *file, const char *name, const char *extra) {
    const char *root = setup();
    snprintf(path, cap, "%s/studies/%s", root, file);
    char text[2048];
    snprintf(text, sizeof text,
             "# tiny study\n[ablation]\nname = %s\nbase = ../base.ini   # relative to this file\nout_dir = %s/out\n%s\n"
             "[variant r4]\nmodel.r = 4 ; smaller\n",
             name, root, extra);
    gf_test_write_text(path, text);
}

static int same_stat(const char *path, const struct stat *before) {
    struct stat s;
    if (stat(path, &s) != 0) return 0;
    return s.st_size == before->st_size && s.st_mtim.tv_sec == before->st_mtim.tv_sec &&
           s.st_mtim.tv_nsec == before->st_mtim.tv_nsec;
}

GF_TEST(smoke, ablate_runs_skips_and_resumes) {
    const char *root = setup();
    char fa[800], fb[800], p[900], q[900];
    study_file(fa, sizeof fa, "a.ini", "a", "");
    study_file(fb, sizeof fb, "b.ini", "b", "");

    /* study a: the base run made by hand, the way the docs say, with its token caches elsewhere
     * (where caches live does not change a run: the study still counts it as its base) */
    char s_dir[700], s_cache[700];
    snprintf(s_dir, sizeof s_dir, "run.out_dir=%s/out/a", root);
    snprintf(s_cache, sizeof s_cache, "tokenizer.cache_dir=%s/cache-elsewhere", root);
    const char *sets[] = {s_dir, "run.name=base", s_cache};
    char base_ini[800];
    snprintf(base_ini, sizeof base_ini, "%s/base.ini", root);
    gf_recipe r;
    GF_REQUIRE_OK(gf_recipe_load(base_ini, sets, 3, &r));
    int intr = 0;
    gf_train_opts to = {.quiet = 1};
    GF_REQUIRE_OK(gf_train_run(&r, &to, &intr));

    gf_ablation a;
    GF_REQUIRE_OK(gf_ablation_load(fa, &a));
    GF_REQUIRE(a.n_variants == 2 && a.n_runs == 2, "%lld variants, %lld runs", (long long)a.n_variants, (long long)a.n_runs);
    GF_CHECK(!strcmp(a.variants[0].name, "base") && !strcmp(a.variants[1].name, "r4"), "variant names");
    GF_CHECK(a.runs[0].state == GF_ABLATE_DONE, "hand-made base run recognised as finished (state %d)", a.runs[0].state);
    GF_CHECK(a.runs[1].state == GF_ABLATE_START, "r4 to start");
    GF_CHECK(a.runs[1].recipe.model.r == 4 && a.runs[0].recipe.model.r == 6, "override applied");
    snprintf(p, sizeof p, "%s/out/a/r4", root);
    GF_CHECK(!strcmp(a.runs[1].run_dir, p), "run dir %s", a.runs[1].run_dir);
    struct stat base_m, r4_m;
    snprintf(p, sizeof p, "%s/out/a/base/metrics.tsv", root);
    GF_REQUIRE(stat(p, &base_m) == 0, "base metrics");
    gf_ablate_opts o = {.quiet = 1};
    GF_REQUIRE_OK(gf_ablation_run(&a, &o, &intr));
    GF_CHECK(!intr, "not interrupted");
    GF_CHECK(a.runs[1].state == GF_ABLATE_DONE, "r4 finished");
    GF_CHECK(same_stat(p, &base_m), "the finished base run was not touched");
    GF_REQUIRE_OK(gf_ablation_report(&a, "gflow ablate a.ini --report"));

    /* summary: header + base + r4, both done, base delta 0 */
    size_t n;
    snprintf(q, sizeof q, "%s/out/a/summary.tsv", root);
    char *sum = gf_test_slurp(q, &n);
    GF_REQUIRE(sum, "summary.tsv written");
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += sum[i] == '\n';
    GF_CHECK(lines == 3, "summary has %d lines, expected 3:\n%s", lines, sum);
    GF_CHECK(!strncmp(sum, "variant\tstatus\tseeds\tparams\tbest_val_ppl\t", 40), "header:\n%s", sum);
    char *l1 = strchr(sum, '\n') + 1, *l2 = strchr(l1, '\n') + 1;
    GF_CHECK(!strncmp(l1, "base\tdone\t1/1\t", 14) && strstr(l1, "\t+0.00\t"), "base row: %.200s", l1);
    GF_CHECK(!strncmp(l2, "r4\tdone\t1/1\t", 12), "r4 row: %.200s", l2);
    /* best val ppl in the row equals the run's own summary */
    double row_val = strtod(strchr(strchr(strchr(strchr(l1, '\t') + 1, '\t') + 1, '\t') + 1, '\t') + 1, NULL);
    snprintf(q, sizeof q, "%s/out/a/base/summary.tsv", root);
    char *bs = gf_test_slurp(q, &n);
    GF_REQUIRE(bs, "base summary");
    double run_val = strtod(strstr(bs, "\nbest_val_ppl\t") + 14, NULL);
    GF_CHECK_NEAR(row_val, run_val, 1e-3, 0);
    GF_CHECK(row_val > 1.0 && row_val < 100.0, "plausible ppl %g", row_val);
    free(bs);
    free(sum);
    snprintf(q, sizeof q, "%s/out/a/summary.md", root);
    char *md = gf_test_slurp(q, &n);
    GF_REQUIRE(md, "summary.md");
    GF_CHECK(strstr(md, "| r4 | `model.r=4` |") && strstr(md, "`gflow ablate a.ini --report`"), "md:\n%s", md);
    char built[200];   /* the table names the one build that produced its rows */
    snprintf(built, sizeof built, "Every finished row was produced by build `%s`.", gf_build_id());
    GF_CHECK(strstr(md, built) != NULL, "md names the build:\n%s", md);
    free(md);
    snprintf(q, sizeof q, "%s/out/a/curves.tsv", root);
    char *cv = gf_test_slurp(q, &n);
    GF_REQUIRE(cv, "curves.tsv");
    GF_CHECK(strstr(cv, "# variant base\n") && strstr(cv, "# variant r4\n") && strstr(cv, "\n4\t"), "curves:\n%s", cv);
    free(cv);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        GF_CHECK_OK(gf_ablation_plot(&a));
        struct stat ps;
        snprintf(q, sizeof q, "%s/out/a/curves.png", root);
        GF_CHECK(stat(q, &ps) == 0 && ps.st_size > 1000, "curves.png written");
    }
    gf_ablation_free(&a);

    /* running again skips both: nothing is rewritten */
    snprintf(q, sizeof q, "%s/out/a/r4/metrics.tsv", root);
    GF_REQUIRE(stat(q, &r4_m) == 0, "r4 metrics");
    GF_REQUIRE_OK(gf_ablation_load(fa, &a));
    GF_CHECK(a.runs[0].state == GF_ABLATE_DONE && a.runs[1].state == GF_ABLATE_DONE, "both finished");
    GF_REQUIRE_OK(gf_ablation_run(&a, &o, &intr));
    GF_CHECK(same_stat(p, &base_m) && same_stat(q, &r4_m), "second run rewrote metrics");
    gf_ablation_free(&a);

    /* study b: stopped mid-base (between checkpoints), then resumed */
    gf_ablation b;
    GF_REQUIRE_OK(gf_ablation_load(fb, &b));
    gf_ablate_opts ob = {.quiet = 1, .stop_after = 6};
    GF_REQUIRE_OK(gf_ablation_run(&b, &ob, &intr));
    GF_CHECK(intr, "stopped");
    GF_CHECK(b.runs[0].state == GF_ABLATE_RESUME && b.runs[0].step_done == 6, "base resumable at step 6 (state %d, step %lld)",
             b.runs[0].state, (long long)b.runs[0].step_done);
    GF_CHECK(b.runs[1].state == GF_ABLATE_START, "r4 not started after the stop");
    GF_REQUIRE_OK(gf_ablation_report(&b, "x"));
    snprintf(q, sizeof q, "%s/out/b/summary.tsv", root);
    sum = gf_test_slurp(q, &n);
    GF_REQUIRE(sum, "b summary");
    GF_CHECK(strstr(sum, "\nbase\tinterrupted (step 6)\t0/1\t") && strstr(sum, "\nr4\tnot run\t0/1\t-\t"), "b:\n%s", sum);
    free(sum);
    gf_ablation_free(&b);
    /* a resumed run appends to speed.tsv, a fresh start would rewrite it: mark it */
    snprintf(q, sizeof q, "%s/out/b/base/speed.tsv", root);
    FILE *sp = fopen(q, "a");
    GF_REQUIRE(sp, "speed.tsv");
    fputs("# before resume\n", sp);
    fclose(sp);
    GF_REQUIRE_OK(gf_ablation_load(fb, &b));
    GF_REQUIRE_OK(gf_ablation_run(&b, &o, &intr));
    char *speed = gf_test_slurp(q, &n);
    GF_CHECK(speed && strstr(speed, "# before resume\n"), "base was restarted instead of resumed");
    free(speed);
    GF_CHECK(!intr && b.runs[0].state == GF_ABLATE_DONE && b.runs[1].state == GF_ABLATE_DONE, "b finished");
    gf_ablation_free(&b);
    const char *vars[] = {"base", "r4"};
    for (int i = 0; i < 2; i++) {
        size_t na, nb;
        snprintf(p, sizeof p, "%s/out/a/%s/metrics.tsv", root, vars[i]);
        snprintf(q, sizeof q, "%s/out/b/%s/metrics.tsv", root, vars[i]);
        char *x = gf_test_slurp(p, &na), *y = gf_test_slurp(q, &nb);
        GF_REQUIRE(x && y, "metrics");
        GF_CHECK(na > 200 && na == nb && !memcmp(x, y, na), "%s: resumed metrics differ from the uninterrupted run", vars[i]);
        free(x);
        free(y);
    }
}

GF_TEST(smoke, ablate_seeds_and_only) {
    const char *root = setup();
    char f[800], p[900];
    study_file(f, sizeof f, "c.ini", "c", "seeds = 3, 5");
    gf_ablation a;
    GF_REQUIRE_OK(gf_ablation_load(f, &a));
    GF_REQUIRE(a.n_runs == 4 && a.n_seeds == 2, "runs %lld", (long long)a.n_runs);
    const char *names[] = {"base-seed3", "base-seed5", "r4-seed3", "r4-seed5"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/out/c/%s", root, names[i]);
        GF_CHECK(!strcmp(a.runs[i].run_dir, p), "run %d: %s", i, a.runs[i].run_dir);
        int64_t want = i & 1 ? 5 : 3;
        GF_CHECK(a.runs[i].recipe.run.seed == want && a.runs[i].state == GF_ABLATE_START, "run %d seed", i);
        GF_CHECK(!strcmp(a.runs[i].recipe.run.name, names[i]), "run.name %s", a.runs[i].recipe.run.name);
    }
    const char *only[] = {"nope"};
    gf_ablate_opts o = {.quiet = 1, .only = only, .n_only = 1};
    int intr = 0;
    GF_CHECK_ERR(gf_ablation_run(&a, &o, &intr), GF_E_INVALID, "no variant named 'nope'");
    /* nothing run yet: the report lists every variant as not run */
    GF_REQUIRE_OK(gf_ablation_report(&a, "x"));
    size_t n;
    snprintf(p, sizeof p, "%s/out/c/summary.tsv", root);
    char *s = gf_test_slurp(p, &n);
    GF_REQUIRE(s, "summary");
    GF_CHECK(strstr(s, "\nbase\tnot run\t0/2\t") && strstr(s, "\nr4\tnot run\t0/2\t"), "%s", s);
    free(s);
    gf_ablation_free(&a);
}

/* each malformed file fails to load with `needle` in the message; nothing runs */
static void bad(const char *file, const char *body, gf_status code, const char *needle) {
    const char *root = setup();
    char path[800];
    snprintf(path, sizeof path, "%s/studies/%s", root, file);
    gf_test_write_text(path, body);
    gf_ablation a;
    GF_CHECK_ERR(gf_ablation_load(path, &a), code, needle);
    GF_CHECK(a.n_variants == 0 && a.runs == NULL, "%s: left empty", file);
    gf_ablation_free(&a);
}

#define HEAD "[ablation]\nname = bad\nbase = ../base.ini\n"

GF_TEST(smoke, ablate_malformed_files_name_lines) {
    bad("b1.ini", HEAD "colour = red\n", GF_E_PARSE, "b1.ini:4: [ablation] colour: unknown key");
    bad("b2.ini", HEAD "[variant v]\nmodel.r = 4\n\n[variant v]\nmodel.r = 5\n", GF_E_PARSE,
        "b2.ini:7: [variant v]: duplicate variant name (first on line 4)");
    bad("b3.ini", HEAD "[variant r/16]\nmodel.r = 16\n", GF_E_PARSE, "b3.ini:4: [variant r/16]: bad variant name");
    bad("b4.ini", HEAD "[variant ok]\nmodel.r = 4\n[variant v]\nmodel.gate = false\nmodel.r = abc\n", GF_E_INVALID,
        "b4.ini:8: [variant v] model.r=abc: [model] r:");
    bad("b5.ini", HEAD "[variant v]\nmodel.colour = 3\n", GF_E_INVALID, "b5.ini:5: [variant v] model.colour=3");
    bad("b6.ini", HEAD "[variant v]\nrun.name = x\n", GF_E_PARSE, "b6.ini:5: [variant v] run.name: set by gflow ablate");
    bad("b7.ini", "[ablation]\nname = bad\n", GF_E_PARSE, "b7.ini:1: [ablation] base: required");
    bad("b8.ini", HEAD "[variants v]\n", GF_E_PARSE, "b8.ini:4: unknown section [variants v]");
    bad("b9.ini", HEAD "[variant v]\nmodel.r = 300\n", GF_E_INVALID, "b9.ini:5: [variant v] model.r=300");
    bad("b10.ini", HEAD "[variant base]\n", GF_E_PARSE, "b10.ini:4:");
    bad("b11.ini", HEAD "seeds = 1,x\n", GF_E_PARSE, "b11.ini:4: [ablation] seeds");
    bad("b12.ini", HEAD "[variant v]\nmodel.r = 4\nmodel.r = 5\n", GF_E_PARSE, "b12.ini:6: [variant v] model.r: duplicate key");
    bad("b13.ini", "[ablation]\nname = bad\nbase = ../missing.ini\n", GF_E_NOTFOUND, "b13.ini:3: [ablation] base:");
    bad("b14.ini", HEAD "[variant v]\nnot a key value line\n", GF_E_PARSE, "b14.ini:5: syntax error");
    /* validation happens before anything runs: the study directory was never made */
    char p[800];
    snprintf(p, sizeof p, "%s/out/bad", setup());
    GF_CHECK(access(p, F_OK) != 0, "nothing ran for a malformed file");
}

/* `gflow ablate FILE [--only V] --dry-run` on stdout (exit status in *rc) */
static char *ablate_cli(const char *file, const char *args, int *rc) {
    char cmd[2400], out[900];
    snprintf(out, sizeof out, "%s/abl/cli.out", gf_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' ablate '%s' %s > '%s' 2>&1", rel_gflow_exe(), file, args, out);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return gf_test_slurp(out, NULL);
}

/* --dry-run plans and creates nothing; --only trains the named variant and leaves the others
 * unstarted; the next plan shows it finished and the rest not selected */
GF_TEST(smoke, ablate_only_and_dry_run) {
    const char *root = setup();
    char f[800], p[900];
    study_file(f, sizeof f, "d.ini", "d", "");
    int rc;
    char *plan = ablate_cli(f, "--dry-run", &rc);
    GF_CHECK(rc == 0 && plan && strstr(plan, "base                         start\n") &&
                 strstr(plan, "r4                           start\n"),
             "dry run: exit %d:\n%s", rc, plan ? plan : "");
    free(plan);
    snprintf(p, sizeof p, "%s/out/d", root);
    GF_CHECK(access(p, F_OK) != 0, "--dry-run created %s", p);
    free(ablate_cli(f, "--only r4 --quiet", &rc));
    GF_CHECK(rc == 0, "--only r4: exit %d", rc);
    snprintf(p, sizeof p, "%s/out/d/r4/summary.tsv", root);
    GF_CHECK(access(p, F_OK) == 0, "--only r4 did not finish r4 (%s)", p);
    snprintf(p, sizeof p, "%s/out/d/base/metrics.tsv", root);
    GF_CHECK(access(p, F_OK) != 0, "--only r4 started base (%s)", p);
    plan = ablate_cli(f, "--only r4 --dry-run", &rc);
    GF_CHECK(rc == 0 && plan && strstr(plan, "base                         not selected (--only)\n") &&
                 strstr(plan, "r4                           skip (finished)\n"),
             "second plan: exit %d:\n%s", rc, plan ? plan : "");
    free(plan);
}
