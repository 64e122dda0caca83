/* curvature.c — curvature of token trajectories through the blocks (arXiv 2511.03060).
 *
 * For a token at position t its hidden states h_0 (embeddings) .. h_N (after block N) form a
 * path; steps s_l = h_{l+1} − h_l (l = 0..N−1); the turning angle at h_l (l = 1..N−1) is
 * θ_l = angle(s_{l−1}, s_l): 0° goes straight on, 90° turns square, 180° doubles back.
 * Two nulls per layer:
 *   random    two isotropic Gaussian directions scaled to that token's |s_{l−1}|, |s_l| (the
 *             scale cannot change an angle; the null is ~90° with spread ~57°/√D)
 *   shuffled  the token's own N steps in a random order, so the angle between two of its real
 *             steps that are not consecutive: what is left when the layer order is destroyed
 * Contextual-edit deflection: two prompts that differ in one context word; for the last
 * (target) token, the relative distance δ_l = |h_l^A − h_l^B| / ½(|h_l^A| + |h_l^B|) and the
 * angle between the two trajectories' steps s_l^A, s_l^B. The bend layer is the block that
 * adds the most δ.
 */
#include "probe_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A small built-in set of WikiText-flavoured edits at various distances from the target (the
 * last word); pairs whose edited words tokenize to different lengths are skipped at run time. */
static const char *builtin_pairs[][2] = {
    {"The city of Paris is known for its", "The city of London is known for its"},
    {"He was born in England and", "He was born in France and"},
    {"The church was built in the", "The bridge was built in the"},
    {"The album was released in the United States and", "The film was released in the United States and"},
    {"The team won the match after the", "The team lost the match after the"},
    {"She walked into the river and", "She walked into the church and"},
    {"In the morning the soldiers marched to the", "In the evening the soldiers marched to the"},
    {"The song was written by a young", "The book was written by a young"},
    {"The war ended in the", "The game ended in the"},
    {"The army moved north to the", "The army moved south to the"},
    {"The ship sank off the coast of", "The ship sailed off the coast of"},
    {"The old man walked slowly along the road to the", "The young man walked slowly along the road to the"},
    {"In the north of the country , the river", "In the south of the country , the river"},
    {"The first game of the season was played at the", "The second game of the season was played at the"},
    {"During the war , the city was attacked by the", "During the storm , the city was attacked by the"},
    {"His father was a famous writer and his", "His mother was a famous writer and his"},
    {"The new church was built on a hill near the", "The old church was built on a hill near the"},
    {"After the battle the army returned to the", "After the election the army returned to the"},
    {"The small town is located on the east bank of the", "The large town is located on the east bank of the"},
};
#define N_BUILTIN ((int64_t)(sizeof builtin_pairs / sizeof builtin_pairs[0]))

/* hidden state l of token (b, t) */
static inline const float *hrow(gf_tensor *const *hid, int64_t l, int64_t b, int64_t t, int64_t L, int64_t D) {
    return hid[l]->data + (b * L + t) * D;
}

typedef struct {
    int64_t N, D, n_tok, cap;
    double **ang, **rnd, **shf; /* (N-1) arrays of per-token angles: model, random null, shuffled null */
    int64_t n_rnd;
    double *norm_sum;           /* (N) Σ |s_l| */
} curv_acc;

static gf_status acc_init(curv_acc *a, int64_t N, int64_t D, int64_t cap, int64_t null_samples) {
    memset(a, 0, sizeof *a);
    a->N = N; a->D = D; a->cap = cap;
    a->ang = calloc((size_t)N, sizeof(double *));
    a->rnd = calloc((size_t)N, sizeof(double *));
    a->shf = calloc((size_t)N, sizeof(double *));
    a->norm_sum = calloc((size_t)N, sizeof(double));
    if (!a->ang || !a->rnd || !a->shf || !a->norm_sum) return gf_error_set(GF_E_NOMEM, "curvature");
    for (int64_t l = 0; l + 1 < N; l++) {
        a->ang[l] = malloc((size_t)cap * sizeof(double));
        a->shf[l] = malloc((size_t)cap * sizeof(double));
        a->rnd[l] = malloc((size_t)(null_samples > 0 ? null_samples : 1) * sizeof(double));
        if (!a->ang[l] || !a->shf[l] || !a->rnd[l]) return gf_error_set(GF_E_NOMEM, "curvature: %lld angles", (long long)cap);
    }
    return GF_OK;
}

