/* test_safetensors.c — reading the golden fixtures, C/python round trips, parameter-block
 * load/export, and rejection of malformed files with messages naming file and tensor. */
#include "gf_test.h"
#include "test_util.h"
#include "gflow/safetensors.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static const char *fixture_path(char *buf, size_t n, const char *variant) {
    snprintf(buf, n, "%s/tests/fixtures/golden/%s.safetensors", gf_test_source_root(), variant);
    return buf;
}

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Declare a parameter for every model tensor in a fixture (skipping inputs, outputs,
 * gradients); `resize`, when set, gives that tensor a different first dimension. */
static void params_from_fixture(gf_params *p, const gf_safetensors_file *f, const char *resize,
                                int64_t new_dim0, const char *extra) {
    gf_params_init(p);
    for (int64_t i = 0; i < gf_safetensors_count(f); i++) {
        const gf_safetensors_tensor *t = gf_safetensors_at(f, i);
        if (starts_with(t->name, "grad.") || starts_with(t->name, "input.") ||
            starts_with(t->name, "out.") || starts_with(t->name, "adamw."))
            continue;
        int64_t shape[GF_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        if (resize && strcmp(resize, t->name) == 0) shape[0] = new_dim0;
        gf_params_add(p, t->name, t->ndim == 2 ? GF_PK_WEIGHT : GF_PK_BIAS, t->ndim, shape);
    }
    if (extra) gf_params_add(p, extra, GF_PK_BIAS, 1, (int64_t[]){4});
    GF_ASSERT(gf_params_alloc(p) == GF_OK, "alloc");
}

GF_TEST(unit, st_golden_fixtures_load) {
    static const char *variants[] = {
        "grassmann_post_A", "grassmann_post_A_nogate", "grassmann_post_A_nonorm",
        "grassmann_post_A_noplucker", "grassmann_post_B", "grassmann_pre_A", "grassmann_pre_B",
        "transformer_post", "transformer_pre"};
    char path[1024];
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        gf_safetensors_file *f = NULL;
        GF_CHECK_OK(gf_safetensors_read(fixture_path(path, sizeof path, variants[v]), &f));
        if (!f) continue;
        const gf_safetensors_tensor *loss = gf_safetensors_find(f, "out.loss");
        GF_CHECK(loss && loss->dtype == GF_SAFETENSORS_F32 && loss->ndim == 1 && loss->shape[0] == 1, "%s: out.loss",
                 variants[v]);
        if (loss) {
            float l = ((const float *)loss->data)[0];
            GF_CHECK(isfinite(l) && l > 0.5f && l < 10.0f, "%s: loss %g", variants[v], l);
        }
        const gf_safetensors_tensor *tok = gf_safetensors_find(f, "input.tokens");
        GF_CHECK(tok && tok->dtype == GF_SAFETENSORS_I32 && tok->ndim == 2 && tok->shape[0] == 2 &&
                 tok->shape[1] == 13, "%s: input.tokens is I32 (2, 13)", variants[v]);
        const char *V = gf_safetensors_meta(f, "V");
        GF_CHECK(V && strcmp(V, "61") == 0, "%s: meta V = %s", variants[v], V ? V : "(null)");
        if (tok && V) {
            const int32_t *ids = tok->data;
            int ok = 1;
            for (int64_t i = 0; i < tok->numel; i++) ok &= ids[i] >= 0 && ids[i] < 61;
            GF_CHECK(ok, "%s: token ids in [0, V)", variants[v]);
        }
        GF_CHECK(gf_safetensors_find(f, "no.such.tensor") == NULL, "find of an absent name");
        GF_CHECK(gf_safetensors_meta(f, "no_such_key") == NULL, "absent meta key");
        gf_safetensors_free(f);
    }
}

