/* gflow/fs.h — the file-system helpers every stage shares: directories made on demand, and
 * outputs that appear whole or not at all. */
#ifndef GFLOW_FS_H
#define GFLOW_FS_H

#include "gflow/error.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* mkdir -p: create dir and its missing parents (existing ones are fine). */
gf_status gf_mkdir_p(const char *dir);

/* The directory part of path ("." without a slash, "/" for "/x"), truncated to cap. */
void gf_path_dir(const char *path, char *out, size_t cap);

/* Open path for writing in place (the files a run appends to, the lock) without ever writing
 * through a link: mode 'w' unlinks whatever is at path (a link itself, never its target) and
 * creates a new file (O_EXCL); 'a' appends, '+' reads and writes (both create a missing file):
 * a symbolic link at path is refused (GF_E_INVALID "PATH is a symbolic link"), so is anything
 * that is not a regular file, and an empty path. Whole-file outputs use the atomic writer below. */
gf_status gf_open_nofollow(const char *path, char mode, int *fd);
/* The same as a FILE * ("w", "a" or "r+"). */
gf_status gf_fopen_nofollow(const char *path, char mode, FILE **f);

/* Exclusive lock on a directory, held until gf_dir_unlock or the process ends: flock on
 * "<dir>/.lock" (created when missing; it then holds the holder's pid; a link there is refused,
 * gf_open_nofollow). Fails at once, never
 * waits: GF_E_INVALID "DIR is in use by another gflow process (pid N)" when another process
 * holds it. *fd gets the lock's descriptor (-1 on failure). */
gf_status gf_dir_lock(const char *dir, int *fd);
void gf_dir_unlock(int *fd);

/* Before a command writes `out`: GF_E_INVALID ("OUT would overwrite ...") when it is one of the
 * n inputs (the same file: device and inode, so ./x, x and symlinks count), or one of a run
 * directory's own files (last.ckpt, best.ckpt, metrics.tsv, recipe.ini, summary.tsv, speed.tsv
 * in a directory holding recipe.ini or last.ckpt), however spelled; or when it exists and is
 * not a regular file (gf_output_regular). */
gf_status gf_output_check(const char *out, const char *const *inputs, int n);

/* Where gflow finds its shared files and keeps its data (src/core/paths.c). Nothing here is a
 * path compiled in: the share directory is found from the running executable.
 *
 * The share directory holds recipes/ and datasets/fetch.sh (with the data set cards). For an
 * installed gflow it is <exe dir>/GF_SHARE_REL (../share/gflow for <prefix>/bin/gflow); for a
 * binary in a meson build directory that is not installed, it is the source tree the build
 * directory's meson-info/meson-info.json names. gf_share_dir_for is the same for a given
 * executable path (tests). Sets *installed to 1 for the first case, 0 for the second. */
gf_status gf_share_dir(char *out, size_t cap, int *installed);
gf_status gf_share_dir_for(const char *exe, char *out, size_t cap, int *installed);

/* Data directories: `gflow data fetch` puts data sets under `data`, and recipes with an empty
 * [data] dir read them there (after $GFLOW_DATA_MIRROR); tokenizers and token caches go under
 * `cache` (recipes with an empty [tokenizer] cache_dir). In order:
 *   $GFLOW_DATA_DIR set:           data = $GFLOW_DATA_DIR,              cache = $GFLOW_DATA_DIR/cache
 *   installed, $XDG_DATA_HOME set: data = $XDG_DATA_HOME/gflow/data,    cache = $XDG_DATA_HOME/gflow/cache
 *   installed, $HOME set:          data = ~/.local/share/gflow/data,    cache = ~/.local/share/gflow/cache
 *   otherwise (a build directory): data = <source>/datasets/data,       cache = <source>/datasets/cache
 * <source> being the share directory of a build directory, the source tree (absolute: the same
 * directories from any working directory; the working directory only when no share directory
 * is known). gf_data_dirs_for takes `installed` and the share directory explicitly (tests);
 * gf_data_dirs asks gf_share_dir. */
void gf_data_dirs_for(int installed, const char *share, char *data, size_t data_cap, char *cache, size_t cache_cap);
void gf_data_dirs(char *data, size_t data_cap, char *cache, size_t cache_cap);

/* GF_E_INVALID naming path when it exists and is not a regular file (after symlinks): an
 * output must never replace /dev/null, a device, a directory or a pipe; and for an empty path. */
gf_status gf_output_regular(const char *path);

/* Atomic file writer, the one home of every whole-file output (checkpoints, safetensors,
 * reports, probe tables, plots): open refuses a path that is not a regular file
 * (gf_output_regular), removes whatever is at "<path>.tmp" and creates it anew, exclusively
 * and without following links; commit fsyncs, renames over path and fsyncs the directory;
 * abort closes and unlinks the tmp file. After a failed write or commit the tmp file is
 * already removed. gf_atomic_stdio gives a FILE * on the tmp file (NULL when out of memory)
 * for fprintf writers: commit then checks its errors; use it or gf_atomic_write, not both. */
typedef struct gf_atomic_file {
    int fd;
    FILE *f;
    char *path;
    char *tmp;
    uint64_t written;
} gf_atomic_file;

gf_status gf_atomic_open(gf_atomic_file *af, const char *path);
/* The same with the tmp file "<path>.tmp<pid>", for outputs that several processes may write at
 * once (shared caches): each writes its own tmp file and the last rename wins. */
gf_status gf_atomic_open_private(gf_atomic_file *af, const char *path);
FILE *gf_atomic_stdio(gf_atomic_file *af);
gf_status gf_atomic_write(gf_atomic_file *af, const void *buf, size_t n);
gf_status gf_atomic_commit(gf_atomic_file *af);
void gf_atomic_abort(gf_atomic_file *af);
/* The stdio form: open + gf_atomic_stdio (message names path); finish commits when st is
 * GF_OK, else aborts and returns st. */
gf_status gf_atomic_fopen(gf_atomic_file *af, const char *path, FILE **f);
gf_status gf_atomic_finish(gf_atomic_file *af, gf_status st);

#endif
