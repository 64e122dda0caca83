/* session.h — internal: everything a run needs in one place (recipe, tokenizer, data,
 * model, loaders, step context). Shared by the trainer, eval, sample and info. */
#ifndef GF_SESSION_H
#define GF_SESSION_H

#include "gflow.h"
#include "gflow/train.h"

typedef struct gf_session {
    gf_recipe r;
    int is_nli;
    gf_tokenizer *tok;
    gf_params *params;       /* the model's block (lm.params or nli.params) */
    gf_lm lm;
    int model_ready;
    /* LM data */
    gf_ids ids[3];           /* token streams per split (train, valid, test) */
    int64_t words[3];        /* WikiText-2 word counts (valid, test) for per-word PPL */
    int loaded[3];
    /* step context and the dropout RNG */
    gf_rng rng;
    gf_ctx ctx;
    int ctx_ready;
} gf_session;

/* Build tokenizer and model from the recipe (no data beyond the tokenizer's train file). */
gf_status gf_session_open(gf_session *s, const gf_recipe *r, int log);
/* Load (tokenize, via the cache) one split. */
gf_status gf_session_load_split(gf_session *s, gf_split split, int log);
/* Evaluate on a split (max_batches 0 = the whole split). */
gf_status gf_session_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res);
void gf_session_close(gf_session *s);
/* The model config a recipe describes, for a tokenizer of `vocab` ids. */
void gf_session_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c);
/* Rebuild the model of a checkpoint without any data: recipe and vocabulary come from the
 * checkpoint's metadata. Fills *r and initialises *lm (weights loaded from the file). */
gf_status gf_session_model_from_ckpt(const char *path, gf_recipe *r, gf_lm *lm);
/* Path of a split's file per the recipe (data dir + file name). */
void gf_session_split_path(const gf_session *s, gf_split split, char *path, size_t cap);

#endif