GF_TEST(unit, st_load_params_from_fixture) {
    char path[1024];
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(fixture_path(path, sizeof path, "grassmann_post_A"), &f));
    gf_params p;
    params_from_fixture(&p, f, NULL, 0, NULL);
    GF_CHECK(p.n == 7356, "fixture n_params 7356, block has %lld", (long long)p.n);
    GF_REQUIRE_OK(gf_safetensors_load_params(f, &p, ""));
    float *g = malloc((size_t)p.n * sizeof *g); // (n)
    GF_REQUIRE_OK(gf_safetensors_load_params_into(f, &p, "grad.", g));
    int ok_w = 1, ok_g = 1;
    for (int64_t i = 0; i < p.n_items; i++) {
        const gf_param *it = p.items[i];
        char gname[128];
        snprintf(gname, sizeof gname, "grad.%s", it->name);
        const gf_safetensors_tensor *t = gf_safetensors_find(f, it->name), *gt = gf_safetensors_find(f, gname);
        ok_w &= t && !memcmp(p.data + it->offset, t->data, t->nbytes);
        ok_g &= gt && !memcmp(g + it->offset, gt->data, gt->nbytes);
    }
    GF_CHECK(ok_w, "weights copied bit-exact into the block");
    GF_CHECK(ok_g, "grad.* copied bit-exact into a block-shaped buffer");

    /* the model disagrees with the file: named tensor and both shapes, block untouched */
    gf_params q;
    params_from_fixture(&q, f, "blocks.0.mix.w_red.weight", 8, NULL);
    for (int64_t i = 0; i < q.n; i++) q.data[i] = 7.0f;
    GF_CHECK_ERR(gf_safetensors_load_params(f, &q, ""), GF_E_INVALID,
                 "grassmann_post_A.safetensors: tensor blocks.0.mix.w_red.weight has shape [6, 16], "
                 "model expects [8, 16]");
    int untouched = 1;
    for (int64_t i = 0; i < q.n; i++) untouched &= q.data[i] == 7.0f;
    GF_CHECK(untouched, "failed load leaves the block untouched");
    gf_params x;
    params_from_fixture(&x, f, NULL, 0, "blocks.9.extra.bias");
    GF_CHECK_ERR(gf_safetensors_load_params(f, &x, ""), GF_E_NOTFOUND, "tensor blocks.9.extra.bias not found");
    GF_CHECK_ERR(gf_safetensors_load_params(f, &p, "nope."), GF_E_NOTFOUND, "nope.");
    free(g);
    gf_params_free(&p);
    gf_params_free(&q);
    gf_params_free(&x);
    gf_safetensors_free(f);
}

GF_TEST(unit, st_export_roundtrip) {
    char path[1024], tmp[1040];
    snprintf(path, sizeof path, "%s/export.safetensors", gf_test_tmpdir());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gf_params p;
    gf_params_init(&p);
    gf_params_add(&p, "tok_emb.weight", GF_PK_EMBED, 2, (int64_t[]){5, 3});
    gf_params_add(&p, "a.bias", GF_PK_BIAS, 1, (int64_t[]){7}); /* odd size: later tensors unaligned in the blob? */
    gf_params_add(&p, "b.weight", GF_PK_WEIGHT, 3, (int64_t[]){2, 3, 4});
    GF_REQUIRE_OK(gf_params_alloc(&p));
    for (int64_t i = 0; i < p.n; i++) p.data[i] = (float)i * 0.37f - 2.0f;
    const char *keys[] = {"family", "note"}, *vals[] = {"grassmann", "quote \" and\nnewline"};
    GF_REQUIRE_OK(gf_safetensors_save_params(path, &p, 2, keys, vals));
    struct stat st;
    GF_CHECK(stat(tmp, &st) != 0, "no tmp file left");
    FILE *fp = fopen(path, "rb");
    unsigned char h[8] = {0};
    GF_REQUIRE(fp && fread(h, 1, 8, fp) == 8, "read header size");
    fclose(fp);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = (hn << 8) | h[i];
    int padded = hn % 8 == 0;
    GF_CHECK(padded, "header padded to a multiple of 8 (%llu)", (unsigned long long)hn);

    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(path, &f));
    GF_CHECK(gf_safetensors_count(f) == 3, "3 tensors");
    for (int64_t i = 0; i < gf_safetensors_count(f) && i < p.n_items; i++)
        GF_CHECK(strcmp(gf_safetensors_at(f, i)->name, p.items[i]->name) == 0, "block order at %lld", (long long)i);
    GF_CHECK(gf_safetensors_meta(f, "note") && strcmp(gf_safetensors_meta(f, "note"), vals[1]) == 0, "escaped metadata");
    const gf_safetensors_tensor *b = gf_safetensors_find(f, "b.weight");
    int b_ok = b && b->ndim == 3 && b->shape[2] == 4 && ((uintptr_t)b->data % 4) == 0;
    GF_CHECK(b_ok, "b.weight");
    gf_params q;
    gf_params_init(&q);
    gf_params_add(&q, "tok_emb.weight", GF_PK_EMBED, 2, (int64_t[]){5, 3});
    gf_params_add(&q, "a.bias", GF_PK_BIAS, 1, (int64_t[]){7});
    gf_params_add(&q, "b.weight", GF_PK_WEIGHT, 3, (int64_t[]){2, 3, 4});
    GF_REQUIRE_OK(gf_params_alloc(&q));
    GF_REQUIRE_OK(gf_safetensors_load_params(f, &q, ""));
    GF_CHECK(!memcmp(p.data, q.data, (size_t)p.n * sizeof(float)), "export -> load is bit-exact");
    gf_safetensors_free(f);
    gf_params_free(&p);
    gf_params_free(&q);
}

