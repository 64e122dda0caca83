/* snli.c — SNLI reader (libcsv, tab-separated, no quoting, columns by header
 * name) and the SNLI batch loader. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <csv.h>

#include "data/data_internal.h"
#include "gflow/data.h"

enum { COL_LABEL, COL_S1, COL_S2, COL_PAIR, N_COLS };
static const char *col_names[N_COLS] = {"gold_label", "sentence1", "sentence2", "pairID"};

typedef struct snli_ctx {
    const char *path;
    const gf_tokenizer *tok;
    const gf_snli_opts *opts;
    gf_snli_data *d;
    int64_t cap;          /* rows allocated in d */
    int64_t line;         /* 1-based line of the row being read */
    int64_t n_header;     /* columns in the header; 0 until it is read */
    int col_of[N_COLS];   /* header index of each needed column, -1 if absent */
    int64_t field;        /* index of the next field within the row */
    size_t col;           /* bytes of the line before the next field */
    char *val[N_COLS];    /* copies of this row's needed fields */
    size_t val_len[N_COLS];
    char **hdr;           /* header names while reading the header row */
    int64_t n_hdr;        /* of them allocated (what is freed, whatever the row's end reset) */
    gf_ids ids;           /* scratch for encoding */
    int prev_cr;          /* last row ended by '\r' (CRLF handling) */
    gf_status err;        /* first error; later rows are ignored */
} snli_ctx;

/* fields are verbatim: no leading/trailing blank trimming */
static int never_space(unsigned char c) { (void)c; return 0; }

static void on_field(void *s, size_t len, void *vctx) {
    snli_ctx *c = vctx;
    if (c->err != GF_OK) return;
    /* verbatim fields (no quoting, no trimming): the line's bytes, so the column is exact */
    c->err = gf_text_check(c->path, c->line + 1, c->col, s, len);
    c->col += len + 1;
    if (c->err != GF_OK) return;
    int64_t k = c->field++;
    if (c->n_header == 0) {
        char **h = realloc(c->hdr, (size_t)(k + 1) * sizeof *h);
        if (!h) { c->err = gf_error_set(GF_E_NOMEM, "%s: out of memory", c->path); return; }
        c->hdr = h;
        h[k] = strndup(s, len);
        if (!h[k]) c->err = gf_error_set(GF_E_NOMEM, "%s: out of memory", c->path);
        else c->n_hdr = k + 1;
        return;
    }
    for (int j = 0; j < N_COLS; j++) {
        if (c->col_of[j] == k) {
            free(c->val[j]);
            c->val[j] = strndup(s, len);
            c->val_len[j] = len;
            if (!c->val[j]) c->err = gf_error_set(GF_E_NOMEM, "%s: out of memory", c->path);
        }
    }
}

static gf_status grow(snli_ctx *c) {
    gf_snli_data *d = c->d;
    if (d->n < c->cap) return GF_OK;
    int64_t nc = c->cap ? c->cap * 2 : 1024, Ls = d->Ls;
    int32_t *p = realloc(d->premise, (size_t)(nc * Ls) * sizeof *p);
    if (p) d->premise = p;
    int32_t *h = p ? realloc(d->hypothesis, (size_t)(nc * Ls) * sizeof *h) : NULL;
    if (h) d->hypothesis = h;
    int32_t *pl = h ? realloc(d->prem_len, (size_t)nc * sizeof *pl) : NULL;
    if (pl) d->prem_len = pl;
    int32_t *hl = pl ? realloc(d->hyp_len, (size_t)nc * sizeof *hl) : NULL;
    if (hl) d->hyp_len = hl;
    int32_t *lb = hl ? realloc(d->label, (size_t)nc * sizeof *lb) : NULL;
    if (lb) d->label = lb;
    if (!lb) return gf_error_set(GF_E_NOMEM, "%s: out of memory at %lld pairs", c->path, (long long)nc);
    c->cap = nc;
    return GF_OK;
}

/* tokenize one sentence into row (Ls), padded; returns kept length */
static gf_status encode_sentence(snli_ctx *c, const char *s, size_t n, int32_t *row, int32_t *len) {
    c->ids.n = 0;
    gf_status st = gf_tokenizer_encode(c->tok, s, n, &c->ids);
    if (st != GF_OK) return gf_error_wrap(st, "%s:%lld: ", c->path, (long long)c->line);
    int64_t Ls = c->d->Ls, k = c->ids.n < Ls ? c->ids.n : Ls;
    if (c->ids.n > Ls) c->d->truncated++;
    if (k > 0) memcpy(row, c->ids.data, (size_t)k * sizeof *row); /* an empty sentence has no ids buffer */
    for (int64_t i = k; i < Ls; i++) row[i] = c->opts->pad_id;
    *len = (int32_t)k;
    return GF_OK;
}

