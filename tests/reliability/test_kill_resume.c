/* test_kill_resume.c — SIGKILL a real `gflow train` at random moments and while a checkpoint
 * is being written, resume each time, and require the final metrics.tsv and the weights (and
 * AdamW moments) of last.ckpt and best.ckpt to be byte-identical to an uninterrupted run.
 * A partial "<name>.ckpt.tmp" left by a kill must never be taken for a checkpoint. */
#include "gf_test.h"
#include "gflow/checkpoint.h"
#include "gflow/rng.h"
#include "rel_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wait for pid; kill it with SIGKILL after `delay` seconds, or (delay < 0) as soon as the
 * n-th "*.ckpt.tmp" file appears in dir (final_name NULL) or the n-th time final_name is renamed
 * into place. Returns 1 when it was killed, 0 when it exited. */
static int kill_on_trigger_ex(pid_t pid, const char *dir, double delay, int nth, const char *final_name,
                              int *saw_tmp) {
    int ifd = -1;
    if (delay < 0) {
        ifd = inotify_init1(IN_NONBLOCK);
        /* the run directory may not exist yet: create it so we can watch it (gflow's mkdir -p
         * accepts an existing directory) */
        mkdir(dir, 0755);
        if (ifd >= 0 && inotify_add_watch(ifd, dir, IN_CREATE | IN_MOVED_TO) < 0) { close(ifd); ifd = -1; }
    }
    double t0 = now_s();
    int seen = 0, status;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) { if (ifd >= 0) close(ifd); return 0; }
        if (delay >= 0) {
            if (now_s() - t0 >= delay) break;
            usleep(2000);
            continue;
        }
        if (ifd < 0) break;
        struct pollfd pf = {ifd, POLLIN, 0};
        if (poll(&pf, 1, 5) <= 0) continue;
        char buf[4096] __attribute__((aligned(8)));
        ssize_t n = read(ifd, buf, sizeof buf);
        int fire = 0;
        for (ssize_t off = 0; off < n;) {
            struct inotify_event *ev = (struct inotify_event *)(buf + off);
            size_t l = ev->len ? strlen(ev->name) : 0;
            int hit = final_name ? (ev->mask & IN_MOVED_TO) && l && !strcmp(ev->name, final_name)
                                 : (ev->mask & IN_CREATE) && l > 9 && !strcmp(ev->name + l - 9, ".ckpt.tmp");
            if (hit && ++seen >= nth) fire = 1;
            off += (ssize_t)(sizeof *ev + ev->len);
        }
        if (fire) break;
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (ifd >= 0) close(ifd);
    /* debris from this kill: a .ckpt.tmp other than the 16-byte garbage planted before resuming */
    char t[900];
    struct stat sb;
    const char *names[] = {"last.ckpt.tmp", "best.ckpt.tmp"};
    for (int i = 0; i < 2; i++) {
        snprintf(t, sizeof t, "%s/%s", dir, names[i]);
        if (stat(t, &sb) == 0 && sb.st_size != 16) { (*saw_tmp)++; break; }
    }
    return 1;
}

static int kill_on_trigger(pid_t pid, const char *dir, double delay, int nth, int *saw_tmp) {
    return kill_on_trigger_ex(pid, dir, delay, nth, NULL, saw_tmp);
}

