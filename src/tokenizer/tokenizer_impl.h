// Shared, immutable state behind Tokenizer (internal to the tokenizer module).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

// Transparent hashing so lookups by string_view do not allocate.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Tokenizer::Impl {
  VocabData data;
  TokenMap token_to_id;  // duplicate texts: the last id wins, as in llama.cpp
  // Merge ranks keyed by merge_key(left, right).
  TokenMap bpe_ranks;
  std::unique_ptr<PreTokenizer> pre;  // BPE only
  // Control/user-defined/unknown tokens, longest text first: matched verbatim in input.
  std::vector<int32_t> special_tokens;
  std::vector<int32_t> eog;                // sorted
  std::array<int32_t, 256> byte_tokens{};  // SPM byte fallback (-1: none)

  std::optional<int32_t> find(std::string_view text) const {
    auto it = token_to_id.find(text);
    if (it == token_to_id.end()) return std::nullopt;
    return it->second;
  }
  int32_t type(int32_t id) const { return data.token_types[static_cast<size_t>(id)]; }
};

// Unambiguous key for a (left, right) merge pair: the left length, a separator, both texts.
std::string merge_key(std::string_view left, std::string_view right);

// Appends the ids for one pre-tokenized word (already GPT-2 byte-encoded).
void bpe_encode_word(const Tokenizer::Impl& impl, std::string_view word, std::vector<int32_t>& out);

// Appends the ids for one raw-text fragment (spaces already escaped to U+2581).
void spm_encode(const Tokenizer::Impl& impl, std::string_view text, std::vector<int32_t>& out);

}  // namespace specdec
