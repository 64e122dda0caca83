/* recipe_internal.h — the schema table shared by the parser, the resolved-text
 * writer and the docs generator. */
#ifndef GF_RECIPE_INTERNAL_H
#define GF_RECIPE_INTERNAL_H

#include <stddef.h>

#include "gflow/recipe.h"

typedef enum gf_rk_type {
    GF_RK_INT,      /* int64_t */
    GF_RK_FLOAT,    /* double, finite */
    GF_RK_BOOL,     /* bool */
    GF_RK_STRING,   /* char[GF_RECIPE_STR] */
    GF_RK_ENUM,     /* an enum field (int-sized) */
    GF_RK_INT_LIST, /* gf_int_list; bounds apply to each entry */
    GF_RK_BASE,     /* [run] base: include another file; no field */
} gf_rk_type;

enum {
    GF_RK_MIN = 1 << 0,      /* value >= lo */
    GF_RK_MAX = 1 << 1,      /* value <= hi */
    GF_RK_MIN_EXCL = 1 << 2, /* value > lo (with GF_RK_MIN) */
    GF_RK_MAX_EXCL = 1 << 3, /* value < hi (with GF_RK_MAX) */
    GF_RK_NONEMPTY = 1 << 4, /* string or list must not be empty */
    GF_RK_COMPONENT = 1 << 5, /* string is one path component: no '/', not "." or ".." */
    GF_RK_PLACEMENT = 1 << 6, /* where and how fast the run computes, not what: not part of the run's
                                 identity (gf_recipe_same_run); may change when it resumes */
};

typedef struct gf_rk_enum_val {
    const char *name;
    int value;
} gf_rk_enum_val;

typedef struct gf_recipe_key {
    const char *section, *key;
    gf_rk_type type;
    const char *def;   /* default, written as recipe text; NULL = required */
    double lo, hi;     /* bounds, see flags */
    unsigned flags;
    const gf_rk_enum_val *enums; /* GF_RK_ENUM: {NULL, 0}-terminated */
    const char *doc;   /* one line for docs/recipe-keys.md */
    size_t offset;     /* into gf_recipe */
} gf_recipe_key;

#define GF_RECIPE_MAX_KEYS 128 /* bound for per-key arrays in the parser */

extern const gf_recipe_key gf_recipe_schema[];
extern const int gf_recipe_n_keys;
extern const char *const gf_recipe_sections[];  /* NULL-terminated, schema order */
extern const char *const gf_recipe_section_docs[];

/* Every key at its schema default; required keys (and [model] vocab) zero. */
void gf_recipe_defaults(gf_recipe *r);

/* The shortest text that reads back to the same double, in buf. */
const char *gf_recipe_fmt_double(double x, char *buf, size_t cap);

#endif
