// Which part of the vocabulary a draft scores when it is told to score only `n` tokens
// (`--draft-vocab N`, FR-Spec): the n most frequent tokens by the best proxy a GGUF file holds,
// plus every token that is not ordinary text (end-of-generation and other control tokens), so
// that the draft can still propose the end of an answer.
//
// Frequency proxy: for byte-level BPE vocabularies the token id is the merge rank (ids are
// assigned in merge order, and a merge is learned because its pair was the most frequent at
// that point), so the n lowest ids; for SentencePiece vocabularies the piece score (a log
// probability), so the n highest-scoring pieces. llama.cpp's GGUF conversion keeps both orders.
#pragma once

#include <cstdint>
#include <optional>

#include "model/vocab_subset.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

// nullopt when n <= 0 or n >= the vocabulary size (score everything). Otherwise the subset, which
// holds at least n ids (VocabSubset rounds out to groups of 8).
std::optional<VocabSubset> draft_vocab_subset(const Tokenizer& tok, int32_t n);

}  // namespace specdec
