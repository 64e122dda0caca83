/* test_paths.c — where gflow finds its shared files (installed prefix vs build directory) and the
 * order of the data directories ($GFLOW_DATA_DIR, XDG, ~/.local/share, datasets/). */
#include "gf_test.h"
#include "gflow.h"
#include "test_util.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* set (or unset, v NULL) an environment variable, remembering the old value in *old */
static void env_put(const char *k, const char *v, char **old) {
    const char *o = getenv(k);
    *old = o ? strdup(o) : NULL;
    if (v) setenv(k, v, 1);
    else unsetenv(k);
}
static void env_restore(const char *k, char *old) {
    if (old) setenv(k, old, 1);
    else unsetenv(k);
    free(old);
}

GF_TEST(unit, data_dirs_resolution_order) {
    char *o_dd, *o_xdg, *o_home, data[PATH_MAX], cache[PATH_MAX];
    env_put("GFLOW_DATA_DIR", "/srv/gfdata", &o_dd);
    env_put("XDG_DATA_HOME", "/x/share", &o_xdg);
    env_put("HOME", "/home/u", &o_home);
    for (int inst = 0; inst < 2; inst++) { /* $GFLOW_DATA_DIR wins, installed or not */
        gf_data_dirs_for(inst, "/src", data, sizeof data, cache, sizeof cache);
        GF_CHECK(!strcmp(data, "/srv/gfdata") && !strcmp(cache, "/srv/gfdata/cache"), "%d: %s %s", inst, data, cache);
    }
    unsetenv("GFLOW_DATA_DIR");
    gf_data_dirs_for(1, "/prefix/share/gflow", data, sizeof data, cache, sizeof cache);
    GF_CHECK(!strcmp(data, "/x/share/gflow/data") && !strcmp(cache, "/x/share/gflow/cache"), "%s %s", data, cache);
    /* a build directory keeps the quick start's datasets/ in its source tree, from any directory */
    gf_data_dirs_for(0, "/src", data, sizeof data, cache, sizeof cache);
    GF_CHECK(!strcmp(data, "/src/datasets/data") && !strcmp(cache, "/src/datasets/cache"), "%s %s", data, cache);
    setenv("XDG_DATA_HOME", "relative/ignored", 1); /* the XDG spec: relative values are invalid */
    gf_data_dirs_for(1, "/prefix/share/gflow", data, sizeof data, cache, sizeof cache);
    GF_CHECK(!strcmp(data, "/home/u/.local/share/gflow/data") && !strcmp(cache, "/home/u/.local/share/gflow/cache"),
             "%s %s", data, cache);
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    /* installed without a home: the working directory's datasets/, as an absolute path */
    char cwd[PATH_MAX], want[PATH_MAX + 32];
    GF_REQUIRE(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    snprintf(want, sizeof want, "%s/datasets/data", cwd);
    gf_data_dirs_for(1, "/prefix/share/gflow", data, sizeof data, cache, sizeof cache);
    GF_CHECK(!strcmp(data, want) && strstr(cache, "/datasets/cache") && cache[0] == '/', "%s %s", data, cache);
    env_restore("GFLOW_DATA_DIR", o_dd);
    env_restore("XDG_DATA_HOME", o_xdg);
    env_restore("HOME", o_home);
}

GF_TEST(unit, recipe_data_dir_defaults) {
    char *o_dd, *o_mirror;
    gf_recipe r;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/recipes/quickstart.ini", gf_test_source_root());
    GF_REQUIRE_OK(gf_recipe_load(path, NULL, 0, &r));
    env_put("GFLOW_DATA_DIR", "/srv/gfdata", &o_dd);
    env_put("GFLOW_DATA_MIRROR", "/mirror", &o_mirror);
    GF_CHECK(!strcmp(gf_recipe_data_dir(&r), "/mirror"), "the mirror first: %s", gf_recipe_data_dir(&r));
    unsetenv("GFLOW_DATA_MIRROR");
    GF_CHECK(!strcmp(gf_recipe_data_dir(&r), "/srv/gfdata"), "then where fetch puts it: %s", gf_recipe_data_dir(&r));
    GF_CHECK(!strcmp(gf_recipe_cache_dir(&r), "/srv/gfdata/cache"), "%s", gf_recipe_cache_dir(&r));
    unsetenv("GFLOW_DATA_DIR");
    /* gf_tests runs from the build directory: not installed, the source tree's datasets/ */
    char *src = realpath(gf_test_source_root(), NULL);
    const char *dirs[2] = {gf_recipe_data_dir(&r), NULL};
    char d0[PATH_MAX];
    snprintf(d0, sizeof d0, "%s", dirs[0]);
    dirs[0] = d0;
    dirs[1] = gf_recipe_cache_dir(&r);
    for (int i = 0; i < 2; i++) { /* <source>/datasets/{data,cache}, absolute */
        snprintf(path, sizeof path, "%s", dirs[i]);
        char *slash = strrchr(path, '/');
        GF_CHECK(path[0] == '/' && slash && !strcmp(slash, i ? "/cache" : "/data"), "%s", dirs[i]);
        if (slash) *slash = 0;
        char *got = realpath(path, NULL), want[PATH_MAX + 16];
        snprintf(want, sizeof want, "%s/datasets", src ? src : "?");
        GF_CHECK(got && !strcmp(got, want), "%s: want %s", dirs[i], want);
        free(got);
    }
    free(src);
    snprintf(r.data.dir, sizeof r.data.dir, "mine");
    snprintf(r.tokenizer.cache_dir, sizeof r.tokenizer.cache_dir, "mycache");
    GF_CHECK(!strcmp(gf_recipe_data_dir(&r), "mine") && !strcmp(gf_recipe_cache_dir(&r), "mycache"), "explicit keys");
    env_restore("GFLOW_DATA_DIR", o_dd);
    env_restore("GFLOW_DATA_MIRROR", o_mirror);
}

GF_TEST(unit, share_dir_installed_then_build_dir) {
    char root[PATH_MAX], p[PATH_MAX + 64], out[PATH_MAX], src[PATH_MAX + 64];
    snprintf(root, sizeof root, "%s/share_dir", gf_test_tmpdir());
    int installed = -1;
    /* an installed prefix: <prefix>/bin/gflow finds <prefix>/share/gflow */
    snprintf(p, sizeof p, "%s/prefix/share/gflow/datasets", root);
    GF_REQUIRE_OK(gf_mkdir_p(p));
    snprintf(p, sizeof p, "%s/prefix/share/gflow/datasets/fetch.sh", root);
    GF_REQUIRE(gf_test_write_text(p, "#!/bin/sh\n"), "write %s", p);
    snprintf(p, sizeof p, "%s/prefix/bin", root);
    GF_REQUIRE_OK(gf_mkdir_p(p));
    snprintf(p, sizeof p, "%s/prefix/bin/gflow", root);
    GF_CHECK_OK(gf_share_dir_for(p, out, sizeof out, &installed));
    GF_CHECK(installed == 1 && strstr(out, "/prefix/share/gflow") != NULL, "%d %s", installed, out);
    /* a build directory: the source tree its meson-info names, also for tests/ below it */
    snprintf(src, sizeof src, "%s/src tree/datasets", root);
    GF_REQUIRE_OK(gf_mkdir_p(src));
    snprintf(p, sizeof p, "%s/src tree/datasets/fetch.sh", root);
    GF_REQUIRE(gf_test_write_text(p, "#!/bin/sh\n"), "write %s", p);
    snprintf(p, sizeof p, "%s/bld/meson-info", root);
    GF_REQUIRE_OK(gf_mkdir_p(p));
    snprintf(p, sizeof p, "%s/bld/meson-info/meson-info.json", root);
    snprintf(src, sizeof src, "{\"directories\": {\"source\": \"%s/src tree\", \"build\": \"x\"}}", root);
    GF_REQUIRE(gf_test_write_text(p, src), "write %s", p);
    snprintf(p, sizeof p, "%s/bld/tests/gf_tests", root);
    GF_CHECK_OK(gf_share_dir_for(p, out, sizeof out, &installed));
    snprintf(src, sizeof src, "%s/src tree", root);
    GF_CHECK(installed == 0 && !strcmp(out, src), "%d %s", installed, out);
    /* neither: a clear error naming where it looked */
    snprintf(p, sizeof p, "%s/elsewhere/gflow", root);
    GF_CHECK_ERR(gf_share_dir_for(p, out, sizeof out, &installed), GF_E_NOTFOUND, "share/gflow/datasets/fetch.sh");
    /* this test binary is in a build directory of the real source tree */
    GF_CHECK_OK(gf_share_dir(out, sizeof out, &installed));
    GF_CHECK(installed == 0, "gf_tests is not installed (%s)", out);
}

/* A test runner moved with its fixtures to another tree (the GPU machine's pack) reads them
 * where $GF_SOURCE_ROOT says, not where it was built; every fixture path goes through this. */
GF_TEST(unit, tests_read_fixtures_from_gf_source_root) {
    char *o_root;
    env_put("GF_SOURCE_ROOT", "/moved/tree", &o_root);
    GF_CHECK(!strcmp(gf_test_source_root(), "/moved/tree"), "%s", gf_test_source_root());
    unsetenv("GF_SOURCE_ROOT");
    GF_CHECK(strcmp(gf_test_source_root(), "/moved/tree") && gf_test_source_root()[0], "%s", gf_test_source_root());
    env_restore("GF_SOURCE_ROOT", o_root);
}
