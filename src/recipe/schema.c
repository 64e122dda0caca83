/* schema.c — every recipe key, the single source of truth for parsing,
 * the resolved text and docs/recipe-keys.md. Add a key here (plus its field
 * in gf_recipe; a [model] key's field is in gf_model_cfg, gflow/model.h, which
 * the model reads as it is), then regenerate the docs (see tests/recipe/test_recipe.c). */
#include "recipe/recipe_internal.h"

_Static_assert(sizeof(gf_dataset) == sizeof(int) && sizeof(gf_split) == sizeof(int) &&
                   sizeof(gf_tokenizer_kind) == sizeof(int) && sizeof(gf_spm_model_type) == sizeof(int) &&
                   sizeof(gf_model_family) == sizeof(int) && sizeof(gf_block_kind) == sizeof(int) &&
                   sizeof(gf_schedule_kind) == sizeof(int) && sizeof(gf_nonfinite_policy) == sizeof(int) &&
                   sizeof(gf_device) == sizeof(int) && sizeof(gf_precision) == sizeof(int),
               "enum fields are written through int*");

/* the data set table's names (gflow/datasets.def) */
static const gf_rk_enum_val e_dataset[] = {
#define GF_DATASET(id, name, ...) {name, GF_DS_##id},
#include "gflow/datasets.def"
#undef GF_DATASET
    {0, 0}};
static const gf_rk_enum_val e_tok[] = {{"spm", GF_TOK_SPM}, {"word", GF_TOK_WORD},
                                       {"wordpiece", GF_TOK_WORDPIECE}, {0, 0}};
static const gf_rk_enum_val e_spm[] = {{"bpe", GF_SPM_BPE}, {"unigram", GF_SPM_UNIGRAM}, {0, 0}};
static const gf_rk_enum_val e_family[] = {{"grassmann", GF_FAMILY_GRASSMANN},
                                          {"transformer", GF_FAMILY_TRANSFORMER}, {0, 0}};
static const gf_rk_enum_val e_block[] = {{"post_ln", GF_BLOCK_POST_LN}, {"pre_ln", GF_BLOCK_PRE_LN}, {0, 0}};
static const gf_rk_enum_val e_sched[] = {{"constant", GF_SCHED_CONSTANT}, {"cosine", GF_SCHED_COSINE},
                                         {"epoch_cosine", GF_SCHED_EPOCH_COSINE}, {0, 0}};
static const gf_rk_enum_val e_nonfinite[] = {{"stop", GF_NONFINITE_STOP}, {"skip", GF_NONFINITE_SKIP}, {0, 0}};
static const gf_rk_enum_val e_device[] = {{"cpu", GF_DEV_CPU}, {"cuda", GF_DEV_CUDA}, {0, 0}};
static const gf_rk_enum_val e_precision[] = {{"fp32", GF_PREC_FP32}, {"bf16", GF_PREC_BF16}, {0, 0}};
static const gf_rk_enum_val e_split[] = {{"train", GF_SPLIT_TRAIN}, {"valid", GF_SPLIT_VALID},
                                         {"test", GF_SPLIT_TEST}, {0, 0}};

