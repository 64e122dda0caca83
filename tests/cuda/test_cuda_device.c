/* test_cuda_device.c — asking for the GPU where it cannot run (suite unit: runs on every build
 * and machine). `[run] device = cuda` in a build without CUDA is a one-line error at the key's
 * file:line; in a build with CUDA but no visible GPU, a one-line error naming the key; with a GPU
 * it opens (suite cuda trains there: tests/cuda/test_cuda_train.c). Which of the three this
 * machine shows is decided by gf_cuda_built and gf_cuda_probe; each test checks that one.
 * The CUDA runtime's error messages (CUDA builds) are checked here too: they need no GPU. So are
 * the host sides of the GPU run: the [run] tf32 key, and [run] device and threads left out of a
 * run's identity, so that a run resumes on the other device (gf_recipe_same_run, --resume --set). */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/session.h"
#include "reliability/rel_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GF_HAVE_CUDA
#include "gflow/cuda.h"
#endif

/* what this build on this machine must say about device = cuda (NULL: it runs) */
static const char *expected_device_error(void) {
    if (!gf_cuda_built()) return "built without CUDA";
    gf_cuda_info info;
    gf_cuda_probe(&info);
    return info.n_devices == 0 ? "no CUDA device visible" : NULL;
}

/* <tmp>/dev.ini: the base recipe with `device = cuda` on line 4 */
static const char *cuda_recipe(void) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/dev.ini", gf_test_tmpdir());
    char text[2048];
    snprintf(text, sizeof text, "[run]\nbase = %s\n# the GPU\ndevice = cuda\n", rel_base_recipe());
    gf_test_write_text(path, text);
    return path;
}

GF_TEST(unit, cuda_device_key_in_recipe) {
    const char *path = cuda_recipe();
    gf_recipe r;
    char at[1100];
    snprintf(at, sizeof at, "%s:4", path);
    if (!gf_cuda_built()) {
        /* refused where the recipe says it, with the key */
        GF_CHECK_ERR(gf_recipe_load(path, NULL, 0, &r), GF_E_INVALID, "built without CUDA");
        GF_CHECK(strstr(gf_last_error(), at) && strstr(gf_last_error(), "[run] device"), "message: %s",
                 gf_last_error());
        const char *set[1] = {"run.device=cuda"};
        GF_CHECK_ERR(gf_recipe_load(rel_base_recipe(), set, 1, &r), GF_E_INVALID, "--set run.device=cuda");
        GF_CHECK(strstr(gf_last_error(), "built without CUDA") != NULL, "message: %s", gf_last_error());
    } else {
        GF_REQUIRE_OK(gf_recipe_load(path, NULL, 0, &r));
        GF_CHECK(r.run.device == GF_DEV_CUDA, "device %d", (int)r.run.device);
    }
    /* the default, and its line in the resolved recipe */
    GF_REQUIRE_OK(gf_recipe_load(rel_base_recipe(), NULL, 0, &r));
    GF_CHECK(r.run.device == GF_DEV_CPU, "default device %d", (int)r.run.device);
    char *text = NULL;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &text));
    GF_CHECK(strstr(text, "\ndevice = cpu\n") != NULL, "resolved text lacks device = cpu");
    /* a recorded recipe (a checkpoint's) parses in any build; running it is what is refused */
    r.run.device = GF_DEV_CUDA;
    free(text);
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &text));
    gf_recipe back;
    GF_CHECK_OK(gf_recipe_parse_text(text, "recorded.ini", NULL, 0, &back));
    GF_CHECK(back.run.device == GF_DEV_CUDA && gf_recipe_equal(&r, &back), "round trip of device = cuda");
    if (expected_device_error()) {
        GF_CHECK_ERR(gf_session_device_check(&back), GF_E_INVALID, expected_device_error());
        GF_CHECK(strstr(gf_last_error(), "[run] device = cuda") && !strchr(gf_last_error(), '\n'), "message: %s",
                 gf_last_error());
    } else {
        GF_CHECK_OK(gf_session_device_check(&back)); /* a GPU: device = cuda runs */
    }
    back.run.device = GF_DEV_CPU;
    GF_CHECK_OK(gf_session_device_check(&back));
    free(text);
}

