#include "engine/draft_vocab.h"

#include <vector>

#include "engine/token_ranking.h"

namespace specdec {

std::vector<int32_t> draft_head_order(const Tokenizer& tok, int32_t head_rows) {
  std::vector<int32_t> ids = rank_tokens(tok).ids;
  std::erase_if(ids, [head_rows](int32_t id) { return id >= head_rows; });
  return ids;
}

std::optional<VocabSubset> draft_vocab_for_prompt(const Tokenizer& tok,
                                                  std::span<const int32_t> head_ids,
                                                  int32_t head_rows, int32_t n,
                                                  std::span<const int32_t> prompt) {
  const int32_t v = tok.n_vocab();
  const int32_t rows = head_rows;  // VocabSubset::from_rows checks head_ids against it
  if (n <= 0 || n >= rows) return std::nullopt;
  // The head row of each id (-1: the head does not hold it).
  std::vector<int32_t> row_of(static_cast<size_t>(v), -1);
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t id = head_ids.empty() ? r : head_ids[static_cast<size_t>(r)];
    if (id >= 0 && id < v) row_of[static_cast<size_t>(id)] = r;
  }
  std::vector<int32_t> wanted;
  wanted.reserve(static_cast<size_t>(n) + prompt.size());
  for (int32_t r = 0; r < n; ++r) wanted.push_back(r);
  auto add_id = [&](int32_t id) {
    if (id >= 0 && id < v && row_of[static_cast<size_t>(id)] >= n) {
      wanted.push_back(row_of[static_cast<size_t>(id)]);
    }
  };
  for (int32_t id : prompt) add_id(id);
  for (int32_t id = 0; id < v; ++id) {
    const int32_t type = tok.token_type(id);
    if (type == kTokenControl || type == kTokenUserDefined || tok.is_eog(id)) add_id(id);
  }
  VocabSubset s = VocabSubset::from_rows(wanted, head_ids, rows);
  if (s.width() >= rows) return std::nullopt;
  return s;
}

}  // namespace specdec
