// Text <-> token ids for GGUF vocabularies, bit-exact with llama.cpp's tokenizer (the oracle):
// byte-level BPE ("gpt2" model, pre-tokenizer regexes chosen by tokenizer.ggml.pre) and
// SentencePiece-style score merging ("llama" model, with <0xXX> byte fallback).
//
// A Tokenizer is immutable after construction and cheap to copy (shared state), so one instance
// may be used from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

namespace gguf {
class GgufFile;
}

enum class VocabKind { Bpe, Spm };

// Token types as stored in tokenizer.ggml.token_type.
enum TokenType : int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

struct VocabData {
  VocabKind kind = VocabKind::Bpe;
  std::string pre;                   // BPE pre-tokenizer name; ignored for SPM
  std::vector<std::string> tokens;   // raw vocab strings (BPE: GPT-2 byte-encoded; SPM: with ▁)
  std::vector<float> scores;         // SPM merge scores; may be empty for BPE
  std::vector<int32_t> token_types;  // empty means "all normal"
  std::vector<std::string> merges;   // BPE merges "left right", in rank order
  int32_t bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;
  // Fill-in-the-middle: prefix, suffix and middle markers, and the repository-level format's
  // repository-name and file-separator markers (-1: found by their text, if any).
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* metadata; defaults follow llama.cpp (SPM: bos=1 eos=2 unk=0,
  // add_bos and add_space_prefix on; BPE: add_bos off except for the llama3 pre-tokenizer).
  // Throws specdec::Error on missing/inconsistent vocab.
  static Tokenizer from_gguf(const gguf::GgufFile& file);
  // Validates and indexes `data`; throws specdec::Error if it is inconsistent.
  static Tokenizer from_vocab(VocabData data);

  // add_special: prepend BOS / append EOS as the vocab asks (add_bos/add_eos).
  // parse_special: control/unknown token texts in `text` become those tokens. User-defined
  // tokens are always matched as whole strings, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Bytes this token contributes to output text. Control and unused tokens give "".
  std::string token_bytes(int32_t id) const;
  // Concatenation of token_bytes (may end inside a UTF-8 sequence). Note: for SPM vocabs with
  // add_space_prefix, the space encode() inserted at the start comes back as a leading ' '.
  std::string decode(std::span<const int32_t> ids) const;
  const std::string& token_text(int32_t id) const;  // raw vocab string; throws if out of range

  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;
  // The fill-in-the-middle markers, when the vocabulary has all three (code models: Qwen2.5-
  // Coder's <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, StarCoder's, CodeLlama's...), with
  // the repository-level markers where the vocabulary has them (Qwen2.5-Coder's <|repo_name|>
  // and <|file_sep|>; -1 otherwise).
  struct FimTokens {
    int32_t prefix, suffix, middle;
    int32_t repo = -1, file_sep = -1;
  };
  std::optional<FimTokens> fim() const;
  int32_t unk() const;
  int32_t pad() const;
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;  // sorted
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  VocabKind kind() const;
  const std::string& pre() const;
  int32_t token_type(int32_t id) const;  // after llama.cpp's overrides (EOG texts -> control)
  float token_score(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Turns a token stream into text chunks that are always complete UTF-8: bytes of a character
// split across tokens are held back until complete; invalid sequences become U+FFFD.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tok);
  // Returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  // Flushes what is held back; an incomplete trailing sequence becomes U+FFFD.
  std::string finish();
  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  Tokenizer tok_;  // a cheap shared copy, so the decoder never dangles
  std::string pending_;
};

}  // namespace specdec
