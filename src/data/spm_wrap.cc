// spm_wrap.cc — the only C++ in gflow: a thin extern "C" shim over Debian's
// libsentencepiece (0.1.97). Every entry point catches everything, so C
// callers only ever see a gf_status and a message.
#include "spm_wrap.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

// Exported by libsentencepiece but not declared in its public headers.
namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);
}
}  // namespace sentencepiece

struct gf_spm {
    sentencepiece::SentencePieceProcessor sp;
};

namespace {

// SentencePiece prints training progress at INFO; keep it to errors (2).
void quiet_logging() { sentencepiece::logging::SetMinLogLevel(2); }

// Parse "... <= 23096." from SentencePiece's "Vocabulary size too high" message.
int64_t parse_max_vocab(const std::string &msg) {
    if (msg.find("Vocabulary size too high") == std::string::npos) return 0;
    size_t p = msg.find("<=");
    if (p == std::string::npos) return 0;
    return std::strtoll(msg.c_str() + p + 2, nullptr, 10);
}

}  // namespace

extern "C" gf_status gf_spm_train(const char *input_path, int64_t vocab_size, const char *model_type,
                                  const char *user_symbols, int64_t *max_vocab, char **model,
                                  size_t *model_len) {
    if (max_vocab) *max_vocab = 0;
    *model = nullptr;
    *model_len = 0;
    try {
        quiet_logging();
        std::unordered_map<std::string, std::string> kw = {
            {"input", input_path},
            {"vocab_size", std::to_string(vocab_size)},
            {"model_type", model_type},
            {"num_threads", "2"},
            // a large corpus: a shuffled sample of at most 1M lines, so training never holds it whole
            // (a corpus of fewer lines, WikiText-2's 36,718, is read whole and trains the same model)
            {"input_sentence_size", "1000000"},
            {"shuffle_input_sentence", "true"},
        };
        sentencepiece::SetRandomGeneratorSeed(1); // the sample, and so the model, the same every time
        if (user_symbols && *user_symbols) {
            kw["user_defined_symbols"] = user_symbols;
            kw["unk_piece"] = "<sp_unk>";
        }
        // the model comes back in memory and the caller writes it (gflow/fs.h's atomic writer):
        // SentencePiece's own write reports a full disk as "Internal: ... [output->Write()]",
        // which named neither file nor cause, and writes through a link
        std::string proto;
        auto st = sentencepiece::SentencePieceTrainer::Train(kw, nullptr, &proto);
        if (!st.ok()) {
            std::string msg = st.ToString();
            int64_t mx = parse_max_vocab(msg);
            if (mx > 0) {
                if (max_vocab) *max_vocab = mx;
                return gf_error_set(GF_E_INVALID,
                                    "sentencepiece %s cannot reach vocab_size %lld on %s; the "
                                    "largest it can reach is %lld (SentencePiece: %s)",
                                    model_type, (long long)vocab_size, input_path, (long long)mx,
                                    msg.c_str());
            }
            return gf_error_set(GF_E_EXTERNAL, "sentencepiece training on %s failed: %s",
                                input_path, msg.c_str());
        }
        *model = static_cast<char *>(std::malloc(proto.size() ? proto.size() : 1));
        if (!*model) return gf_error_set(GF_E_NOMEM, "sentencepiece training on %s: out of memory", input_path);
        std::memcpy(*model, proto.data(), proto.size());
        *model_len = proto.size();
        return GF_OK;
    } catch (const std::bad_alloc &) {
        return gf_error_set(GF_E_NOMEM, "sentencepiece training on %s: out of memory", input_path);
    } catch (const std::exception &e) {
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece training on %s: %s", input_path, e.what());
    } catch (...) {
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece training on %s: unknown exception",
                            input_path);
    }
}

