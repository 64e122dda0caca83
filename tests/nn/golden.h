/* golden.h — the runner shared by the PyTorch golden fixtures of both heads (test_golden.c: the
 * language model; test_nli.c: the SNLI classifier).
 *
 * A fixture tests/fixtures/golden/<variant>.safetensors holds weights, one batch, the logits,
 * the loss, every parameter gradient, and the losses / pre-clip gradient norms of AdamW steps.
 * The runner loads the weights into the model the hooks build, runs the batch (dropout off) on the
 * CPU or, for suite cuda, the GPU, and compares, with these tolerances (float32 throughout; the
 * bf16 fixtures' are test_golden.c's):
 *   logits  |Δ| <= 3e-5 + 1e-5 |ref|       loss   relative 1e-5
 *   grads   |Δ| <= 1e-4 * max|ref| of that tensor (+1e-7)
 *   AdamW   losses and grad norms relative 1e-4 over the steps
 * and prints the worst error per variant so the margins stay visible. On the CUDA emulator it
 * also counts the host's waits for the stream and its uploads from pageable memory: the AdamW
 * steps' forward (no outputs asked for, as in training) must not wait, and from the second
 * step on uploads only through the pinned staging. */
#ifndef GF_TEST_GOLDEN_H
#define GF_TEST_GOLDEN_H

#include "gflow.h"

typedef struct gf_golden_model {
    /* Build the model from the fixture's metadata into `self`; its parameters, or NULL (the
     * hook has recorded the failure). */
    gf_params *(*open)(void *self, const gf_safetensors_file *f);
    /* The fixture batch's loss on the tape. With logits non-NULL (the first pass) also point
     * *logits at the logits tensor to compare with out.logits and run the head's own checks. */
    gf_tensor *(*forward)(void *self, gf_ctx *ctx, const gf_safetensors_file *f, const gf_tensor **logits);
    void (*close)(void *self);
} gf_golden_model;

/* Integer / float metadata value of the fixture, -1 when absent. */
int64_t gf_golden_meta_i(const gf_safetensors_file *f, const char *key);
double gf_golden_meta_f(const gf_safetensors_file *f, const char *key);

/* Run fixture `variant` through the model `self` built by `m`, on the CPU. */
void gf_golden_run(const char *variant, const gf_golden_model *m, void *self);
/* The same with the parameter block and the step on device `dev` (GF_DEV_CUDA: suite cuda runs
 * every fixture through the CUDA path, with the same tolerances). */
void gf_golden_run_on(const char *variant, const gf_golden_model *m, void *self, gf_device dev);

/* The comparison's tolerances (the fp32 ones above: gf_golden_fp32_tol). */
typedef struct gf_golden_tol {
    double logit_abs, logit_rel; /* |Δ| <= abs + rel |ref| per logit */
    double loss;                 /* relative */
    double grad;                 /* max|Δ| <= grad · max|ref| per parameter tensor */
    double adamw;                /* relative, per step's loss and gradient norm */
} gf_golden_tol;
extern const gf_golden_tol gf_golden_fp32_tol;

/* [run] precision = bf16: fixture `<variant>.bf16` on device `dev` in bf16; out.* / grad.* /
 * adamw.* (PyTorch computing as gflow does in bf16) within `exact`, and autocast.out.* /
 * autocast.grad.* (torch.autocast(bfloat16)) within `autocast`. */
void gf_golden_run_bf16(const char *variant, const gf_golden_model *m, void *self, gf_device dev,
                        const gf_golden_tol *exact, const gf_golden_tol *autocast);

/* t's first element, whatever its device */
float gf_golden_scalar(const gf_tensor *t);

#endif
