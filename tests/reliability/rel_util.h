/* rel_util.h — helpers for the reliability tests: run the real `gflow` binary in a child
 * (optionally under RLIMIT_FSIZE, or killed on a trigger), a tiny synthetic corpus and recipe,
 * and byte comparisons of files and of checkpoint weight blobs. */
#ifndef GF_REL_UTIL_H
#define GF_REL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "test_util.h"

/* Path of the gflow binary: $GFLOW_EXE, else <dir of gf_tests>/../gflow (the meson layout). */
const char *rel_gflow_exe(void);

typedef struct rel_result {
    int exit_code;   /* exit status, or -1 when killed by a signal */
    int signal;      /* terminating signal, 0 when it exited */
    char err[8192];  /* stderr (truncated) */
    int err_lines;   /* newline count of stderr */
    char first[8192]; /* stderr's first line (a message names its file, key or option there) */
} rel_result;

/* Run `gflow ARGS...` (NULL-terminated argv without argv[0]) to completion.
 * fsize_limit > 0 sets RLIMIT_FSIZE in the child, with SIGXFSZ at its default disposition (kill),
 * as a user's shell leaves it. */
void rel_gflow(rel_result *res, int64_t fsize_limit, const char *const *args);
/* rel_gflow with more limits in the child (each 0 = none): RLIMIT_FSIZE as above, RLIMIT_AS,
 * and a deadline after which SIGALRM kills it (res->signal SIGALRM: it did not finish). */
typedef struct rel_limits {
    int64_t fsize, as_bytes;
    int seconds;
} rel_limits;
void rel_gflow_limited(rel_result *res, const rel_limits *lim, const char *const *args);
/* Start `gflow ARGS...` in the background with stdout/stderr to log_path; returns the pid. */
pid_t rel_gflow_spawn(const char *log_path, const char *const *args);

/* Data dir with train.txt (600 lines), valid.txt, test.txt of a small grammar (created once),
 * and a base recipe <tmp>/rel/base.ini (threads 1, 2-layer d=32 grassmann, 40 steps,
 * eval_every 5, eval_batches 3) writing runs to <tmp>/rel/runs. */
const char *rel_data_dir(void);
const char *rel_base_recipe(void);
const char *rel_runs_dir(void);

/* 1 when both files exist and hold the same bytes */
int rel_files_equal(const char *a, const char *b);
/* 1 when both checkpoints hold the same float blob (weights, Adam m and v): bytes
 * [blob_offset, file_size - 16) of the version-1 layout; *why gets a reason otherwise */
int rel_ckpt_weights_equal(const char *a, const char *b, const char **why);
/* number of entries in dir whose name ends with suffix */
int rel_count_suffix(const char *dir, const char *suffix);

#endif
