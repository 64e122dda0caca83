/* test_checkpoint.c — checkpoint round trip, corruption/truncation detection, model mismatch,
 * and atomic writes that fail (RLIMIT_FSIZE, unwritable directory) without harming the old file. */
#include "gf_test.h"
#include "test_util.h"
#include "gflow/checkpoint.h"
#include "gflow/rng.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A small model; `wide` resizes one matrix to exercise shape mismatches, `extra` adds a
 * tensor the checkpoint lacks, `big` makes the file larger than the RLIMIT_FSIZE test's limit. */
typedef struct model_opts { int64_t wide; int extra, drop_ln, big; } model_opts;

static void make_model(gf_params *p, model_opts o, uint64_t seed) {
    gf_params_init(p);
    int64_t s_emb[2] = {11, 8}, s_w[2] = {o.wide ? o.wide : 8, 8}, s_b[1] = {8}, s_ln[1] = {8};
    int64_t s_big[2] = {64, 96}, s_x[1] = {3};
    gf_params_add(p, "tok_emb.weight", GF_PK_EMBED, 2, s_emb);
    gf_params_add(p, "blocks.0.fc.weight", GF_PK_WEIGHT, 2, s_w);
    gf_params_add(p, "blocks.0.fc.bias", GF_PK_BIAS, 1, s_b);
    if (!o.drop_ln) gf_params_add(p, "ln_f.weight", GF_PK_NORM, 1, s_ln);
    if (o.big) gf_params_add(p, "blocks.0.big.weight", GF_PK_WEIGHT, 2, s_big);
    if (o.extra) gf_params_add(p, "blocks.0.extra.bias", GF_PK_BIAS, 1, s_x);
    GF_ASSERT(gf_params_alloc(p) == GF_OK, "alloc");
    gf_rng r;
    gf_rng_seed(&r, seed);
    for (int64_t i = 0; i < p->n; i++) {
        p->data[i] = (float)gf_rng_normal(&r);
        p->m[i] = (float)gf_rng_normal(&r) * 1e-3f;
        p->v[i] = gf_rng_uniform(&r) * 1e-6f;
        p->grad[i] = 1234.5f; /* sentinel: checkpoints neither store nor touch grad */
    }
}

static int block_equal(const gf_params *a, const gf_params *b) {
    size_t n = (size_t)a->n * sizeof(float);
    return a->n == b->n && !memcmp(a->data, b->data, n) && !memcmp(a->m, b->m, n) &&
           !memcmp(a->v, b->v, n);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

typedef struct optim_pod { int64_t t; double lr; float beta1, beta2; } optim_pod;

static void fill_meta(gf_ckpt_meta *m, gf_rng *r) {
    gf_ckpt_meta_init(m);
    m->step = 1234;
    m->epoch = 3;
    gf_ckpt_meta_set_recipe(m, "[model]\nfamily = grassmann\nd = 16\n\n[optim]\nlr = 3e-4\n");
    gf_ckpt_meta_set_blob(&m->rng, r, sizeof *r);
    int64_t loader[3] = {7, 4096, -1};
    gf_ckpt_meta_set_blob(&m->loader, loader, sizeof loader);
    optim_pod op = {1234, 3e-4, 0.9f, 0.95f};
    gf_ckpt_meta_set_blob(&m->optim, &op, sizeof op);
    gf_ckpt_meta_set_kv(m, "git", "v0.1-3-gabc123");
    gf_ckpt_meta_set_kv(m, "empty", "");
    gf_ckpt_meta_set_kv(m, "git", "v0.1-4-gdef456"); /* replaces */
}

static void ckpt_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", gf_test_tmpdir(), name);
}

