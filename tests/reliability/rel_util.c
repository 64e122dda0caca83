/* rel_util.c — see rel_util.h. */
#include "rel_util.h"
#include "gf_test.h"
#include "gflow/rng.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *rel_gflow_exe(void) {
    static char path[4096];
    if (path[0]) return path;
    const char *e = getenv("GFLOW_EXE");
    if (e && *e) {
        snprintf(path, sizeof path, "%s", e);
        return path;
    }
    char self[3900];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return "gflow";
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/../gflow", self);
    return path;
}

static void exec_gflow(const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = "gflow";
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    execv(rel_gflow_exe(), (char *const *)argv);
    _exit(127);
}

void rel_gflow(rel_result *res, int64_t fsize_limit, const char *const *args) {
    rel_limits lim = {.fsize = fsize_limit};
    rel_gflow_limited(res, &lim, args);
}

void rel_gflow_limited(rel_result *res, const rel_limits *lim, const char *const *args) {
    const int64_t fsize_limit = lim->fsize;
    memset(res, 0, sizeof *res);
    char errp[700];
    snprintf(errp, sizeof errp, "%s/rel_stderr.%d", gf_test_tmpdir(), (int)getpid());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_WRONLY);
        if (fd < 0 || nul < 0) _exit(126);
        dup2(nul, 1);
        dup2(fd, 2);
        if (fsize_limit > 0) {
            /* the default disposition (a user's shell): gflow itself must turn SIGXFSZ into EFBIG */
            signal(SIGXFSZ, SIG_DFL);
            struct rlimit rl = {(rlim_t)fsize_limit, (rlim_t)fsize_limit};
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        if (lim->as_bytes > 0) {
            struct rlimit rl = {(rlim_t)lim->as_bytes, (rlim_t)lim->as_bytes};
            setrlimit(RLIMIT_AS, &rl);
        }
        if (lim->seconds > 0) alarm((unsigned)lim->seconds); /* survives exec: SIGALRM ends a run that hangs */
        exec_gflow(args);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
    else { res->exit_code = -1; res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0; }
    size_t n = 0;
    char *e = gf_test_slurp(errp, &n);
    if (e) {
        snprintf(res->err, sizeof res->err, "%s", e);
        for (size_t i = 0; i < n; i++) res->err_lines += e[i] == '\n';
        snprintf(res->first, sizeof res->first, "%.*s", (int)strcspn(res->err, "\n"), res->err);
        free(e);
    }
    unlink(errp);
}

pid_t rel_gflow_spawn(const char *log_path, const char *const *args) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0) _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        exec_gflow(args);
    }
    return pid;
}

static char g_root[600];

static void ensure_setup(void) {
    if (g_root[0]) return;
    snprintf(g_root, sizeof g_root, "%s/rel", gf_test_tmpdir());
    mkdir(g_root, 0755);
    char p[800];
    snprintf(p, sizeof p, "%s/data", g_root);
    gf_test_write_splits(p, 600, 60);
    snprintf(p, sizeof p, "%s/runs", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/base.ini", g_root);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fprintf(f,
            "[run]\nname = base\nseed = 7\nout_dir = %s/runs\nthreads = 1\n"
            "[data]\ndataset = wikitext2\ndir = %s/data\ntrain_file = train.txt\nvalid_file = valid.txt\n"
            "test_file = test.txt\nseq_len = 16\n"
            "[tokenizer]\nkind = word\ntrain_file = train.txt\ncache_dir = %s/cache\n"
            "[model]\nfamily = grassmann\nn_layers = 2\nd_model = 32\nd_ff = 64\nr = 6\noffsets = 1,2,4\n"
            "dropout = 0.1\n"
            "[optim]\nlr = 1e-2\nclip = 1.0\n"
            "[schedule]\nkind = cosine\nwarmup_steps = 5\nmin_lr = 1e-3\n"
            "[train]\nepochs = 50\nbatch_size = 8\nmax_steps = 40\nlog_every = 1000\neval_every = 5\n"
            "eval_batches = 3\n",
            g_root, g_root, g_root);
    fclose(f);
}

const char *rel_data_dir(void) {
    static char p[700];
    ensure_setup();
    snprintf(p, sizeof p, "%s/data", g_root);
    return p;
}

const char *rel_base_recipe(void) {
    static char p[700];
    ensure_setup();
    snprintf(p, sizeof p, "%s/base.ini", g_root);
    return p;
}

const char *rel_runs_dir(void) {
    static char p[700];
    ensure_setup();
    snprintf(p, sizeof p, "%s/runs", g_root);
    return p;
}

int rel_files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = gf_test_slurp(a, &na), *y = gf_test_slurp(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

static uint64_t rd_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int rel_ckpt_weights_equal(const char *a, const char *b, const char **why) {
    size_t na = 0, nb = 0;
    unsigned char *x = (unsigned char *)gf_test_slurp(a, &na), *y = (unsigned char *)gf_test_slurp(b, &nb);
    int eq = 0;
    *why = "";
    if (!x || !y) *why = "missing file";
    else if (na < 64 || nb < 64 || memcmp(x, "GFLOWCK1", 8) || memcmp(y, "GFLOWCK1", 8)) *why = "not a checkpoint";
    else {
        uint64_t fa = rd_u64(x + 16), fb = rd_u64(y + 16), oa = rd_u64(x + 56), ob = rd_u64(y + 56);
        if (fa != na || fb != nb || oa >= fa || ob >= fb) *why = "bad header sizes";
        else if (fa - oa != fb - ob) *why = "blob sizes differ";
        else if (rd_u64(x + 24) != rd_u64(y + 24)) *why = "steps differ";
        else if (memcmp(x + oa, y + ob, (size_t)(fa - oa - 16))) *why = "weights/moments differ";
        else eq = 1;
    }
    free(x);
    free(y);
    return eq;
}

int rel_count_suffix(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    size_t ls = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l >= ls && !strcmp(e->d_name + l - ls, suffix)) n++;
    }
    closedir(d);
    return n;
}
