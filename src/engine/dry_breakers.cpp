#include "engine/dry_breakers.h"

namespace specdec {

std::vector<DryBreaker> vocabulary_dry_breakers(const Tokenizer& tokenizer,
                                                const std::vector<std::string>& texts) {
  const auto text_of = [&tokenizer](int32_t id) {
    const std::string bytes = tokenizer.token_bytes(id);
    // Control and unused tokens have no bytes in output text; llama.cpp matches their text.
    return bytes.empty() ? tokenizer.token_text(id) : bytes;
  };
  const auto tokenize = [&tokenizer](const std::string& s) {
    return tokenizer.encode(s, /*add_special=*/false, /*parse_special=*/false);
  };
  return dry_breakers(texts, tokenizer.n_vocab(), text_of, tokenize);
}

std::shared_ptr<const std::vector<DryBreaker>> DryBreakerCache::get(
    const std::vector<std::string>& texts) {
  std::lock_guard lock(mutex_);
  if (const auto it = cache_.find(texts); it != cache_.end()) return it->second;
  // A client choosing a new list per request must not grow this without bound.
  if (cache_.size() >= 16) cache_.clear();
  auto breakers =
      std::make_shared<const std::vector<DryBreaker>>(vocabulary_dry_breakers(tokenizer_, texts));
  cache_.emplace(texts, breakers);
  return breakers;
}

}  // namespace specdec
