#include "engine/draft_vocab.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace specdec {

std::optional<VocabSubset> draft_vocab_subset(const Tokenizer& tok, int32_t n) {
  const int32_t v = tok.n_vocab();
  if (n <= 0 || n >= v) return std::nullopt;
  std::vector<int32_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  if (tok.kind() == VocabKind::Spm) {
    std::stable_sort(order.begin(), order.end(), [&tok](int32_t a, int32_t b) {
      return tok.token_score(a) > tok.token_score(b);
    });
  }
  order.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < v; ++id) {
    const int32_t type = tok.token_type(id);
    if (type == kTokenControl || type == kTokenUserDefined || tok.is_eog(id)) order.push_back(id);
  }
  return VocabSubset::from_ids(order, v);
}

}  // namespace specdec
