/* gflow/safetensors.h — read and write the safetensors format (weights exchange with PyTorch).
 *
 * File: 8-byte little-endian u64 header size N, N bytes of JSON
 *   {name: {"dtype": "F32"|"I32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {str: str}}
 * then the data section; offsets are relative to its start. gflow reads and writes only
 * F32 and I32 (other dtypes are rejected by name). The reader checks the whole file before
 * returning: header size vs file size, the JSON, dtypes, shape product x dtype size ==
 * end - begin, offsets in range, no overlaps or holes (the spec forbids both), unique names.
 * The JSON is parsed by cJSON. The writer pads the header with spaces to a multiple of 8 and
 * writes atomically (path.tmp, fsync, rename). `gflow export` is gf_st_save_params().
 */
#ifndef GFLOW_SAFETENSORS_H
#define GFLOW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"
#include "gflow/params.h"

#define GF_ST_MAX_DIMS 8

typedef enum gf_st_dtype { GF_ST_F32 = 0, GF_ST_I32 = 1 } gf_st_dtype;

typedef struct gf_st_tensor {
    const char *name;
    gf_st_dtype dtype;
    int32_t ndim;                   /* 0 for a scalar (one element) */
    int64_t shape[GF_ST_MAX_DIMS];
    int64_t numel;
    size_t nbytes;
    const void *data;               /* 8-byte aligned; float* for F32, int32_t* for I32 */
} gf_st_tensor;

typedef struct gf_st_file gf_st_file; /* opaque; owns the file's bytes */

/* Read and validate the whole file. Errors (GF_E_NOTFOUND, GF_E_IO, GF_E_PARSE, GF_E_CORRUPT)
 * name the path and, where one is at fault, the tensor. */
gf_status gf_st_read(const char *path, gf_st_file **out);
void gf_st_free(gf_st_file *f);
const char *gf_st_path(const gf_st_file *f);

/* Tensors in header order (index 0..count-1), or by exact name (NULL when absent). */
int64_t gf_st_count(const gf_st_file *f);
const gf_st_tensor *gf_st_at(const gf_st_file *f, int64_t i);
const gf_st_tensor *gf_st_find(const gf_st_file *f, const char *name);
/* "__metadata__" value for key, NULL when absent. */
const char *gf_st_meta(const gf_st_file *f, const char *key);
int64_t gf_st_meta_count(const gf_st_file *f);
/* i-th metadata pair; returns the key, *val set to its value. */
const char *gf_st_meta_at(const gf_st_file *f, int64_t i, const char **val);

const char *gf_st_dtype_name(gf_st_dtype d);

/* Write n tensors in the given order. shapes[i] has ndims[i] entries (ndims[i] may be 0);
 * datas[i] holds prod(shape) elements of dtypes[i]. meta_keys/meta_vals: n_meta strings each
 * (may be NULL when n_meta == 0). Written to "<path>.tmp", fsync'd, renamed over path. */
gf_status gf_st_write(const char *path, int64_t n, const char *const names[],
                      const gf_st_dtype dtypes[], const int32_t ndims[],
                      const int64_t *const shapes[], const void *const datas[], int64_t n_meta,
                      const char *const meta_keys[], const char *const meta_vals[]);

/* Copy every parameter of the block from tensor "<prefix><name>" (F32, same shape) into
 * p->data. Everything is checked before anything is copied: on error p is untouched and the
 * message names the file and the first missing or mismatched tensor, e.g.
 * "x.safetensors: tensor blocks.0.mix.w_red.weight has shape [6, 16], model expects [8, 16]".
 * Extra tensors in the file are ignored (fixtures carry inputs, outputs and grads too). */
gf_status gf_st_load_params(const gf_st_file *f, gf_params *p, const char *prefix);
/* The same into any (p->n)-float array laid out like the block (p->grad, p->m, a scratch
 * buffer), e.g. prefix "grad." into a buffer to compare against p->grad. */
gf_status gf_st_load_params_into(const gf_st_file *f, const gf_params *p, const char *prefix,
                                 float *dst /* (p->n) */);

/* Write every parameter under its name, in block order, plus the metadata (gflow export). */
gf_status gf_st_save_params(const char *path, const gf_params *p, int64_t n_meta,
                            const char *const meta_keys[], const char *const meta_vals[]);

#endif
