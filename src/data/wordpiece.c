/* wordpiece.c — BERT's uncased WordPiece tokenizer: the basic tokenizer (clean, spaces around
 * CJK ideographs, whitespace split, lowercase, NFD without nonspacing marks, punctuation split)
 * then greedy longest-match-first WordPiece over a vocab.txt, with utf8proc's Unicode data. The
 * algorithm is stated in gflow/tokenizer.h; tools/wordpiece_ref.py is its reference. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "data/data_internal.h"
#include "gflow/tokenizer.h"

#define WP_MAX_WORD 100 /* code points; a longer word is [UNK] (BERT's max_input_chars_per_word) */
#define WP_HINT                                                                                          \
    " (a WordPiece vocabulary is BERT's vocab.txt: one piece a line; for [tokenizer] kind = wordpiece, " \
    "train_file names it, e.g. bert-base-uncased/vocab.txt from `gflow data fetch bert-base-uncased`)"

/* ---- vocabulary ---- */

typedef struct { gf_wordpiece *wp; const char *path; } load_ctx;

static gf_status load_line(void *ctx, const char *line, size_t len, int64_t lineno) {
    load_ctx *c = ctx;
    if (len == 0) return gf_error_set(GF_E_INVALID, "%s:%lld: an empty line" WP_HINT, c->path, (long long)lineno);
    for (size_t i = 0; i < len; i++)
        if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\v' || line[i] == '\f')
            return gf_error_set(GF_E_INVALID, "%s:%lld: the piece holds whitespace" WP_HINT, c->path, (long long)lineno);
    int64_t before = c->wp->v.n;
    int32_t id;
    GF_TRY(gf_vocab_add(&c->wp->v, line, len, &id));
    if (c->wp->v.n == before)
        return gf_error_set(GF_E_INVALID, "%s:%lld: the piece '%.*s' repeats line %d" WP_HINT, c->path,
                            (long long)lineno, (int)len, line, id + 1);
    int64_t chars = 0; /* code points: the bytes that do not continue a UTF-8 sequence */
    for (size_t i = 0; i < len; i++) chars += ((unsigned char)line[i] & 0xC0) != 0x80;
    if (len > 2 && !memcmp(line, "##", 2)) chars -= 2;
    if (chars > c->wp->max_chars) c->wp->max_chars = chars;
    return GF_OK;
}

gf_status gf_wordpiece_load(gf_wordpiece *wp, const char *path) {
    memset(wp, 0, sizeof *wp);
    load_ctx c = {wp, path};
    gf_status s = gf_data_for_each_line(path, load_line, &c);
    if (!s) {
        wp->unk_id = gf_vocab_find(&wp->v, "[UNK]", 5);
        wp->sep_id = gf_vocab_find(&wp->v, "[SEP]", 5);
        if (wp->unk_id < 0 || wp->sep_id < 0)
            s = gf_error_set(GF_E_INVALID, "%s: no %s piece" WP_HINT, path, wp->unk_id < 0 ? "[UNK]" : "[SEP]");
    }
    if (s) gf_wordpiece_free(wp);
    return s;
}

void gf_wordpiece_free(gf_wordpiece *wp) {
    gf_vocab_free(&wp->v);
    memset(wp, 0, sizeof *wp);
}

/* ---- character classes (BERT's definitions over utf8proc's categories) ---- */

