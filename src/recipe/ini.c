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

/* Next physical line into l->buf (no newline). 0 at end. */
static int read_line(gf_ini_lines *l) {
    l->nul = 0;
    if (l->f) {
        ssize_t n = getline(&l->buf, &l->cap, l->f);
        l->nul = n > 0 && memchr(l->buf, 0, (size_t)n) != NULL;
        return n >= 0;
    }
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

char *gf_ini_next_line(gf_ini_lines *l) {
    if (!read_line(l)) return NULL;
    l->lineno++;
    char *s = l->buf;
    s[strcspn(s, "\r\n")] = 0;
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
