/* spm_wrap.h — C view of the SentencePiece shim (spm_wrap.cc). Internal to
 * src/data; the public interface is gflow/tokenizer.h. No C++ exception ever
 * crosses this boundary: every failure is a gf_status with a message. */
#ifndef GF_SPM_WRAP_H
#define GF_SPM_WRAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
/* gflow/error.h is C11-only (no extern "C", uses _Noreturn): adapt it here. */
#define _Noreturn [[noreturn]]
extern "C" {
#endif
#include "gflow/error.h"
#ifdef __cplusplus
#undef _Noreturn
#endif

typedef struct gf_spm gf_spm; /* a loaded SentencePieceProcessor */

/* Train on the lines of `input_path`; the serialized model comes back in *model (malloc'd,
 * *model_len bytes) for the caller to write. model_type: "unigram" or "bpe". user_symbols: comma-separated
 * pieces kept whole (NULL/"" for none); when given, SentencePiece's own
 * unknown piece is renamed "<sp_unk>" so a corpus symbol "<unk>" can be one
 * of them (WikiText-2's `<unk>` then encodes and decodes verbatim). When SentencePiece reports that
 * vocab_size is too high, returns GF_E_INVALID and sets *max_vocab (if not
 * NULL) to the largest size it names; otherwise *max_vocab = 0. */
gf_status gf_spm_train(const char *input_path, int64_t vocab_size, const char *model_type,
                       const char *user_symbols, int64_t *max_vocab, char **model, size_t *model_len);
gf_status gf_spm_load(gf_spm **out, const char *model_path);
void gf_spm_free(gf_spm *m);
/* Append the ids of `text` (len bytes) to a malloc'd buffer (*ids, *n, *cap). */
gf_status gf_spm_encode(const gf_spm *m, const char *text, size_t len, int32_t **ids, int64_t *n,
                        int64_t *cap);
/* malloc'd NUL-terminated text of the ids (caller frees). */
gf_status gf_spm_decode(const gf_spm *m, const int32_t *ids, int64_t n, char **text);
int64_t gf_spm_vocab_size(const gf_spm *m);
/* Piece of an id, NULL when out of range; valid while the model lives. */
const char *gf_spm_id_to_piece(const gf_spm *m, int32_t id);
int32_t gf_spm_eos_id(const gf_spm *m);

#ifdef __cplusplus
}
#endif
#endif
