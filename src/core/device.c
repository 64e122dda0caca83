/* device.c — device names, the registry of the backends this build has (gflow/backend.h) and,
 * in a build without the CUDA backend, its stand-ins: the probe says "built without CUDA" and the
 * device-memory functions abort (they cannot be reached: no tensor can be on the GPU). With
 * GF_HAVE_CUDA the CUDA functions are src/core/cuda/. */
#include "gflow/device.h"
#include "gflow/backend.h"

#include <stdio.h>
#include <string.h>

const char *gf_device_name(gf_device d) {
    switch (d) {
    case GF_DEV_CPU: return "cpu";
    case GF_DEV_CUDA: return "cuda";
    }
    return "?";
}

const gf_backend *gf_backend_find(gf_device d) {
    /* the backends this build has, by device (one line per backend) */
    static const gf_backend *const registered[] = {
        [GF_DEV_CPU] = &gf_backend_cpu,
#ifdef GF_HAVE_CUDA
        [GF_DEV_CUDA] = &gf_backend_cuda,
#endif
    };
    const int n = (int)(sizeof registered / sizeof *registered);
    return (int)d >= 0 && (int)d < n ? registered[d] : NULL;
}

const gf_backend *gf_backend_of(gf_device d) {
    const gf_backend *b = gf_backend_find(d);
    GF_ASSERT(b, "a tensor on %s in a build without %s (docs/architecture.md, A backend)", gf_device_name(d),
              gf_device_name(d));
    return b;
}

gf_status gf_tensor_to_host(const gf_tensor *t, float *dst, int64_t n) {
    GF_ASSERT(n >= 0 && n <= gf_tensor_numel(t), "gf_tensor_to_host: %lld floats of a tensor of %lld", (long long)n,
              (long long)gf_tensor_numel(t));
    return gf_backend_of(t->device)->download(dst, t->data, (size_t)n * sizeof(float));
}

#ifdef GF_HAVE_CUDA

int gf_cuda_built(void) { return 1; }

#else

int gf_cuda_built(void) { return 0; }

void gf_cuda_probe(gf_cuda_info *info) {
    memset(info, 0, sizeof *info);
    snprintf(info->why, sizeof info->why, "built without CUDA");
}

gf_status gf_ctx_use_cuda(struct gf_ctx *ctx, size_t first_bytes) {
    (void)ctx;
    (void)first_bytes;
    return gf_error_set(GF_E_INVALID, "gflow was built without CUDA (docs/cuda.md)");
}

gf_status gf_cuda_tf32(int on) {
    (void)on;
    return gf_error_set(GF_E_INVALID, "gflow was built without CUDA (docs/cuda.md)");
}

gf_status gf_cuda_graph_begin(void) {
    return gf_error_set(GF_E_INVALID, "gflow was built without CUDA (docs/cuda.md)");
}
gf_status gf_cuda_graph_launch(struct gf_cuda_graph **g, int *redo) {
    (void)g;
    *redo = 0;
    return gf_error_set(GF_E_INVALID, "gflow was built without CUDA (docs/cuda.md)");
}
void gf_cuda_graph_free(struct gf_cuda_graph *g) { (void)g; }
gf_status gf_cuda_graph_replay(struct gf_cuda_graph *g) {
    (void)g;
    return gf_error_set(GF_E_INVALID, "gflow was built without CUDA (docs/cuda.md)");
}
int gf_cuda_sync_mode(void) { return 0; }

#define NO_CUDA() gf_abort(__FILE__, __LINE__, "%s: a GPU tensor in a build without CUDA", __func__)

float *gf_cuda_floats(struct gf_ctx *ctx, int64_t n) { (void)ctx; (void)n; NO_CUDA(); }
float *gf_cuda_zeros(struct gf_ctx *ctx, int64_t n) { (void)ctx; (void)n; NO_CUDA(); }
void gf_cuda_acc_host(struct gf_ctx *ctx, float *dst, const float *src, int64_t n) {
    (void)ctx; (void)dst; (void)src; (void)n;
    NO_CUDA();
}
void gf_cuda_acc_const(struct gf_ctx *ctx, float *dst, const float *src, int64_t n) {
    (void)ctx; (void)dst; (void)src; (void)n;
    NO_CUDA();
}
void gf_ctx_feed(struct gf_ctx *ctx, const void *host, size_t bytes) { (void)ctx; (void)host; (void)bytes; }
void gf_ctx_draw_keys(struct gf_ctx *ctx, int32_t n) { (void)ctx; (void)n; NO_CUDA(); }
int64_t gf_cuda_allocs(void) { return 0; }
size_t gf_ctx_device_used(const struct gf_ctx *ctx) { (void)ctx; return 0; }
void gf_ctx_device_hold(struct gf_ctx *ctx, size_t used) { (void)ctx; (void)used; NO_CUDA(); }
int64_t gf_ctx_captured_stages(const struct gf_ctx *ctx) { (void)ctx; return 0; }
void gf_cuda_arena_reset(struct gf_cuda_arena *a) { (void)a; NO_CUDA(); }
void gf_cuda_arena_free(struct gf_cuda_arena *a) { (void)a; NO_CUDA(); }

#endif