static int have_python_numpy(void) {
    if (access("/usr/bin/python3", X_OK) != 0) return 0;
    return system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

GF_TEST(unit, st_python_roundtrip) {
    if (!have_python_numpy()) {
        gf_test_skip("/usr/bin/python3 with numpy not available");
        return;
    }
    const char *dir = gf_test_tmpdir();
    char c2py[1024], py2c[1024], script[1024], log[1024], cmd[6000];
    snprintf(c2py, sizeof c2py, "%s/c2py.safetensors", dir);
    snprintf(py2c, sizeof py2c, "%s/py2c.safetensors", dir);
    snprintf(script, sizeof script, "%s/st_check.py", dir);
    snprintf(log, sizeof log, "%s/st_check.log", dir);

    float w[12], big[1000], sc = 3.5f; // w (3, 4); big (1000)
    int32_t tok[10];                    // (2, 5)
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 1000; i++) big[i] = (float)(i % 97) / 8.0f - 6.0f;
    for (int i = 0; i < 10; i++) tok[i] = i * 7 - 3;
    const char *names[] = {"w", "tok", "s", "big"};
    gf_safetensors_dtype dt[] = {GF_SAFETENSORS_F32, GF_SAFETENSORS_I32, GF_SAFETENSORS_F32, GF_SAFETENSORS_F32};
    int32_t nd[] = {2, 2, 0, 1};
    const int64_t sw[] = {3, 4}, stok[] = {2, 5}, sbig[] = {1000};
    const int64_t *shapes[] = {sw, stok, NULL, sbig};
    const void *datas[] = {w, tok, &sc, big};
    const char *mk[] = {"recipe", "unicode"}, *mv[] = {"a = 1\nb = \"x\"", "Pl\xc3\xbc" "cker"};
    GF_REQUIRE_OK(gf_safetensors_write(c2py, 4, names, dt, nd, shapes, datas, 2, mk, mv));

    FILE *fp = fopen(script, "w");
    GF_REQUIRE(fp, "write script");
    fputs("import sys\n"
          "sys.path.insert(0, sys.argv[1] + \"/tools\")\n"
          "import numpy as np\n"
          "import safetensors_io as st\n"
          "t, m = st.load(sys.argv[2])\n"
          "assert list(t) == [\"w\", \"tok\", \"s\", \"big\"], list(t)\n"
          "ew = (np.arange(12, dtype=np.float32) * np.float32(0.25) - 1).reshape(3, 4)\n"
          "assert t[\"w\"].dtype == np.float32 and t[\"w\"].shape == (3, 4) and (t[\"w\"] == ew).all()\n"
          "et = (np.arange(10, dtype=np.int32) * 7 - 3).reshape(2, 5)\n"
          "assert t[\"tok\"].dtype == np.int32 and t[\"tok\"].shape == (2, 5) and (t[\"tok\"] == et).all()\n"
          "assert t[\"s\"].shape == () and t[\"s\"] == np.float32(3.5)\n"
          "eb = (np.arange(1000) % 97).astype(np.float32) / np.float32(8) - np.float32(6)\n"
          "assert t[\"big\"].shape == (1000,) and (t[\"big\"] == eb).all()\n"
          "assert m == {\"recipe\": \"a = 1\\nb = \\\"x\\\"\", \"unicode\": \"Pl\\u00fccker\"}, m\n"
          "x = (np.arange(6, dtype=np.float32) / 4).reshape(2, 3)\n"
          "st.save(sys.argv[3], {\"x\": x, \"i\": np.array([[-1, 2]], dtype=np.int32)}, {\"k\": \"v\"})\n"
          "print(\"python ok\")\n",
          fp);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' '%s' '%s' >'%s' 2>&1", script,
             gf_test_source_root(), c2py, py2c, log);
    int rc = system(cmd);
    if (rc != 0) {
        char buf[2048] = {0};
        FILE *lf = fopen(log, "r");
        if (lf) {
            size_t n = fread(buf, 1, sizeof buf - 1, lf);
            buf[n] = 0;
            fclose(lf);
        }
        GF_CHECK(rc == 0, "python load() disagrees with the C writer (rc %d):\n%s", rc, buf);
        return;
    }
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(py2c, &f));
    const gf_safetensors_tensor *x = gf_safetensors_find(f, "x"), *i = gf_safetensors_find(f, "i");
    GF_REQUIRE(x && i, "both tensors present");
    GF_CHECK(x->dtype == GF_SAFETENSORS_F32 && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3, "x shape");
    int ok = 1;
    for (int k = 0; k < 6; k++) ok &= ((const float *)x->data)[k] == (float)k / 4.0f;
    GF_CHECK(ok, "x values");
    GF_CHECK(i->dtype == GF_SAFETENSORS_I32 && i->numel == 2 && ((const int32_t *)i->data)[0] == -1 &&
             ((const int32_t *)i->data)[1] == 2, "i values");
    GF_CHECK(gf_safetensors_meta(f, "k") && !strcmp(gf_safetensors_meta(f, "k"), "v"), "metadata from python");
    gf_safetensors_free(f);
}

