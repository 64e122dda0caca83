/* args.c — the one parser of command lines. Every command's options come from its table
 * (gf_cli_spec) through getopt_long, and its --help from the same table; every numeric value goes
 * through gf_arg_int / gf_arg_real, so "--batch 7x", "--threads abc", "--temperature nan" and
 * out-of-range values are refused the same way (usage error naming the option). */
#include "cli.h"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int gf_arg_ckpt(const gf_cli_spec *spec, const char *v, const char **which) {
    if (strcmp(v, "best") && strcmp(v, "last")) {
        gf_cli_usage(spec, "--ckpt must be best or last, got '%s'", v);
        return 0;
    }
    *which = v;
    return 1;
}

int gf_arg_stop_after(const char *cmd, const char *v, int64_t *steps) {
    long long n;
    if (!gf_arg_int(cmd, "--stop-after", v, 1, LLONG_MAX, &n)) return 0;
    *steps = n;
    return 1;
}

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

/* --- the option tables (gf_cli_spec) --- */

#define GF_CLI_VAL0 256 /* getopt_long's val for table entry i: GF_CLI_VAL0 + i, clear of 'h', '?', ':' */

void gf_cli_begin(gf_cli *p, const gf_cli_spec *spec, int argc, char **argv) {
    *p = (gf_cli){.spec = spec, .argc = argc, .argv = argv};
    while (spec->opts[p->n_opts].name) p->n_opts++;
}

static void opt_label(const gf_cli_opt *o, char *buf, size_t n) {
    snprintf(buf, n, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

void gf_cli_help(const gf_cli_spec *spec, FILE *f) {
    const char *u = spec->usage;
    for (int first = 1; u; first = 0) { /* one "gflow NAME ..." line per synopsis line */
        const char *nl = strchr(u, '\n');
        int len = nl ? (int)(nl - u) : (int)strlen(u);
        fprintf(f, "%s gflow %s %.*s\n", first ? "usage:" : "      ", spec->name, len, u);
        u = nl ? nl + 1 : NULL;
    }
    if (spec->about) fprintf(f, "\n%s", spec->about);
    /* the option column: as wide as the widest "--name ARG", within reason */
    int col = (int)strlen("-h, --help");
    char lab[128];
    for (const gf_cli_opt *o = spec->opts; o->name; o++) {
        opt_label(o, lab, sizeof lab);
        if ((int)strlen(lab) > col && strlen(lab) <= 24) col = (int)strlen(lab);
    }
    fprintf(f, "\noptions:\n");
    for (const gf_cli_opt *o = spec->opts; o->name; o++) {
        opt_label(o, lab, sizeof lab);
        fprintf(f, "  %-*s  ", col, lab);
        for (const char *h = o->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "  %-*s  ", col, "");
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-*s  this help\n", col, "-h, --help");
    if (spec->more) fprintf(f, "\n%s", spec->more);
}

int gf_cli_usage(const gf_cli_spec *spec, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gflow %s: ", spec->name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (gflow %s --help lists the options)\n", spec->name);
    return GF_EXIT_USAGE;
}

/* What was wrong with the option word w that getopt_long refused: its name is unknown, or the
 * prefix of several, or a flag was given a value. */
static int refused(const gf_cli *p, const char *w) {
    const gf_cli_spec *s = p->spec;
    if (strncmp(w, "--", 2)) return gf_cli_usage(s, "unknown option '%s'", w);
    const char *name = w + 2, *eq = strchr(name, '=');
    int n = eq ? (int)(eq - name) : (int)strlen(name);
    if (n == 0) return gf_cli_usage(s, "unknown option '%s'", w); /* "--=x" */
    char cand[512] = "";
    int hits = 0;
    for (int i = 0; i <= p->n_opts; i++) { /* the table, then --help */
        const char *o = i < p->n_opts ? s->opts[i].name : "help";
        if (strncmp(o, name, (size_t)n)) continue;
        if ((int)strlen(o) == n) { /* an exact name: it wins over the prefixes */
            snprintf(cand, sizeof cand, "--%s", o);
            hits = 1;
            break;
        }
        snprintf(cand + strlen(cand), sizeof cand - strlen(cand), "%s--%s", hits++ ? ", " : "", o);
    }
    if (hits > 1) return gf_cli_usage(s, "option '--%.*s' is ambiguous: %s", n, name, cand);
    if (hits == 1 && eq) return gf_cli_usage(s, "option %s takes no value (got '%s')", cand, w);
    return gf_cli_usage(s, "unknown option '--%.*s'", n, name);
}

int gf_cli_next(gf_cli *p, const char **val) {
    const gf_cli_spec *s = p->spec;
    struct option lo[GF_CLI_MAX_OPTS + 2];
    if (p->n_opts > GF_CLI_MAX_OPTS) return gf_cli_usage(s, "internal: more than %d options", GF_CLI_MAX_OPTS), GF_CLI_USAGE;
    for (int i = 0; i < p->n_opts; i++)
        lo[i] = (struct option){s->opts[i].name, s->opts[i].arg ? required_argument : no_argument, NULL, GF_CLI_VAL0 + i};
    lo[p->n_opts] = (struct option){"help", no_argument, NULL, 'h'};
    lo[p->n_opts + 1] = (struct option){0};
    if (!p->started) {
        optind = 0; /* glibc: start afresh (a test may parse several command lines in one process) */
        opterr = 0; /* our messages, naming the command */
        p->started = 1;
    }
    *val = NULL;
    /* ':' first: a missing value is told apart from an unknown option */
    int c = getopt_long(p->argc, p->argv, ":h", lo, NULL);
    if (c == -1) {
        p->pos = p->argv + optind;
        p->n_pos = p->argc - optind;
        return GF_CLI_END;
    }
    if (c == 'h') {
        gf_cli_help(s, stdout);
        return GF_CLI_HELP;
    }
    if (c == ':') {
        const gf_cli_opt *o = optopt >= GF_CLI_VAL0 ? &s->opts[optopt - GF_CLI_VAL0] : NULL;
        if (o) gf_cli_usage(s, "option '--%s' needs a value (%s)", o->name, o->arg);
        else gf_cli_usage(s, "option '-%c' needs a value", optopt);
        return GF_CLI_USAGE;
    }
    if (c == '?') {
        const char *w = p->argv[optind - 1]; /* getopt_long has stepped past a refused long option */
        if (!strncmp(w, "--", 2)) refused(p, w);
        else gf_cli_usage(s, "unknown option '-%c'", optopt);
        return GF_CLI_USAGE;
    }
    const gf_cli_opt *o = &s->opts[c - GF_CLI_VAL0];
    if (o->arg && !*optarg) /* an empty path would be "./.tmp", an empty number 0 */
        return gf_cli_usage(s, "option '--%s' needs a value (%s), got ''", o->name, o->arg), GF_CLI_USAGE;
    *val = optarg;
    return o->key;
}

int gf_cli_args(const gf_cli *p, int lo, int hi, const char *what) {
    if (p->n_pos > hi) return gf_cli_usage(p->spec, "unexpected argument '%s'", p->pos[hi]), 0;
    if (p->n_pos < lo) return gf_cli_usage(p->spec, "missing %s", what), 0;
    for (int i = 0; i < p->n_pos; i++) /* every argument names a file, a directory or a word */
        if (!*p->pos[i]) return gf_cli_usage(p->spec, "argument %d is empty ('')", i + 1), 0;
    return 1;
}
