#include "engine/dry_breakers.h"

namespace specdec {

std::vector<std::string> dry_token_texts(const Tokenizer& tokenizer) {
  std::vector<std::string> out(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    std::string bytes = tokenizer.token_bytes(id);
    // Control and unused tokens have no bytes in output text; llama.cpp matches their text.
    out[static_cast<size_t>(id)] = bytes.empty() ? tokenizer.token_text(id) : std::move(bytes);
  }
  return out;
}

std::vector<DryBreaker> vocabulary_dry_breakers(const Tokenizer& tokenizer,
                                                const std::vector<std::string>& token_texts,
                                                const std::vector<std::string>& texts) {
  const auto text_of = [&token_texts](int32_t id) -> const std::string& {
    return token_texts[static_cast<size_t>(id)];
  };
  const auto tokenize = [&tokenizer](const std::string& s) {
    return tokenizer.encode(s, /*add_special=*/false, /*parse_special=*/false);
  };
  return dry_breakers(texts, static_cast<int32_t>(token_texts.size()), text_of, tokenize);
}

std::shared_ptr<const std::vector<DryBreaker>> DryBreakerCache::get(
    const std::vector<std::string>& texts) {
  std::lock_guard lock(mutex_);
  if (const auto it = cache_.find(texts); it != cache_.end()) return it->second;
  if (token_texts_.empty()) token_texts_ = dry_token_texts(tokenizer_);
  // A client choosing a new list per request must not grow this without bound.
  if (cache_.size() >= 16) cache_.clear();
  auto breakers = std::make_shared<const std::vector<DryBreaker>>(
      vocabulary_dry_breakers(tokenizer_, token_texts_, texts));
  cache_.emplace(texts, breakers);
  return breakers;
}

}  // namespace specdec
