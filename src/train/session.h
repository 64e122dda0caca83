/* session.h — internal: everything a run needs in one place (recipe, tokenizer, data,
 * model, training loader and batch buffers, step context). The task (language model on
 * WikiText-2, or NLI classifier on SNLI) is decided by [data] dataset; the trainer talks to
 * the session only through the functions below, so both tasks share one training loop. */
#ifndef GF_SESSION_H
#define GF_SESSION_H

#include "gflow.h"
#include "gflow/nli.h"
#include "gflow/train.h"

typedef struct gf_session {
    gf_recipe r;
    int is_nli;
    gf_tokenizer *tok;
    gf_params *params;       /* the model's block (lm.params or nli.params) */
    gf_lm lm;
    gf_nli nli;
    int model_ready;
    /* data per split (train, valid, test) */
    int loaded[3];
    gf_ids ids[3];           /* LM token streams */
    int64_t words[3];        /* WikiText-2 word counts for per-word PPL */
    gf_snli_data snli[3];    /* NLI examples */
    /* training loader and one batch */
    gf_lm_loader *lm_ld;
    gf_snli_loader *snli_ld;
    int64_t B;               /* capacity of the batch buffers */
    int64_t train_B;         /* training batch size */
    int32_t *win;            /* LM (B, L+1) */
    int32_t *prem, *hyp;     /* NLI (B, Ls) */
    float *pmask, *hmask;    /* NLI (B, Ls) */
    int32_t *labels;         /* NLI (B) */
    /* step context and the dropout RNG */
    gf_rng rng;
    gf_ctx ctx;
    int ctx_ready;
} gf_session;

/* Build tokenizer and model from the recipe (weights initialised from run.seed). */
gf_status gf_session_open(gf_session *s, const gf_recipe *r, int log);
/* Load (tokenize, via the cache) one split. */
gf_status gf_session_load_split(gf_session *s, gf_split split, int log);
/* Training loader over the train split; returns the number of items (windows or pairs). */
gf_status gf_session_train_loader(gf_session *s, int64_t B, int64_t *n_items, int log);
/* Next training batch into the session's buffers; *rows = 0 only at an epoch boundary. */
gf_status gf_session_next(gf_session *s, int64_t *rows);
/* Forward of the current batch (ctx->training decides dropout); tokens predicted per row. */
gf_tensor *gf_session_forward(gf_session *s, int64_t rows);
/* Forward of rows [lo, lo+n) of the current batch (a data-parallel rank's slice). */
gf_tensor *gf_session_forward_rows(gf_session *s, int64_t lo, int64_t n);
int64_t gf_session_tokens_per_row(const gf_session *s);
gf_status gf_session_loader_state(const gf_session *s, gf_loader_state *st);
gf_status gf_session_set_loader_state(gf_session *s, const gf_loader_state *st);
/* Evaluate on a split (max_batches 0 = the whole split). */
gf_status gf_session_eval(gf_session *s, gf_split split, int64_t max_batches, gf_eval_result *res);
void gf_session_close(gf_session *s);
/* Path of a split's file per the recipe (data dir + file name). */
void gf_session_split_path(const gf_session *s, gf_split split, char *path, size_t cap);
/* The model config a recipe describes, for a tokenizer of `vocab` ids. */
void gf_session_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c);
void gf_session_nli_cfg(const gf_recipe *r, int64_t vocab, gf_nli_cfg *c);
/* Rebuild the LM of a checkpoint without any data: recipe and vocabulary come from the
 * checkpoint's metadata. Fills *r and initialises *lm (weights loaded from the file). */
gf_status gf_session_model_from_ckpt(const char *path, gf_recipe *r, gf_lm *lm);
/* `gflow export`: the LM's weights as safetensors, with the resolved recipe and vocabulary in
 * the metadata (tools/load_gflow.py rebuilds the PyTorch model from exactly these). */
gf_status gf_lm_export(const gf_lm *lm, const gf_recipe *r, const char *path);

#endif
