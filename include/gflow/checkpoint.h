/* gflow/checkpoint.h — resumable training state: one self-describing, verified file.
 *
 * A checkpoint holds the whole parameter block (weights, AdamW m and v), the step and
 * epoch, the resolved recipe text, opaque byte blobs for the RNG, data-loader and
 * optimizer state, and free-form string key/values. It is written to "<path>.tmp",
 * fsync'd, renamed over <path>, and the directory fsync'd, so <path> is always either the
 * previous good checkpoint or the new one; load opens only the exact name, so a .tmp left
 * by a crash is never read. Load verifies magic, version, length, CRC32 and the tensor
 * table against the model before it copies a single float.
 *
 * On-disk layout (version 1; integers little-endian, floats IEEE-754 binary32 LE):
 *
 *   off  size  field
 *   0    8     magic "GFLOWCK1"
 *   8    4     u32 version (1)
 *   12   4     u32 reserved (0)
 *   16   8     u64 file_size: total bytes, trailer included
 *   24   8     i64 step
 *   32   8     i64 epoch
 *   40   8     u64 meta_size   (metadata section starts at 64)
 *   48   8     u64 table_size  (tensor table starts at 64 + meta_size)
 *   56   8     u64 blob_offset (float blob start; multiple of 64; zero padding before it)
 *   64   ...   metadata: records { u32 name_len, name, u64 value_len, value bytes };
 *              names "recipe", "rng", "loader", "optim", and "kv:<key>" for each key/value
 *              (unknown names are skipped, so later versions can add records)
 *   ...  ...   tensor table: u64 count, then per entry
 *              { u32 name_len, name, u8 group (0 param, 1 adam_m, 2 adam_v), u8 kind
 *                (gf_param_kind), u16 ndim, i64 shape[ndim], u64 offset (bytes from
 *                blob_offset), u64 nbytes }
 *   blob_offset  the three arrays of the block, each starting on a 64-byte boundary of
 *              the blob: data (n floats), m (n floats), v (n floats); each parameter's entry
 *              points at its slice, so a reader needs no knowledge of the block layout
 *   file_size-16  trailer: "GFLOWEND", u32 CRC-32 (zlib) of bytes [0, file_size-8), u32 0
 *
 * Errors name the path and the reason (bad magic, version, truncated, checksum, table,
 * missing/mismatched tensor with both shapes).
 */
#ifndef GFLOW_CHECKPOINT_H
#define GFLOW_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"
#include "gflow/params.h"
#include "gflow/recipe.h"

#define GF_CKPT_MAGIC "GFLOWCK1"
#define GF_CKPT_VERSION 1u

typedef struct gf_ckpt_blob {
    void *data;   /* owned by the meta */
    size_t size;
} gf_ckpt_blob;

/* Metadata saved beside the tensors. A meta always owns its memory: fill it with the
 * setters (which copy), read it after load/peek, release it with gf_ckpt_meta_free. */
typedef struct gf_ckpt_meta {
    int64_t step;         /* optimizer steps taken */
    int64_t epoch;
    char *recipe;         /* resolved recipe text, NUL-terminated; NULL when absent */
    gf_ckpt_blob rng;     /* e.g. a memcpy of gf_rng */
    gf_ckpt_blob loader;  /* data-loader position */
    gf_ckpt_blob optim;   /* optimizer POD (the caller's struct, as bytes) */
    int64_t n_kv;
    char **keys;          /* (n_kv) */
    char **vals;          /* (n_kv) */
} gf_ckpt_meta;

void gf_ckpt_meta_init(gf_ckpt_meta *m);
void gf_ckpt_meta_free(gf_ckpt_meta *m);
gf_status gf_ckpt_meta_set_recipe(gf_ckpt_meta *m, const char *text);
/* Copy `size` bytes into one of m->rng / m->loader / m->optim (size 0 clears it). */
gf_status gf_ckpt_meta_set_blob(gf_ckpt_blob *b, const void *data, size_t size);
/* Set (or replace) a string key/value. */
gf_status gf_ckpt_meta_set_kv(gf_ckpt_meta *m, const char *key, const char *val);
/* Value for key, NULL when absent. */
const char *gf_ckpt_meta_get_kv(const gf_ckpt_meta *m, const char *key);

/* Save the block (data, m, v; not grad) and meta (may be NULL: step 0, nothing else).
 * Atomic: on any failure (ENOSPC, EFBIG, unwritable directory) returns GF_E_IO naming
 * path, removes "<path>.tmp", and leaves an existing file at path untouched. */
gf_status gf_ckpt_save(const char *path, const gf_params *p, const gf_ckpt_meta *meta);

/* Verify the file and that it holds exactly the model's parameters (same names and shapes,
 * each with m and v), then copy data, m and v into p and, when out is not NULL, the metadata
 * into *out (overwritten, not freed: pass an initialised or freed meta). On any error p and
 * *out are untouched. grad is not stored and not touched. */
gf_status gf_ckpt_load(const char *path, gf_params *p, gf_ckpt_meta *out);

/* Read only the metadata (e.g. the recipe text, to rebuild the model before load), still
 * verifying magic, version, length, checksum and the table's structure. */
gf_status gf_ckpt_peek(const char *path, gf_ckpt_meta *out);
/* Peek and parse the checkpoint's recipe into *r (an error naming the file if it has none).
 * keep != NULL receives the metadata too (the caller frees it); NULL frees it here. */
gf_status gf_ckpt_peek_recipe(const char *path, gf_recipe *r, gf_ckpt_meta *keep);

#endif
