// Which part of the vocabulary a draft scores when it is told to score only `n` tokens
// (`--draft-vocab N`, FR-Spec): the n most frequent tokens (engine/token_ranking.h: a corpus
// count where we ship one for the vocabulary, else the order the GGUF file suggests), plus
// every token that is not ordinary text (end-of-generation and other control tokens), so that
// the draft can still propose the end of an answer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/vocab_subset.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

// Every id the model's head has a row for (those below head_rows: a tokenizer may list more
// tokens than the model scores) once, in the order a draft's output head is laid out for
// FR-Spec (ModelLoadOptions::output_ids): most frequent first (engine/token_ranking.h), so that
// the n most frequent tokens are the head's first n rows.
std::vector<int32_t> draft_head_order(const Tokenizer& tok, int32_t head_rows);

// What a draft scores for one prompt: its head's first n rows (the n most frequent tokens when
// the head is in draft_head_order; the n lowest ids of an id-ordered head), plus the rows of
// every token of the prompt (a summary copies its passage's words, a follow-up turn the earlier
// answers: a ranking from a general corpus misses exactly those), plus every control and
// end-of-generation token (so that the draft can propose the end of an answer). head_ids: the
// draft's Model::logit_ids() (row -> id; empty: row r is id r), head_rows its
// Model::head_rows(). nullopt when n <= 0 or the subset would be the whole head.
std::optional<VocabSubset> draft_vocab_for_prompt(const Tokenizer& tok,
                                                  std::span<const int32_t> head_ids,
                                                  int32_t head_rows, int32_t n,
                                                  std::span<const int32_t> prompt);

// draft_vocab_for_prompt's subset (which it computes), grown during a generation by every token the
// answer uses that it lacked. A token the draft cannot score is a draft that cannot pass at that
// position; an answer reuses its own rare words (names, identifiers, numbers that are in neither
// the corpus ranking nor the prompt), so after the first use the draft can propose them. Measured
// on the Qwen pair over 500-token summaries at T 0 (fixed γ 4, no lookup): the prompt-only subset
// accepted 2-7 points fewer drafts than the whole head (docs/benchmarks.md). Lossless like the
// subset itself: which rows the draft scores never changes its cache or the output distribution.
class GrowingDraftVocab {
 public:
  // Inactive (subset() is nullopt and stays so) when n <= 0, n >= head_rows or the prompt's
  // subset would span the whole head.
  GrowingDraftVocab(const Tokenizer& tok, std::span<const int32_t> head_ids, int32_t head_rows,
                    int32_t n, std::span<const int32_t> prompt);

  // The subset now; nullopt: the whole head.
  const std::optional<VocabSubset>& subset() const { return subset_; }
  // Adds the head rows of `ids` that the subset lacks; true when it changed (then subset() is the
  // new one, possibly nullopt once it would span the whole head). Ids outside the vocabulary or
  // the head are ignored.
  bool add(std::span<const int32_t> ids);

 private:
  // subset_ from wanted_ (nullopt when it spans the whole head), covered_ marked to match.
  void rebuild();

  std::vector<int32_t> head_ids_;  // row -> id (empty: row r is id r)
  std::vector<int32_t> row_of_;    // id -> head row, -1 when the head lacks it
  std::vector<int32_t> wanted_;    // the rows asked for so far (VocabSubset rounds them out)
  std::vector<uint8_t> covered_;   // per head row: in the subset (its group of 8 is)
  int32_t head_rows_ = 0;
  std::optional<VocabSubset> subset_;
};

}  // namespace specdec
