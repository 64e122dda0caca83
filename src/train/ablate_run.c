/* ablate_run.c — an ablation's runs: every variant x seed's recipe loaded and validated before
 * anything trains, each run directory's state (done / resume / start / restart, and a recipe
 * that no longer matches), and training what is not finished. */
#include "train/ablate_internal.h"
#include "gflow/checkpoint.h"
#include "gflow/fs.h"
#include "gflow/train.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Load one variant x seed's recipe; on failure blame the first override that breaks it. */
static gf_status load_run_recipe(const gf_ablation *a, int64_t vi, int64_t seed_i, gf_ablate_run *run) {
    const gf_ablate_variant *v = &a->variants[vi];
    const char **sets = calloc((size_t)v->n_sets + 3, sizeof *sets);
    if (!sets) return gf_error_set(GF_E_NOMEM, "out of memory");
    char runname[GF_ABLATE_NAME + 32], s_dir[1200], s_name[GF_ABLATE_NAME + 48], s_seed[48];
    if (a->n_seeds) snprintf(runname, sizeof runname, "%s-seed%lld", v->name, (long long)a->seeds[seed_i]);
    else snprintf(runname, sizeof runname, "%s", v->name);
    snprintf(s_dir, sizeof s_dir, "run.out_dir=%s", a->study_dir);
    snprintf(s_name, sizeof s_name, "run.name=%s", runname);
    snprintf(s_seed, sizeof s_seed, "run.seed=%lld", a->n_seeds ? (long long)a->seeds[seed_i] : 0LL);
    int64_t n = 0;
    for (int64_t j = 0; j < v->n_sets; j++) sets[n++] = v->sets[j];
    sets[n++] = s_dir;
    sets[n++] = s_name;
    if (a->n_seeds) sets[n++] = s_seed;
    gf_status st = gf_recipe_load(a->base, sets, n, &run->recipe);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", gf_last_error());
        gf_recipe tmp;
        int64_t bad = -1;
        for (int64_t k = 0; k <= v->n_sets && bad < 0; k++)
            if (gf_recipe_load(a->base, sets, k, &tmp) != GF_OK) {
                bad = k;
                /* the recipe's own message, without its "--set section.key=value: " prefix */
                const char *e = gf_last_error();
                size_t pl = k > 0 ? strlen(v->sets[k - 1]) : 0;
                if (k > 0 && !strncmp(e, "--set ", 6) && !strncmp(e + 6, v->sets[k - 1], pl) && e[6 + pl] == ':')
                    e += 6 + pl + 1 + (e[7 + pl] == ' ');
                snprintf(msg, sizeof msg, "%s", e);
            }
        if (bad == 0) /* the base recipe itself */
            st = gf_error_set(st, "%s:%d: [ablation] base: %s", a->path, a->base_line, msg);
        else if (bad > 0)
            st = gf_error_set(st, "%s:%d: [variant %s] %s: %s", a->path, v->set_lines[bad - 1], v->name,
                              v->sets[bad - 1], msg);
        else
            st = gf_error_set(st, "%s:%d: [variant %s]: %s", a->path, v->line, v->name, msg);
    }
    free(sets);
    if (st) return st;
    run->variant = vi;
    run->seed = run->recipe.run.seed;
    int w = snprintf(run->run_dir, sizeof run->run_dir, "%s/%s", a->study_dir, runname);
    if (w >= (int)sizeof run->run_dir) return gf_error_set(GF_E_INVALID, "%s: run directory path too long", a->path);
    return GF_OK;
}

static int exists(const char *dir, const char *file) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return access(p, F_OK) == 0;
}

/* The first line where two resolved recipes differ (run.threads and run.device ignored: where a
 * run computes is not part of what it is, gf_recipe_same_run). */
