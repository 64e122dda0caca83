/* fs.c — directories and atomic files (see gflow/fs.h). */
#include "gflow/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void gf_path_dir(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, cap, ".");
        return;
    }
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/x.ini" */
    if (n >= cap) n = cap - 1;
    memcpy(out, path, n);
    out[n] = 0;
}

/* ---------------------------------------------------------------- files written in place */

static gf_status open_refused(const char *path, int e) {
    if (e == ELOOP || e == EMLINK)
        return gf_error_set(GF_E_INVALID, "%s is a symbolic link: gflow does not write through links "
                            "(remove it, or pick another directory)", path);
    return gf_error_set(GF_E_IO, "%s: cannot open for writing: %s", path, strerror(e));
}

gf_status gf_open_nofollow(const char *path, char mode, int *fd) {
    *fd = -1;
    GF_TRY(gf_output_regular(path)); /* a link to /dev/null is refused, not replaced */
    int flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK; /* O_NONBLOCK: a fifo planted since must not hang */
    if (mode == 'w') {
        if (unlink(path) != 0 && errno != ENOENT) return open_refused(path, errno);
        flags |= O_WRONLY | O_CREAT | O_EXCL;
    } else {
        flags |= O_CREAT | (mode == 'a' ? O_WRONLY | O_APPEND : O_RDWR);
    }
    *fd = open(path, flags, 0644);
    if (*fd < 0) return open_refused(path, errno);
    struct stat st;
    if (fstat(*fd, &st) == 0 && S_ISREG(st.st_mode)) {
        fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
        return GF_OK;
    }
    close(*fd); /* something else appeared there since gf_output_regular */
    *fd = -1;
    return gf_error_set(GF_E_INVALID, "%s is not a regular file: refusing to write to it", path);
}

gf_status gf_fopen_nofollow(const char *path, char mode, FILE **f) {
    int fd;
    *f = NULL;
    GF_TRY(gf_open_nofollow(path, mode, &fd));
    *f = fdopen(fd, mode == 'a' ? "a" : mode == 'w' ? "w" : "r+");
    if (*f) return GF_OK;
    close(fd);
    return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
}

gf_status gf_dir_lock(const char *dir, int *fd) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    GF_TRY(gf_open_nofollow(path, '+', fd));
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[32] = {0}, who[64] = "";
        ssize_t n = pread(*fd, buf, sizeof buf - 1, 0);
        long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (pid > 0) snprintf(who, sizeof who, " (pid %ld)", pid);
        close(*fd);
        *fd = -1;
        if (e == EWOULDBLOCK)
            return gf_error_set(GF_E_INVALID, "%s is in use by another gflow process%s: wait for it to end, or stop it",
                                dir, who);
        return gf_error_set(GF_E_IO, "%s: cannot lock: %s", path, strerror(e));
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(*fd, 0) != 0 || pwrite(*fd, pid, (size_t)n, 0) != n) { /* the pid is a courtesy: no error */ }
    return GF_OK;
}

void gf_dir_unlock(int *fd) {
    if (*fd >= 0) close(*fd); /* releases the flock; the file stays (removing it would race) */
    *fd = -1;
}

gf_status gf_mkdir_p(const char *dir) {
    char tmp[4096];
    size_t n = strlen(dir);
    if (n >= sizeof tmp) return gf_error_set(GF_E_INVALID, "path too long: %s", dir);
    memcpy(tmp, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];
            tmp[i] = '\0';
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return gf_error_set(GF_E_IO, "cannot create directory %s: %s", tmp, strerror(errno));
            tmp[i] = c;
        }
    }
    return GF_OK;
}

/* ---------------------------------------------------------------- atomic file writer */

gf_status gf_output_regular(const char *path) {
    if (!*path) return gf_error_set(GF_E_INVALID, "an empty output path"); /* its tmp file would be ./.tmp */
    struct stat st;
    /* stat, not lstat: a link is replaced by the rename, but a link to a device says the same */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return gf_error_set(GF_E_INVALID, "%s exists and is not a regular file (a device, directory, pipe or "
                            "socket): refusing to replace it, pick another output path", path);
    return GF_OK;
}

/* the writers below, with the tmp file "<path><suffix>" */
static gf_status atomic_open_as(gf_atomic_file *af, const char *path, const char *suffix) {
    memset(af, 0, sizeof *af);
    af->fd = -1;
    GF_TRY(gf_output_regular(path));
    size_t len = strlen(path), cap = len + strlen(suffix) + 1;
    af->path = malloc(len + 1);
    af->tmp = malloc(cap);
    if (!af->path || !af->tmp) {
        free(af->path);
        free(af->tmp);
        af->path = af->tmp = NULL;
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(af->path, path, len + 1);
    snprintf(af->tmp, cap, "%s%s", path, suffix);
    /* Whatever sits at the tmp name (debris of a kill, or a planted symlink) is unlinked, never
     * opened: O_EXCL|O_NOFOLLOW creates a new file or fails, so no write goes through a link. */
    int e = 0;
    if (unlink(af->tmp) != 0 && errno != ENOENT) e = errno;
    if (!e) {
        af->fd = open(af->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644); /* RDWR: plots are read back */
        if (af->fd < 0) e = errno;
    }
    if (e) {
        gf_status s = gf_error_set(GF_E_IO, "%s: cannot create temporary file %s: %s", path,
                                   af->tmp, strerror(e));
        free(af->path);
        free(af->tmp);
        af->path = af->tmp = NULL;
        return s;
    }
    return GF_OK;
}

gf_status gf_atomic_open(gf_atomic_file *af, const char *path) { return atomic_open_as(af, path, ".tmp"); }

gf_status gf_atomic_open_private(gf_atomic_file *af, const char *path) {
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".tmp%ld", (long)getpid());
    return atomic_open_as(af, path, suffix);
}

