/* test_export_torch.c — `gflow export` output loads into the PyTorch reference and gives the
 * same logits (tools/load_gflow.py), for both families; skipped without python3-torch. */
#include "gf_test.h"
#include "test_util.h"
#include "gflow.h"
#include "gflow/session.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void check_family(const char *family, const char *block, const char *extra) {
    if (system("/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null") != 0) {
        gf_test_skip("/usr/bin/python3 lacks torch or numpy");
        return;
    }
    char text[2048];
    snprintf(text, sizeof text,
             "[run]\nname = x\n[data]\ndataset = wikitext2\nseq_len = 12\n[tokenizer]\nkind = spm\nvocab_size = 53\n"
             "[model]\nfamily = %s\nblock = %s\nn_layers = 2\nd_model = 16\nd_ff = 32\nr = 5\nheads = 4\n"
             "init_std = 0.3\n%s[optim]\nlr = 1e-3\n[train]\nepochs = 1\nbatch_size = 2\n",
             family, block, extra);
    gf_recipe r;
    GF_REQUIRE_OK(gf_recipe_parse_text(text, "export.ini", NULL, 0, &r));
    gf_model_cfg c;
    gf_recipe_model_cfg(&r, 53, &c);
    gf_lm lm;
    GF_REQUIRE_OK(gf_lm_init(&lm, &c));
    gf_rng rng;
    gf_rng_seed(&rng, 11);
    gf_lm_init_weights(&lm, &rng);
    for (int64_t i = 0; i < lm.params.n_items; i++) /* non-trivial biases and norms */
        if (lm.params.items[i]->kind != GF_PK_WEIGHT && lm.params.items[i]->kind != GF_PK_EMBED) {
            gf_tensor *t = &lm.params.items[i]->t;
            for (int64_t j = 0; j < gf_tensor_numel(t); j++) t->data[j] += (float)(0.1 * gf_rng_normal(&rng));
        }
    int32_t win[2 * 13];
    for (int i = 0; i < 26; i++) win[i] = (int32_t)gf_rng_below(&rng, 53);
    gf_ctx ctx;
    gf_ctx_init(&ctx, 0, NULL);
    gf_ctx_set_grad(&ctx, 0);
    gf_lm_out out = {.want_logits = 1};
    gf_lm_forward(&lm, &ctx, win, 2, 12, &out);
    char model[600], check[600], cmd[2000];
    snprintf(model, sizeof model, "%s/export-%s-%s.safetensors", gf_test_tmpdir(), family, block);
    snprintf(check, sizeof check, "%s/check-%s-%s.safetensors", gf_test_tmpdir(), family, block);
    GF_REQUIRE_OK(gf_lm_export(&lm, &r, model));
    int32_t tok[24];
    for (int b = 0; b < 2; b++) memcpy(tok + b * 12, win + b * 13, 12 * sizeof(int32_t));
    const char *names[2] = {"check.tokens", "check.logits"};
    gf_safetensors_dtype dt[2] = {GF_SAFETENSORS_I32, GF_SAFETENSORS_F32};
    int32_t nd[2] = {2, 3};
    int64_t s0[2] = {2, 12}, s1[3] = {2, 12, 53};
    const int64_t *shapes[2] = {s0, s1};
    const void *datas[2] = {tok, out.logits->data};
    GF_REQUIRE_OK(gf_safetensors_write(check, 2, names, dt, nd, shapes, datas, 0, NULL, NULL));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tools/load_gflow.py %s --check %s", gf_test_source_root(), model, check);
    int rc = system(cmd);
    GF_CHECK(rc == 0, "%s %s: PyTorch logits from the exported weights differ (rc %d)", family, block, rc);
    gf_ctx_free(&ctx);
    gf_lm_free(&lm);
}

/* ln_eps far from the default: the export must carry it to every LayerNorm of the reference */
GF_TEST(golden, export_loads_in_torch_grassmann) { check_family("grassmann", "post_ln", "offsets = 1,2,4\nln_eps = 0.5\n"); }
GF_TEST(golden, export_loads_in_torch_grassmann_pre_schedule) {
    check_family("grassmann", "pre_ln", "offset_schedule = 1,3\n");
}
GF_TEST(golden, export_loads_in_torch_transformer) { check_family("transformer", "pre_ln", "ln_eps = 0.5\n"); }
