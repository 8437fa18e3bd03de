// Helpers shared by the fuzz targets: a reader that splits one input into fields, a memfd for
// the parsers that read files, a strict UTF-8 check, the small generated vocabularies the text
// targets tokenize with, and the cache shapes of the slot file target (and its seeds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "model/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace specdec::fuzz {

// Reads an input front to back. Fields are separated by a NUL byte, so seeds stay readable
// (printf 'x\0template\0user\0hello'); past the end every read gives 0 or "".
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}
  uint8_t byte() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }
  // Up to the next NUL (consumed) or the end.
  std::string_view field() {
    const size_t nul = rest_.find('\0');
    const std::string_view f = rest_.substr(0, nul);
    rest_.remove_prefix(nul == std::string_view::npos ? rest_.size() : nul + 1);
    return f;
  }
  std::string_view rest() {
    const std::string_view r = rest_;
    rest_ = {};
    return r;
  }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

// A memfd each input is written to (one per target and process, rewritten for every input) and
// the path that opens it (/proc/self/fd/N): for the parsers that read a file by its path, which
// then see an ordinary regular file.
struct MemFile {
  int fd = -1;
  std::string path;
  explicit MemFile(const char* name);
  void write(const uint8_t* data, size_t size) const;
};

// The slot file target's models (engine/slot_file.h), by shape and a made-up fingerprint each:
// a 2-layer target and a 1-layer draft, one KV head of 32 (q8_0 caches need a multiple of 32),
// a context of kSlotFuzzContext tokens and a vocabulary of kSlotFuzzVocab.
inline constexpr int32_t kSlotFuzzContext = 40;
inline constexpr int32_t kSlotFuzzVocab = 300;
inline constexpr uint64_t kSlotFuzzTargetFingerprint = 0x7a26e7f00d5107ULL;
inline constexpr uint64_t kSlotFuzzDraftFingerprint = 0xd2af7f00d5107ULL;
ModelConfig slot_fuzz_config(bool draft);

// With SPECDEC_FUZZ_VERBOSE=1 in the environment, prints why an input was refused (`what`
// names the step); otherwise does nothing. Handy when checking that seeds get past the parser.
void note_refused(const char* what, const std::exception& e);

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), written
// independently of tokenizer/unicode.cpp so that it can judge it.
bool is_valid_utf8(std::string_view s);

// The vocabularies (built once, shared; Tokenizer is immutable and cheap to copy):
//   0..4  byte-level BPE with the pre-tokenizers default, gpt2, smollm, llama3, qwen2: the 256
//         GPT-2 byte tokens, ChatML/Llama 3 specials (control), a user-defined <tool>, and a
//         few merges, as in src/tokenizer/test_vocabs;
//   5     SentencePiece with <0xXX> byte fallback, add_bos and add_space_prefix;
//   6     the same SentencePiece pieces without the space prefix, with add_eos.
inline constexpr int kNumVocabs = 7;
const Tokenizer& vocab_tokenizer(int which);
// The VocabData behind vocab_tokenizer(which), to extend with tokens from an input.
VocabData vocab_data(int which);

}  // namespace specdec::fuzz

namespace specdec::fuzz {

// `s` with every ill-formed part replaced by U+FFFD the way the Unicode standard recommends
// ("substitution of maximal subparts", what Python's errors="replace" does): the output that
// StreamingDecoder must produce for a token stream whose bytes are `s`, however they are split.
std::string replace_invalid_utf8(std::string_view s);

}  // namespace specdec::fuzz