FILE *gf_atomic_stdio(gf_atomic_file *af) {
    if (!af->f) af->f = fdopen(af->fd, "w");
    return af->f;
}

gf_status gf_atomic_fopen(gf_atomic_file *af, const char *path, FILE **f) {
    GF_TRY(gf_atomic_open(af, path));
    *f = gf_atomic_stdio(af);
    if (*f) return GF_OK;
    gf_atomic_abort(af);
    return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
}

gf_status gf_atomic_finish(gf_atomic_file *af, gf_status st) {
    if (!st) return gf_atomic_commit(af);
    gf_atomic_abort(af);
    return st;
}

void gf_atomic_abort(gf_atomic_file *af) {
    if (af->f) fclose(af->f); /* closes fd too */
    else if (af->fd >= 0) close(af->fd);
    af->f = NULL;
    if (af->tmp) unlink(af->tmp);
    free(af->path);
    free(af->tmp);
    af->fd = -1;
    af->path = af->tmp = NULL;
}

/* Set the error from errno and drop the tmp file. */
static gf_status atomic_fail(gf_atomic_file *af, int e, const char *what) {
    uint64_t n = af->written;
    if (af->f && ftello(af->f) > 0) n = (uint64_t)ftello(af->f);
    gf_status s = gf_error_set(GF_E_IO, "%s: %s failed after %llu bytes: %s (nothing written "
                               "to %s; any previous file there is unchanged)",
                               af->path, what, (unsigned long long)n, strerror(e),
                               af->path);
    gf_atomic_abort(af);
    return s;
}

gf_status gf_atomic_write(gf_atomic_file *af, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        /* under RLIMIT_FSIZE with SIGXFSZ ignored: a short write, then -1/EFBIG */
        ssize_t w = write(af->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return atomic_fail(af, errno, "write");
        }
        if (w == 0) return atomic_fail(af, EIO, "write");
        p += w;
        n -= (size_t)w;
        af->written += (uint64_t)w;
    }
    return GF_OK;
}

gf_status gf_atomic_commit(gf_atomic_file *af) {
    if (af->f) {
        errno = 0;
        if (fflush(af->f) != 0 || ferror(af->f)) return atomic_fail(af, errno ? errno : EIO, "write");
    }
    if (fsync(af->fd) != 0) return atomic_fail(af, errno, "fsync");
    FILE *f = af->f;
    int fd = af->fd;
    af->f = NULL;
    af->fd = -1;
    if ((f ? fclose(f) : close(fd)) != 0) return atomic_fail(af, errno, "close");
    if (rename(af->tmp, af->path) != 0) return atomic_fail(af, errno, "rename");
    /* make the rename itself durable: fsync the containing directory */
    char *dir = af->tmp; /* reuse: the tmp name is no longer needed */
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, strlen(dir) + 1, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    gf_status s = GF_OK;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP)) {
        s = gf_error_set(GF_E_IO, "%s: written, but syncing directory %s failed: %s", af->path,
                         dir, strerror(errno));
    }
    if (dfd >= 0) close(dfd);
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    return s;
}


static const char *const k_run_files[] = {"last.ckpt", "best.ckpt", "metrics.tsv", "recipe.ini", "summary.tsv",
                                          "speed.tsv"};

/* out's absolute path with symlinks resolved (its directory's, when out does not exist yet) */
static int resolve_out(const char *out, char *full, size_t cap) {
    char buf[PATH_MAX];
    if (realpath(out, buf)) return snprintf(full, cap, "%s", buf) < (int)cap;
    char dir[PATH_MAX];
    gf_path_dir(out, dir, sizeof dir);
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    if (!realpath(dir, buf)) return 0;
    return snprintf(full, cap, "%s/%s", buf, base) < (int)cap;
}

gf_status gf_output_check(const char *out, const char *const *inputs, int n) {
    GF_TRY(gf_output_regular(out));
    struct stat so, si;
    if (stat(out, &so) == 0)
        for (int i = 0; i < n; i++)
            if (inputs[i] && stat(inputs[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
                return gf_error_set(GF_E_INVALID, "%s would overwrite %s, an input of this command: pick another "
                                    "output path", out, inputs[i]);
    char full[PATH_MAX + 64], dir[PATH_MAX + 64], probe[PATH_MAX + 80];
    if (!resolve_out(out, full, sizeof full)) return GF_OK; /* no such directory: nothing to overwrite */
    gf_path_dir(full, dir, sizeof dir);
    const char *base = strrchr(full, '/') + 1;
    snprintf(probe, sizeof probe, "%s/recipe.ini", dir);
    int run_dir = access(probe, F_OK) == 0;
    snprintf(probe, sizeof probe, "%s/last.ckpt", dir);
    run_dir = run_dir || access(probe, F_OK) == 0;
    for (size_t i = 0; run_dir && i < sizeof k_run_files / sizeof k_run_files[0]; i++)
        if (!strcmp(base, k_run_files[i]))
            return gf_error_set(GF_E_INVALID, "%s would overwrite %s, a file of the run in %s: pick another output "
                                "path", out, k_run_files[i], dir);
    return GF_OK;
}