static gf_status same_recipe(const gf_recipe *want, const gf_recipe *have_in, const char *where, const char *variant_at) {
    gf_recipe have = *have_in;
    /* neither the thread count, the device, nor where token caches live makes another run (and
     * the cache_dir default moved from datasets/cache to the data directories' cache) */
    have.run.threads = want->run.threads;
    have.run.device = want->run.device;
    memcpy(have.tokenizer.cache_dir, want->tokenizer.cache_dir, sizeof have.tokenizer.cache_dir);
    if (gf_recipe_equal(want, &have)) return GF_OK;
    char *ta = NULL, *tb = NULL;
    gf_status st = gf_recipe_resolved_text(want, &ta);
    if (!st) st = gf_recipe_resolved_text(&have, &tb);
    char diff[400] = "?";
    if (!st) {
        const char *p = ta, *q = tb, *sec = "";
        char secbuf[64] = "";
        while (*p && *q) {
            size_t la = strcspn(p, "\n"), lb = strcspn(q, "\n");
            if (*p == '[') { snprintf(secbuf, sizeof secbuf, "%.*s", (int)(la < 60 ? la : 60), p); sec = secbuf; }
            if (la != lb || memcmp(p, q, la)) {
                snprintf(diff, sizeof diff, "%s %.*s (ablation) vs %.*s (run)", sec, (int)(la < 150 ? la : 150), p,
                         (int)(lb < 150 ? lb : 150), q);
                break;
            }
            p += la + (p[la] != 0);
            q += lb + (q[lb] != 0);
        }
    }
    free(ta);
    free(tb);
    if (st) return st;
    return gf_error_set(GF_E_INVALID,
                        "%s: %s was run with a different recipe (%s); remove that run directory to rerun it, or "
                        "restore the override",
                        variant_at, where, diff);
}

static gf_status run_state(const gf_ablation *a, gf_ablate_run *run) {
    const gf_ablate_variant *v = &a->variants[run->variant];
    char at[1200];
    if (v->line) snprintf(at, sizeof at, "%s:%d: [variant %s]", a->path, v->line, v->name);
    else snprintf(at, sizeof at, "%s: variant base", a->path);
    run->step_done = 0;
    if (exists(run->run_dir, "summary.tsv")) {
        run->state = GF_ABLATE_DONE;
        char p[1200];
        snprintf(p, sizeof p, "%s/recipe.ini", run->run_dir);
        gf_recipe have;
        if (access(p, F_OK) == 0) {
            GF_TRY(gf_recipe_load(p, NULL, 0, &have));
            GF_TRY(same_recipe(&run->recipe, &have, run->run_dir, at));
        }
        return GF_OK;
    }
    if (exists(run->run_dir, "last.ckpt")) {
        run->state = GF_ABLATE_RESUME;
        char p[1200];
        snprintf(p, sizeof p, "%s/last.ckpt", run->run_dir);
        gf_ckpt_meta m;
        gf_recipe have;
        GF_TRY(gf_ckpt_peek_recipe(p, &have, &m));
        run->step_done = m.step;
        gf_ckpt_meta_free(&m);
        return same_recipe(&run->recipe, &have, run->run_dir, at);
    }
    run->state = exists(run->run_dir, "metrics.tsv") ? GF_ABLATE_RESTART : GF_ABLATE_START;
    return GF_OK;
}

gf_status gf_ablation_refresh(gf_ablation *a) {
    for (int64_t i = 0; i < a->n_runs; i++) {
        GF_TRY(run_state(a, &a->runs[i]));
        if (a->runs[i].state == GF_ABLATE_DONE) a->runs[i].failed = 0; /* finished since */
    }
    return GF_OK;
}

int64_t gf_ablation_failed(const gf_ablation *a) {
    int64_t n = 0;
    for (int64_t i = 0; i < a->n_runs; i++) n += a->runs[i].failed != 0;
    return n;
}

/* the run's directory name under the study directory */
static const char *run_name(const gf_ablation *a, const gf_ablate_run *run) {
    return run->run_dir + strlen(a->study_dir) + 1;
}

/* Record a failed attempt: its error on one line (tabs and line breaks as spaces), for
 * failures.tsv and the summary. */
static void mark_failed(gf_ablate_run *run, const char *error) {
    run->failed = 1;
    snprintf(run->error, sizeof run->error, "%s", error);
    for (char *c = run->error; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
}

/* <study_dir>/failures.tsv: "run<TAB>error" of every run whose last attempt failed; removed when
 * none did. Written after each attempt, so a study stopped later still knows. */
static gf_status save_failures(const gf_ablation *a) {
    char path[1200];
    snprintf(path, sizeof path, "%s/failures.tsv", a->study_dir);
    if (!gf_ablation_failed(a)) {
        if (unlink(path) != 0 && errno != ENOENT)
            return gf_error_set(GF_E_IO, "%s: cannot remove: %s", path, strerror(errno));
        return GF_OK;
    }
    GF_TRY(gf_mkdir_p(a->study_dir));
    gf_atomic_file af;
    FILE *f;
    GF_TRY(gf_atomic_fopen(&af, path, &f));
    fprintf(f, "run\terror\n");
    for (int64_t i = 0; i < a->n_runs; i++)
        if (a->runs[i].failed) fprintf(f, "%s\t%s\n", run_name(a, &a->runs[i]), a->runs[i].error);
    return gf_atomic_finish(&af, GF_OK);
}

/* The failures an earlier `gflow ablate` recorded (failures.tsv; lines naming no run of the
 * study are ignored, a run finished since is not failed). */
static gf_status load_failures(gf_ablation *a) {
    char path[1200], line[2048];
    snprintf(path, sizeof path, "%s/failures.tsv", a->study_dir);
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? GF_OK : gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        for (int64_t i = 0; i < a->n_runs; i++)
            if (a->runs[i].state != GF_ABLATE_DONE && !strcmp(run_name(a, &a->runs[i]), line))
                mark_failed(&a->runs[i], tab + 1);
    }
    fclose(f);
    return GF_OK;
}

