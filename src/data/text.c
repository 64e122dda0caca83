/* text.c — dataset = text with one corpus file: its train, valid and test parts, split on line
 * boundaries by byte fractions (gf_text_split, gflow/data.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gflow/data.h"
#include "gflow/fs.h"

/* A private tmp file (runs splitting the same corpus at once) written through stdio. */
static gf_status open_part(gf_atomic_file *af, const char *path, FILE **f) {
    GF_TRY(gf_atomic_open_private(af, path));
    if ((*f = gf_atomic_stdio(af))) return GF_OK;
    gf_atomic_abort(af);
    return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
}

/* 1 when dir holds the three parts and its stamp names the source's sha256 */
static int parts_current(const char *dir, const char *hex) {
    char p[PATH_MAX + 32], got[80] = "";
    snprintf(p, sizeof p, "%s/source.sha256", dir);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    int ok = fgets(got, sizeof got, f) && !strncmp(got, hex, 64);
    fclose(f);
    for (int s = 0; ok && s < 3; s++) {
        snprintf(p, sizeof p, "%s/%s.txt", dir, gf_split_name((gf_split)s));
        ok = access(p, F_OK) == 0;
    }
    return ok;
}

/* Each line to the part its first byte falls in: [0, cut0) train, [cut0, cut1) valid, the rest
 * test; every line checked (gf_line_check) and every part non-empty. */
static gf_status write_parts(const char *src, FILE *in, const int64_t cut[2], double fv, double ft,
                             gf_atomic_file af[3], FILE *out[3]) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int64_t off = 0, lineno = 0, lines[3] = {0, 0, 0};
    gf_status s = GF_OK;
    while (!s && (got = getline(&line, &cap, in)) > 0) {
        lineno++;
        size_t len = (size_t)got - (line[got - 1] == '\n');
        const int part = off < cut[0] ? 0 : off < cut[1] ? 1 : 2;
        s = gf_line_check(src, lineno, line, len);
        if (!s && fwrite(line, 1, (size_t)got, out[part]) != (size_t)got)
            s = gf_error_set(GF_E_IO, "%s: cannot write its %s part", af[part].path, gf_split_name((gf_split)part));
        lines[part]++;
        off += got;
    }
    free(line);
    if (!s && ferror(in)) s = gf_error_set(GF_E_IO, "%s: read error after line %lld", src, (long long)lineno);
    for (int p = 0; !s && p < 3; p++)
        if (!lines[p])
            s = gf_error_set(GF_E_INVALID, "%s: its %s part is empty: %lld bytes, %lld lines, valid_fraction %g and "
                             "test_fraction %g leave no line starting in it ([data] file needs more text, or other "
                             "fractions)", src, gf_split_name((gf_split)p), (long long)off, (long long)lineno, fv, ft);
    return s;
}

gf_status gf_text_split(const char *src, double fv, double ft, const char *dir, int log) {
    char hex[65];
    GF_TRY(gf_data_verify(src));
    GF_TRY(gf_sha256_file(src, NULL, hex));
    if (parts_current(dir, hex)) return GF_OK;
    GF_TRY(gf_mkdir_p(dir));
    struct stat sb;
    FILE *in = fopen(src, "rb");
    if (!in || fstat(fileno(in), &sb) != 0) {
        if (in) fclose(in);
        return gf_error_set(GF_E_IO, "%s: cannot read it", src);
    }
    const int64_t cut[2] = {(int64_t)((double)sb.st_size * (1.0 - fv - ft)), (int64_t)((double)sb.st_size * (1.0 - ft))};
    gf_atomic_file af[3];
    FILE *out[3] = {NULL, NULL, NULL};
    gf_status s = GF_OK;
    int n_open = 0;
    for (; !s && n_open < 3; n_open++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/%s.txt", dir, gf_split_name((gf_split)n_open));
        s = open_part(&af[n_open], p, &out[n_open]);
        if (s) break;
    }
    if (!s) s = write_parts(src, in, cut, fv, ft, af, out);
    fclose(in);
    for (int p = 0; p < n_open; p++) s = gf_atomic_finish(&af[p], s);
    if (s) return s;
    /* the stamp last: parts without it are rewritten */
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/source.sha256", dir);
    gf_atomic_file st;
    FILE *f;
    GF_TRY(open_part(&st, p, &f));
    fprintf(f, "%s\n", hex);
    GF_TRY(gf_atomic_finish(&st, GF_OK));
    if (log) fprintf(stderr, "data: %s split into %s/{train,valid,test}.txt\n", src, dir);
    return GF_OK;
}
