/* test_selftest_bench.c — the two commands that need no data, through the real binary:
 * `gflow selftest` passes when trained long enough and fails (exit 1) when not; `gflow bench`
 * on the CPU reports a model of the recipe's size at its initial loss, and its figures agree
 * with each other (tokens/s with ms/step, training FLOPs with forward FLOPs). */
#include "gf_test.h"
#include "rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* `gflow ARGS` with stdout and stderr to <tmp>/rel/NAME.out; its text (caller frees), status in *rc */
static char *gflow_out(const char *name, const char *args, int *rc) {
    char out[900], cmd[3000];
    snprintf(out, sizeof out, "%s/../%s.out", rel_runs_dir(), name);
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2>&1", rel_gflow_exe(), args, out);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return gf_test_slurp(out, NULL);
}

/* the number after "key: " in text, NAN when absent */
static double field(const char *text, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *p = text ? strstr(text, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

GF_TEST(smoke, selftest_passes_and_can_fail) {
    int rc;
    char *t = gflow_out("selftest", "selftest --steps 200 --threads 1", &rc);
    GF_CHECK(rc == 0 && t && strstr(t, ", PASS\n"), "selftest 200 steps: exit %d: %s", rc, t ? t : "");
    free(t);
    /* one step cannot reach a tenth of ln V: the check must say FAIL and exit 1 */
    t = gflow_out("selftest", "selftest --steps 1 --threads 1", &rc);
    GF_CHECK(rc == 1 && t && strstr(t, ", FAIL\n"), "selftest 1 step: exit %d: %s", rc, t ? t : "");
    free(t);
}

GF_TEST(smoke, bench_cpu_figures_agree) {
    char args[1200];
    int rc;
    snprintf(args, sizeof args, "info '%s'", rel_base_recipe());
    char *info = gflow_out("bench-info", args, &rc);
    GF_REQUIRE(rc == 0 && info, "gflow info: %s", info ? info : "");
    double params = field(info, "parameters");
    free(info);
    snprintf(args, sizeof args, "bench '%s' --steps 3 --warmup 1 --peak-n 0 --no-profile --threads 1",
             rel_base_recipe());
    char *t = gflow_out("bench", args, &rc);
    GF_REQUIRE(rc == 0 && t, "gflow bench: exit %d: %s", rc, t ? t : "");
    double loss = field(t, "loss_last"), tps = field(t, "tokens_per_s"),
           ms = field(t, "ms_per_step"), fwd = field(t, "flops_per_token_fwd"),
           train = field(t, "flops_per_step_train");
    const char *bl = strstr(t, " V="), *ll = strstr(t, " L="), *bb = strstr(t, " B=");
    GF_REQUIRE(bl && ll && bb, "bench header lacks V=, L=, B=: %s", t);
    double V = strtod(bl + 3, NULL), L = strtod(ll + 3, NULL), B = strtod(bb + 3, NULL);
    GF_CHECK(field(t, "params") == params, "bench params %g, gflow info %g", field(t, "params"), params);
    /* random tokens: an untrained model's loss is about ln V */
    GF_CHECK(fabs(loss - log(V)) < 0.3, "loss_last %g, ln V %g", loss, log(V));
    GF_CHECK(tps > 0 && fabs(tps - B * L * 1000.0 / ms) <= 0.01 * tps, "tokens/s %g, B*L/ms_per_step %g", tps,
             B * L * 1000.0 / ms);
    GF_CHECK(fwd > 0 && fabs(train - 3 * fwd * B * L) <= 1e-3 * train, "training FLOPs %g, 3 x forward x B*L %g",
             train, 3 * fwd * B * L);
    free(t);
}

/* Issue 35 item 3: a step that cannot fit is refused before the first step, with exit 1 and one
 * line naming the keys and the estimate against what the process may use
 * (gf_session_memory_check); a step that passes that lower bound and still runs out is one
 * error line naming the step arena, not an abort (exit 134); a batch of 10^9 rows names
 * batch_size and the size. */
static void check_refusal(const rel_limits *lim, const char *const *args, const char *n1, const char *n2) {
    rel_result res;
    rel_gflow_limited(&res, lim, args);
    GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, n1) && strstr(res.err, n2),
             "gflow %s %s %s %s: exit %d (signal %d), want 1 and one line with '%s' and '%s': %s", args[0], args[1],
             args[2], args[3], res.exit_code, res.signal, n1, n2, res.err);
}