/* a malformed row: error, or count and skip */
__attribute__((format(printf, 2, 3)))
static gf_status bad_row(snli_ctx *c, const char *fmt, ...) {
    if (c->opts->skip_bad_rows) {
        c->d->skipped_bad++;
        return GF_OK;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gf_error_set(GF_E_PARSE, "%s:%lld: %s", c->path, (long long)c->line, msg);
}

static gf_status finish_header(snli_ctx *c) {
    c->n_header = c->field;
    for (int j = 0; j < N_COLS; j++) {
        c->col_of[j] = -1;
        for (int64_t k = 0; k < c->field; k++)
            if (strcmp(c->hdr[k], col_names[j]) == 0) c->col_of[j] = (int)k;
        if (c->col_of[j] < 0 && j != COL_PAIR)
            return gf_error_set(GF_E_PARSE, "%s:%lld: header has no column '%s' (need gold_label, sentence1, sentence2)",
                                c->path, (long long)c->line, col_names[j]);
    }
    return GF_OK;
}

static gf_status finish_row(snli_ctx *c) {
    if (c->n_header == 0) return finish_header(c);
    gf_snli_data *d = c->d;
    d->rows_read++;
    if (c->field != c->n_header)
        return bad_row(c, "%lld tab-separated columns, the header has %lld", (long long)c->field,
                       (long long)c->n_header);
    const char *lab = c->val[COL_LABEL];
    int32_t y;
    if (!strcmp(lab, "entailment")) y = GF_SNLI_ENTAILMENT;
    else if (!strcmp(lab, "neutral")) y = GF_SNLI_NEUTRAL;
    else if (!strcmp(lab, "contradiction")) y = GF_SNLI_CONTRADICTION;
    else if (!strcmp(lab, "-")) {
        d->skipped_no_label++;
        return GF_OK;
    } else {
        return bad_row(c, "unknown gold_label '%s' (expected entailment, neutral, contradiction or -)", lab);
    }
    GF_TRY(grow(c));
    int64_t i = d->n;
    GF_TRY(encode_sentence(c, c->val[COL_S1], c->val_len[COL_S1], d->premise + i * d->Ls, &d->prem_len[i]));
    GF_TRY(encode_sentence(c, c->val[COL_S2], c->val_len[COL_S2], d->hypothesis + i * d->Ls, &d->hyp_len[i]));
    d->label[i] = y;
    d->label_count[y]++;
    d->n++;
    return GF_OK;
}

static void on_row(int term, void *vctx) {
    snli_ctx *c = vctx;
    /* CSV_REPALL_NL reports every line end, so each call is one physical line;
     * the LF of a CRLF pair arrives as an empty row and is not a new line. */
    int empty = c->field == 0;
    int crlf_tail = empty && term == '\n' && c->prev_cr;
    c->prev_cr = term == '\r';
    c->col = 0;
    if (crlf_tail) return;
    c->line++;
    if (c->err == GF_OK && !empty) c->err = finish_row(c);
    c->field = 0;
    for (int j = 0; j < N_COLS; j++) {
        free(c->val[j]);
        c->val[j] = NULL;
        c->val_len[j] = 0;
    }
}

void gf_snli_free(gf_snli_data *d) {
    free(d->premise);
    free(d->hypothesis);
    free(d->prem_len);
    free(d->hyp_len);
    free(d->label);
    memset(d, 0, sizeof *d);
}

gf_status gf_snli_load(gf_snli_data *out, const char *path, const gf_tokenizer *tok, const gf_snli_opts *opts) {
    memset(out, 0, sizeof *out);
    if (opts->max_len < 1)
        return gf_error_set(GF_E_INVALID, "snli max_len %lld must be >= 1", (long long)opts->max_len);
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", path, strerror(errno));
    out->Ls = opts->max_len;
    out->pad_id = opts->pad_id;
    snli_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    c.tok = tok;
    c.opts = opts;
    c.d = out;
    struct csv_parser p;
    /* CSV_APPEND_NULL: NUL-terminated fields; CSV_REPALL_NL: every line end is
     * reported, so line numbers stay exact. */
    if (csv_init(&p, CSV_APPEND_NULL | CSV_REPALL_NL) != 0) {
        fclose(f);
        return gf_error_set(GF_E_EXTERNAL, "%s: csv_init failed", path);
    }
    csv_set_delim(&p, '\t');
    /* Quoting off: libcsv has no switch for it, so the quote character is set
     * to NUL, which text files never contain (checked per block below). SNLI
     * sentences contain '"' and must be read verbatim. */
    csv_set_quote(&p, '\0');
    csv_set_space_func(&p, never_space);
    static _Thread_local char buf[1 << 16];
    size_t got;
    gf_status s = GF_OK;
    while (s == GF_OK && (got = fread(buf, 1, sizeof buf, f)) > 0) {
        if (memchr(buf, '\0', got)) {
            s = gf_error_set(GF_E_PARSE, "%s: contains a NUL byte (not a text file)", path);
            break;
        }
        if (csv_parse(&p, buf, got, on_field, on_row, &c) != got)
            s = gf_error_set(GF_E_PARSE, "%s: near line %lld: %s", path, (long long)c.line + 1,
                             csv_strerror(csv_error(&p)));
        if (c.err != GF_OK) s = c.err;
    }
    if (s == GF_OK && ferror(f)) s = gf_error_set(GF_E_IO, "%s: read error", path);
    if (s == GF_OK) {
        csv_fini(&p, on_field, on_row, &c); /* last row without a newline */
        if (c.err != GF_OK) s = c.err;
    }
    if (s == GF_OK && c.n_header == 0) s = gf_error_set(GF_E_PARSE, "%s: empty file (no header line)", path);
    csv_free(&p);
    fclose(f);
    for (int j = 0; j < N_COLS; j++) free(c.val[j]);
    for (int64_t k = 0; k < c.n_hdr; k++) free(c.hdr[k]);
    free(c.hdr);
    gf_ids_free(&c.ids);
    if (s != GF_OK) gf_snli_free(out);
    return s;
}

/* ---- loader ---- */

struct gf_snli_loader {
    const gf_snli_data *d;
    gf_sampler smp;
};

gf_status gf_snli_loader_new(gf_snli_loader **out, const gf_snli_data *data, int shuffle, uint64_t seed) {
    *out = NULL;
    if (data->n <= 0) return gf_error_set(GF_E_INVALID, "SNLI loader: data set has no labelled pairs");
    gf_snli_loader *ld = calloc(1, sizeof *ld);
    if (!ld) return gf_error_set(GF_E_NOMEM, "SNLI loader: out of memory");
    ld->d = data;
    gf_status s = gf_sampler_init(&ld->smp, data->n, shuffle, seed);
    if (s != GF_OK) {
        free(ld);
        return s;
    }
    *out = ld;
    return GF_OK;
}

void gf_snli_loader_free(gf_snli_loader *ld) {
    if (!ld) return;
    gf_sampler_free(&ld->smp);
    free(ld);
}

static void fill_row(const int32_t *ids, int32_t len, int64_t Ls, int32_t pad, int32_t *row, float *mask) {
    for (int64_t k = 0; k < Ls; k++) {
        int real = ids && k < len;
        row[k] = real ? ids[k] : pad;
        mask[k] = real ? 1.0f : 0.0f;
    }
}

gf_status gf_snli_loader_next(gf_snli_loader *ld, int64_t B, int32_t *prem, float *prem_mask, int32_t *hyp,
                              float *hyp_mask, int32_t *labels, int64_t *n_rows) {
    const gf_snli_data *d = ld->d;
    const int64_t Ls = d->Ls;
    const int32_t pad = d->pad_id;
    int64_t r = 0;
    if (!gf_sampler_has_next(&ld->smp)) {
        (void)gf_sampler_next(&ld->smp);
    } else {
        for (; r < B && gf_sampler_has_next(&ld->smp); r++) {
            int64_t i = gf_sampler_next(&ld->smp);
            fill_row(d->premise + i * Ls, d->prem_len[i], Ls, pad, prem + r * Ls, prem_mask + r * Ls);
            fill_row(d->hypothesis + i * Ls, d->hyp_len[i], Ls, pad, hyp + r * Ls, hyp_mask + r * Ls);
            labels[r] = d->label[i];
        }
    }
    for (int64_t q = r; q < B; q++) {
        fill_row(NULL, 0, Ls, pad, prem + q * Ls, prem_mask + q * Ls);
        fill_row(NULL, 0, Ls, pad, hyp + q * Ls, hyp_mask + q * Ls);
        labels[q] = GF_IGNORE_ID;
    }
    *n_rows = r;
    return GF_OK;
}

void gf_snli_loader_get_state(const gf_snli_loader *ld, gf_loader_state *st) { *st = ld->smp.st; }

gf_status gf_snli_loader_set_state(gf_snli_loader *ld, const gf_loader_state *st) {
    return gf_sampler_set_state(&ld->smp, st);
}
