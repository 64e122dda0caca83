/* recipe_write.c — a resolved recipe as text: every key, defaults included (printed at training
 * start, stored in checkpoints and run directories). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe/recipe_internal.h"
#include "gflow/version.h"

/* shortest text that reads back to the same double */
const char *gf_recipe_fmt_double(double x, char *buf, size_t cap) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

static void value_text(const gf_recipe *r, const gf_recipe_key *k, char *buf, size_t cap) {
    const void *field = (const char *)r + k->offset;
    switch (k->type) {
    case GF_RK_INT: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)field); return;
    case GF_RK_FLOAT: gf_recipe_fmt_double(*(const double *)field, buf, cap); return;
    case GF_RK_BOOL: snprintf(buf, cap, "%s", *(const bool *)field ? "true" : "false"); return;
    case GF_RK_STRING: snprintf(buf, cap, "%s", (const char *)field); return;
    case GF_RK_ENUM: {
        int v = *(const int *)field;
        for (const gf_rk_enum_val *e = k->enums; e->name; e++)
            if (e->value == v) {
                snprintf(buf, cap, "%s", e->name);
                return;
            }
        GF_ASSERT(0, "%s.%s: enum value %d not in schema", k->section, k->key, v);
        return;
    }
    case GF_RK_INT_LIST: {
        const gf_int_list *l = field;
        size_t w = 0;
        buf[0] = 0;
        for (int64_t i = 0; i < l->n && w < cap; i++)
            w += (size_t)snprintf(buf + w, cap - w, "%s%lld", i ? "," : "", (long long)l->v[i]);
        return;
    }
    case GF_RK_BASE: buf[0] = 0; return;
    }
}

gf_status gf_recipe_resolved_text(const gf_recipe *r, char **out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return gf_error_set(GF_E_NOMEM, "recipe: open_memstream failed");
    fprintf(f, "# resolved gflow recipe: every key, defaults included (gflow %s)\n", gf_build_id());
    const char *cur = "";
    for (int i = 0; i < gf_recipe_n_keys; i++) {
        const gf_recipe_key *k = &gf_recipe_schema[i];
        if (k->type == GF_RK_BASE) continue;
        if (strcmp(cur, k->section) != 0) {
            fprintf(f, "%s[%s]\n", i ? "\n" : "", k->section);
            cur = k->section;
        }
        char v[GF_RECIPE_STR * 2];
        value_text(r, k, v, sizeof v);
        fprintf(f, v[0] ? "%s = %s\n" : "%s =%s\n", k->key, v);
    }
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return gf_error_set(GF_E_NOMEM, "recipe: writing resolved text failed");
    }
    *out = buf;
    return GF_OK;
}
