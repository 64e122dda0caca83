/* test_cuda_device.c — asking for the GPU where it cannot run (suite unit: runs on every build
 * and machine). `[run] device = cuda` in a build without CUDA is a one-line error at the key's
 * file:line; in a build with CUDA but no visible GPU, a one-line error naming the key; with a GPU,
 * a one-line error saying which part of the GPU training path is missing. Which of the three
 * this machine shows is decided by gf_cuda_built and gf_cuda_probe; each test checks that one.
 * The CUDA runtime's error messages (CUDA builds) are checked here too: they need no GPU. */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/session.h"
#include "reliability/rel_util.h"

#include <stdio.h>
#include <string.h>

#ifdef GF_HAVE_CUDA
#include "gflow/cuda.h"
#endif

/* what this build on this machine must say about device = cuda */
static const char *expected_device_error(void) {
    if (!gf_cuda_built()) return "built without CUDA";
    gf_cuda_info info;
    gf_cuda_probe(&info);
    return info.n_devices == 0 ? "no CUDA device visible" : "GPU training path is not complete";
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
    GF_CHECK_ERR(gf_session_device_check(&back), GF_E_INVALID, expected_device_error());
    GF_CHECK(strstr(gf_last_error(), "[run] device = cuda") && !strchr(gf_last_error(), '\n'), "message: %s",
             gf_last_error());
    back.run.device = GF_DEV_CPU;
    GF_CHECK_OK(gf_session_device_check(&back));
    free(text);
}

/* what a user sees: exit 1, one stderr line naming the key (and, for a file, its line) */
GF_TEST(unit, cuda_device_key_cli) {
    const char *path = cuda_recipe(), *want = expected_device_error();
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
    gf_cuda_info info;
    gf_cuda_probe(&info);
    if (info.n_devices == 0) GF_CHECK_OK(gf_cuda_sync());
}
#endif