GF_TEST(smoke, rel_step_memory_checked_before_first_step) {
    const char *huge[] = {"train", rel_base_recipe(), "--quiet", "--set", "train.batch_size=1000000000", "--set",
                          "run.name=huge-batch", NULL};
    rel_limits none = {.seconds = 120};
    check_refusal(&none, huge, "[train] batch_size", "1000000000");
#if defined(__SANITIZE_ADDRESS__)
    gf_test_skip("RLIMIT_AS cases: ASan reserves terabytes of address space");
#else
    /* 2,000,000 KiB as `ulimit -v 2000000`; bench of the base model (d 32, 2 layers, seq_len 16) */
    rel_limits as = {.as_bytes = 2000000LL * 1024, .seconds = 120};
    const char *big[] = {"bench", rel_base_recipe(), "--batch", "100000", "--peak-n", "0", "--steps", "1", NULL};
    check_refusal(&as, big, "batch_size", "RLIMIT_AS");
    check_refusal(&as, big, "seq_len", "d_model");
    /* the lower bound (1.0 GB) passes, the step's arena does not fit in what is left; a
     * 512-token vocabulary runs out in the first ops (the default 30,522's head took 50 s) */
    const char *arena[] = {"bench", rel_base_recipe(), "--batch", "12000", "--peak-n", "0", "--steps", "1",
                           "--warmup", "0", "--set", "tokenizer.vocab_size=512", NULL};
    check_refusal(&as, arena, "step arena", "batch_size");
#endif
}

/* `gflow bench --products`: gf_gemm's products by shape. Their FLOPs are the model's training
 * FLOPs but for the Plücker pairs (3 x 2 x layers x offsets x 2P per token), the base recipe's r 6,
 * 3 offsets, 2 layers: in fp32 exactly; in bf16 plus the head's vocabulary padded to a multiple of
 * 256 (head_ce.c), and with time spent rounding B (the weights at least; an A whose op wrote its
 * bits, gf_gemm_round_into, takes none). The rows add up to the total, rounding columns too. */
static void check_products(const char *precision) {
    char args[1200];
    int rc;
    snprintf(args, sizeof args, "bench '%s' --steps 2 --warmup 1 --peak-n 0 --threads 1 --products --set run.precision=%s",
             rel_base_recipe(), precision);
    char *t = gflow_out("bench-products", args, &rc);
    GF_REQUIRE(rc == 0 && t, "gflow %s: exit %d: %s", args, rc, t ? t : "");
    const char *bl = strstr(t, " V="), *bb = strstr(t, " B="), *ll = strstr(t, " L="), *tot = strstr(t, "\ngemm_products_total: ");
    GF_REQUIRE(bl && bb && ll && tot, "bench --products: no header or no gemm_products_total: %s", t);
    const double V = strtod(bl + 3, NULL), B = strtod(bb + 3, NULL), L = strtod(ll + 3, NULL);
    double ms = 0, rounding = 0, ra = 0, rb = 0, flops = 0, sum_ms = 0, sum_flops = 0;
    const int got = sscanf(tot, "\ngemm_products_total: %lf ms/step, %*f GFLOP/s, %lf ms rounding/step (A %lf, B %lf), "
                           "%lf FLOPs/step", &ms, &rounding, &ra, &rb, &flops); /* (no % in a check's condition: it
                                                                                 * joins the message's format) */
    GF_REQUIRE(got == 5, "gemm_products_total unreadable: %s", tot);
    GF_CHECK(fabs(ra + rb - rounding) <= 0.11, "rounding %g ms, A %g + B %g", rounding, ra, rb);
    int rows = 0;
    double sum_ra = 0, sum_rb = 0;
    for (const char *p = strstr(t, "\ngemm_product: "); p; p = strstr(p + 1, "\ngemm_product: ")) {
        double M, N, K, calls, rms, a, b;
        const int n = sscanf(p, "\ngemm_product: %lf %lf %lf %*c %*c %*s %lf %lf %*f %lf %lf", &M, &N, &K, &calls, &rms,
                             &a, &b);
        GF_REQUIRE(n == 7, "a gemm_product row unreadable: %.80s", p + 1);
        GF_CHECK(calls >= 0.5 && rms >= 0 && a >= 0 && b >= 0, "row %.60s: calls/step %g, ms %g, rounding %g %g", p + 1,
                 calls, rms, a, b);
        sum_flops += 2 * M * N * K * calls, sum_ms += rms, sum_ra += a, sum_rb += b, rows++;
    }
    GF_CHECK(fabs(sum_ra - ra) <= 0.005 * rows + 0.005 && fabs(sum_rb - rb) <= 0.005 * rows + 0.005,
             "rows' rounding A %g, B %g; total A %g, B %g", sum_ra, sum_rb, ra, rb);
    GF_CHECK(rows >= 10, "%d product shapes in a GrassmannLM step", rows);
    GF_CHECK(fabs(sum_flops - flops) <= 1e-5 * flops, "rows' FLOPs %.9g, total %.9g", sum_flops, flops);
    GF_CHECK(fabs(sum_ms - ms) <= 0.01 * rows + 0.05, "rows' ms %g, total %g", sum_ms, ms);
    const double pairs = 3 * 2 * 2 * 3 * 2 * (6 * 5 / 2) * B * L, train = field(t, "flops_per_step_train");
    const int bf16 = !strcmp(precision, "bf16");
    const double pad = bf16 ? 3 * 2 * (ceil(V / 256) * 256 - V) * 32 * B * L : 0;
    GF_CHECK(fabs(flops - (train - pairs + pad)) <= 1e-5 * train,
             "%s: products' FLOPs %.9g, the model's %.9g less the pairs' %.9g plus the head's pad %.9g", precision, flops,
             train, pairs, pad);
    GF_CHECK(bf16 ? rb > 0 : ra == 0 && rb == 0, "%s: %g ms rounding A, %g B a step", precision, ra, rb);
    free(t);
}

