/* datasets.c — the data set table (gflow/datasets.def) as gf_dataset_info rows: the recipe's
 * [data] dataset values and file defaults, `gflow data`, the file checks and the task choice
 * all read it. */
#include <stdio.h>
#include <string.h>

#include "gflow/data.h"

#define GF_DS_FILE(name, sha) {name, sha}
#define GF_DS_NOFILE {NULL, NULL}
static const gf_dataset_info rows[GF_DS_COUNT] = {
#define GF_DATASET(id, name, fetch, dir, kind, tok, tr, va, te, ex) {name, fetch, dir, kind, tok, {tr, va, te}, ex},
#include "gflow/datasets.def"
#undef GF_DATASET
};

const gf_dataset_info *gf_dataset_get(gf_dataset ds) {
    return (int)ds >= 0 && ds < GF_DS_COUNT ? &rows[ds] : NULL;
}

const gf_dataset_info *gf_dataset_by_name(const char *name) {
    for (int i = 0; i < GF_DS_COUNT; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}

int gf_dataset_default_file(gf_dataset ds, gf_split split, char *out, size_t cap) {
    const gf_dataset_info *d = gf_dataset_get(ds);
    if (!d || !d->split[split].name) return 0;
    int w = snprintf(out, cap, "%s/%s", d->dir, d->split[split].name);
    return w > 0 && (size_t)w < cap;
}

const char *gf_data_known_sha256(const char *basename) {
    for (int i = 0; i < GF_DS_COUNT; i++) {
        const gf_dataset_file *f = rows[i].split;
        for (int k = 0; k < 4; k++) { /* the three splits, then the extra file */
            const gf_dataset_file *x = k < 3 ? &f[k] : &rows[i].extra;
            if (x->name && x->sha256 && !strcmp(x->name, basename)) return x->sha256;
        }
    }
    return NULL;
}