GF_TEST(unit, ckpt_roundtrip_bit_exact) {
    char path[600], tmp[610];
    ckpt_path(path, sizeof path, "rt.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gf_params a, b;
    make_model(&a, (model_opts){0}, 1);
    make_model(&b, (model_opts){0}, 2);
    gf_rng r;
    gf_rng_seed(&r, 99);
    for (int i = 0; i < 5; i++) gf_rng_u64(&r);
    (void)gf_rng_normal(&r); /* leaves a cached spare in the state */
    gf_ckpt_meta m;
    fill_meta(&m, &r);
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, &m));
    GF_CHECK(!exists(tmp), "no tmp file left after a good save");
    GF_CHECK(!block_equal(&a, &b), "models differ before load");

    gf_ckpt_meta got;
    gf_ckpt_meta_init(&got);
    GF_REQUIRE_OK(gf_ckpt_load(path, &b, &got));
    GF_CHECK(block_equal(&a, &b), "data, m and v bit-exact after load");
    GF_CHECK(b.grad[0] == 1234.5f && b.grad[b.n - 1] == 1234.5f, "grad untouched");
    GF_CHECK(got.step == 1234 && got.epoch == 3, "step %lld epoch %lld", (long long)got.step,
             (long long)got.epoch);
    GF_CHECK(got.recipe && strcmp(got.recipe, m.recipe) == 0, "recipe text");
    GF_CHECK(got.rng.size == sizeof r && !memcmp(got.rng.data, &r, sizeof r), "rng blob");
    GF_CHECK(got.loader.size == m.loader.size && !memcmp(got.loader.data, m.loader.data, m.loader.size),
             "loader blob");
    GF_CHECK(got.optim.size == sizeof(optim_pod) && !memcmp(got.optim.data, m.optim.data, sizeof(optim_pod)),
             "optim blob");
    GF_CHECK(got.n_kv == 2, "n_kv %lld", (long long)got.n_kv);
    GF_CHECK(gf_ckpt_meta_get_kv(&got, "git") && !strcmp(gf_ckpt_meta_get_kv(&got, "git"), "v0.1-4-gdef456"),
             "kv git");
    GF_CHECK(gf_ckpt_meta_get_kv(&got, "empty") && !*gf_ckpt_meta_get_kv(&got, "empty"), "kv empty");
    /* the restored RNG continues the stream exactly */
    gf_rng r2;
    memcpy(&r2, got.rng.data, sizeof r2);
    int same = 1;
    for (int i = 0; i < 16; i++) same &= gf_rng_normal(&r) == gf_rng_normal(&r2);
    GF_CHECK(same, "restored RNG reproduces the stream");

    gf_ckpt_meta pk;
    gf_ckpt_meta_init(&pk);
    GF_REQUIRE_OK(gf_ckpt_peek(path, &pk));
    GF_CHECK(pk.step == 1234 && pk.recipe && !strcmp(pk.recipe, m.recipe), "peek reads the header");

    /* meta NULL: step 0, nothing else; overwriting an existing checkpoint */
    GF_REQUIRE_OK(gf_ckpt_save(path, &b, NULL));
    gf_ckpt_meta_free(&pk);
    GF_REQUIRE_OK(gf_ckpt_peek(path, &pk));
    GF_CHECK(pk.step == 0 && !pk.recipe && pk.n_kv == 0 && pk.rng.size == 0, "empty meta");

    gf_ckpt_meta_free(&pk);
    gf_ckpt_meta_free(&got);
    gf_ckpt_meta_free(&m);
    gf_params_free(&a);
    gf_params_free(&b);
}

