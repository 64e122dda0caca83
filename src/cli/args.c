/* args.c — the one parser of numeric command-line values: every numeric flag of every
 * command goes through these, so "--batch 7x", "--threads abc", "--temperature nan" and
 * out-of-range values are refused the same way (usage error naming the option). */
#include "cli.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>

int gf_arg_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno == ERANGE || x < lo || x > hi) {
        fprintf(stderr, "gflow %s: %s needs an integer in [%lld, %lld], got '%s'\n", cmd, opt, lo, hi, v);
        return 0;
    }
    *out = x;
    return 1;
}

int gf_arg_real(const char *cmd, const char *opt, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno == ERANGE || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "gflow %s: %s needs a finite number in [%g, %g], got '%s'\n", cmd, opt, lo, hi, v);
        return 0;
    }
    *out = x;
    return 1;
}
