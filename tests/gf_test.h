/* gf_test.h — the single C test runner's registration and check macros.
 *
 * A test is a function declared with GF_TEST(suite, name) in any tests/<stage>/ .c
 * file linked into gf_tests; a constructor registers it, so adding a test
 * file touches no shared list. Checks record a failure and keep going within
 * the test (so one run shows every mismatch); GF_REQUIRE returns at once.
 *
 *   GF_TEST(unit, arena_reset) {
 *       GF_CHECK(x == 3, "x=%d", x);
 *       GF_CHECK_NEAR(a, b, 1e-6, 1e-5);   // |a-b| <= atol + rtol*|b|
 *   }
 *
 * Suites: unit, grad, golden, data, smoke, slow, cuda. `gf_tests --suite grad`
 * runs one suite, `gf_tests NAME...` runs tests whose name contains NAME.
 * Exit status is non-zero when any test failed; the last line printed is
 * exactly "N passed, M failed".
 *
 * A suite that needs something the machine may lack has a gate (in any of its files):
 *
 *   GF_TEST_GATE(cuda) { return gpu_visible() ? NULL : "no CUDA device visible"; }
 *
 * The runner asks the gate once (in a child process), before the suite's first test. When it
 * returns a reason, the runner prints the one line "SKIP cuda: <reason>" and runs and counts
 * none of the suite's tests (not passed, not skipped); a run in which nothing else ran then
 * exits 77, which meson reports as a skip. With GF_REQUIRE_GPU=1 in the environment (the GPU
 * machine's script, tools/gpu_check.sh) a closed gate is also one failure: a missing GPU cannot
 * pass for a green suite.
 */
#ifndef GF_TEST_H
#define GF_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*gf_test_fn)(void);
void gf_test_register(const char *suite, const char *name, const char *file, gf_test_fn fn);
typedef const char *(*gf_test_gate_fn)(void);
void gf_test_register_gate(const char *suite, gf_test_gate_fn fn);
/* 1 when $GF_REQUIRE_GPU is set and not "0" */
int gf_test_require_gpu(void);
void gf_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Mark the running test skipped (e.g. the data mirror is absent) with a reason. */
void gf_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int gf_test_failed_now(void);
/* A scratch directory unique to this test run (created on first use). */
const char *gf_test_tmpdir(void);

#define GF_TEST(suite, name)                                                  \
    static void gf_test_##suite##_##name(void);                               \
    __attribute__((constructor)) static void gf_test_reg_##suite##_##name(void) { \
        gf_test_register(#suite, #name, __FILE__, gf_test_##suite##_##name);  \
    }                                                                         \
    static void gf_test_##suite##_##name(void)

#define GF_TEST_GATE(suite)                                                   \
    static const char *gf_gate_##suite(void);                                 \
    __attribute__((constructor)) static void gf_gate_reg_##suite(void) {      \
        gf_test_register_gate(#suite, gf_gate_##suite);                       \
    }                                                                         \
    static const char *gf_gate_##suite(void)

#define GF_CHECK(cond, ...)                                                   \
    do { if (!(cond)) gf_test_fail(__FILE__, __LINE__, "check failed: " #cond " :: " __VA_ARGS__); } while (0)

#define GF_REQUIRE(cond, ...)                                                 \
    do { if (!(cond)) { gf_test_fail(__FILE__, __LINE__, "required: " #cond " :: " __VA_ARGS__); return; } } while (0)

/* |a-b| <= atol + rtol*|b|, b being the reference value. */
#define GF_CHECK_NEAR(a, b, atol, rtol)                                       \
    do { double gf_a_ = (double)(a), gf_b_ = (double)(b);                     \
         if (!(fabs(gf_a_ - gf_b_) <= (atol) + (rtol) * fabs(gf_b_)))         \
             gf_test_fail(__FILE__, __LINE__, "%s = %.9g, expected %s = %.9g (atol %g, rtol %g)", \
                          #a, gf_a_, #b, gf_b_, (double)(atol), (double)(rtol)); } while (0)

/* Status must be GF_OK; prints gf_last_error() otherwise. */
#define GF_CHECK_OK(expr)                                                     \
    do { gf_status gf_s_ = (expr);                                            \
         if (gf_s_ != GF_OK) gf_test_fail(__FILE__, __LINE__, "%s -> %s: %s", #expr, \
                                          gf_status_name(gf_s_), gf_last_error()); } while (0)
#define GF_REQUIRE_OK(expr)                                                   \
    do { gf_status gf_s_ = (expr);                                            \
         if (gf_s_ != GF_OK) { gf_test_fail(__FILE__, __LINE__, "%s -> %s: %s", #expr, \
                                          gf_status_name(gf_s_), gf_last_error()); return; } } while (0)

/* Expect a given non-OK status and a message containing `needle`. */
#define GF_CHECK_ERR(expr, code, needle)                                      \
    do { gf_status gf_s_ = (expr);                                            \
         if (gf_s_ != (code)) gf_test_fail(__FILE__, __LINE__, "%s -> %s (%s), expected %s", #expr, \
                                   gf_status_name(gf_s_), gf_last_error(), gf_status_name(code)); \
         else if ((needle) && !strstr(gf_last_error(), (needle)))             \
             gf_test_fail(__FILE__, __LINE__, "%s: message '%s' lacks '%s'", #expr, gf_last_error(), (needle)); \
    } while (0)

#endif
