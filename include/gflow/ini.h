/* gflow/ini.h — the line source that recipes and ablation files give inih: each physical line
 * read from a file or a string and cleaned the same way, so both formats share one set of
 * comment and whitespace rules. */
#ifndef GFLOW_INI_H
#define GFLOW_INI_H

#include "gflow/error.h"
#include <stdio.h>

typedef struct gf_ini_lines {
    FILE *f;          /* file source, or */
    const char *text; /* text source (advanced as read) */
    int lineno;       /* of the line last returned (1-based) */
    const char *bad;  /* why the line just returned must be refused (a NUL byte, too long, the file
                         too large), else NULL: the reader reports it as file:line and stops */
    long long total;  /* bytes read so far from f */
    char *buf;
    size_t cap;
} gf_ini_lines;

/* The next line with its CR/LF, a UTF-8 BOM on line 1, its indentation (so nothing is a
 * continuation line), an inline comment ('#' or ';' at the start or after whitespace; the
 * Debian build of inih strips only ';') and trailing whitespace removed. NULL at the end. */
char *gf_ini_next_line(gf_ini_lines *l);
/* The next line as it is but for its CR/LF (other line-based inputs: prompt-pair files), within
 * the same limits (l->bad). NULL at the end. */
char *gf_ini_raw_line(gf_ini_lines *l);

/* The next cleaned line for an inih reader whose buffer holds num bytes: NULL at the end, once
 * *err keeps a fault (a binary file is not read to its end), or at a line that must be refused
 * (l->bad, or one longer than the buffer), which is kept in *err as file:line. */
char *gf_ini_reader_line(gf_ini_lines *l, gf_first_error *err, const char *file, int num);

/* What a file source may hold: recipes, ablation and prompt-pair files are short texts, and a
 * line or a file beyond these is a wrong path (`/dev/zero`, a binary), refused before it is read
 * to the end. */
#define GF_INI_MAX_LINE_BYTES 65536
#define GF_INI_MAX_FILE_BYTES (1 << 20)
void gf_ini_lines_free(gf_ini_lines *l);

/* Strip spaces and tabs at both ends, in place. */
char *gf_ini_trim(char *s);

#endif
