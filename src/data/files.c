/* files.c — sha256 (OpenSSL libcrypto EVP), the table of recorded dataset
 * checksums (kept equal to datasets/fetch.sh), split paths. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "gflow/data.h"

gf_status gf_sha256_file(const char *path, uint8_t digest[32], char hex[65]) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(errno == ENOENT ? GF_E_NOTFOUND : GF_E_IO, "%s: %s", path,
                            strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        fclose(f);
        EVP_MD_CTX_free(ctx);
        return gf_error_set(GF_E_EXTERNAL, "%s: cannot start sha256 (libcrypto)", path);
    }
    static _Thread_local unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) EVP_DigestUpdate(ctx, buf, got);
    int err = ferror(f);
    fclose(f);
    uint8_t d[32];
    unsigned int dn = 0;
    EVP_DigestFinal_ex(ctx, d, &dn);
    EVP_MD_CTX_free(ctx);
    if (err) return gf_error_set(GF_E_IO, "%s: read error", path);
    if (digest) memcpy(digest, d, 32);
    if (hex) gf_sha256_to_hex(d, hex);
    return GF_OK;
}

void gf_sha256_buf(const void *data, size_t n, uint8_t digest[32]) {
    unsigned int dn = 0;
    EVP_Digest(data, n, digest, &dn, EVP_sha256(), NULL);
}

void gf_sha256_to_hex(const uint8_t digest[32], char hex[65]) {
    static const char *h = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = h[digest[i] >> 4];
        hex[2 * i + 1] = h[digest[i] & 15];
    }
    hex[64] = '\0';
}

gf_status gf_sha256_verify(const char *path, const char *expected_hex) {
    char hex[65];
    GF_TRY(gf_sha256_file(path, NULL, hex));
    if (strcasecmp(hex, expected_hex) != 0)
        return gf_error_set(GF_E_CORRUPT,
                            "%s: sha256 mismatch: file has %s, expected %s (file damaged, "
                            "truncated or a different version; fetch it again)",
                            path, hex, expected_hex);
    return GF_OK;
}

/* Same sums as datasets/fetch.sh and the dataset cards. */
static const struct { const char *name, *sha; } known[] = {
    {"wiki.train.tokens", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"},
    {"wiki.valid.tokens", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"},
    {"wiki.test.tokens", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"},
    {"snli_1.0_dev.txt", "3b3482d555af6bc25305a0d100d8ee8a4434c4ba784b4087e6564b9fc062c330"},
    {"snli_1.0_test.txt", "fe1e49f8b128aee1c78ce8a378aa0e48462e7ceecf328700c12515971a78a6b5"},
    {"snli_1.0_train_0.01.txt", "a79d2105cc2d399d151d59e0fe4f0e5aff9ce6d2795aaafe24a0ce40c71f0cd5"},
};

const char *gf_data_known_sha256(const char *basename) {
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, basename) == 0) return known[i].sha;
    return NULL;
}

gf_status gf_data_verify(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return gf_error_set(GF_E_NOTFOUND, "%s: %s", path, strerror(errno));
    /* a data file is hashed and read to its end: /dev/zero, /dev/urandom or a pipe never ends */
    if (!S_ISREG(sb.st_mode)) return gf_error_set(GF_E_INVALID, "%s: not a regular file (a data file is read to its end)", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *sha = gf_data_known_sha256(base);
    return sha ? gf_sha256_verify(path, sha) : GF_OK;
}

const char *gf_split_name(gf_split split) {
    return split == GF_SPLIT_TRAIN ? "train" : split == GF_SPLIT_VALID ? "valid" : "test";
}

gf_status gf_split_parse(const char *s, gf_split *out) {
    if (!strcmp(s, "train")) *out = GF_SPLIT_TRAIN;
    else if (!strcmp(s, "valid") || !strcmp(s, "dev") || !strcmp(s, "validation")) *out = GF_SPLIT_VALID;
    else if (!strcmp(s, "test")) *out = GF_SPLIT_TEST;
    else return gf_error_set(GF_E_INVALID, "unknown split '%s' (expected train, valid/dev or test)", s);
    return GF_OK;
}

gf_status gf_data_split_path(const char *data_dir, gf_dataset ds, gf_split split, char *path,
                             size_t cap) {
    static const char *wt[] = {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"};
    static const char *sn[] = {"snli_1.0_train.txt", "snli_1.0_dev.txt", "snli_1.0_test.txt"};
    const char *sub = ds == GF_DS_WIKITEXT2 ? "wikitext-2" : "snli_1.0";
    const char *file = ds == GF_DS_WIKITEXT2 ? wt[split] : sn[split];
    const char *dsname = ds == GF_DS_WIKITEXT2 ? "wikitext2" : "snli";
    int w = snprintf(path, cap, "%s/%s/%s", data_dir, sub, file);
    if (w < 0 || (size_t)w >= cap) return gf_error_set(GF_E_INVALID, "data path too long: %s", data_dir);
    struct stat sb;
    if (stat(path, &sb) == 0) return GF_OK;
    if (ds == GF_DS_SNLI && split == GF_SPLIT_TRAIN) {
        char alt[4096];
        snprintf(alt, sizeof alt, "%s/snli_1.0/snli_1.0_train_0.01.txt", data_dir);
        if (stat(alt, &sb) == 0)
            return gf_error_set(GF_E_NOTFOUND,
                                "SNLI train split missing: %s does not exist; only the 1%% sample "
                                "%s is present (point the recipe's train file at it and label "
                                "results as 1%%-data runs)",
                                path, alt);
    }
    return gf_error_set(GF_E_NOTFOUND,
                        "%s %s split missing: %s does not exist (run `datasets/fetch.sh %s %s`, "
                        "or `gflow data fetch %s`; other splits are unaffected)",
                        dsname, split == GF_SPLIT_TRAIN ? "train" : split == GF_SPLIT_VALID ? "valid" : "test",
                        path, dsname, data_dir, dsname);
}