static void acc_free(curv_acc *a) {
    for (int64_t l = 0; l < a->N && a->ang; l++) { free(a->ang[l]); free(a->rnd[l]); free(a->shf[l]); }
    free(a->ang); free(a->rnd); free(a->shf); free(a->norm_sum);
}

static double vnorm(const float *x, int64_t d) {
    double s = 0;
    for (int64_t i = 0; i < d; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

double gf_null_random_angle(const float *s0, const float *s1, int64_t d, gf_rng *rng, float *u, float *v) {
    double n0 = 0, n1 = 0, g0 = 0, g1 = 0;
    for (int64_t j = 0; j < d; j++) {
        n0 += (double)s0[j] * s0[j];
        n1 += (double)s1[j] * s1[j];
        u[j] = (float)gf_rng_normal(rng);
        v[j] = (float)gf_rng_normal(rng);
        g0 += (double)u[j] * u[j];
        g1 += (double)v[j] * v[j];
    }
    double a = sqrt(n0 / g0), b = sqrt(n1 / g1);
    for (int64_t j = 0; j < d; j++) { u[j] = (float)(u[j] * a); v[j] = (float)(v[j] * b); }
    return gf_angle_deg(u, v, d);
}

void gf_null_shuffled_angles(const float *steps, int64_t n, int64_t d, gf_rng *rng, int64_t *perm, double *theta) {
    for (int64_t l = 0; l < n; l++) perm[l] = l;
    gf_rng_shuffle_i64(rng, perm, n);
    for (int64_t l = 0; l + 1 < n; l++) theta[l] = gf_angle_deg(steps + perm[l] * d, steps + perm[l + 1] * d, d);
}

/* One token's path: model angles and the shuffled null. steps: (N, D) scratch. */
static void token_path(curv_acc *a, gf_tensor *const *hid, int64_t b, int64_t t, int64_t L, float *steps, int64_t *perm,
                       double *theta, gf_rng *rng) {
    const int64_t N = a->N, D = a->D;
    for (int64_t l = 0; l < N; l++) {
        const float *h0 = hrow(hid, l, b, t, L, D), *h1 = hrow(hid, l + 1, b, t, L, D);
        for (int64_t j = 0; j < D; j++) steps[l * D + j] = h1[j] - h0[j];
        a->norm_sum[l] += vnorm(steps + l * D, D);
    }
    for (int64_t l = 0; l + 1 < N; l++) a->ang[l][a->n_tok] = gf_angle_deg(steps + l * D, steps + (l + 1) * D, D);
    gf_null_shuffled_angles(steps, N, D, rng, perm, theta);
    for (int64_t l = 0; l + 1 < N; l++) a->shf[l][a->n_tok] = theta[l];
    a->n_tok++;
}

/* Random-direction null: each draw takes a random token's pair of steps for their norms. */
static void random_null(curv_acc *a, gf_tensor *const *hid, int64_t Wb, int64_t L, int64_t samples, gf_rng *rng,
                        float *s0, float *s1, float *u, float *v) {
    const int64_t N = a->N, D = a->D;
    for (int64_t l = 0; l + 1 < N; l++)
        for (int64_t k = 0; k < samples; k++) {
            int64_t b = (int64_t)gf_rng_below(rng, (uint64_t)Wb), t = (int64_t)gf_rng_below(rng, (uint64_t)L);
            const float *h0 = hrow(hid, l, b, t, L, D), *h1 = hrow(hid, l + 1, b, t, L, D), *h2 = hrow(hid, l + 2, b, t, L, D);
            for (int64_t j = 0; j < D; j++) { s0[j] = h1[j] - h0[j]; s1[j] = h2[j] - h1[j]; }
            a->rnd[l][a->n_rnd + k] = gf_null_random_angle(s0, s1, D, rng, u, v);
        }
    a->n_rnd += samples;
}

/* Forward one prompt (ids, n tokens) and copy the target (last) token's hidden states (N+1, D). */
static void prompt_states(gf_probe_run *p, const int32_t *ids, int64_t n, gf_tensor **hid, float *out) {
    gf_lm *m = gf_session_lm(&p->s);
    const int64_t N = m->cfg.n_layers, D = m->cfg.d_model;
    int32_t *w = malloc((size_t)(n + 1) * sizeof(int32_t));
    memcpy(w, ids, (size_t)n * sizeof(int32_t));
    w[n] = -1; /* no target */
    gf_lm_out o = {.hidden = hid};
    gf_lm_forward(m, &p->s.ctx, w, 1, n, &o);
    for (int64_t l = 0; l <= N; l++) memcpy(out + l * D, hid[l]->data + (n - 1) * D, (size_t)D * sizeof(float));
    gf_ctx_reset(&p->s.ctx);
    free(w);
}

static gf_status deflection(gf_probe_run *p, const gf_probe_opts *o, gf_tensor **hid) {
    gf_lm *m = gf_session_lm(&p->s);
    const int64_t N = m->cfg.n_layers, D = m->cfg.d_model;
    gf_prompt_pairs pairs = {0};
    gf_status st = GF_OK;
    for (int64_t i = 0; i < N_BUILTIN && !st; i++) st = gf_prompt_pairs_add(&pairs, builtin_pairs[i][0], builtin_pairs[i][1], "built-in", i + 1);
    int64_t n_builtin = pairs.n;
    if (!st && o->pairs_file) {
        gf_prompt_pairs user = {0};
        st = gf_prompt_pairs_read(o->pairs_file, &user);
        for (int64_t i = 0; i < user.n && !st; i++) st = gf_prompt_pairs_add(&pairs, user.a[i], user.b[i], o->pairs_file, user.line[i]);
        gf_prompt_pairs_free(&user);
    }
    char path[1200], path2[1200];
    gf_probe_path(p->dir, "curvature-pairs", "tsv", path, sizeof path);
    gf_probe_path(p->dir, "curvature-deflection", "tsv", path2, sizeof path2);
    FILE *f = NULL, *f2 = NULL;
    gf_atomic_file f_af, f2_af;
    if (!st) st = gf_atomic_fopen(&f_af, path, &f);
    if (!st) st = gf_atomic_fopen(&f2_af, path2, &f2);
    float *ha = malloc((size_t)((N + 1) * D) * sizeof(float)), *hb = malloc((size_t)((N + 1) * D) * sizeof(float)); // (N+1, D)
    float *sa = malloc((size_t)D * sizeof(float)), *sb = malloc((size_t)D * sizeof(float));
    double *dsum = calloc((size_t)(N + 1), sizeof(double)), *asum = calloc((size_t)N, sizeof(double));
    int64_t used = 0, skipped = 0;
    if (!st) fprintf(f, "pair\tsource\tline\tn_tokens\tedit_token\tdistance\tbend_layer\tfinal_rel_dist\tmax_step_angle\tprompt_a\tprompt_b\n");
    for (int64_t i = 0; i < pairs.n && !st; i++) {
        const char *src = i < n_builtin ? "built-in" : o->pairs_file;
        gf_ids a = {0}, b = {0};
        /* a word the vocabulary cannot encode (word tokenizer without <unk>) skips the pair */
        gf_status es = gf_tokenizer_encode(p->s.tok, pairs.a[i], strlen(pairs.a[i]), &a);
        if (!es) es = gf_tokenizer_encode(p->s.tok, pairs.b[i], strlen(pairs.b[i]), &b);
        if (es) {
            if (o->log) fprintf(stderr, "probe: skipping prompt pair %s:%lld: %s\n", src, (long long)pairs.line[i], gf_last_error());
            skipped++;
            gf_ids_free(&a); gf_ids_free(&b);
            continue;
        }
        int64_t edit = -1;
        if (a.n == b.n)
            for (int64_t t = 0; t < a.n; t++) if (a.data[t] != b.data[t]) { edit = t; break; }
        const char *why = a.n != b.n ? "the edited word tokenizes to a different number of tokens"
                        : a.n > m->cfg.max_len ? "longer than the model's max_len"
                        : edit < 0 ? "identical after tokenization"
                        : a.data[a.n - 1] != b.data[b.n - 1] || edit == a.n - 1 ? "the edit reaches the target token" : NULL;
        if (why) {
            if (o->log) fprintf(stderr, "probe: skipping prompt pair %s:%lld: %s\n", src, (long long)pairs.line[i], why);
            skipped++;
            gf_ids_free(&a); gf_ids_free(&b);
            continue;
        }
        prompt_states(p, a.data, a.n, hid, ha);
        prompt_states(p, b.data, b.n, hid, hb);
        double prev = 0, best_inc = -INFINITY, max_ang = 0, rd = 0;
        int64_t bend = 0;
        for (int64_t l = 0; l <= N; l++) {
            double dd = 0, na = vnorm(ha + l * D, D), nb = vnorm(hb + l * D, D);
            for (int64_t j = 0; j < D; j++) { double x = (double)ha[l * D + j] - hb[l * D + j]; dd += x * x; }
            rd = na + nb > 0 ? sqrt(dd) / (0.5 * (na + nb)) : 0;
            dsum[l] += rd;
            if (l > 0) {
                if (rd - prev > best_inc) { best_inc = rd - prev; bend = l; }
                for (int64_t j = 0; j < D; j++) {
                    sa[j] = ha[l * D + j] - ha[(l - 1) * D + j];
                    sb[j] = hb[l * D + j] - hb[(l - 1) * D + j];
                }
                double ang = gf_angle_deg(sa, sb, D);
                asum[l - 1] += ang;
                if (ang > max_ang) max_ang = ang;
            }
            prev = rd;
        }
        /* distance: tokens from the (first) edited token to the target */
        fprintf(f, "%lld\t%s\t%lld\t%lld\t%lld\t%lld\t%lld\t%.6f\t%.3f\t%s\t%s\n", (long long)i, src, (long long)pairs.line[i],
                (long long)a.n, (long long)edit, (long long)(a.n - 1 - edit), (long long)bend, rd, max_ang, pairs.a[i], pairs.b[i]);
        used++;
        gf_ids_free(&a);
        gf_ids_free(&b);
    }
    if (!st) {
        /* layer l: δ after block l (0 = embeddings); step_angle: angle between s_{l-1}^A and s_{l-1}^B (block l) */
        fprintf(f2, "layer\tn_pairs\trel_dist\tstep_angle\n");
        for (int64_t l = 0; l <= N; l++)
            fprintf(f2, "%lld\t%lld\t%.6f\t%.3f\n", (long long)l, (long long)used, used ? dsum[l] / (double)used : NAN,
                    l == 0 || !used ? NAN : asum[l - 1] / (double)used);
    }
    if (f2) st = gf_atomic_finish(&f2_af, st);
    if (f) st = gf_atomic_finish(&f_af, st);
    if (!st && o->log)
        fprintf(stderr, "probe: contextual edits: %lld prompt pairs used, %lld skipped -> %s\n", (long long)used,
                (long long)skipped, path);
    if (!st && used == 0) st = gf_error_set(GF_E_INVALID, "curvature: no usable prompt pair (every pair was skipped; see above)");
    free(ha); free(hb); free(sa); free(sb); free(dsum); free(asum);
    gf_prompt_pairs_free(&pairs);
    return st;
}

gf_status gf_probe_curvature(const char *run_dir, const gf_probe_opts *o) {
    if (o->pairs_file) { /* a bad pair file fails now, not after the trajectories */
        gf_prompt_pairs check = {0};
        gf_status ps = gf_prompt_pairs_read(o->pairs_file, &check);
        gf_prompt_pairs_free(&check);
        GF_TRY(ps);
    }
    gf_probe_run p;
    double t0 = gf_time_now();
    gf_status st = gf_probe_open(&p, run_dir, o, o->windows > 0 ? o->windows : 256);
    if (st) { gf_probe_close(&p); return st; }
    gf_lm *m = gf_session_lm(&p.s);
    const int64_t N = m->cfg.n_layers, D = m->cfg.d_model, L = p.L, BB = 8;
    if (N < 2) { /* the message before the close, which clears p.ckpt */
        st = gf_error_set(GF_E_INVALID, "%s: curvature needs at least 2 layers (the run has %lld)", p.ckpt, (long long)N);
        gf_probe_close(&p);
        return st;
    }
    gf_ctx_set_grad(&p.s.ctx, 0);
    curv_acc a;
    gf_tensor **hid = calloc((size_t)(N + 1), sizeof(gf_tensor *));
    float *steps = malloc((size_t)(N * D) * sizeof(float)), *u = malloc((size_t)(4 * D) * sizeof(float)); // (N, D), 4 × (D)
    int64_t *perm = malloc((size_t)N * sizeof(int64_t));
    double *theta = malloc((size_t)N * sizeof(double));
    int64_t nb = (p.W + BB - 1) / BB;
    int64_t per_batch = o->null_samples > 0 ? (o->null_samples + nb - 1) / nb : 0;
    st = acc_init(&a, N, D, p.W * L, per_batch * nb);
    gf_rng rng;
    gf_rng_seed(&rng, o->seed ^ 0xC0FFEEull);
    for (int64_t b0 = 0; b0 < p.W && !st; b0 += BB) {
        int64_t Bb = p.W - b0 < BB ? p.W - b0 : BB;
        gf_lm_out out = {.hidden = hid};
        gf_lm_forward(m, &p.s.ctx, p.win + b0 * (L + 1), Bb, L, &out);
        for (int64_t b = 0; b < Bb; b++)
            for (int64_t t = 0; t < L; t++) token_path(&a, hid, b, t, L, steps, perm, theta, &rng);
        random_null(&a, hid, Bb, L, per_batch, &rng, u, u + D, u + 2 * D, u + 3 * D);
        gf_ctx_reset(&p.s.ctx);
        if (o->log && (b0 / BB) % 8 == 7)
            fprintf(stderr, "probe: curvature: %lld/%lld windows (%.0f s)\n", (long long)(b0 + Bb), (long long)p.W, gf_time_now() - t0);
    }
    char path[1200];
    gf_probe_path(run_dir, "curvature", "tsv", path, sizeof path);
    FILE *f = NULL;
    gf_atomic_file f_af;
    if (!st) st = gf_atomic_fopen(&f_af, path, &f);
    if (!st) {
        /* layer l = the hidden state h_l where the path turns (between block l and block l+1) */
        fprintf(f, "layer\tseries\tn\tmean\tmedian\tq1\tq3\tstep_in_norm\n");
        const char *names[3] = {"model", "null_random", "null_shuffled"};
        for (int s = 0; s < 3; s++)
            for (int64_t l = 0; l + 1 < N; l++) {
                gf_quartiles d;
                gf_quartiles_of(s == 0 ? a.ang[l] : s == 1 ? a.rnd[l] : a.shf[l], s == 1 ? a.n_rnd : a.n_tok, &d);
                fprintf(f, "%lld\t%s\t%lld\t%.4f\t%.4f\t%.4f\t%.4f\t%.5g\n", (long long)(l + 1), names[s], (long long)d.n,
                        d.mean, d.median, d.q1, d.q3, a.norm_sum[l] / (double)a.n_tok);
                if (o->log && s == 0)
                    fprintf(stderr, "probe: turn at h%lld: median %.1f deg (IQR %.1f-%.1f) over %lld tokens\n", (long long)(l + 1),
                            d.median, d.q1, d.q3, (long long)d.n);
            }
        st = gf_atomic_finish(&f_af, st);
    }
    if (!st) st = deflection(&p, o, hid);
    if (!st && o->log) fprintf(stderr, "probe: wrote %s (%.1f s)\n", path, gf_time_now() - t0);
    acc_free(&a);
    free(hid); free(steps); free(u); free(perm); free(theta);
    gf_probe_close(&p);
    if (!st && o->plot) {
        st = gf_probe_plot_run(run_dir, "curvature", gf_probe_curvature_plot);
        if (!st && o->log) fprintf(stderr, "probe: wrote %s/probe-curvature.png\n", run_dir);
    }
    return st;
}

/* Left: turning angle per layer (median with IQR bars; nulls as IQR bands). Right: contextual
 * edits, mean relative distance of the target token per layer. One or two runs. */
gf_status gf_probe_curvature_plot(const char *const *dirs, int n_dirs, const char *png) {
    static const char *col[2] = {"#1f77b4", "#d62728"};
    static const char *const angles[5] = {"series", "layer", "median", "q1", "q3"}, *edits[2] = {"layer", "rel_dist"};
    gf_plot p;
    GF_TRY(gf_plot_begin(&p, "1200,600", "set style fill transparent solid 0.25 noborder\n"));
    gf_status st = GF_OK;
    for (int r = 0; r < n_dirs && !st; r++) {
        gf_tsv t;
        int32_t c[5];
        char name[32];
        if ((st = gf_plot_table(dirs[r], "curvature", &t, 5, angles, c))) break;
        snprintf(name, sizeof name, "m%d", r); gf_tsv_datablock(p.g, name, &t, c[0], "model", c + 1, 4);
        snprintf(name, sizeof name, "r%d", r); gf_tsv_datablock(p.g, name, &t, c[0], "null_random", c + 1, 4);
        snprintf(name, sizeof name, "s%d", r); gf_tsv_datablock(p.g, name, &t, c[0], "null_shuffled", c + 1, 4);
        gf_tsv_free(&t);
        if ((st = gf_plot_table(dirs[r], "curvature-deflection", &t, 2, edits, c))) break;
        snprintf(name, sizeof name, "d%d", r);
        gf_tsv_datablock(p.g, name, &t, 0, NULL, c, 2);
        gf_tsv_free(&t);
    }
    if (!st) {
        gf_plot_command(&p, "set multiplot layout 1,2\nset xlabel 'hidden state h_l where the path turns (layer)'\n"
                            "set ylabel 'turning angle (degrees)'\nset key outside bottom center maxrows 3 font ',9'\n"
                            "set xtics 1\nset title 'token trajectories: median and IQR (bands: nulls)'\n", "plot");
        for (int r = 0; r < n_dirs; r++) {
            gf_plot_series(&p, dirs[r], ": random directions", "$r%d using 1:3:4 with filledcurves lc rgb '%s'", r,
                           col[r]);
            gf_plot_series(&p, dirs[r], ": layers shuffled",
                           "$s%d using 1:3:4 with filledcurves lc rgb '%s' fs pattern 4", r, col[r]);
            gf_plot_series(&p, dirs[r], ": model", "$m%d using 1:2:3:4 with yerrorlines lw 2 pt 7 lc rgb '%s'", r,
                           col[r]);
        }
        gf_plot_command(&p, "set xlabel 'layer (0 = embeddings)'\nset ylabel 'relative distance |h^A - h^B| / |h|'\n"
                            "set key outside bottom center font ',9'\n"
                            "set title 'contextual edit: target token, mean over prompt pairs'\n", "plot");
        for (int r = 0; r < n_dirs; r++)
            gf_plot_series(&p, dirs[r], "", "$d%d using 1:2 with linespoints lw 2 pt 7 lc rgb '%s'", r, col[r]);
    }
    return gf_plot_draw(&p, st, "unset multiplot\n", png);
}
