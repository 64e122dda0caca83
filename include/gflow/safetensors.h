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
 * writes atomically (path.tmp, fsync, rename). `gflow export` is gf_safetensors_save_params().
 */
#ifndef GFLOW_SAFETENSORS_H
#define GFLOW_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gflow/error.h"
#include "gflow/params.h"

#define GF_SAFETENSORS_MAX_DIMS 8

typedef enum gf_safetensors_dtype { GF_SAFETENSORS_F32 = 0, GF_SAFETENSORS_I32 = 1 } gf_safetensors_dtype;

typedef struct gf_safetensors_tensor {
    const char *name;
    gf_safetensors_dtype dtype;
    int32_t ndim;                   /* 0 for a scalar (one element) */
    int64_t shape[GF_SAFETENSORS_MAX_DIMS];
    int64_t numel;
    size_t nbytes;
    const void *data;               /* 8-byte aligned; float* for F32, int32_t* for I32 */
} gf_safetensors_tensor;

typedef struct gf_safetensors_file gf_safetensors_file; /* opaque; owns the file's bytes */

/* Read and validate the whole file. Errors (GF_E_NOTFOUND, GF_E_IO, GF_E_PARSE, GF_E_CORRUPT)
 * name the path and, where one is at fault, the tensor. */
gf_status gf_safetensors_read(const char *path, gf_safetensors_file **out);
void gf_safetensors_free(gf_safetensors_file *f);

/* Tensors in header order (index 0..count-1), or by exact name (NULL when absent). */
int64_t gf_safetensors_count(const gf_safetensors_file *f);
const gf_safetensors_tensor *gf_safetensors_at(const gf_safetensors_file *f, int64_t i);
const gf_safetensors_tensor *gf_safetensors_find(const gf_safetensors_file *f, const char *name);
/* "__metadata__" value for key, NULL when absent. */
const char *gf_safetensors_meta(const gf_safetensors_file *f, const char *key);

const char *gf_safetensors_dtype_name(gf_safetensors_dtype d);

/* Write n tensors in the given order. shapes[i] has ndims[i] entries (ndims[i] may be 0);
 * datas[i] holds prod(shape) elements of dtypes[i]. meta_keys/meta_vals: n_meta strings each
 * (may be NULL when n_meta == 0). Written to "<path>.tmp", fsync'd, renamed over path. */
gf_status gf_safetensors_write(const char *path, int64_t n, const char *const names[],
                      const gf_safetensors_dtype dtypes[], const int32_t ndims[],
                      const int64_t *const shapes[], const void *const datas[], int64_t n_meta,
                      const char *const meta_keys[], const char *const meta_vals[]);

/* Copy every parameter of the block from tensor "<prefix><name>" (F32, same shape) into
 * p->data. Everything is checked before anything is copied: on error p is untouched and the
 * message names the file and the first missing or mismatched tensor, e.g.
 * "x.safetensors: tensor blocks.0.mix.w_red.weight has shape [6, 16], model expects [8, 16]".
 * Extra tensors in the file are ignored (fixtures carry inputs, outputs and grads too). */
gf_status gf_safetensors_load_params(const gf_safetensors_file *f, gf_params *p, const char *prefix);
/* The same into any (p->n)-float array laid out like the block (p->grad, p->m, a scratch
 * buffer), e.g. prefix "grad." into a buffer to compare against p->grad. */
gf_status gf_safetensors_load_params_into(const gf_safetensors_file *f, const gf_params *p, const char *prefix,
                                 float *dst /* (p->n) */);

/* Write every parameter under its name, in block order, plus the metadata (gflow export). */
gf_status gf_safetensors_save_params(const char *path, const gf_params *p, int64_t n_meta,
                            const char *const meta_keys[], const char *const meta_vals[]);

#endif
