#include "engine/draft_vocab.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/token_ranking.h"

namespace specdec {

std::vector<int32_t> draft_head_order(const Tokenizer& tok, int32_t head_rows) {
  std::vector<int32_t> ids = rank_tokens(tok).ids;
  std::erase_if(ids, [head_rows](int32_t id) { return id >= head_rows; });
  return ids;
}

namespace {

// The head row of each of the v ids (-1: the head does not hold it).
std::vector<int32_t> head_rows_of_ids(std::span<const int32_t> head_ids, int32_t rows, int32_t v) {
  std::vector<int32_t> row_of(static_cast<size_t>(v), -1);
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t id = head_ids.empty() ? r : head_ids[static_cast<size_t>(r)];
    if (id >= 0 && id < v) row_of[static_cast<size_t>(id)] = r;
  }
  return row_of;
}

// The rows draft_vocab_for_prompt asks for (before VocabSubset rounds them out to groups).
std::vector<int32_t> prompt_rows(const Tokenizer& tok, std::span<const int32_t> row_of, int32_t n,
                                 std::span<const int32_t> prompt) {
  const int32_t v = tok.n_vocab();
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
  return wanted;
}

}  // namespace

std::optional<VocabSubset> draft_vocab_for_prompt(const Tokenizer& tok,
                                                  std::span<const int32_t> head_ids,
                                                  int32_t head_rows, int32_t n,
                                                  std::span<const int32_t> prompt) {
  return GrowingDraftVocab(tok, head_ids, head_rows, n, prompt).subset();
}

GrowingDraftVocab::GrowingDraftVocab(const Tokenizer& tok, std::span<const int32_t> head_ids,
                                     int32_t head_rows, int32_t n, std::span<const int32_t> prompt)
    : head_ids_(head_ids.begin(), head_ids.end()), head_rows_(head_rows) {
  if (n <= 0 || n >= head_rows) return;
  row_of_ = head_rows_of_ids(head_ids, head_rows, tok.n_vocab());
  wanted_ = prompt_rows(tok, row_of_, n, prompt);
  covered_.assign(static_cast<size_t>(head_rows_), 0);
  rebuild();
}

bool GrowingDraftVocab::add(std::span<const int32_t> ids) {
  if (!subset_) return false;  // inactive, or already the whole head
  bool grew = false;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= row_of_.size()) continue;
    const int32_t r = row_of_[static_cast<size_t>(id)];
    if (r < 0 || covered_[static_cast<size_t>(r)]) continue;
    wanted_.push_back(r);
    grew = true;
  }
  if (grew) rebuild();
  return grew;
}

void GrowingDraftVocab::rebuild() {
  // VocabSubset::from_rows checks head_ids_ against head_rows_.
  VocabSubset s = VocabSubset::from_rows(wanted_, head_ids_, head_rows_);
  if (s.width() >= head_rows_) {  // the whole head: no subset
    subset_.reset();
    return;
  }
  for (const auto& [begin, end] : s.ranges()) {
    std::fill(covered_.begin() + begin, covered_.begin() + end, uint8_t{1});
  }
  subset_ = std::move(s);
}

}  // namespace specdec