/* what a user sees: exit 1, one stderr line naming the key (and, for a file, its line) */
GF_TEST(unit, cuda_device_key_cli) {
    const char *path = cuda_recipe(), *want = expected_device_error();
    if (!want) return; /* a GPU: these would train on it (suite cuda does, tests/cuda/test_cuda_train.c) */
    const char *train_file[] = {"train", path, "--quiet", NULL};
    const char *train_set[] = {"train", rel_base_recipe(), "--quiet", "--set", "run.device=cuda", NULL};
    const char *bench_set[] = {"bench", rel_base_recipe(), "--steps", "1", "--set", "run.device=cuda", NULL};
    const char *const *cmds[] = {train_file, train_set, bench_set};
    for (int i = 0; i < 3; i++) {
        rel_result res;
        rel_gflow(&res, 0, cmds[i]);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1, "gflow %s (case %d): exit %d, %d stderr lines: %s",
                 cmds[i][0], i, res.exit_code, res.err_lines, res.err);
        GF_CHECK(strstr(res.err, want) && strstr(res.err, "device"), "case %d: '%s' lacks '%s'", i, res.err, want);
        if (i == 0 && !gf_cuda_built()) {
            char at[1100];
            snprintf(at, sizeof at, "%s:4: [run] device", path);
            GF_CHECK(strstr(res.err, at) != NULL, "'%s' lacks '%s'", res.err, at);
        }
    }
}

/* the probe and gf_ctx_use_cuda agree, and fail cleanly where no GPU can run */
GF_TEST(unit, cuda_probe_and_context) {
    gf_cuda_info info;
    gf_cuda_probe(&info);
    GF_CHECK(info.n_devices >= 0, "n_devices %d", info.n_devices);
    if (!gf_cuda_built()) GF_CHECK(!strcmp(info.why, "built without CUDA"), "why: %s", info.why);
    if (info.n_devices > 0) return; /* a GPU: the suite cuda tests the device context */
    GF_CHECK(info.why[0] != 0, "no device and no reason");
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    GF_CHECK_ERR(gf_ctx_use_cuda(&ctx, 0), GF_E_INVALID,
                 gf_cuda_built() ? "no CUDA device visible" : "built without CUDA");
    GF_CHECK(ctx.cuda == NULL, "a device arena without a device");
    gf_ctx_free(&ctx);
}

