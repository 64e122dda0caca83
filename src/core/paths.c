/* paths.c — the share directory (recipes, the fetch script) found from the running executable,
 * and the data directories (see gflow/fs.h). */
#include "gflow/fs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GF_SHARE_REL
#define GF_SHARE_REL "../share/gflow"
#endif

static int is_share_dir(const char *dir) {
    char f[PATH_MAX];
    if (snprintf(f, sizeof f, "%s/datasets/fetch.sh", dir) >= (int)sizeof f) return 0;
    return access(f, R_OK) == 0;
}

/* the "source" entry of <build>/meson-info/meson-info.json ("directories": {"source": "..."}) */
static int meson_source_dir(const char *build, char *out, size_t cap) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/meson-info/meson-info.json", build) >= (int)sizeof p) return 0;
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *k = strstr(buf, "\"source\"");
    if (!k) return 0;
    k = strchr(k + 8, '"');
    if (!k) return 0;
    k++;
    size_t i = 0;
    for (; *k && *k != '"'; k++) {
        if (*k == '\\' && k[1]) k++; /* JSON escapes in a path: \" and \\ */
        if (i + 1 >= cap) return 0;
        out[i++] = *k;
    }
    out[i] = 0;
    return *k == '"' && i > 0;
}

gf_status gf_share_dir_for(const char *exe, char *out, size_t cap, int *installed) {
    char dir[PATH_MAX], cand[PATH_MAX];
    gf_path_dir(exe, dir, sizeof dir);
    if (snprintf(cand, sizeof cand, "%s/%s", dir, GF_SHARE_REL) < (int)sizeof cand && is_share_dir(cand)) {
        char *real = realpath(cand, NULL);
        snprintf(out, cap, "%s", real ? real : cand);
        free(real);
        if (installed) *installed = 1;
        return GF_OK;
    }
    /* an uninstalled build: the executable sits in the build directory (or tests/ below it) */
    char up[PATH_MAX], exe_dir[PATH_MAX];
    snprintf(exe_dir, sizeof exe_dir, "%s", dir);
    for (int level = 0; level < 3; level++) {
        if (meson_source_dir(dir, cand, sizeof cand) && is_share_dir(cand)) {
            snprintf(out, cap, "%s", cand);
            if (installed) *installed = 0;
            return GF_OK;
        }
        gf_path_dir(dir, up, sizeof up);
        if (!strcmp(up, dir)) break;
        snprintf(dir, sizeof dir, "%s", up);
    }
    return gf_error_set(GF_E_NOTFOUND,
                        "cannot find gflow's shared files for %s: neither %s/%s/datasets/fetch.sh (an installed "
                        "gflow) nor the source tree of a meson build directory", exe, exe_dir, GF_SHARE_REL);
}

gf_status gf_share_dir(char *out, size_t cap, int *installed) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return gf_error_set(GF_E_IO, "cannot read /proc/self/exe: %s", strerror(errno));
    exe[n] = 0;
    return gf_share_dir_for(exe, out, cap, installed);
}

void gf_data_dirs_for(int installed, const char *share, char *data, size_t data_cap, char *cache, size_t cache_cap) {
    const char *dd = getenv("GFLOW_DATA_DIR"), *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char cwd[PATH_MAX];
    if (dd && *dd) {
        snprintf(data, data_cap, "%s", dd);
        snprintf(cache, cache_cap, "%s/cache", dd);
    } else if (installed && xdg && xdg[0] == '/') { /* XDG: a relative value is invalid, ignore it */
        snprintf(data, data_cap, "%s/gflow/data", xdg);
        snprintf(cache, cache_cap, "%s/gflow/cache", xdg);
    } else if (installed && home && *home) {
        snprintf(data, data_cap, "%s/.local/share/gflow/data", home);
        snprintf(cache, cache_cap, "%s/.local/share/gflow/cache", home);
    } else {
        /* the source tree's datasets/ (a build directory), else the working directory's; absolute
         * either way, so a run from elsewhere reads what `gflow data dir` printed */
        const char *root = !installed && share && *share ? share : getcwd(cwd, sizeof cwd) ? cwd : ".";
        snprintf(data, data_cap, "%s/datasets/data", root);
        snprintf(cache, cache_cap, "%s/datasets/cache", root);
    }
}

void gf_data_dirs(char *data, size_t data_cap, char *cache, size_t cache_cap) {
    static int installed = -1;
    static char share[PATH_MAX];
    if (installed < 0) {
        int inst = 0;
        if (gf_share_dir(share, sizeof share, &inst) != GF_OK) share[0] = 0;
        installed = share[0] && inst;
    }
    gf_data_dirs_for(installed, share, data, data_cap, cache, cache_cap);
}
