/* error.c — per-thread last-error message and the abort path; see gflow/error.h. */
#include "gflow/error.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GF_ERRMSG_MAX 2048
static _Thread_local char gf_errmsg[GF_ERRMSG_MAX];

gf_status gf_error_set(gf_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gf_errmsg, sizeof gf_errmsg, fmt, ap);
    va_end(ap);
    return code;
}

gf_status gf_error_wrap(gf_status code, const char *fmt, ...) {
    char prefix[GF_ERRMSG_MAX], old[GF_ERRMSG_MAX];
    memcpy(old, gf_errmsg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* truncation is acceptable for a message: keep as much of the prefix and old text as fits */
    size_t np = strnlen(prefix, sizeof gf_errmsg - 1);
    memcpy(gf_errmsg, prefix, np);
    size_t no = strnlen(old, sizeof gf_errmsg - 1 - np);
    memcpy(gf_errmsg + np, old, no);
    gf_errmsg[np + no] = 0;
    return code;
}

const char *gf_last_error(void) { return gf_errmsg; }
void gf_error_clear(void) { gf_errmsg[0] = 0; }

const char *gf_status_name(gf_status s) {
    static const char *names[GF_E_COUNT] = {
        "ok", "invalid", "io", "parse", "corrupt", "not-found", "no-memory", "non-finite", "external"};
    return (s >= 0 && s < GF_E_COUNT) ? names[s] : "unknown";
}

void gf_first_error_vset(gf_first_error *e, const char *file, int line, gf_status code, const char *fmt,
                         va_list ap) {
    if (e->line) return; /* keep the first */
    e->line = line ? line : -1;
    e->code = code;
    int k = snprintf(e->msg, sizeof e->msg, "%s:%d: ", file, line);
    if (k < 0 || (size_t)k >= sizeof e->msg) return;
    vsnprintf(e->msg + k, sizeof e->msg - (size_t)k, fmt, ap);
}

void gf_first_error_set(gf_first_error *e, const char *file, int line, gf_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gf_first_error_vset(e, file, line, code, fmt, ap);
    va_end(ap);
}

GF_NORETURN void gf_fatal(gf_status code, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "gflow: error (%s): ", gf_status_name(code));
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

GF_NORETURN void gf_abort(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "gflow: internal error at %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}