/* Write "size + json + data" verbatim (no padding), for malformed-file cases. */
static void write_raw(const char *path, uint64_t hsize, const char *json, const void *data, size_t dn) {
    FILE *fp = fopen(path, "wb");
    GF_ASSERT(fp, "open %s", path);
    unsigned char h[8];
    for (int i = 0; i < 8; i++) h[i] = (unsigned char)(hsize >> (8 * i));
    fwrite(h, 1, 8, fp);
    fwrite(json, 1, strlen(json), fp);
    if (dn) fwrite(data, 1, dn, fp);
    fclose(fp);
}

GF_TEST(unit, st_rejects_malformed) {
    char path[1024];
    snprintf(path, sizeof path, "%s/bad.safetensors", gf_test_tmpdir());
    static const unsigned char zeros[64];
    struct {
        const char *json;
        size_t data_bytes;
        gf_status code;
        const char *needle1, *needle2;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, GF_E_PARSE, "not valid JSON", NULL},
        {"{} x", 0, GF_E_PARSE, "after the JSON", NULL},
        {"[1, 2]", 0, GF_E_CORRUPT, "not a JSON object", NULL},
        {"{\"half\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, GF_E_INVALID, "tensor half", "F16"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20, GF_E_CORRUPT, "tensor a", "[2, 3]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, GF_E_CORRUPT, "tensor a", "past"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, GF_E_CORRUPT, "tensor b", "overlaps tensor a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, GF_E_CORRUPT, "tensor a", "twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, GF_E_CORRUPT, "tensor a", "holes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, GF_E_CORRUPT, "after the last tensor", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, GF_E_CORRUPT, "tensor a", "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, GF_E_CORRUPT, "tensor a", "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, GF_E_CORRUPT, "tensor a", "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, GF_E_CORRUPT, "tensor a", "data_offsets"},
        {"{\"__metadata__\":{\"k\":1}}", 0, GF_E_CORRUPT, "key k", "not a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, strlen(cases[i].json), cases[i].json, zeros, cases[i].data_bytes);
        gf_safetensors_file *f = (gf_safetensors_file *)0x1;
        gf_status s = gf_safetensors_read(path, &f);
        const char *e = gf_last_error();
        GF_CHECK(s == cases[i].code && f == NULL && strstr(e, path) && strstr(e, cases[i].needle1) &&
                 (!cases[i].needle2 || strstr(e, cases[i].needle2)),
                 "case %zu (%s): got %s '%s', expected %s with '%s'", i, cases[i].json, gf_status_name(s),
                 e, gf_status_name(cases[i].code), cases[i].needle1);
        if (s == GF_OK) gf_safetensors_free(f);
    }
    /* header size beyond the file; a file too short for the size field; a missing file */
    write_raw(path, 1000, "{}", NULL, 0);
    gf_safetensors_file *f = NULL;
    GF_CHECK_ERR(gf_safetensors_read(path, &f), GF_E_CORRUPT, "header size 1000");
    FILE *fp = fopen(path, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    GF_CHECK_ERR(gf_safetensors_read(path, &f), GF_E_CORRUPT, "too short");
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/none.safetensors", gf_test_tmpdir());
    const char *missingp = missing;
    GF_CHECK_ERR(gf_safetensors_read(missing, &f), GF_E_NOTFOUND, missingp);
    /* valid edge cases: empty header object, padded header, scalar */
    write_raw(path, 8, "{}      ", NULL, 0);
    GF_CHECK_OK(gf_safetensors_read(path, &f));
    if (f) GF_CHECK(gf_safetensors_count(f) == 0, "empty file has no tensors");
    gf_safetensors_free(f);
    /* the writer refuses duplicate and reserved names */
    const char *dup[] = {"a", "a"};
    gf_safetensors_dtype dt[] = {GF_SAFETENSORS_F32, GF_SAFETENSORS_F32};
    int32_t nd[] = {0, 0};
    float v = 1.0f;
    const void *da[] = {&v, &v};
    GF_CHECK_ERR(gf_safetensors_write(path, 2, dup, dt, nd, (const int64_t *const[]){NULL, NULL}, da, 0, NULL, NULL),
                 GF_E_INVALID, "given twice");
    const char *res[] = {"__metadata__"};
    GF_CHECK_ERR(gf_safetensors_write(path, 1, res, dt, nd, (const int64_t *const[]){NULL}, da, 0, NULL, NULL),
                 GF_E_INVALID, "reserved");
}