static int is_cjk(int32_t c) { /* BERT's _is_chinese_char: the CJK Unified Ideographs blocks */
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int is_punct(int32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return 1;
    utf8proc_category_t k = utf8proc_category(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* after cleaning, what Python's str.split() (BERT's whitespace_tokenize) still splits on */
static int is_split(int32_t c) {
    return c == ' ' || utf8proc_category(c) == UTF8PROC_CATEGORY_ZL || utf8proc_category(c) == UTF8PROC_CATEGORY_ZP;
}

/* Unicode's Final_Sigma context, as Python's str.lower() applies it: cased = Lu, Ll, Lt or a
 * letter with a case mapping (ª, º, U+0345 and U+1F130-1F189 are cased there, not here);
 * case-ignorable = Mn, Me, Cf, Lm, Sk and Word_Break MidLetter, MidNumLet, Single_Quote
 * (utf8proc has no word-break property: those 17 are listed; the same set as Python 3.11's). */
static int is_cased(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
           utf8proc_tolower(c) != c || utf8proc_toupper(c) != c;
}

static int is_case_ignorable(int32_t c) {
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK: return 1;
    default: break;
    }
    static const int32_t mid[] = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,  0x5F4,  0x2018, 0x2019,
                                  0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    for (size_t i = 0; i < sizeof mid / sizeof mid[0]; i++)
        if (c == mid[i]) return 1;
    return 0;
}

static int32_t lower_at(const int32_t *w, int64_t n, int64_t i) {
    if (w[i] != 0x3A3) return utf8proc_tolower(w[i]);
    int64_t j = i - 1, k = i + 1;
    while (j >= 0 && is_case_ignorable(w[j])) j--;
    while (k < n && is_case_ignorable(w[k])) k++;
    return j >= 0 && is_cased(w[j]) && !(k < n && is_cased(w[k])) ? 0x3C2 : 0x3C3; /* ς : σ */
}

/* ---- encode ---- */

/* growable buffers of one encode call */
typedef struct {
    int32_t *cp;  /* (n_cp) the cleaned line */
    int32_t *nfd; /* (cap_nfd) one word, lowercased and decomposed */
    uint8_t *u8;  /* (cap_u8) UTF-8 of one word; "##" + a word's rest */
    int64_t off[WP_MAX_WORD + 1]; /* byte offset of each code point of a word in u8 */
    int64_t n_cp, cap_cp, cap_nfd, cap_u8;
} wp_scratch;

static gf_status grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return GF_OK;
    int64_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return gf_error_set(GF_E_NOMEM, "wordpiece: out of memory (%lld code points)", (long long)need);
    *p = q;
    *cap = nc;
    return GF_OK;
}

static gf_status push_cp(wp_scratch *sc, int32_t c) {
    GF_TRY(grow((void **)&sc->cp, &sc->cap_cp, sc->n_cp + 1, sizeof *sc->cp));
    sc->cp[sc->n_cp++] = c;
    return GF_OK;
}

/* BERT's _clean_text and _tokenize_chinese_chars over bytes [0, n) of s into sc->cp */
static gf_status clean(const uint8_t *s, size_t n, size_t at, wp_scratch *sc) {
    for (size_t i = 0; i < n;) {
        int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k < 0) return gf_error_set(GF_E_INVALID, "invalid UTF-8 at byte %zu of the line", at + i + 1);
        i += (size_t)k;
        utf8proc_category_t cat = utf8proc_category(c);
        int ws = c == ' ' || c == '\t' || c == '\n' || c == '\r' || cat == UTF8PROC_CATEGORY_ZS;
        if (c == 0 || c == 0xFFFD || (!ws && (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF))) continue;
        if (ws) {
            GF_TRY(push_cp(sc, ' '));
        } else if (is_cjk(c)) {
            GF_TRY(push_cp(sc, ' '));
            GF_TRY(push_cp(sc, c));
            GF_TRY(push_cp(sc, ' '));
        } else {
            GF_TRY(push_cp(sc, c));
        }
    }
    return GF_OK;
}

/* greedy longest-match-first WordPiece of one word w[0, n) */
static gf_status wordpiece(const gf_wordpiece *wp, const int32_t *w, int64_t n, wp_scratch *sc, gf_ids *out) {
    if (n > WP_MAX_WORD) return gf_ids_push(out, wp->unk_id);
    GF_TRY(grow((void **)&sc->u8, &sc->cap_u8, 2 * (4 * n + 2), 1));
    uint8_t *word = sc->u8, *rest = sc->u8 + 4 * n + 2; /* rest: "##" + a suffix of word */
    sc->off[0] = 0;
    for (int64_t i = 0; i < n; i++) sc->off[i + 1] = sc->off[i] + utf8proc_encode_char(w[i], word + sc->off[i]);
    const int64_t mark = out->n;
    for (int64_t start = 0; start < n;) {
        int64_t end = n < start + wp->max_chars ? n : start + wp->max_chars;
        const uint8_t *p = word + sc->off[start];
        int64_t pre = 0;
        if (start > 0) {
            memcpy(rest, "##", 2);
            memcpy(rest + 2, p, (size_t)(sc->off[end] - sc->off[start]));
            p = rest;
            pre = 2;
        }
        int32_t id = -1;
        while (end > start && (id = gf_vocab_find(&wp->v, (const char *)p,
                                                  (size_t)(pre + sc->off[end] - sc->off[start]))) < 0)
            end--;
        if (id < 0) { /* a rest no piece starts: the whole word is [UNK] */
            out->n = mark;
            return gf_ids_push(out, wp->unk_id);
        }
        GF_TRY(gf_ids_push(out, id));
        start = end;
    }
    return GF_OK;
}

