/* rundir.c — a run directory's summary.tsv and metrics.tsv, and the gnuplot pipe
 * (see gflow/rundir.h). */
#include "gflow/rundir.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int gf_run_metrics_scan(const char *dir, void (*fn)(const gf_metrics_row *row, void *user), void *user) {
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        gf_metrics_row r;
        r.n_fields = sscanf(line, "%lld\t%lld\t%15s\t%31s\t%31s\t%31s\t%31s", &r.step, &r.epoch, r.split, r.loss, r.ppl,
                            r.ppl_word, r.acc);
        if (r.n_fields >= 2) fn(&r, user);
    }
    fclose(f);
    return 1;
}

gf_status gf_gnuplot(const char *script, int quiet, const char *what, const char *hint) {
    FILE *g = popen(quiet ? "gnuplot >/dev/null 2>&1" : "gnuplot 2>&1", "w");
    if (!g) {
        if (what) return gf_error_set(GF_E_EXTERNAL, "cannot run gnuplot for %s: %s", what, strerror(errno));
        return gf_error_set(GF_E_EXTERNAL, "cannot run gnuplot: %s", strerror(errno));
    }
    fputs(script, g);
    if (pclose(g) != 0) {
        if (what) return gf_error_set(GF_E_EXTERNAL, "gnuplot failed writing %s (%s)", what, hint);
        return gf_error_set(GF_E_EXTERNAL, "gnuplot failed (%s)", hint);
    }
    return GF_OK;
}
