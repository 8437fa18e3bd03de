// Token ids ordered from most to least frequent, for a draft that scores only the most
// frequent tokens (FR-Spec, engine/draft_vocab.h). The best source is a count over real text:
// for vocabularies we ship one for (recognised by a fingerprint of their token strings), tokens
// seen in the corpus come first by count (token_ranking_data.cpp, made by
// scripts/vocab/gen_token_ranking.py). Every other token follows in the order the GGUF file
// itself suggests: for byte-level BPE the id (ids are merge ranks, and a merge is learned
// because its pair was the most frequent at that point), for SentencePiece the piece score (a
// log probability). Any order keeps speculative decoding exact; a better one keeps more drafts
// acceptable for the same head size.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specdec {

// FNV-1a 64 over every token string's bytes, each followed by a NUL.
uint64_t vocab_fingerprint(const Tokenizer& tok);

struct TokenRanking {
  std::vector<int32_t> ids;  // every id of the vocabulary once, most frequent first
  int32_t counted = 0;       // how many of the first ids come from a corpus count (0: none)
};
TokenRanking rank_tokens(const Tokenizer& tok);

}  // namespace specdec
