/* files.c — sha256 (OpenSSL libcrypto EVP), the file checks and split paths (the recorded
 * sums and file names are the data set table's: datasets.c). */
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
    const gf_dataset_info *d = gf_dataset_get(ds);
    char rel[512];
    if (!gf_dataset_default_file(ds, split, rel, sizeof rel))
        return gf_error_set(GF_E_INVALID, "data set %s has no %s file of its own (the recipe names it)",
                            d ? d->name : "?", gf_split_name(split));
    int w = snprintf(path, cap, "%s/%s", data_dir, rel);
    if (w < 0 || (size_t)w >= cap) return gf_error_set(GF_E_INVALID, "data path too long: %s", data_dir);
    struct stat sb;
    if (stat(path, &sb) == 0) return GF_OK;
    if (d->extra.name && split == GF_SPLIT_TRAIN) {
        char alt[4096];
        snprintf(alt, sizeof alt, "%s/%s/%s", data_dir, d->dir, d->extra.name);
        if (stat(alt, &sb) == 0)
            return gf_error_set(GF_E_NOTFOUND,
                                "%s train split missing: %s does not exist; only the sample "
                                "%s is present (point the recipe's train file at it and label "
                                "results as sample-data runs)",
                                d->name, path, alt);
    }
    return gf_error_set(GF_E_NOTFOUND,
                        "%s %s split missing: %s does not exist (run `datasets/fetch.sh %s %s`, "
                        "or `gflow data fetch %s`; other splits are unaffected)",
                        d->name, gf_split_name(split), path, d->fetch, data_dir, d->fetch);
}