#define MIN GF_RK_MIN
#define MAX GF_RK_MAX
#define MINX (GF_RK_MIN | GF_RK_MIN_EXCL)
#define MAXX (GF_RK_MAX | GF_RK_MAX_EXCL)
#define NONEMPTY GF_RK_NONEMPTY
#define COMPONENT GF_RK_COMPONENT
#define PLACEMENT GF_RK_PLACEMENT
#define REQ NULL
#define GF_XSTR(x) GF_STR(x)
#define GF_STR(x) #x
/* 1 when field x has the C type the parser writes for its key type (a compile error otherwise) */
#define IS_INT(x) _Generic((x), int64_t: 1, default: 0)
#define IS_FLOAT(x) _Generic((x), double: 1, default: 0)
#define IS_BOOL(x) _Generic((x), bool: 1, default: 0)
#define IS_STRING(x) (sizeof(x) == GF_RECIPE_STR)
#define IS_ENUM(x) (sizeof(x) == sizeof(int)) /* enum types: the _Static_assert above */
#define IS_INT_LIST(x) _Generic((x), gf_int_list: 1, default: 0)
#define FIELD(s, k) (((gf_recipe *)0)->s.k)
#define K(s, k, type, def, lo, hi, fl, en, doc) \
    {#s, #k, GF_RK_##type, def, lo, hi, fl, en, doc, \
     offsetof(gf_recipe, s.k) + 0 * sizeof(char[IS_##type(FIELD(s, k)) ? 1 : -1])}

const gf_recipe_key gf_recipe_schema[] = {
    K(run, name, STRING, REQ, 0, 0, NONEMPTY | COMPONENT, 0, "Run name; checkpoints go to out_dir/name."),
    {"run", "base", GF_RK_BASE, "", 0, 0, 0, 0,
     "Recipe file applied first (path relative to this file); this file's keys override it. "
     "Not written in the resolved recipe.", 0},
    K(run, seed, INT, "1", 0, 0, 0, 0, "Seed for initialisation, dropout and data order."),
    K(run, out_dir, STRING, "checkpoints", 0, 0, NONEMPTY, 0, "Directory for run outputs (checkpoints, metrics.tsv)."),
    K(run, threads, INT, "0", 0, 1024, MIN | MAX | PLACEMENT, 0,
      "OpenMP/BLAS threads; 0 = OMP_NUM_THREADS or all cores. May change when the run resumes "
      "(`gflow train --resume DIR --set run.threads=N`)."),
    K(run, device, ENUM, "cpu", 0, 0, PLACEMENT, e_device,
      "Where the training step runs: cpu, or cuda (one NVIDIA GPU; needs a build with the CUDA backend: "
      "docs/cuda.md). May change when the run resumes (`--resume DIR --set run.device=cpu`)."),
    K(run, tf32, BOOL, "false", 0, 0, 0, 0,
      "cuda: cuBLAS GEMMs on TF32 tensor cores (inputs rounded to 10 mantissa bits, FP32 accumulation; "
      "faster, about 1e-3 relative error per product); ignored on the CPU."),
    K(run, cuda_graph, BOOL, "true", 0, 0, PLACEMENT, 0,
      "cuda: each training step after the first is captured as a CUDA graph and launched as one (the same "
      "bits; the step's kernels reach the GPU in one launch); a language model's graph is captured once and "
      "replayed on the next steps of its shape, without the host's pass; false launches the kernels one by "
      "one. Ignored on the CPU. May change when the run resumes."),
    K(run, precision, ENUM, "fp32", 0, 0, 0, e_precision,
      "Inputs of the matrix products (linear layers, the Plücker projection, the tied head): fp32, or bf16 "
      "(rounded to bfloat16, accumulated and returned in fp32: oneDNN on a CPU with AMX or on an AMD CPU with "
      "AVX512-BF16, faster than fp32; else OpenBLAS on the rounded inputs, as fast as fp32). Weights, gradients, "
      "AdamW, norms, softmax and the loss stay "
      "fp32; checkpoints hold fp32. Part of the run's identity. On the GPU: cublasGemmEx, bf16 tensor cores."),

    K(data, dataset, ENUM, REQ, 0, 0, 0, e_dataset,
      "Data set (`gflow data list`): wikitext2 (language model), snli (sentence-pair classification) or text "
      "(a language model on your own UTF-8 files: train_file, valid_file and test_file, or file with "
      "valid_fraction and test_fraction; docs/datasets.md)."),
    K(data, dir, STRING, "", 0, 0, 0, 0, "Data directory; empty = $GFLOW_DATA_MIRROR, else where `gflow data fetch` puts data "
      "($GFLOW_DATA_DIR; installed: ~/.local/share/gflow/data; a build directory: datasets/data of its source tree)."),
    K(data, train_file, STRING, "", 0, 0, 0, 0,
      "Train split, relative to dir (or absolute); empty = the data set's own (`gflow data list`)."),
    K(data, valid_file, STRING, "", 0, 0, 0, 0, "Validation split; empty = the data set's own."),
    K(data, test_file, STRING, "", 0, 0, 0, 0, "Test split; empty = the data set's own."),
    K(data, file, STRING, "", 0, 0, 0, 0,
      "text: one corpus file (relative to dir, or absolute) split on line boundaries into train, valid and "
      "test: its last test_fraction of bytes is test, the valid_fraction before that valid (instead of "
      "train_file, valid_file and test_file)."),
    K(data, valid_fraction, FLOAT, "0", 0, 1, MIN | MAXX, 0, "text with file: the share of its bytes for valid."),
    K(data, test_fraction, FLOAT, "0", 0, 1, MIN | MAXX, 0, "text with file: the share of its bytes for test."),
    K(data, seq_len, INT, "128", 1, GF_RECIPE_MAX_LEN, MIN | MAX, 0, "LM window L: predictions per training sequence."),
    K(data, max_sentence_len, INT, "48", 1, GF_RECIPE_MAX_LEN, MIN | MAX, 0, "SNLI: tokens kept per sentence (Ls)."),
    K(data, skip_bad_rows, BOOL, "false", 0, 0, 0, 0, "SNLI: count and skip malformed rows instead of failing."),
    K(data, train_fraction, FLOAT, "1", 0, 1, MINX | MAX, 0,
      "Fraction of the training split used (learning curves)."),

    K(tokenizer, kind, ENUM, "spm", 0, 0, 0, e_tok,
      "SentencePiece trained on the train split, whitespace words, or BERT's uncased WordPiece over a fixed "
      "vocabulary (train_file; docs/tokenizers.md)."),
    K(tokenizer, vocab_size, INT, "30522", 1, 0, MIN, 0,
      "spm: vocabulary size incl. special pieces; wordpiece: the vocabulary file's size (checked); word: ignored."),
    K(tokenizer, model_type, ENUM, "bpe", 0, 0, 0, e_spm, "spm model type."),
    K(tokenizer, train_file, STRING, "", 0, 0, 0, 0,
      "Corpus the tokenizer is trained on (relative to [data] dir); empty = the data set's default (`gflow data "
      "list`: wikitext-2/wiki.train.tokens, which SNLI runs share; text: its train split). spm samples at most "
      "1,000,000 lines of it (SentencePiece's input_sentence_size, shuffled). wordpiece: the vocabulary in "
      "BERT's vocab.txt form, e.g. bert-base-uncased/vocab.txt (`gflow data fetch bert-base-uncased`; with "
      "[data] dir empty, read from $GFLOW_DATA_MIRROR or else where fetch puts data)."),
    K(tokenizer, cache_dir, STRING, "", 0, 0, 0, 0,
      "Where trained tokenizers and token caches are kept; empty = beside the fetched data "
      "($GFLOW_DATA_DIR/cache; installed: ~/.local/share/gflow/cache; a build directory: datasets/cache)."),

    K(model, family, ENUM, REQ, 0, 0, 0, e_family, "Sequence mixer: causal Grassmann mixing or causal self-attention."),
    K(model, n_layers, INT, REQ, 1, GF_MAX_LAYERS, MIN | MAX, 0,
      "Number of blocks (snli: at most " GF_XSTR(GF_NLI_MAX_LAYERS) ")."),
    K(model, d_model, INT, REQ, 1, 0, MIN, 0, "Model width d."),
    K(model, d_ff, INT, REQ, 1, 0, MIN, 0, "FFN hidden width."),
    K(model, max_len, INT, "0", 0, GF_RECIPE_MAX_LEN, MIN | MAX, 0,
      "Rows of the position table (Lmax); 0 = seq_len (snli: max_sentence_len). Must be >= seq_len."),
    K(model, dropout, FLOAT, "0.1", 0, 1, MIN | MAXX, 0, "Dropout on the embedding sum, after the mixer LN and on the FFN output."),
    K(model, block, ENUM, "post_ln", 0, 0, 0, e_block,
      "Block layout: paper-literal post-LN, or pre-LN with residuals. snli: always pre_ln (post_ln "
      "set there is an error)."),
    K(model, init_std, FLOAT, "0.02", 0, 0, MINX, 0, "Std of N(0, s) init for linear and embedding weights."),
    K(model, ln_eps, FLOAT, "1e-5", 0, 0, MINX, 0, "LayerNorm epsilon."),
    K(model, r, INT, "32", 2, 0, MIN, 0, "grassmann: reduced dimension r (<= d_model); r(r-1)/2 Pluecker coordinates."),
    K(model, offsets, INT_LIST, "1,2,4,8,12,16", 1, 0, MIN | NONEMPTY, 0,
      "grassmann: offsets W (mode A: every layer averages over all of them). An offset >= seq_len pairs no "
      "position (a no-op); at least one must be < seq_len."),
    K(model, offset_schedule, INT_LIST, "", 1, 0, MIN, 0,
      "grassmann: mode B when set: one offset per layer (n_layers entries), layer l uses entry l; each must be "
      "< seq_len (an offset >= seq_len pairs no position, and the layer would not mix)."),
    K(model, eps, FLOAT, "1e-8", 0, 0, MINX, 0, "grassmann: Pluecker normalisation p / max(||p||, eps)."),
    K(model, normalize, BOOL, "true", 0, 0, 0, 0, "grassmann: normalise Pluecker vectors."),
    K(model, gate, BOOL, "true", 0, 0, 0, 0, "grassmann: gated fusion (false: plain sum h + g, ablation; wikitext2 only)."),
    K(model, plucker, BOOL, "true", 0, 0, 0, 0, "grassmann: Pluecker features (false: ablation without them; wikitext2 only)."),
    K(model, heads, INT, "4", 1, 0, MIN, 0, "transformer: attention heads; must divide d_model."),
    K(model, window, INT, "8", 1, 0, MIN, 0, "snli head: token window length."),
    K(model, stride, INT, "8", 1, 0, MIN, 0, "snli head: window stride."),
    K(model, mix_heads, INT, "4", 1, 0, MIN, 0, "snli head: mixing heads."),
    K(model, classifier_hidden, INT, "0", 0, 0, MIN, 0, "snli head: classifier hidden width; 0 = d_model."),

    K(optim, lr, FLOAT, REQ, 0, 0, MINX, 0, "AdamW peak learning rate."),
    K(optim, beta1, FLOAT, "0.9", 0, 1, MIN | MAXX, 0, "AdamW beta1."),
    K(optim, beta2, FLOAT, "0.999", 0, 1, MIN | MAXX, 0, "AdamW beta2."),
    K(optim, eps, FLOAT, "1e-8", 0, 0, MINX, 0, "AdamW epsilon."),
    K(optim, weight_decay, FLOAT, "0.01", 0, 0, MIN, 0, "Decoupled weight decay (torch AdamW); weights always decay."),
    K(optim, decay_bias, BOOL, "false", 0, 0, 0, 0, "Apply weight decay to biases."),
    K(optim, decay_norm, BOOL, "false", 0, 0, 0, 0, "Apply weight decay to LayerNorm gains and shifts."),
    K(optim, decay_embed, BOOL, "true", 0, 0, 0, 0, "Apply weight decay to token and position embeddings."),
    K(optim, clip, FLOAT, "1", 0, 0, MIN, 0, "Global gradient-norm clipping threshold; 0 = off."),

    K(schedule, kind, ENUM, "cosine", 0, 0, 0, e_sched,
      "constant; cosine = linear warmup then per-step cosine to min_lr; "
      "epoch_cosine = CosineAnnealingLR(T_max=epochs) stepped per epoch."),
    K(schedule, warmup_steps, INT, "0", 0, 0, MIN, 0, "Linear warmup steps (lr*(step+1)/warmup_steps)."),
    K(schedule, min_lr, FLOAT, "0", 0, 0, MIN, 0, "Cosine floor; <= lr."),

    K(train, epochs, INT, REQ, 1, 0, MIN, 0, "Passes over the training split."),
    K(train, batch_size, INT, REQ, 1, 0, MIN, 0, "Sequences (LM windows or SNLI pairs) per step."),
    K(train, max_steps, INT, "0", 0, 0, MIN, 0, "Stop after this many optimizer steps; 0 = all epochs."),
    K(train, log_every, INT, "10", 1, 0, MIN, 0, "Progress line every N steps."),
    K(train, eval_every, INT, "0", 0, 0, MIN, 0, "Evaluate every N steps; 0 = only at epoch end."),
    K(train, eval_batches, INT, "0", 0, 0, MIN, 0, "Batches per evaluation; 0 = the full split."),
    K(train, nonfinite, ENUM, "stop", 0, 0, 0, e_nonfinite,
      "On a NaN/Inf loss or gradient norm: stop with an error, or skip the step."),
    K(train, max_skip_frac, FLOAT, "0.05", 0, 1, MIN | MAX, 0,
      "nonfinite = skip: stop with an error once more than this fraction of the run's steps were skipped."),
    K(train, early_stop_patience, INT, "0", 0, 0, MIN, 0,
      "Stop after N evaluations without a better validation loss; 0 = off."),
    K(train, evals_per_epoch, INT, "0", 0, 0, MIN, 0,
      "Full evaluations per epoch, evenly spaced, the last at its end (2 = every half epoch); "
      "0 = eval_every. Not with eval_every."),
    K(train, save_every, INT, "0", 0, 0, MIN, 0,
      "Also save last.ckpt every N steps (evaluations always save); 0 = off."),
    K(train, save_every_min, FLOAT, "5", 0, 0, MIN, 0,
      "Also save last.ckpt once this many minutes passed since the last save; 0 = off. "
      "Decides only when to save: the run's results do not depend on it."),

    K(eval, batch_size, INT, "0", 0, 0, MIN, 0, "Evaluation batch size; 0 = train batch_size."),
    K(eval, split, ENUM, "valid", 0, 0, 0, e_split,
      "Split `gflow eval` evaluates when no --split is given. Training always evaluates and "
      "selects the best checkpoint on valid, and reports test once, for the best checkpoint."),
};
const int gf_recipe_n_keys = (int)(sizeof gf_recipe_schema / sizeof gf_recipe_schema[0]);
_Static_assert(sizeof gf_recipe_schema / sizeof gf_recipe_schema[0] <= GF_RECIPE_MAX_KEYS,
               "raise GF_RECIPE_MAX_KEYS");

const char *const gf_recipe_sections[] = {"run", "data", "tokenizer", "model", "optim",
                                          "schedule", "train", "eval", NULL};
const char *const gf_recipe_section_docs[] = {
    "Run identity, output, threads and device.",
    "Data set, split files and windowing.",
    "Tokenizer (trained once, cached under cache_dir).",
    "Architecture. Keys marked grassmann/transformer/snli apply only to that family or task.",
    "AdamW (torch.optim.AdamW semantics) and clipping.",
    "Learning-rate schedule.",
    "Training loop.",
    "Evaluation: during training, and by `gflow eval`.",
    NULL,
};