#ifdef GF_HAVE_CUDA
/* CUDA and cuBLAS failures become a status whose message names the call and the place */
GF_TEST(unit, cuda_errors_name_the_call) {
    GF_CHECK_OK(gf_cuda_status(cudaSuccess, "cudaFree(p)", __FILE__, __LINE__));
    GF_CHECK_ERR(gf_cuda_status(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)", "../src/core/x.c", 12),
                 GF_E_EXTERNAL, "CUDA error in cudaMalloc(&p, bytes) at src/core/x.c:12: ");
    GF_CHECK(strstr(gf_last_error(), "cudaErrorMemoryAllocation") != NULL, "message: %s", gf_last_error());
    GF_CHECK_ERR(gf_cublas_status(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSgemm(h, ...)", "../src/ops/cuda/l.cu", 7),
                 GF_E_EXTERNAL, "cuBLAS error in cublasSgemm(h, ...) at src/ops/cuda/l.cu:7: ");
    GF_CHECK(strstr(gf_last_error(), "CUBLAS_STATUS_NOT_INITIALIZED") != NULL, "message: %s", gf_last_error());
    /* an op notes its first failure; gf_cuda_sync reports that one, once */
    gf_cuda_note(cudaErrorInvalidValue, "launch of k1", "../src/ops/cuda/a.cu", 3);
    gf_cuda_note(cudaErrorLaunchFailure, "launch of k2", "../src/ops/cuda/b.cu", 4);
    GF_CHECK_ERR(gf_cuda_sync(), GF_E_EXTERNAL, "launch of k1 at src/ops/cuda/a.cu:3");
    /* a failure noted before a copy's error is the cause: reported first, then forgotten */
    gf_cuda_note(cudaErrorLaunchFailure, "launch of k3", "../src/ops/cuda/c.cu", 5);
    GF_CHECK_ERR(gf_cuda_status(cudaErrorIllegalAddress, "cudaMemcpyAsync(d, s, n)", "../src/core/r.c", 9),
                 GF_E_EXTERNAL, "CUDA error in launch of k3 at src/ops/cuda/c.cu:5: ");
    GF_CHECK(strstr(gf_last_error(), "; then CUDA error in cudaMemcpyAsync(d, s, n) at src/core/r.c:9") != NULL,
             "message: %s", gf_last_error());
    GF_CHECK_ERR(gf_cuda_status(cudaErrorIllegalAddress, "cudaFree(p)", "../src/core/r.c", 10), GF_E_EXTERNAL,
                 "CUDA error in cudaFree(p) at src/core/r.c:10: ");
    gf_cuda_info info;
    gf_cuda_probe(&info);
    if (info.n_devices == 0) GF_CHECK_OK(gf_cuda_sync());
}
#endif

/* [run] tf32: a bool, off by default, in the resolved text and in the run's identity (it changes
 * what a GPU run computes); a CPU run ignores it */
GF_TEST(unit, cuda_tf32_key) {
    gf_recipe r, t;
    GF_REQUIRE_OK(gf_recipe_load(rel_base_recipe(), NULL, 0, &r));
    GF_CHECK(!r.run.tf32, "tf32 is off by default");
    const char *on[] = {"run.tf32=true"};
    GF_REQUIRE_OK(gf_recipe_load(rel_base_recipe(), on, 1, &t));
    GF_CHECK(t.run.tf32, "run.tf32=true");
    GF_CHECK(!gf_recipe_same_run(&r, &t), "tf32 is part of the run's identity");
    const char *bad[] = {"run.tf32=maybe"};
    GF_CHECK_ERR(gf_recipe_load(rel_base_recipe(), bad, 1, &t), GF_E_INVALID, "tf32");
    char *text = NULL;
    GF_REQUIRE_OK(gf_recipe_resolved_text(&r, &text));
    GF_CHECK(strstr(text, "\ndevice = cpu\ntf32 = false\n") != NULL, "resolved text:\n%s", text);
    free(text);
    r.run.tf32 = true;
    GF_CHECK_OK(gf_session_device_check(&r));
}

/* [run] device, threads and cuda_graph say where and how a run computes, not what:
 * gf_recipe_same_run leaves them out, and they are the only keys `gflow train --resume DIR --set`
 * may change */
GF_TEST(unit, cuda_device_not_in_run_identity) {
    gf_recipe a, b, c;
    GF_REQUIRE_OK(gf_recipe_load(rel_base_recipe(), NULL, 0, &a));
    b = a;
    b.run.device = GF_DEV_CUDA;
    b.run.threads = a.run.threads + 3;
    b.run.cuda_graph = !a.run.cuda_graph;
    GF_CHECK(!gf_recipe_equal(&a, &b) && gf_recipe_same_run(&a, &b),
             "device, threads and cuda_graph are not the run's identity");
    b.optim.lr *= 2;
    GF_CHECK(!gf_recipe_same_run(&a, &b), "the learning rate is");
    b = a;
    const char *ok[] = {"run.device=cuda", "run.threads=3", "run.cuda_graph=false"};
    GF_REQUIRE_OK(gf_recipe_resume_sets(&b, ok, 3));
    GF_CHECK(b.run.device == GF_DEV_CUDA && b.run.threads == 3 && !b.run.cuda_graph && gf_recipe_same_run(&a, &b),
             "resume sets applied");
    const char *no[] = {"run.device=cpu", "optim.lr=0.5"};
    c = b;
    GF_CHECK_ERR(gf_recipe_resume_sets(&c, no, 2), GF_E_INVALID, "--set optim.lr");
    GF_CHECK(strstr(gf_last_error(), "device") && !strchr(gf_last_error(), '\n'), "message: %s", gf_last_error());
    GF_CHECK(gf_recipe_equal(&c, &b), "a refused --set changes nothing");
    const char *typo[] = {"run.device=tpu"};
    GF_CHECK(gf_recipe_resume_sets(&c, typo, 1) != GF_OK && strstr(gf_last_error(), "device"), "message: %s",
             gf_last_error());
    GF_CHECK_OK(gf_recipe_resume_sets(&c, NULL, 0));
    GF_CHECK(gf_recipe_equal(&c, &b), "unchanged");
}

/* s with its first `from` replaced by `to` (malloc'd; NULL when from is absent) */
static char *replace_once(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    if (!at) return NULL;
    size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return out;
}

/* a stopped run resumes with another thread count (--set), and with a recipe.ini whose [run]
 * device differs from last.ckpt's recipe; not with another learning rate or seed */
GF_TEST(unit, cuda_resume_changes_where_it_runs) {
    char dir[800], ini[900];
    snprintf(dir, sizeof dir, "%s/xdev", rel_runs_dir());
    snprintf(ini, sizeof ini, "%s/recipe.ini", dir);
    rel_result res;
    const char *first[] = {"train", rel_base_recipe(), "--quiet", "--overwrite", "--set", "run.name=xdev",
                           "--stop-after", "6", NULL};
    rel_gflow(&res, 0, first);
    GF_REQUIRE(res.exit_code == 0, "first part: exit %d: %s", res.exit_code, res.err);
    const char *lr[] = {"train", "--resume", dir, "--quiet", "--set", "optim.lr=0.5", NULL};
    rel_gflow(&res, 0, lr);
    GF_CHECK(res.exit_code == 2 && res.err_lines == 1 && strstr(res.err, "--set optim.lr"), "lr: exit %d: %s",
             res.exit_code, res.err);
    const char *thr[] = {"train", "--resume", dir, "--quiet", "--set", "run.threads=2", "--stop-after", "9", NULL};
    rel_gflow(&res, 0, thr);
    GF_CHECK(res.exit_code == 0, "threads: exit %d: %s", res.exit_code, res.err);
    const char *want = expected_device_error();
    if (want) { /* refused as the session refuses it (a GPU: suite cuda resumes on it) */
        const char *dev[] = {"train", "--resume", dir, "--quiet", "--set", "run.device=cuda", NULL};
        rel_gflow(&res, 0, dev);
        GF_CHECK(res.exit_code == 1 && res.err_lines == 1 && strstr(res.err, want), "device: exit %d: %s",
                 res.exit_code, res.err);
    }
    char *text = gf_test_slurp(ini, NULL);
    GF_REQUIRE(text, "%s", ini);
    char *other_device = replace_once(text, "\ndevice = cpu\n", "\ndevice = cuda\n");
    char *other_seed = replace_once(text, "\nseed = 7\n", "\nseed = 8\n");
    GF_REQUIRE(other_device && other_seed, "recipe.ini lines:\n%s", text);
    gf_test_write_text(ini, other_device);
    const char *go[] = {"train", "--resume", dir, "--quiet", "--stop-after", "12", NULL};
    rel_gflow(&res, 0, go);
    GF_CHECK(res.exit_code == 0, "recipe.ini with another device: exit %d: %s", res.exit_code, res.err);
    gf_test_write_text(ini, other_seed);
    const char *go2[] = {"train", "--resume", dir, "--quiet", "--stop-after", "14", NULL};
    rel_gflow(&res, 0, go2);
    GF_CHECK(res.exit_code == 1 && strstr(res.err, "does not belong to this run"), "another seed: exit %d: %s",
             res.exit_code, res.err);
    gf_test_write_text(ini, text);
    free(text);
    free(other_device);
    free(other_seed);
}

#if defined(GF_HAVE_CUDA) && !defined(GF_CUDA_EMULATOR)
void gf_test_launch_fault(float *p); /* fault_kernels.cu */

/* GF_CUDA_SYNC=1 on a GPU: a kernel that faults is named, with the file and line of its launch,
 * by the first error reported after it (without the mode, by the copy that found it). The fault
 * leaves the CUDA context unusable: this test's process (a child of the runner) ends with it. */
GF_TEST(cuda, sync_mode_names_the_faulting_kernel) {
    setenv("GF_CUDA_SYNC", "1", 1);
    GF_REQUIRE_OK(gf_cuda_init());
    GF_CHECK(gf_cuda_sync_mode(), "GF_CUDA_SYNC=1 not seen");
    gf_test_launch_fault(NULL);
    GF_CHECK_ERR(gf_cuda_sync(), GF_E_EXTERNAL,
                 "CUDA error in launch of fk_store (GF_CUDA_SYNC=1: the stream synchronised after it) at "
                 "tests/cuda/fault_kernels.cu:");
}
#endif

/* The backend tables (gflow/backend.h): the CPU's in every build, CUDA's exactly where the build
 * has it, each named as its device and pointing to its ops (and a device's to its optimizer
 * loops); without CUDA, the parameter block refuses to move there and stays on the host. */
GF_TEST(unit, backend_tables_registered) {
    const gf_backend *cpu = gf_backend_find(GF_DEV_CPU), *cu = gf_backend_find(GF_DEV_CUDA);
    GF_CHECK(cpu && cpu == gf_backend_of(GF_DEV_CPU) && !strcmp(cpu->name, gf_device_name(GF_DEV_CPU)) && cpu->ops,
             "the CPU's table");
    GF_CHECK(!gf_backend_find((gf_device)7), "a device with no table");
    GF_CHECK((cu != NULL) == gf_cuda_built(), "CUDA's table %s, CUDA %s in the build", cu ? "found" : "absent",
             gf_cuda_built() ? "is" : "is not");
    if (cu) {
        GF_CHECK(!strcmp(cu->name, gf_device_name(GF_DEV_CUDA)) && cu->ops && cu->optim, "CUDA's table");
        return;
    }
    gf_params p;
    gf_params_init(&p);
    const int64_t shape[1] = {3};
    gf_params_add(&p, "w", GF_PK_WEIGHT, 1, shape);
    GF_REQUIRE_OK(gf_params_alloc(&p));
    GF_CHECK_ERR(gf_params_to_device(&p, GF_DEV_CUDA), GF_E_INVALID, "built without it");
    GF_CHECK(p.device == GF_DEV_CPU && p.data, "the block stays on the host");
    gf_params_free(&p);
}
