/* gflow/error.h — the one status type and the two-tier error convention.
 *
 * User and environment errors (I/O, recipe, data, checkpoint, tokenizer, shape
 * mismatch on load) are returned as a gf_status; the message, which names the
 * file, line, key or tensor at fault, is kept per thread and read back with
 * gf_last_error(). Only src/cli/ turns a status into an exit code.
 * Programmer errors (violated invariants) use GF_ASSERT, which aborts.
 */
#ifndef GFLOW_ERROR_H
#define GFLOW_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#define GF_NORETURN [[noreturn]]
#else
#define GF_NORETURN _Noreturn
#endif

typedef enum gf_status {
    GF_OK = 0,
    GF_E_INVALID,   /* bad argument or value (recipe key, command line, shape) */
    GF_E_IO,        /* open/read/write/rename failed */
    GF_E_PARSE,     /* malformed text input (recipe, csv, json) */
    GF_E_CORRUPT,   /* binary file fails magic/version/checksum/structure */
    GF_E_NOTFOUND,  /* missing file, split, key or tensor */
    GF_E_NOMEM,     /* allocation failed */
    GF_E_NONFINITE, /* NaN/Inf met in loss or gradient */
    GF_E_EXTERNAL,  /* a library (SentencePiece, BLAS, MPI) reported an error */
    GF_E_COUNT
} gf_status;

/* Set the thread's last error message (printf-style) and return `code`, so
 * callers can write `return gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));`. */
gf_status gf_error_set(gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix the current message with more context ("loading ckpt: " + old). */
gf_status gf_error_wrap(gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *gf_last_error(void);
const char *gf_status_name(gf_status s);
void gf_error_clear(void);

/* The first fault a line-by-line parser meets (recipes, ablation files), kept as
 * "file:line: message": later faults are often echoes of it, so they are dropped, and the parser
 * stops reading once one is kept. */
typedef struct gf_first_error {
    int line; /* where it was met (0: none kept; -1: before the first line) */
    gf_status code;
    char msg[1024];
} gf_first_error;
/* Keep this fault unless one is kept already. */
void gf_first_error_set(gf_first_error *e, const char *file, int line, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void gf_first_error_vset(gf_first_error *e, const char *file, int line, gf_status code, const char *fmt,
                         va_list ap) __attribute__((format(printf, 5, 0)));

/* A user-facing failure where no status can travel back (an arena allocation deep inside an
 * op): prints "gflow: error (<status>): message" as the CLI does for a status, and exits 1. */
GF_NORETURN void gf_fatal(gf_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Programmer errors only. Prints file:line and the message, then aborts. */
GF_NORETURN void gf_abort(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define GF_ASSERT(cond, ...) \
    do { if (!(cond)) gf_abort(__FILE__, __LINE__, __VA_ARGS__); } while (0)

/* Propagate a non-OK status. */
#define GF_TRY(expr) \
    do { gf_status gf_try_s_ = (expr); if (gf_try_s_ != GF_OK) return gf_try_s_; } while (0)

#ifdef __cplusplus
}
#endif

#endif