GF_TEST(unit, ckpt_truncation_rejected) {
    char path[600], cut[600];
    ckpt_path(path, sizeof path, "full.ckpt");
    ckpt_path(cut, sizeof cut, "cut.ckpt");
    gf_params a, b, b0;
    make_model(&a, (model_opts){0}, 3);
    make_model(&b, (model_opts){0}, 4);
    make_model(&b0, (model_opts){0}, 4);
    gf_rng r;
    gf_rng_seed(&r, 1);
    gf_ckpt_meta m;
    fill_meta(&m, &r);
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, &m));
    size_t len;
    unsigned char *buf = (unsigned char *)gf_test_slurp(path, &len);
    GF_REQUIRE(buf && len > 1000, "read back %zu bytes", len);
    for (int k = 0; k < 16; k++) {
        size_t n = len * (size_t)k / 16;
        GF_REQUIRE(gf_test_write_file(cut, buf, n), "write truncated copy");
        gf_ckpt_meta out;
        gf_ckpt_meta_init(&out);
        gf_status s = gf_ckpt_load(cut, &b, &out);
        GF_CHECK(s == GF_E_CORRUPT, "truncated to %zu/%zu bytes: got %s (%s)", n, len,
                 gf_status_name(s), gf_last_error());
        GF_CHECK(strstr(gf_last_error(), cut) != NULL, "message names the file: %s", gf_last_error());
        GF_CHECK(gf_ckpt_peek(cut, &out) == GF_E_CORRUPT, "peek rejects %zu bytes too", n);
    }
    /* one byte short, and one byte extra */
    GF_REQUIRE(gf_test_write_file(cut, buf, len - 1), "write");
    GF_CHECK_ERR(gf_ckpt_load(cut, &b, NULL), GF_E_CORRUPT, "truncated");
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    GF_REQUIRE(gf_test_write_file(cut, longer, len + 1), "write");
    const char *cutp = cut;
    GF_CHECK_ERR(gf_ckpt_load(cut, &b, NULL), GF_E_CORRUPT, cutp);
    GF_CHECK(block_equal(&b, &b0), "failed loads leave the block untouched");
    free(longer);
    free(buf);
    gf_ckpt_meta_free(&m);
    gf_params_free(&a);
    gf_params_free(&b);
    gf_params_free(&b0);
}

static uint64_t rd64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

GF_TEST(unit, ckpt_bit_flips_rejected) {
    char path[600], bad[600];
    ckpt_path(path, sizeof path, "flip.ckpt");
    ckpt_path(bad, sizeof bad, "flipped.ckpt");
    gf_params a, b, b0;
    make_model(&a, (model_opts){0}, 5);
    make_model(&b, (model_opts){0}, 6);
    make_model(&b0, (model_opts){0}, 6);
    gf_rng r;
    gf_rng_seed(&r, 2);
    gf_ckpt_meta m;
    fill_meta(&m, &r);
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, &m));
    size_t len;
    unsigned char *buf = (unsigned char *)gf_test_slurp(path, &len);
    GF_REQUIRE(buf, "read back");
    uint64_t meta_size = rd64(buf + 40), table_size = rd64(buf + 48), blob = rd64(buf + 56);
    int layout_ok = blob % 64 == 0 && blob >= 64 + meta_size + table_size && blob < len;
    GF_REQUIRE(layout_ok, "blob offset %llu", (unsigned long long)blob);
    struct { const char *where; size_t off; int bit; } flips[] = {
        {"header step", 24, 0},
        {"header epoch", 32, 5},
        {"metadata (recipe)", 64 + 20, 3},
        {"tensor table (a name)", 64 + meta_size + 14, 1},
        {"tensor table (a shape)", 64 + meta_size + table_size - 30, 6},
        {"data blob (first float)", blob, 0},
        {"data blob (m, sign bit)", blob + (len - blob) / 2, 7},
        {"data blob (last float of v)", len - 17, 4},
        {"checksum itself", len - 8, 2},
    };
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        buf[flips[i].off] ^= (unsigned char)(1u << flips[i].bit);
        GF_REQUIRE(gf_test_write_file(bad, buf, len), "write");
        buf[flips[i].off] ^= (unsigned char)(1u << flips[i].bit);
        gf_status s = gf_ckpt_load(bad, &b, NULL);
        GF_CHECK(s == GF_E_CORRUPT && strstr(gf_last_error(), "checksum") && strstr(gf_last_error(), bad),
                 "bit flip in %s: %s (%s)", flips[i].where, gf_status_name(s), gf_last_error());
        gf_ckpt_meta pk;
        GF_CHECK(gf_ckpt_peek(bad, &pk) == GF_E_CORRUPT, "peek also verifies the checksum (%s)",
                 flips[i].where);
    }
    GF_CHECK(block_equal(&b, &b0), "failed loads leave the block untouched");
    /* the unmodified bytes still load */
    GF_REQUIRE(gf_test_write_file(bad, buf, len), "write");
    GF_CHECK_OK(gf_ckpt_load(bad, &b, NULL));
    GF_CHECK(block_equal(&a, &b), "intact copy loads");
    free(buf);
    gf_ckpt_meta_free(&m);
    gf_params_free(&a);
    gf_params_free(&b);
    gf_params_free(&b0);
}

