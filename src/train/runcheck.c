/* runcheck.c — the one place where a command finds a run's checkpoint and checks that it is the
 * run's own (gflow/train.h): `train --resume`, eval, export, info, probe and sample all go
 * through gf_run_ckpt_path or gf_run_ckpt_belongs, so they refuse the same foreign checkpoint
 * with the same line. */
#include "gflow/checkpoint.h"
#include "gflow/fs.h"
#include "gflow/ini.h"
#include "gflow/train.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file, NUL-terminated (*n: its length); NULL with errno set on failure. A recipe.ini
 * is a short text: beyond the recipe reader's limit it is not one (EFBIG). */
static char *read_text(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len > GF_INI_MAX_FILE_BYTES) { free(b); b = NULL; errno = EFBIG; break; }
        if (len == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) { free(b); b = NULL; errno = ENOMEM; break; }
            b = nb;
            cap *= 2;
        }
    }
    if (b && ferror(f)) { free(b); b = NULL; errno = EIO; }
    fclose(f);
    if (b) { b[len] = 0; *n = len; }
    return b;
}

/* Skip '#' comment lines (the resolved text's first line names the build, which may change
 * between a run's processes); *line counts the lines of p passed. */
static const char *skip_comments(const char *p, int *line) {
    while (*p == '#') {
        const char *nl = strchr(p, '\n');
        if (!nl) return p + strlen(p);
        p = nl + 1;
        if (line) (*line)++;
    }
    return p;
}

/* 1 when the two recipe texts agree but for comment lines; *line: the first line of a that differs */
static int recipes_match(const char *a, const char *b, int *line) {
    *line = 1;
    a = skip_comments(a, line);
    b = skip_comments(b, NULL);
    while (*a && *a == *b) {
        if (*a == '\n') {
            (*line)++;
            a = skip_comments(a + 1, line);
            b = skip_comments(b + 1, NULL);
        } else {
            a++;
            b++;
        }
    }
    return !*a && !*b;
}

/* 1 when two recipe texts parse to the same run (gf_recipe_same_run: [run] device and threads
 * aside, which a run may change when it resumes) */
static int same_run_text(const char *a, const char *b) {
    gf_recipe *ra = malloc(sizeof *ra), *rb = malloc(sizeof *rb);
    int same = ra && rb && !gf_recipe_parse_text(a, "recipe.ini", NULL, 0, ra) &&
               !gf_recipe_parse_text(b, "last.ckpt", NULL, 0, rb) && gf_recipe_same_run(ra, rb);
    free(ra);
    free(rb);
    return same;
}

gf_status gf_run_ckpt_belongs(const char *cpath, const char *ckpt_recipe, const char *rpath, const char *hint) {
    size_t n = 0;
    char *ini = read_text(rpath, &n);
    if (!ini) return gf_error_set(GF_E_IO, "%s: cannot read the run's recipe to check %s against: %s", rpath, cpath,
                                  strerror(errno));
    int line = 0;
    const char *ck = ckpt_recipe ? ckpt_recipe : "";
    int same = strlen(ini) == n && (recipes_match(ini, ck, &line) || same_run_text(ini, ck));
    free(ini);
    if (!same)
        return gf_error_set(GF_E_INVALID, "%s does not belong to this run: its recipe differs from %s (from line %d): %s",
                            cpath, rpath, line, hint);
    return GF_OK;
}

/* A checkpoint inside a run directory (one holding recipe.ini) must be that run's: a last.ckpt
 * copied in from another run would otherwise be evaluated, exported or probed under this run's
 * name. One that cannot be read is left to the caller's load, which names what is wrong. */
static gf_status check_in_run_dir(const char *path) {
    char dir[1100], rpath[1200];
    gf_path_dir(path, dir, sizeof dir);
    snprintf(rpath, sizeof rpath, "%s/recipe.ini", dir);
    if (access(rpath, F_OK) != 0) return GF_OK;
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    if (gf_ckpt_peek(path, &m) != GF_OK) {
        gf_ckpt_meta_free(&m);
        return GF_OK;
    }
    gf_status st = gf_run_ckpt_belongs(path, m.recipe, rpath,
                                       "put the run's own checkpoint back (a checkpoint of another run is used from "
                                       "outside a run directory)");
    gf_ckpt_meta_free(&m);
    return st;
}

gf_status gf_run_ckpt_path(const char *run_dir_or_ckpt, const char *which, char *path, size_t cap) {
    struct stat sb;
    /* only ENOENT is "not there": a symlink loop (ELOOP) or EACCES is reported as what it is */
    if (stat(run_dir_or_ckpt, &sb) != 0)
        return errno == ENOENT ? gf_error_set(GF_E_NOTFOUND, "%s: no such run directory or checkpoint", run_dir_or_ckpt)
                               : gf_error_set(GF_E_IO, "%s: %s", run_dir_or_ckpt, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        snprintf(path, cap, "%s/%s.ckpt", run_dir_or_ckpt, which ? which : "best");
        if (stat(path, &sb) != 0)
            return errno == ENOENT
                       ? gf_error_set(GF_E_NOTFOUND, "%s: not found (has the run evaluated once? try --ckpt last)", path)
                       : gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    } else {
        snprintf(path, cap, "%s", run_dir_or_ckpt);
    }
    return check_in_run_dir(path);
}

