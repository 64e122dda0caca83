/* rundir.c — a run directory's summary.tsv and metrics.tsv, and gnuplot
 * (see gflow/rundir.h). */
#include "gflow/rundir.h"
#include "gflow/fs.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- clearing a run directory for a new run */

static const char *const k_run_own[] = {"last.ckpt", "best.ckpt", "metrics.tsv", "speed.tsv", "summary.tsv",
                                        "recipe.ini"};

/* 1 for a name a run or a probe of it writes (probe-*.tsv, probe-*.png), or the atomic writer's
 * tmp file of one ("<name>.tmp", "<name>.tmp<pid>") */
static int run_owned(const char *name) {
    char base[256];
    if (snprintf(base, sizeof base, "%s", name) >= (int)sizeof base) return 0;
    char *tmp = strstr(base, ".tmp");
    if (tmp && tmp[4 + strspn(tmp + 4, "0123456789")] == 0) *tmp = 0;
    for (size_t i = 0; i < sizeof k_run_own / sizeof k_run_own[0]; i++)
        if (!strcmp(base, k_run_own[i])) return 1;
    size_t n = strlen(base);
    return !strncmp(base, "probe-", 6) && n > 10 && (!strcmp(base + n - 4, ".tsv") || !strcmp(base + n - 4, ".png"));
}

static int run_dir_holds(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

/* check (a link to a device or a directory is refused, as every output: gf_output_regular), or
 * remove, every file of a run in dir */
static gf_status clear_pass(const char *dir, int unlink_them) {
    DIR *d = opendir(dir);
    if (!d) return gf_error_set(GF_E_IO, "%s: cannot list the run directory: %s", dir, strerror(errno));
    gf_status st = GF_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!run_owned(e->d_name)) continue;
        if (!unlink_them) st = gf_output_regular(path);
        else if (unlink(path) != 0 && errno != ENOENT) /* a link is removed itself, never followed */
            st = gf_error_set(GF_E_IO, "%s: cannot remove the previous run's file: %s", path, strerror(errno));
    }
    closedir(d);
    return st;
}

gf_status gf_run_dir_clear(const char *dir) {
    if (!run_dir_holds(dir, "recipe.ini") && !run_dir_holds(dir, "last.ckpt") && !run_dir_holds(dir, "best.ckpt") &&
        !run_dir_holds(dir, "metrics.tsv"))
        return GF_OK; /* not a run directory: nothing in it is gflow's */
    GF_TRY(clear_pass(dir, 0));
    return clear_pass(dir, 1);
}

int gf_run_summary_read(const char *dir, gf_run_summary *s) {
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.tsv", dir);
    s->n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1200];
    while (s->n < GF_RUN_SUMMARY_MAX && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        char *v = tab + 1;
        v[strcspn(v, "\r\n")] = 0;
        snprintf(s->kv[s->n].key, sizeof s->kv[s->n].key, "%.63s", line);
        snprintf(s->kv[s->n].val, sizeof s->kv[s->n].val, "%.511s", v);
        s->n++;
    }
    fclose(f);
    return s->n;
}

const char *gf_run_summary_get(const gf_run_summary *s, const char *key) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->kv[i].key, key)) return s->kv[i].val;
    return NULL;
}

double gf_run_summary_num(const gf_run_summary *s, const char *key) {
    const char *v = gf_run_summary_get(s, key);
    if (!v) return NAN;
    char *end;
    double x = strtod(v, &end);
    return end == v ? NAN : x;
}

/* a number as metrics.tsv writes it ("-" for none, inf and nan included), the whole field */
static int metrics_number(const char *f) {
    if (!strcmp(f, "-")) return 1;
    char *end;
    errno = 0;
    (void)strtod(f, &end);
    return end != f && *end == 0;
}

/* One row of metrics.tsv into *r; NULL, or what is wrong with it. */
static const char *metrics_parse(char *line, gf_metrics_row *r) {
    static const char *const names[] = {"step", "epoch", "split", "loss", "ppl", "ppl_word", "acc", "lr", "gnorm"};
    char *field[10];
    int n = 0;
    for (char *p = line;; p++) {
        if (n == 10) return "more than 9 tab-separated fields";
        field[n++] = p;
        p += strcspn(p, "\t");
        if (!*p) break;
        *p = 0;
    }
    if (n < 5) return "fewer than 5 tab-separated fields (step, epoch, split, loss, ppl)";
    char *end;
    r->step = strtoll(field[0], &end, 10);
    if (end == field[0] || *end || r->step < 0) return "step is not a count";
    r->epoch = strtoll(field[1], &end, 10);
    if (end == field[1] || *end || r->epoch < 0) return "epoch is not a count";
    if (strcmp(field[2], "train") && strcmp(field[2], "valid") && strcmp(field[2], "test"))
        return "split is not train, valid or test";
    for (int i = 3; i < n; i++)
        if (!metrics_number(field[i]) || strlen(field[i]) >= sizeof r->loss) {
            static _Thread_local char why[64];
            snprintf(why, sizeof why, "%s is not a number or '-'", names[i]);
            return why;
        }
    snprintf(r->split, sizeof r->split, "%s", field[2]);
    char *dst[4] = {r->loss, r->ppl, r->ppl_word, r->acc};
    for (int i = 0; i < 4; i++) snprintf(dst[i], sizeof r->loss, "%s", 3 + i < n ? field[3 + i] : "-");
    r->n_fields = n < 7 ? n : 7;
    return NULL;
}