GF_TEST(unit, ckpt_wrong_magic_and_version) {
    char path[600], bad[600];
    ckpt_path(path, sizeof path, "mv.ckpt");
    ckpt_path(bad, sizeof bad, "mv_bad.ckpt");
    gf_params a;
    make_model(&a, (model_opts){0}, 7);
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, NULL));
    size_t len;
    unsigned char *buf = (unsigned char *)gf_test_slurp(path, &len);
    GF_REQUIRE(buf, "read back");
    buf[5] = 'X';
    GF_REQUIRE(gf_test_write_file(bad, buf, len), "write");
    GF_CHECK_ERR(gf_ckpt_load(bad, &a, NULL), GF_E_CORRUPT, "bad magic");
    GF_CHECK(strstr(gf_last_error(), bad) != NULL, "names the file: %s", gf_last_error());
    buf[5] = 'C';
    buf[8] = 2; /* version 2 */
    GF_REQUIRE(gf_test_write_file(bad, buf, len), "write");
    GF_CHECK_ERR(gf_ckpt_load(bad, &a, NULL), GF_E_CORRUPT, "unsupported checkpoint version 2");
    GF_CHECK_ERR(gf_ckpt_peek(bad, &(gf_ckpt_meta){0}), GF_E_CORRUPT, "version 2");
    /* a text file and an empty file */
    GF_REQUIRE(gf_test_write_file(bad, "[model]\nd = 16\n", 15), "write");
    GF_CHECK_ERR(gf_ckpt_load(bad, &a, NULL), GF_E_CORRUPT, "not a gflow checkpoint");
    GF_REQUIRE(gf_test_write_file(bad, "", 0), "write");
    GF_CHECK_ERR(gf_ckpt_load(bad, &a, NULL), GF_E_CORRUPT, "not a gflow checkpoint");
    free(buf);
    gf_params_free(&a);
}

GF_TEST(unit, ckpt_model_mismatch_named) {
    char path[600];
    ckpt_path(path, sizeof path, "mm.ckpt");
    gf_params a, w, w0, x, d;
    make_model(&a, (model_opts){0}, 8);
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, NULL));
    make_model(&w, (model_opts){.wide = 6}, 9);
    make_model(&w0, (model_opts){.wide = 6}, 9);
    gf_ckpt_meta out;
    gf_ckpt_meta_init(&out);
    GF_CHECK_ERR(gf_ckpt_load(path, &w, &out), GF_E_INVALID,
                 "tensor blocks.0.fc.weight has shape [8, 8] in the checkpoint, model expects [6, 8]");
    GF_CHECK(strstr(gf_last_error(), path) != NULL, "names the file");
    GF_CHECK(block_equal(&w, &w0), "params untouched after a mismatch");
    GF_CHECK(out.recipe == NULL && out.n_kv == 0, "meta untouched");
    make_model(&x, (model_opts){.extra = 1}, 10);
    GF_CHECK_ERR(gf_ckpt_load(path, &x, NULL), GF_E_NOTFOUND, "lacks tensor blocks.0.extra.bias");
    make_model(&d, (model_opts){.drop_ln = 1}, 11);
    GF_CHECK_ERR(gf_ckpt_load(path, &d, NULL), GF_E_INVALID, "ln_f.weight, which the model does not declare");
    gf_params_free(&a);
    gf_params_free(&w);
    gf_params_free(&w0);
    gf_params_free(&x);
    gf_params_free(&d);
}

