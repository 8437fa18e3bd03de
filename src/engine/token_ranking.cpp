#include "engine/token_ranking.h"

#include <algorithm>
#include <numeric>
#include <span>

namespace specdec {

namespace token_ranking_data {
extern const uint64_t k_qwen2_fingerprint;
extern const int32_t k_qwen2_vocab;
extern const int32_t k_qwen2_ranked[];
extern const int32_t k_qwen2_ranked_count;
}  // namespace token_ranking_data

namespace {

struct CountedRanking {
  uint64_t fingerprint;
  int32_t n_vocab;
  std::span<const int32_t> ids;
};

std::vector<CountedRanking> shipped_rankings() {
  namespace d = token_ranking_data;
  return {
      {d::k_qwen2_fingerprint, d::k_qwen2_vocab,
       std::span<const int32_t>(d::k_qwen2_ranked, static_cast<size_t>(d::k_qwen2_ranked_count))}};
}

}  // namespace

uint64_t vocab_fingerprint(const Tokenizer& tok) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char b) { h = (h ^ b) * 0x100000001b3ull; };
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    for (char ch : tok.token_text(id)) mix(static_cast<unsigned char>(ch));
    mix(0);
  }
  return h;
}

TokenRanking rank_tokens(const Tokenizer& tok) {
  const int32_t v = tok.n_vocab();
  std::vector<int32_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  if (tok.kind() == VocabKind::Spm) {
    std::stable_sort(order.begin(), order.end(), [&tok](int32_t a, int32_t b) {
      return tok.token_score(a) > tok.token_score(b);
    });
  }
  TokenRanking r;
  const uint64_t fp = vocab_fingerprint(tok);
  for (const CountedRanking& c : shipped_rankings()) {
    if (c.n_vocab != v || c.fingerprint != fp) continue;
    std::vector<bool> seen(static_cast<size_t>(v), false);
    for (int32_t id : c.ids) {
      if (id >= 0 && id < v && !seen[static_cast<size_t>(id)]) {
        seen[static_cast<size_t>(id)] = true;
        r.ids.push_back(id);
      }
    }
    r.counted = static_cast<int32_t>(r.ids.size());
    for (int32_t id : order) {
      if (!seen[static_cast<size_t>(id)]) r.ids.push_back(id);
    }
    return r;
  }
  r.ids = std::move(order);
  return r;
}

}  // namespace specdec
