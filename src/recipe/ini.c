/* ini.c — the cleaned line source behind inih (see gflow/ini.h). */
#include "gflow/ini.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_ws(char c) { return c == ' ' || c == '\t'; }

char *gf_ini_trim(char *s) {
    while (is_ws(*s)) s++;
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1])) s[--n] = 0;
    return s;
}

/* Next physical line of the file into l->buf (no newline), read no further than the limits so
 * that /dev/zero or a binary stops at its first line. 0 at the end. */
static int read_file_line(gf_ini_lines *l) {
    size_t n = 0;
    int c = 0;
    const char *stop = NULL;
    for (;;) {
        if (n > GF_INI_MAX_LINE_BYTES) stop = "line longer than 65536 bytes";
        else if (l->total >= GF_INI_MAX_FILE_BYTES) stop = "file larger than 1 MiB";
        if ((c = getc(l->f)) == EOF) break;
        if (stop) { /* more to read beyond a limit */
            ungetc(c, l->f);
            break;
        }
        l->total++;
        if (c == '\n') break;
        if (n + 2 > l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 256;
            char *b = realloc(l->buf, cap);
            if (!b) return 0;
            l->buf = b;
            l->cap = cap;
        }
        if (c == 0 && !l->bad) l->bad = "NUL byte in the line (a binary file?)";
        l->buf[n++] = (char)c;
    }
    if (c == EOF && n == 0) return 0;
    if (n + 1 > l->cap) { /* an empty first line (the loop grows the buffer before it fills) */
        size_t cap = n + 1 > 256 ? n + 1 : 256;
        char *b = realloc(l->buf, cap);
        if (!b) return 0;
        l->buf = b;
        l->cap = cap;
    }
    l->buf[n] = 0;
    if (stop && c != EOF && !l->bad) l->bad = stop;
    return 1;
}

/* Next physical line into l->buf (no newline). 0 at end. */
static int read_line(gf_ini_lines *l) {
    l->bad = NULL;
    if (l->f) return read_file_line(l);
    if (!l->text || !*l->text) return 0;
    const char *nl = strchr(l->text, '\n');
    size_t n = nl ? (size_t)(nl - l->text) : strlen(l->text);
    if (n + 1 > l->cap) {
        char *b = realloc(l->buf, n + 1);
        if (!b) return 0;
        l->buf = b;
        l->cap = n + 1;
    }
    memcpy(l->buf, l->text, n);
    l->buf[n] = 0;
    l->text += nl ? n + 1 : n;
    return 1;
}

char *gf_ini_raw_line(gf_ini_lines *l) {
    if (!read_line(l)) return NULL;
    l->lineno++;
    l->buf[strcspn(l->buf, "\r\n")] = 0;
    return l->buf;
}

char *gf_ini_next_line(gf_ini_lines *l) {
    char *s = gf_ini_raw_line(l);
    if (!s) return NULL;
    if (l->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
        s += 3;
    while (is_ws(*s)) s++;
    for (char *c = s; *c; c++)
        if ((*c == '#' || *c == ';') && (c == s || is_ws(c[-1]))) {
            *c = 0;
            break;
        }
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1])) s[--n] = 0;
    return s;
}

void gf_ini_lines_free(gf_ini_lines *l) {
    free(l->buf);
    l->buf = NULL;
    l->cap = 0;
}

char *gf_ini_reader_line(gf_ini_lines *l, gf_first_error *err, const char *file, int num) {
    if (err->line) return NULL;
    char *s = gf_ini_next_line(l);
    if (!s) return NULL;
    size_t n = strlen(s);
    if (l->bad) /* a NUL would cut the line inih sees: "x = 64\0junk" as 64 */
        gf_first_error_set(err, file, l->lineno, GF_E_PARSE, "%s", l->bad);
    else if (n + 2 > (size_t)num)
        gf_first_error_set(err, file, l->lineno, GF_E_PARSE, "line too long (%zu bytes, max %d)", n, num - 2);
    return err->line ? NULL : s;
}