GF_TEST(smoke, rel_kill_resume_bit_identical) {
    const char *base = rel_base_recipe(), *runs = rel_runs_dir();
    char ref[800], kd[800], log[800], p[900], q[900];
    snprintf(ref, sizeof ref, "%s/kr-ref", runs);
    snprintf(kd, sizeof kd, "%s/kr-kill", runs);
    snprintf(log, sizeof log, "%s/kr.log", runs);
    /* 60 steps, a checkpoint (and a partial evaluation) every 3 steps, a full one at the end */
    const char *common[] = {"--set", "train.max_steps=60", "--set", "train.eval_every=3", "--set",
                            "train.eval_batches=2"};
    rel_result res;
    double t0 = now_s();
    {
        const char *a[] = {"train", base, "--quiet", "--set", "run.name=kr-ref", common[0], common[1], common[2],
                           common[3], common[4], common[5], NULL};
        rel_gflow(&res, 0, a);
        GF_REQUIRE(res.exit_code == 0, "reference run failed (%d): %s", res.exit_code, res.err);
    }
    double t_ref = now_s() - t0;

    gf_rng rng;
    unsigned seed = (unsigned)time(NULL);
    if (getenv("GF_REL_SEED")) seed = (unsigned)strtoul(getenv("GF_REL_SEED"), NULL, 10);
    gf_rng_seed(&rng, seed);
    /* kill plan: random moments alternate with kills right after a checkpoint's .tmp appears */
    int kills = 0, tmp_kills = 0, saw_tmp = 0, finished = 0, resumes = 0;
    for (int k = 0; k < 8 && !finished; k++) {
        snprintf(p, sizeof p, "%s/last.ckpt", kd);
        int have_ckpt = access(p, F_OK) == 0;
        pid_t pid;
        if (!have_ckpt) {
            /* killed before the first checkpoint: start afresh over the debris */
            const char *a[] = {"train", base, "--quiet", "--overwrite", "--set", "run.name=kr-kill", common[0],
                               common[1], common[2], common[3], common[4], common[5], NULL};
            pid = rel_gflow_spawn(log, a);
        } else {
            /* a stray .tmp must be ignored: plant garbage when the kill left none */
            snprintf(q, sizeof q, "%s/last.ckpt.tmp", kd);
            if (access(q, F_OK) != 0) gf_test_write_file(q, "GFLOWCK1 garbage", 16);
            const char *a[] = {"train", "--resume", kd, "--quiet", NULL};
            pid = rel_gflow_spawn(log, a);
            resumes++;
        }
        int by_tmp = k % 2 == 1;
        /* random kills land in the first quarter of a reference run: a resumed run is shorter than the
         * reference, and a loaded machine stretches the reference, so later moments may miss */
        double delay = by_tmp ? -1.0 : 0.02 + gf_rng_uniform(&rng) * 0.25 * t_ref;
        int nth = 1 + (int)gf_rng_below(&rng, 4);
        int before = saw_tmp;
        if (kill_on_trigger(pid, kd, delay, nth, &saw_tmp)) {
            kills++;
            tmp_kills += by_tmp;
            printf("    kill %d: %s -> %s\n", kills, by_tmp ? "at a checkpoint write" : "at a random moment",
                   saw_tmp > before ? ".tmp debris left" : "no debris");
        } else {
            finished = 1;
        }
    }
    if (!finished) {
        const char *a[] = {"train", "--resume", kd, "--quiet", NULL};
        rel_gflow(&res, 0, a);
        GF_REQUIRE(res.exit_code == 0, "final resume failed (%d): %s", res.exit_code, res.err);
        resumes++;
    }
    printf("    seed %u: %d kills (%d at checkpoint writes, %d left .tmp debris), %d resumes, ref run %.2f s\n",
           seed, kills, tmp_kills, saw_tmp, resumes, t_ref);
    GF_CHECK(kills >= 4, "only %d kills landed (seed %u)", kills, seed);
    GF_CHECK(saw_tmp >= 1, "no kill interrupted a checkpoint write (seed %u)", seed);

    const char *files[] = {"metrics.tsv"}; /* recipe.ini differs by run.name */
    for (int i = 0; i < 1; i++) {
        snprintf(p, sizeof p, "%s/%s", ref, files[i]);
        snprintf(q, sizeof q, "%s/%s", kd, files[i]);
        GF_CHECK(rel_files_equal(p, q), "%s differs from the uninterrupted run (seed %u)", files[i], seed);
    }
    const char *ck[] = {"last.ckpt", "best.ckpt"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", ref, ck[i]);
        snprintf(q, sizeof q, "%s/%s", kd, ck[i]);
        const char *why;
        GF_CHECK(rel_ckpt_weights_equal(p, q, &why), "%s: %s (seed %u)", ck[i], why, seed);
    }
    /* debris may stay (a best.ckpt.tmp whose save was killed is only replaced by the next best
     * save), but it is never read: evaluating the run uses the committed files only */
    const char *e[] = {"eval", kd, "--ckpt", "last", NULL};
    rel_gflow(&res, 0, e);
    GF_CHECK(res.exit_code == 0, "gflow eval --ckpt last on the resumed run: %s", res.err);
}

