/* test_task.c — the task interface: each [data] dataset picks its task, and a session built
 * without data (gflow info, export) gives the task's model; an NLI model exports under its
 * own tensor names with format gflow-nli-1 and no LM block name; a session opened on the host
 * (GF_SESSION_HOST) keeps its recipe. */
#include "gf_test.h"
#include "gflow.h"
#include "gflow/session.h"
#include <stdio.h>
#include <string.h>

static void tiny_recipe(const char *dataset, const char *family, gf_recipe *r) {
    char text[1024];
    snprintf(text, sizeof text,
             "[run]\nname = x\n[data]\ndataset = %s\nseq_len = 12\nmax_sentence_len = 8\n[tokenizer]\nkind = spm\n"
             "vocab_size = 53\n[model]\nfamily = %s\nn_layers = 1\nd_model = 16\nd_ff = 32\nr = 4\nheads = 2\n"
             "max_len = 12\nwindow = 4\nstride = 4\nmix_heads = 2\nclassifier_hidden = 8\n[optim]\nlr = 1e-3\n"
             "[train]\nepochs = 1\nbatch_size = 2\n",
             dataset, family);
    GF_REQUIRE_OK(gf_recipe_parse_text(text, "task.ini", NULL, 0, r));
}

GF_TEST(unit, task_is_chosen_by_dataset) {
    gf_recipe r;
    tiny_recipe("wikitext2", "grassmann", &r);
    GF_CHECK(gf_task_of(&r) && gf_task_of(&r)->language_model, "wikitext2 is the language-model task");
    tiny_recipe("snli", "grassmann", &r);
    GF_CHECK(gf_task_of(&r) && !gf_task_of(&r)->language_model, "snli is the NLI task");
}

GF_TEST(unit, nli_session_without_data_exports) {
    gf_recipe r;
    tiny_recipe("snli", "transformer", &r);
    gf_session s;
    GF_REQUIRE_OK(gf_session_open_model(&s, &r, 53, 1));
    GF_CHECK(gf_session_lm(&s) == NULL, "an NLI session has no language model");
    GF_CHECK(gf_session_tokens_per_row(&s) == 16, "premise and hypothesis tokens per row");
    char path[600];
    snprintf(path, sizeof path, "%s/nli.safetensors", gf_test_tmpdir());
    GF_REQUIRE_OK(gf_session_export(&s, path));
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(path, &f));
    GF_CHECK(gf_safetensors_find(f, "cls.fc2.weight") != NULL, "the classifier's tensors are exported");
    GF_CHECK(gf_safetensors_find(f, "blocks.0.attn.qkv.weight") != NULL, "the blocks' tensors are exported");
    const char *fmt = gf_safetensors_meta(f, "format");
    GF_CHECK(fmt && !strcmp(fmt, "gflow-nli-1"), "format %s", fmt ? fmt : "(none)");
    GF_CHECK(gf_safetensors_meta(f, "block") == NULL, "no LM block name for an NLI model");
    gf_safetensors_free(f);
    gf_session_close(&s);
}

/* GF_SESSION_HOST (gflow info, a checkpoint's readers): a device = cuda recipe opens its model on
 * the host in any build, with no GPU step, and the session keeps the recipe as given; its export
 * records device = cuda */
GF_TEST(unit, host_session_keeps_the_recipe) {
    gf_recipe r;
    tiny_recipe("wikitext2", "grassmann", &r);
    r.run.device = GF_DEV_CUDA;
    gf_session s;
    GF_REQUIRE_OK(gf_session_open_model(&s, &r, 53, GF_SESSION_HOST));
    GF_CHECK(s.params->device == GF_DEV_CPU && !s.ctx.cuda && !s.gpu, "the model is not on the host alone");
    GF_CHECK(s.r.run.device == GF_DEV_CUDA, "the session's recipe says device %s, not cuda",
             gf_device_name(s.r.run.device));
    char path[600];
    snprintf(path, sizeof path, "%s/host.safetensors", gf_test_tmpdir());
    GF_REQUIRE_OK(gf_session_export(&s, path));
    gf_safetensors_file *f = NULL;
    GF_REQUIRE_OK(gf_safetensors_read(path, &f));
    const char *rec = gf_safetensors_meta(f, "recipe");
    GF_CHECK(rec && strstr(rec, "\ndevice = cuda\n"), "the exported recipe does not say device = cuda");
    gf_safetensors_free(f);
    gf_session_close(&s);
}