GF_TEST(unit, ckpt_fsize_limit_keeps_previous) {
    char path[600], tmp[610];
    ckpt_path(path, sizeof path, "fsize.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gf_params a, b;
    make_model(&a, (model_opts){.big = 1}, 12);
    make_model(&b, (model_opts){.big = 1}, 13); /* what the failing save tries to write */
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, NULL));
    size_t len0;
    unsigned char *before = (unsigned char *)gf_test_slurp(path, &len0);
    GF_REQUIRE(before && len0 > 3 * 64 * 96 * 4, "big enough file (%zu bytes)", len0);
    fflush(stdout);
    pid_t pid = fork();
    GF_REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN); /* get EFBIG instead of being killed */
        struct rlimit rl = {16384, 16384};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(10);
        gf_status s = gf_ckpt_save(path, &b, NULL);
        if (s != GF_E_IO) _exit(11);
        if (!strstr(gf_last_error(), path) || !strstr(gf_last_error(), "File too large")) _exit(12);
        if (exists(tmp)) _exit(13);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    GF_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
             "child: exit %d (10 setrlimit, 11 save did not fail with io, 12 message, 13 tmp left)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    size_t len1;
    unsigned char *after = (unsigned char *)gf_test_slurp(path, &len1);
    GF_CHECK(after && len1 == len0 && !memcmp(before, after, len0), "previous checkpoint unchanged");
    GF_CHECK(!exists(tmp), "tmp file removed");
    GF_CHECK_OK(gf_ckpt_load(path, &b, NULL));
    GF_CHECK(block_equal(&a, &b), "previous checkpoint still loads");
    free(before);
    free(after);
    gf_params_free(&a);
    gf_params_free(&b);
}

GF_TEST(unit, ckpt_unwritable_target) {
    char file[600], path[620];
    ckpt_path(file, sizeof file, "plainfile");
    GF_REQUIRE(gf_test_write_file(file, "x", 1), "write");
    snprintf(path, sizeof path, "%s/x.ckpt", file); /* under a non-directory: fails even as root */
    gf_params a;
    make_model(&a, (model_opts){0}, 14);
    const char *pathp = path;
    GF_CHECK_ERR(gf_ckpt_save(path, &a, NULL), GF_E_IO, pathp);
    if (geteuid() != 0) { /* root ignores permissions, so this half only runs as a user */
        char dir[600], in[620];
        ckpt_path(dir, sizeof dir, "rodir");
        mkdir(dir, 0755);
        snprintf(in, sizeof in, "%s/x.ckpt", dir);
        GF_REQUIRE_OK(gf_ckpt_save(in, &a, NULL));
        chmod(dir, 0555);
        a.data[0] += 1.0f;
        const char *inp = in;
        GF_CHECK_ERR(gf_ckpt_save(in, &a, NULL), GF_E_IO, inp);
        a.data[0] -= 1.0f;
        gf_params b;
        make_model(&b, (model_opts){0}, 15);
        GF_CHECK_OK(gf_ckpt_load(in, &b, NULL));
        GF_CHECK(block_equal(&a, &b), "old file intact");
        gf_params_free(&b);
        chmod(dir, 0755);
    }
    gf_params_free(&a);
}

GF_TEST(unit, ckpt_tmp_never_loaded) {
    char path[600], tmp[610];
    ckpt_path(path, sizeof path, "crash.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gf_params a;
    make_model(&a, (model_opts){0}, 16);
    /* a complete file under the tmp name, as a crash between write and rename leaves it */
    GF_REQUIRE_OK(gf_ckpt_save(path, &a, NULL));
    GF_REQUIRE(rename(path, tmp) == 0, "rename");
    const char *pathp = path;
    GF_CHECK_ERR(gf_ckpt_load(path, &a, NULL), GF_E_NOTFOUND, pathp);
    GF_CHECK_ERR(gf_ckpt_peek(path, &(gf_ckpt_meta){0}), GF_E_NOTFOUND, pathp);
    /* a stale or torn tmp does not stop the next save, which replaces it */
    GF_REQUIRE(gf_test_write_file(tmp, "torn", 4), "write");
    GF_CHECK_OK(gf_ckpt_save(path, &a, NULL));
    GF_CHECK(!exists(tmp) && exists(path), "tmp consumed by the rename");
    gf_params_free(&a);
}
