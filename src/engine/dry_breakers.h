// DRY's sequence breakers (sampling/dry.h) for a vocabulary: the breaker texts of a request as
// token sequences, computed once per distinct list and kept (a scan of the whole vocabulary).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sampling/dry.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

// Every token's text as DRY matches it: its bytes, control tokens spelled out (as llama.cpp's
// detokenize with special tokens gives them).
std::vector<std::string> dry_token_texts(const Tokenizer& tokenizer);

// The breakers of `texts` over the vocabulary whose token texts are `token_texts`.
std::vector<DryBreaker> vocabulary_dry_breakers(const Tokenizer& tokenizer,
                                                const std::vector<std::string>& token_texts,
                                                const std::vector<std::string>& texts);

// Thread-safe memo of vocabulary_dry_breakers for one tokenizer: the token texts are decoded
// once, on first use, so that a new breaker list costs a scan of strings (milliseconds), and the
// last 16 lists are kept.
class DryBreakerCache {
 public:
  explicit DryBreakerCache(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::shared_ptr<const std::vector<DryBreaker>> get(const std::vector<std::string>& texts);

 private:
  Tokenizer tokenizer_;
  std::mutex mutex_;
  std::vector<std::string> token_texts_;  // empty until first use
  std::map<std::vector<std::string>, std::shared_ptr<const std::vector<DryBreaker>>> cache_;
};

}  // namespace specdec