/* `gflow bench`'s op lines split the op families' time by op: forward and backward each add up
 * to the families' (every interval an op times goes to one family and one op; a backward call
 * to its op's family and its op) */
GF_TEST(smoke, bench_ops_add_up_to_the_families) {
    char args[1200];
    int rc;
    snprintf(args, sizeof args, "bench '%s' --steps 2 --warmup 1 --peak-n 0 --threads 1", rel_base_recipe());
    char *t = gflow_out("bench-ops", args, &rc);
    GF_REQUIRE(rc == 0 && t, "gflow %s: exit %d: %s", args, rc, t ? t : "");
    double fam_f = 0, fam_b = 0, op_f = 0, op_b = 0;
    int fams = 0, ops = 0, plucker = 0, head = 0;
    for (const char *p = strstr(t, "\nms_"); p; p = strstr(p + 1, "\nms_")) {
        double f, b;
        if (sscanf(p, "\nms_%*[a-z]: fwd %lf bwd %lf", &f, &b) == 2) fam_f += f, fam_b += b, fams++;
    }
    for (const char *p = strstr(t, "\nop: "); p; p = strstr(p + 1, "\nop: ")) {
        const char *e = strchr(p + 1, '\n'), *sp = e;
        GF_REQUIRE(e, "an op line without its end: %.80s", p + 1);
        for (int k = 0; k < 2; k++) /* the two numbers are the line's last two words */
            for (sp--; sp > p && *sp != ' '; sp--) {}
        double f, b;
        const int got = sscanf(sp, " %lf %lf", &f, &b); /* (not in the check: its % would join the message's format) */
        GF_REQUIRE(got == 2, "an op line unreadable: %.80s", p + 1);
        GF_CHECK(f >= 0 && b >= 0, "op line %.60s: negative", p + 1);
        plucker |= !strncmp(p + 5, "plucker_mix ", 12), head |= !strncmp(p + 5, "head_ce ", 8);
        op_f += f, op_b += b, ops++;
    }
    GF_CHECK(fams == 4 && ops >= 5 && plucker && head, "%d families, %d ops (plucker_mix %d, head_ce %d): %s", fams,
             ops, plucker, head, t);
    const double tol = 0.05 * fams + 0.005 * ops + 1e-9; /* the lines' rounding */
    GF_CHECK(fabs(op_f - fam_f) <= tol && fabs(op_b - fam_b) <= tol,
             "ops: forward %g backward %g ms, families: %g and %g", op_f, op_b, fam_f, fam_b);
    free(t);
}

GF_TEST(smoke, bench_products_are_the_models_products) {
    check_products("fp32");
    check_products("bf16");
    /* where the host does not time gf_gemm: a usage error naming both, nothing run */
    char args[1200];
    int rc;
    snprintf(args, sizeof args, "bench '%s' --products --generate", rel_base_recipe());
    char *t = gflow_out("bench-products-generate", args, &rc);
    GF_CHECK(rc == 2 && t && strstr(t, "--products") && strstr(t, "--generate") && !strstr(t, "prefill"),
             "bench --products --generate: exit %d: %s", rc, t ? t : "");
    free(t);
}