/* Killed in the last moments: after the final last.ckpt (marked finished) is in place but
 * before the best checkpoint's test evaluation and summary.tsv are written. The resumed run
 * must still produce the test line of metrics.tsv and summary.tsv. */
GF_TEST(smoke, rel_kill_after_final_checkpoint) {
    const char *base = rel_base_recipe(), *runs = rel_runs_dir();
    char ref[800], kd[800], log[800], p[900], q[900];
    snprintf(ref, sizeof ref, "%s/kf-ref", runs);
    snprintf(kd, sizeof kd, "%s/kf-kill", runs);
    snprintf(log, sizeof log, "%s/kf.log", runs);
    rel_result res;
    const char *a[] = {"train", base, "--quiet", "--set", "run.name=kf-ref", "--set", "train.max_steps=20", NULL};
    rel_gflow(&res, 0, a);
    GF_REQUIRE(res.exit_code == 0, "reference run failed (%d): %s", res.exit_code, res.err);
    /* last.ckpt is written at steps 5, 10, 15, 20 (eval_every 5) and once more, finished, at the end */
    const char *b[] = {"train", base, "--quiet", "--set", "run.name=kf-kill", "--set", "train.max_steps=20", NULL};
    int saw = 0;
    pid_t pid = rel_gflow_spawn(log, b);
    int killed = kill_on_trigger_ex(pid, kd, -1.0, 5, "last.ckpt", &saw);
    GF_REQUIRE(killed, "the run ended before the kill");
    const char *c[] = {"train", "--resume", kd, "--quiet", NULL};
    rel_gflow(&res, 0, c);
    GF_CHECK(res.exit_code == 0, "resume after the final checkpoint failed (%d): %s", res.exit_code, res.err);
    snprintf(p, sizeof p, "%s/metrics.tsv", ref);
    snprintf(q, sizeof q, "%s/metrics.tsv", kd);
    GF_CHECK(rel_files_equal(p, q), "metrics.tsv differs (test line missing?) from the uninterrupted run");
    snprintf(q, sizeof q, "%s/summary.tsv", kd);
    GF_CHECK(access(q, F_OK) == 0, "%s missing after resuming a run killed during its final evaluation", q);
}

/* `gflow train base --quiet --overwrite --set run.name=NAME` + sets (NULL-terminated) */
static pid_t spawn_named(const char *log, const char *name, const char *const *sets) {
    char sn[128];
    snprintf(sn, sizeof sn, "run.name=%s", name);
    const char *a[32] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", sn};
    int n = 6;
    for (int i = 0; sets[i]; i++) { a[n++] = "--set"; a[n++] = sets[i]; }
    a[n] = NULL;
    return rel_gflow_spawn(log, a);
}

