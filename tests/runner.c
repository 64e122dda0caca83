/* runner.c — gflow's single test runner; see gf_test.h.
 * Prints one line per test and, last, exactly "N passed, M failed".
 * Tests run sorted by (file, name) so output is stable, each in a forked child so a crash
 * counts as one failure and the summary line is always printed. */
#include "gf_test.h"
#include "gflow/error.h"
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { const char *suite, *name, *file; gf_test_fn fn; } test_entry;
static test_entry tests[1024];
static int n_tests;
static int cur_failed, cur_skipped;
static char skip_reason[512];
static char tmpdir[512];

void gf_test_register(const char *suite, const char *name, const char *file, gf_test_fn fn) {
    if (n_tests < (int)(sizeof tests / sizeof tests[0]))
        tests[n_tests++] = (test_entry){suite, name, file, fn};
}

int gf_test_require_gpu(void) {
    const char *e = getenv("GF_REQUIRE_GPU");
    return e && *e && strcmp(e, "0");
}

/* suite gates (GF_TEST_GATE): asked once, before the suite's first test */
typedef struct { const char *suite; gf_test_gate_fn fn; int asked, closed; } gate_entry;
static gate_entry gates[16];
static int n_gates;

void gf_test_register_gate(const char *suite, gf_test_gate_fn fn) {
    if (n_gates < (int)(sizeof gates / sizeof gates[0])) gates[n_gates++] = (gate_entry){suite, fn, 0, 0};
}

/* Ask a gate in a child process (a gate may initialise a GPU runtime, which a process that
 * forks the tests must not have done) and read its reason back through a pipe. Returns 1 when
 * the suite is closed (after printing its SKIP line), 0 when open, -1 when the gate crashed. */
static int ask_gate(const gate_entry *g) {
    int fd[2];
    if (pipe(fd) != 0) { perror("pipe"); exit(2); }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        const char *why = g->fn();
        if (why && write(fd[1], why, strlen(why)) < 0) _exit(3);
        _exit(0);
    }
    close(fd[1]);
    char why[512];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof why - 1 && (got = read(fd[0], why + len, sizeof why - 1 - len)) > 0) len += (size_t)got;
    why[len] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("FAIL  %s: its suite gate crashed (status %d)\n", g->suite, st);
        return -1;
    }
    if (len == 0) return 0;
    printf("SKIP %s: %s\n", g->suite, why);
    return 1;
}

/* 1 when the suite's gate closed it (asking the gate the first time), else 0; a crashed gate
 * counts as one failure and closes the suite */
static int suite_closed(const char *suite, int *failed) {
    for (int i = 0; i < n_gates; i++) {
        gate_entry *g = &gates[i];
        if (strcmp(g->suite, suite)) continue;
        if (!g->asked) {
            g->asked = 1;
            int r = ask_gate(g);
            if (r < 0) (*failed)++;
            if (r > 0 && gf_test_require_gpu()) { /* the GPU machine's script: a closed gate is a failure */
                printf("FAIL  %s: GF_REQUIRE_GPU=1 and the suite cannot run here (the SKIP line says why)\n", suite);
                (*failed)++;
            }
            g->closed = r != 0;
        }
        return g->closed;
    }
    return 0;
}

void gf_test_fail(const char *file, int line, const char *fmt, ...) {
    if (cur_failed < 20) { /* keep the log readable when a whole tensor mismatches */
        fprintf(stdout, "    FAIL %s:%d: ", file, line);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
    }
    cur_failed++;
}

void gf_test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
    cur_skipped = 1;
}

int gf_test_failed_now(void) { return cur_failed; }

const char *gf_test_tmpdir(void) {
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/gf_tests.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) { perror("mkdtemp"); exit(2); }
    }
    return tmpdir;
}

static int cmp(const void *a, const void *b) {
    const test_entry *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

static void usage(void) {
    printf("usage: gf_tests [--suite S]... [--list] [NAME-SUBSTRING...]\n"
           "  runs gflow's C tests; suites: unit grad golden data smoke slow cuda (default: all but slow;\n"
           "  --suite again adds a suite)\n");
}

int main(int argc, char **argv) {
    const char *suites[16];
    int list = 0, n_pat = 0, n_suites = 0;
    const char *pats[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--suite") && i + 1 < argc) {
            if (n_suites < 16) suites[n_suites++] = argv[i + 1];
            i++;
        }
        else if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
        else if (n_pat < 64) pats[n_pat++] = argv[i];
    }
    qsort(tests, (size_t)n_tests, sizeof tests[0], cmp);
    int passed = 0, failed = 0, skipped = 0, gated = 0;
    /* a suite named with --suite says whether it runs here even when none of its tests is
     * compiled in (tests/cuda/ in a build without CUDA) */
    for (int k = 0; k < n_suites && !list; k++) gated |= suite_closed(suites[k], &failed);
    for (int i = 0; i < n_tests; i++) {
        test_entry *t = &tests[i];
        int in_suite = 0;
        for (int k = 0; k < n_suites; k++) in_suite |= !strcmp(t->suite, suites[k]);
        if (n_suites ? !in_suite : (!n_pat && !strcmp(t->suite, "slow"))) continue;
        int match = n_pat == 0;
        for (int p = 0; p < n_pat; p++) if (strstr(t->name, pats[p])) match = 1;
        if (!match) continue;
        if (list) { printf("%s/%s\n", t->suite, t->name); continue; }
        if (suite_closed(t->suite, &failed)) { gated = 1; continue; }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        fflush(stdout);
        /* each test runs in its own process: a crash is one failed test, not a lost run */
        pid_t pid = fork();
        if (pid == 0) {
            cur_failed = 0;
            cur_skipped = 0;
            gf_error_clear();
            t->fn();
            if (cur_skipped && !cur_failed) printf("SKIP  %s/%s: %s\n", t->suite, t->name, skip_reason);
            fflush(stdout);
            _exit(cur_failed ? 1 : cur_skipped ? 77 : 0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6;
        if (WIFSIGNALED(st)) { failed++; printf("FAIL  %s/%s (crashed: signal %d, %.0f ms)\n", t->suite, t->name, WTERMSIG(st), ms); }
        else if (WEXITSTATUS(st) == 77) skipped++;
        else if (WEXITSTATUS(st) != 0) { failed++; printf("FAIL  %s/%s (%.0f ms)\n", t->suite, t->name, ms); }
        else { passed++; printf("ok    %s/%s (%.0f ms)\n", t->suite, t->name, ms); }
        fflush(stdout);
    }
    if (list) return 0;
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    if (failed) return 1;
    return gated && !passed && !skipped ? 77 : 0; /* only closed suites: meson reports a skip */
}
