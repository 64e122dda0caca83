/* gflow/fs.h — the file-system helpers every stage shares: directories made on demand, and
 * outputs that appear whole or not at all. */
#ifndef GFLOW_FS_H
#define GFLOW_FS_H

#include "gflow/error.h"
#include <stddef.h>
#include <stdint.h>

/* mkdir -p: create dir and its missing parents (existing ones are fine). */
gf_status gf_mkdir_p(const char *dir);

/* The directory part of path ("." without a slash, "/" for "/x"), truncated to cap. */
void gf_path_dir(const char *path, char *out, size_t cap);

/* Exclusive lock on a directory, held until gf_dir_unlock or the process ends: flock on
 * "<dir>/.lock" (created when missing; it then holds the holder's pid). Fails at once, never
 * waits: GF_E_INVALID "DIR is in use by another gflow process (pid N)" when another process
 * holds it. *fd gets the lock's descriptor (-1 on failure). */
gf_status gf_dir_lock(const char *dir, int *fd);
void gf_dir_unlock(int *fd);

/* Before a command writes `out`: GF_E_INVALID ("OUT would overwrite ...") when it is one of the
 * n inputs (the same file: device and inode, so ./x, x and symlinks count), or one of a run
 * directory's own files (last.ckpt, best.ckpt, metrics.tsv, recipe.ini, summary.tsv, speed.tsv
 * in a directory holding recipe.ini or last.ckpt), however spelled. */
gf_status gf_output_check(const char *out, const char *const *inputs, int n);

/* Atomic file writer (checkpoints, safetensors, reports): bytes go to "<path>.tmp";
 * commit fsyncs, renames over path and fsyncs the directory; abort closes and unlinks the
 * tmp file. After a failed write or commit the tmp file is already removed. */
typedef struct gf_atomic_file {
    int fd;
    char *path;
    char *tmp;
    uint64_t written;
} gf_atomic_file;

gf_status gf_atomic_open(gf_atomic_file *af, const char *path);
gf_status gf_atomic_write(gf_atomic_file *af, const void *buf, size_t n);
gf_status gf_atomic_commit(gf_atomic_file *af);
void gf_atomic_abort(gf_atomic_file *af);

#endif