gf_status gf_ablation_load(const char *path, gf_ablation *a) {
    memset(a, 0, sizeof *a);
    gf_status st = gf_ablate_parse_file(path, a);
    if (!st) st = gf_ablate_check_outputs(a);
    int64_t per = a->n_seeds ? a->n_seeds : 1;
    if (!st) {
        a->n_runs = a->n_variants * per;
        a->runs = calloc((size_t)a->n_runs, sizeof *a->runs);
        if (!a->runs) st = gf_error_set(GF_E_NOMEM, "out of memory");
    }
    /* every recipe first, so a typo in the last variant fails before hours of training */
    for (int64_t i = 0; !st && i < a->n_runs; i++) st = load_run_recipe(a, i / per, i % per, &a->runs[i]);
    if (!st) st = gf_ablation_refresh(a);
    if (!st) st = load_failures(a);
    if (st) gf_ablation_free(a);
    return st;
}

static int wanted(const gf_ablate_opts *o, const char *name) {
    if (!o->n_only) return 1;
    for (int64_t i = 0; i < o->n_only; i++)
        if (!strcmp(o->only[i], name)) return 1;
    return 0;
}

/* One run's attempt failed: say so, keep its error, and let the study go on. The run's state is
 * read again (a failure after a checkpoint leaves it resumable). */
static gf_status run_failed(gf_ablation *a, gf_ablate_run *run) {
    mark_failed(run, gf_last_error());
    fprintf(stderr, "gflow ablate: %s failed: %s; going on with the next run (run the study again to retry it)\n",
            run->run_dir, run->error);
    gf_ablate_state was = run->state;
    if (run_state(a, run) != GF_OK) run->state = was;
    return save_failures(a);
}

gf_status gf_ablation_run(gf_ablation *a, const gf_ablate_opts *o, int *interrupted) {
    *interrupted = 0;
    for (int64_t i = 0; i < o->n_only; i++)
        if (gf_ablation_find(a, o->only[i]) < 0)
            return gf_error_set(GF_E_INVALID, "%s: no variant named '%s'", a->path, o->only[i]);
    GF_TRY(gf_ablation_refresh(a));
    for (int64_t i = 0; i < a->n_runs; i++) {
        gf_ablate_run *run = &a->runs[i];
        const char *vname = a->variants[run->variant].name;
        if (!wanted(o, vname)) continue;
        if (run->state == GF_ABLATE_DONE) {
            if (!o->quiet) fprintf(stderr, "ablate: %s: finished, skipped\n", run->run_dir);
            continue;
        }
        if (o->stop_flag && *o->stop_flag) { *interrupted = 1; return GF_OK; }
        gf_train_opts to = {.quiet = o->quiet, .stop_flag = o->stop_flag, .stop_after = o->stop_after};
        if (run->state == GF_ABLATE_RESUME) to.resume_dir = run->run_dir;
        if (run->state == GF_ABLATE_RESTART) to.overwrite = 1;
        if (!o->quiet)
            fprintf(stderr, "ablate: %s: %s%s\n", run->run_dir,
                    run->state == GF_ABLATE_RESUME ? "resuming" : run->state == GF_ABLATE_RESTART ? "restarting (no checkpoint)" : "starting",
                    run->failed ? " (it failed before: retrying)" : "");
        int intr = 0;
        if (gf_train_run(&run->recipe, &to, &intr) != GF_OK) {
            GF_TRY(run_failed(a, run));
            continue;
        }
        GF_TRY(run_state(a, run));
        if (run->failed) { run->failed = 0; GF_TRY(save_failures(a)); }
        if (intr) { *interrupted = 1; return GF_OK; }
    }
    return GF_OK;
}
