// Splits text into the "words" that byte-level BPE merges within, using the same regex chain
// llama.cpp uses for each tokenizer.ggml.pre value. Each regex further splits every chunk the
// previous one produced; both matches and the gaps between them become chunks, and a chunk's
// end acts as end-of-text for lookaheads (as in llama.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

class PreTokenizer {
 public:
  // Throws specdec::Error for an unknown pre-tokenizer name.
  explicit PreTokenizer(const std::string& pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Returns the words as UTF-8. Invalid input bytes come back as U+FFFD, as llama.cpp does.
  std::vector<std::string> split(std::string_view text) const;

  // llama3-style vocabs emit a whole word as one token when it is in the vocab, skipping merges.
  bool ignore_merges() const { return ignore_merges_; }

  // The regexes (PCRE2 syntax, already expanded) used for `pre`; exposed for tests.
  static std::vector<std::string> regexes_for(const std::string& pre, bool* ignore_merges);

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace specdec