static int wait_exit(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* [train] save_every / save_every_min: last.ckpt between evaluations. A kill after such a save
 * resumes from it and ends byte-identical to an uninterrupted run; a minutes-based cadence (here
 * ~6 ms, so it saves at steps that depend on the machine's load) changes nothing either. */
/* the step last.ckpt of run dir kd holds */
static long long last_ckpt_step(const char *kd) {
    char p[900];
    snprintf(p, sizeof p, "%s/last.ckpt", kd);
    gf_ckpt_meta m;
    gf_ckpt_meta_init(&m);
    long long at = gf_ckpt_peek(p, &m) == GF_OK ? (long long)m.step : -1; /* -1 fails the callers' checks */
    gf_ckpt_meta_free(&m);
    return at;
}

/* `train --resume kd` must succeed and end where the uninterrupted run ref ended: the same
 * metrics.tsv bytes, the same weights and moments in last.ckpt and best.ckpt */
static void resume_matches(const char *name, const char *kd, const char *ref, const char *how, long long at) {
    char p[900], q[900];
    const char *r[] = {"train", "--resume", kd, "--quiet", NULL};
    rel_result res;
    rel_gflow(&res, 0, r);
    GF_CHECK(res.exit_code == 0, "%s: resume after %s at step %lld: %s", name, how, at, res.err);
    snprintf(p, sizeof p, "%s/metrics.tsv", ref);
    snprintf(q, sizeof q, "%s/metrics.tsv", kd);
    GF_CHECK(rel_files_equal(p, q), "%s: metrics.tsv differs from the uninterrupted run (%s at step %lld)", name, how,
             at);
    const char *ck[] = {"last.ckpt", "best.ckpt"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", ref, ck[i]);
        snprintf(q, sizeof q, "%s/%s", kd, ck[i]);
        const char *why;
        GF_CHECK(rel_ckpt_weights_equal(p, q, &why), "%s: %s: %s", name, ck[i], why);
    }
}

GF_TEST(smoke, rel_kill_between_evaluations_after_save_every) {
    const char *runs = rel_runs_dir();
    char ref[800], kd[800], log[800];
    snprintf(ref, sizeof ref, "%s/se-ref", runs);
    snprintf(log, sizeof log, "%s/se.log", runs);
    /* evaluations (and their saves) at steps 20 and 40 only */
    const char *base[] = {"train.max_steps=40", "train.eval_every=20", "train.eval_batches=2", "train.save_every_min=0",
                          NULL};
    GF_REQUIRE(wait_exit(spawn_named(log, "se-ref", base)) == 0, "reference run failed (see %s)", log);
    struct { const char *name, *every, *minutes; int nth; } cases[] = {
        {"se-steps", "train.save_every=3", "train.save_every_min=0", 3},      /* saves at 3, 6, 9: killed after 9 */
        {"se-minutes", "train.save_every=0", "train.save_every_min=0.0001", 4}, /* wherever 6 ms have passed */
    };
    for (int c = 0; c < 2; c++) {
        snprintf(kd, sizeof kd, "%s/%s", runs, cases[c].name);
        const char *sets[] = {base[0], base[1], base[2], cases[c].every, cases[c].minutes, NULL};
        int saw = 0;
        pid_t pid = spawn_named(log, cases[c].name, sets);
        GF_REQUIRE(kill_on_trigger_ex(pid, kd, -1.0, cases[c].nth, "last.ckpt", &saw),
                   "%s: the run ended before the kill", cases[c].name);
        long long at = last_ckpt_step(kd);
        if (c == 0) GF_CHECK(at == 9, "%s: the 3rd save of save_every = 3 is at step %lld", cases[c].name, at);
        printf("    %s: killed after the save at step %lld\n", cases[c].name, at);
        resume_matches(cases[c].name, kd, ref, "the kill", at);
    }
}

/* Wait until path holds a line with "\ttrain\t" (the first training step is done, so the signal
 * handlers are installed) or pid exits. Returns 1 when seen; polls, no fixed sleep to race. */
static int wait_train_row(pid_t pid, const char *path, double timeout_s) {
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return 0;
        char *m = gf_test_slurp(path, NULL);
        int seen = m && strstr(m, "\ttrain\t");
        free(m);
        if (seen) return 1;
        usleep(1000);
    }
    return 0;
}

/* SIGTERM (`timeout -s TERM`) and SIGINT (Ctrl-C) during training: gflow finishes its step, saves
 * last.ckpt and exits 130; `train --resume` then ends byte-identical to an uninterrupted run.
 * 120 steps keep the run going long after the first train row, where the signal is sent. */
GF_TEST(smoke, rel_sigterm_sigint_stop_resumable) {
    const char *runs = rel_runs_dir();
    char ref[800], kd[800], log[800], p[900];
    snprintf(ref, sizeof ref, "%s/sg-ref", runs);
    snprintf(log, sizeof log, "%s/sg.log", runs);
    const char *sets[] = {"train.max_steps=120", "train.eval_every=40", "train.eval_batches=2", NULL};
    GF_REQUIRE(wait_exit(spawn_named(log, "sg-ref", sets)) == 0, "reference run failed (see %s)", log);
    struct { const char *name; int sig; } cases[] = {{"sg-term", SIGTERM}, {"sg-int", SIGINT}};
    for (int c = 0; c < 2; c++) {
        snprintf(kd, sizeof kd, "%s/%s", runs, cases[c].name);
        snprintf(p, sizeof p, "%s/metrics.tsv", kd);
        pid_t pid = spawn_named(log, cases[c].name, sets);
        int started = wait_train_row(pid, p, 120.0);
        if (started) kill(pid, cases[c].sig);
        int rc = wait_exit(pid);
        GF_REQUIRE(started, "%s: no train row in %s before the run ended (see %s)", cases[c].name, p, log);
        GF_CHECK(rc == 130, "%s: exit %d after signal %d, want 130 (see %s)", cases[c].name, rc, cases[c].sig, log);
        long long at = last_ckpt_step(kd);
        GF_CHECK(at >= 1 && at < 120, "%s: last.ckpt at step %lld, want an unfinished run", cases[c].name, at);
        printf("    %s: stopped at step %lld\n", cases[c].name, at);
        resume_matches(cases[c].name, kd, ref, "the signal", at);
    }
}

/* a /proc file's contents (its size reads as 0, so gf_test_slurp cannot), NUL-terminated */
static char *slurp_proc(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16;
    char *b = malloc(cap + 1);
    *n = b ? fread(b, 1, cap, f) : 0;
    fclose(f);
    if (b) b[*n] = 0;
    return b;
}

/* 1 when the NUL-separated environment block env (n bytes) holds the entry want */
static int env_has(const char *env, size_t n, const char *want) {
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (!strcmp(env + i, want)) return 1;
    return 0;
}

/* README and docs/performance.md: gflow sets OMP_WAIT_POLICY=passive and OPENBLAS_THREAD_TIMEOUT=4
 * where the user did not (re-executing itself, so the runtimes read them at load) and leaves a
 * user's value alone. Read from the running process's /proc/PID/environ, which exec replaces. */
GF_TEST(smoke, rel_gflow_sets_thread_wait_env) {
    unsetenv("OMP_WAIT_POLICY"); /* this test's own forked child: the runner is unaffected */
    setenv("OPENBLAS_THREAD_TIMEOUT", "7", 1);
    char kd[800], log[800], p[900];
    snprintf(kd, sizeof kd, "%s/env-run", rel_runs_dir());
    snprintf(log, sizeof log, "%s/env.log", rel_runs_dir());
    snprintf(p, sizeof p, "%s/metrics.tsv", kd);
    const char *sets[] = {"train.max_steps=120", "train.eval_every=0", NULL};
    pid_t pid = spawn_named(log, "env-run", sets);
    int started = wait_train_row(pid, p, 120.0);
    char ep[64];
    snprintf(ep, sizeof ep, "/proc/%d/environ", (int)pid);
    size_t n = 0;
    char *env = started ? slurp_proc(ep, &n) : NULL;
    kill(pid, SIGKILL);
    wait_exit(pid);
    GF_REQUIRE(env, "no train row, or %s unreadable (see %s)", ep, log);
    GF_CHECK(env_has(env, n, "OMP_WAIT_POLICY=passive"), "OMP_WAIT_POLICY=passive not set in the running gflow");
    GF_CHECK(env_has(env, n, "OPENBLAS_THREAD_TIMEOUT=7"), "the user's OPENBLAS_THREAD_TIMEOUT=7 was not kept");
    free(env);
}