extern "C" gf_status gf_spm_load(gf_spm **out, const char *model_path) {
    *out = nullptr;
    gf_spm *m = nullptr;
    try {
        quiet_logging();
        m = new gf_spm();
        auto st = m->sp.Load(model_path);
        if (!st.ok()) {
            delete m;
            return gf_error_set(GF_E_EXTERNAL, "sentencepiece: cannot load model %s: %s",
                                model_path, st.ToString().c_str());
        }
        *out = m;
        return GF_OK;
    } catch (const std::bad_alloc &) {
        delete m;
        return gf_error_set(GF_E_NOMEM, "sentencepiece: out of memory loading %s", model_path);
    } catch (const std::exception &e) {
        delete m;
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece: loading %s: %s", model_path, e.what());
    } catch (...) {
        delete m;
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece: loading %s: unknown exception",
                            model_path);
    }
}

extern "C" void gf_spm_free(gf_spm *m) {
    try {
        delete m;
    } catch (...) {
    }
}

extern "C" gf_status gf_spm_encode(const gf_spm *m, const char *text, size_t len, int32_t **ids,
                                   int64_t *n, int64_t *cap) {
    try {
        std::vector<int> v;
        auto st = m->sp.Encode(std::string(text, len), &v);
        if (!st.ok())
            return gf_error_set(GF_E_EXTERNAL, "sentencepiece encode: %s", st.ToString().c_str());
        int64_t need = *n + (int64_t)v.size();
        if (need > *cap) {
            int64_t nc = *cap > 0 ? *cap : 256;
            while (nc < need) nc *= 2;
            int32_t *p = (int32_t *)std::realloc(*ids, (size_t)nc * sizeof(int32_t));
            if (!p) return gf_error_set(GF_E_NOMEM, "sentencepiece encode: out of memory");
            *ids = p;
            *cap = nc;
        }
        for (size_t i = 0; i < v.size(); i++) (*ids)[*n + (int64_t)i] = (int32_t)v[i];
        *n = need;
        return GF_OK;
    } catch (const std::bad_alloc &) {
        return gf_error_set(GF_E_NOMEM, "sentencepiece encode: out of memory");
    } catch (const std::exception &e) {
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece encode: %s", e.what());
    } catch (...) {
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece encode: unknown exception");
    }
}

extern "C" gf_status gf_spm_decode(const gf_spm *m, const int32_t *ids, int64_t n, char **text) {
    *text = nullptr;
    try {
        std::vector<int> v(ids, ids + n);
        int vs = m->sp.GetPieceSize();
        for (int64_t i = 0; i < n; i++)
            if (v[i] < 0 || v[i] >= vs)
                return gf_error_set(GF_E_INVALID, "sentencepiece decode: id %d out of range [0, %d)",
                                    v[i], vs);
        std::string s;
        auto st = m->sp.Decode(v, &s);
        if (!st.ok())
            return gf_error_set(GF_E_EXTERNAL, "sentencepiece decode: %s", st.ToString().c_str());
        char *p = (char *)std::malloc(s.size() + 1);
        if (!p) return gf_error_set(GF_E_NOMEM, "sentencepiece decode: out of memory");
        std::memcpy(p, s.data(), s.size());
        p[s.size()] = '\0';
        *text = p;
        return GF_OK;
    } catch (const std::bad_alloc &) {
        return gf_error_set(GF_E_NOMEM, "sentencepiece decode: out of memory");
    } catch (const std::exception &e) {
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece decode: %s", e.what());
    } catch (...) {
        return gf_error_set(GF_E_EXTERNAL, "sentencepiece decode: unknown exception");
    }
}

extern "C" int64_t gf_spm_vocab_size(const gf_spm *m) {
    try {
        return m->sp.GetPieceSize();
    } catch (...) {
        return 0;
    }
}

extern "C" const char *gf_spm_id_to_piece(const gf_spm *m, int32_t id) {
    try {
        if (id < 0 || id >= m->sp.GetPieceSize()) return nullptr;
        return m->sp.IdToPiece(id).c_str();  // a reference into the model proto
    } catch (...) {
        return nullptr;
    }
}

extern "C" int32_t gf_spm_eos_id(const gf_spm *m) {
    try {
        return m->sp.eos_id();
    } catch (...) {
        return -1;
    }
}