gf_status gf_run_metrics_scan(const char *dir, void (*fn)(const gf_metrics_row *row, void *user), void *user) {
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", path, strerror(errno));
    char line[512];
    long long lineno = 0;
    gf_status st = GF_OK;
    while (!st && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        int torn = len == 0 || line[len - 1] != '\n';
        if (torn && len == sizeof line - 1)
            st = gf_error_set(GF_E_PARSE, "%s:%lld: line longer than %zu bytes (not a gflow metrics table)", path,
                              lineno, sizeof line - 2);
        if (torn) break; /* the last line, cut where a killed run stopped writing it */
        line[len - 1] = 0;
        if (lineno == 1) {
            if (strncmp(line, "step\tepoch\tsplit\t", 17))
                st = gf_error_set(GF_E_PARSE, "%s:1: not a gflow metrics table (its header starts "
                                  "'step<TAB>epoch<TAB>split')", path);
            continue;
        }
        gf_metrics_row r;
        const char *why = metrics_parse(line, &r);
        if (why) st = gf_error_set(GF_E_PARSE, "%s:%lld: %s", path, lineno, why);
        else fn(&r, user);
    }
    if (!st && ferror(f)) st = gf_error_set(GF_E_IO, "%s: read error after line %lld", path, lineno);
    fclose(f);
    return st;
}

void gf_gnuplot_string(FILE *g, const char *s) {
    /* gnuplot substitutes nothing inside single quotes (no `...`, no @macro); '' is a quote, and
     * a line break would end the command, so control characters become spaces */
    fputc('\'', g);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'') fputs("''", g);
        else fputc(c < 0x20 || c == 0x7f ? ' ' : c, g);
    }
    fputc('\'', g);
}

/* a PNG that gnuplot finished: the signature first and the IEND chunk last (a full disk or a
 * file-size limit cuts it, and gnuplot may still exit 0) */
static int png_complete(int fd, long long *size) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    struct stat st;
    unsigned char b[12];
    *size = fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
    if (*size < 20) return 0;
    return pread(fd, b, 8, 0) == 8 && !memcmp(b, sig, 8) && pread(fd, b, 12, st.st_size - 12) == 12 &&
           !memcmp(b, iend, 12);
}

/* gnuplot with stdin from a pipe and stdout the tmp file; no shell in between */
static gf_status gnuplot_run(const char *script, int quiet, int out_fd, int *wstatus) {
    int in[2];
    if (pipe(in) != 0) return gf_error_set(GF_E_IO, "cannot run gnuplot: %s", strerror(errno));
    fcntl(in[0], F_SETFD, FD_CLOEXEC);
    fcntl(in[1], F_SETFD, FD_CLOEXEC); /* else gnuplot holds its own stdin open and never ends */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    if (quiet) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)"gnuplot", NULL};
    pid_t pid;
    int e = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    if (e) {
        close(in[1]);
        return gf_error_set(GF_E_EXTERNAL, "cannot run gnuplot: %s", strerror(e));
    }
    /* a gnuplot that stops reading early must not kill us with SIGPIPE */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    for (size_t n = strlen(script); n > 0;) {
        ssize_t w = write(in[1], script, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break; /* its exit status says what went wrong */
        script += w;
        n -= (size_t)w;
    }
    close(in[1]);
    sigaction(SIGPIPE, &old, NULL);
    while (waitpid(pid, wstatus, 0) < 0)
        if (errno != EINTR) return gf_error_set(GF_E_EXTERNAL, "gnuplot: wait failed: %s", strerror(errno));
    return GF_OK;
}

gf_status gf_gnuplot(const char *script, int quiet, const char *png, const char *hint) {
    gf_atomic_file af;
    GF_TRY(gf_atomic_open(&af, png));
    int ws = 0;
    gf_status st = gnuplot_run(script, quiet, af.fd, &ws);
    long long size = 0;
    if (st) st = gf_error_set(GF_E_EXTERNAL, "%s, for %s (%s)", gf_last_error(), png, hint);
    else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        st = gf_error_set(GF_E_EXTERNAL, "gnuplot failed writing %s (%s); %s is unchanged", png, hint, png);
    else if (!png_complete(af.fd, &size))
        st = gf_error_set(GF_E_IO, "%s: gnuplot's PNG is incomplete (%lld bytes: a full disk or a file-size limit?); "
                          "%s is unchanged", png, size, png);
    if (st) {
        gf_atomic_abort(&af);
        return st;
    }
    return gf_atomic_commit(&af);
}