/* w[0, n) lowercased, decomposed (NFD) and without nonspacing marks (accents) into sc->nfd[0, *k) */
static gf_status lower_nfd(const int32_t *w, int64_t n, wp_scratch *sc, int64_t *k) {
    int ascii = 1;
    for (int64_t i = 0; i < n && ascii; i++) ascii = w[i] < 0x80;
    if (ascii) { /* the common case, sooner: ASCII's own lowercase; NFD changes nothing, no marks */
        GF_TRY(grow((void **)&sc->nfd, &sc->cap_nfd, n, sizeof *sc->nfd));
        for (int64_t i = 0; i < n; i++) sc->nfd[i] = w[i] >= 'A' && w[i] <= 'Z' ? w[i] + 32 : w[i];
        *k = n;
        return GF_OK;
    }
    GF_TRY(grow((void **)&sc->u8, &sc->cap_u8, 4 * n, 1));
    int64_t len = 0;
    for (int64_t i = 0; i < n; i++) len += utf8proc_encode_char(lower_at(w, n, i), sc->u8 + len);
    utf8proc_ssize_t m = utf8proc_decompose(sc->u8, len, sc->nfd, sc->cap_nfd, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    if (m > sc->cap_nfd) {
        GF_TRY(grow((void **)&sc->nfd, &sc->cap_nfd, m, sizeof *sc->nfd));
        m = utf8proc_decompose(sc->u8, len, sc->nfd, sc->cap_nfd, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    }
    if (m < 0) return gf_error_set(GF_E_EXTERNAL, "wordpiece: utf8proc: %s", utf8proc_errmsg(m));
    *k = 0;
    for (int64_t i = 0; i < m; i++)
        if (utf8proc_category(sc->nfd[i]) != UTF8PROC_CATEGORY_MN) sc->nfd[(*k)++] = sc->nfd[i];
    return GF_OK;
}

/* one whitespace-separated word w[0, n): lowercase, NFD, drop Mn, split off punctuation */
static gf_status basic_word(const gf_wordpiece *wp, const int32_t *w, int64_t n, wp_scratch *sc, gf_ids *out) {
    int64_t k = 0;
    GF_TRY(lower_nfd(w, n, sc, &k));
    int32_t *d = sc->nfd; /* wordpiece() reuses sc->u8, not sc->nfd */
    for (int64_t i = 0; i < k;) {
        int64_t j = i + 1;
        if (!is_punct(d[i]))
            while (j < k && !is_punct(d[j])) j++;
        GF_TRY(wordpiece(wp, d + i, j - i, sc, out));
        i = j;
    }
    return GF_OK;
}

static gf_status encode_segment(const gf_wordpiece *wp, const char *s, size_t n, size_t at, wp_scratch *sc,
                                gf_ids *out) {
    sc->n_cp = 0;
    GF_TRY(clean((const uint8_t *)s, n, at, sc));
    for (int64_t i = 0; i < sc->n_cp;) {
        while (i < sc->n_cp && is_split(sc->cp[i])) i++;
        int64_t j = i;
        while (j < sc->n_cp && !is_split(sc->cp[j])) j++;
        if (j > i) GF_TRY(basic_word(wp, sc->cp + i, j - i, sc, out));
        i = j;
    }
    return GF_OK;
}

gf_status gf_wordpiece_encode(const gf_wordpiece *wp, const char *text, size_t len, gf_ids *out) {
    wp_scratch sc;
    memset(&sc, 0, sizeof sc);
    gf_status s = GF_OK;
    size_t at = 0;
    while (!s && at <= len) { /* every "<unk>" is [UNK]; the text between is tokenized alone */
        size_t u = at;
        while (u + 5 <= len && memcmp(text + u, "<unk>", 5)) u++;
        if (u + 5 > len) u = len;
        s = encode_segment(wp, text + at, u - at, at, &sc, out);
        if (!s && u < len) s = gf_ids_push(out, wp->unk_id);
        at = u + 5;
    }
    free(sc.cp);
    free(sc.nfd);
    free(sc.u8);
    return s;
}
