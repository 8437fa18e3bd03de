// DRY ("don't repeat yourself", p-e-w's sampler as llama.cpp has it): a token that would extend a
// repetition of the text's end gets its logit lowered by multiplier * base^(length - allowed),
// where length is how many tokens of the end the earlier occurrence already repeats. Matching
// stops at a sequence breaker (by default a newline, ':', '"' or '*'), so that text merely
// sharing a line start or a quote is not penalized.
//
// Like the other penalties it makes the target's distribution a function of the text so far:
// a verify row counts the round's drafts before it (TokenPenalties::apply's `extra`).
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace specdec {

struct DryParams {
  float multiplier = 0.0f;      // 0 disables
  float base = 1.75f;           // below 1 disables
  int32_t allowed_length = 2;   // repeats this long or shorter are free
  int32_t penalty_last_n = -1;  // tokens of the text looked at; -1: all of it; 0 disables
  // The breakers' texts (llama.cpp's defaults). The engine turns them into token sequences for
  // the vocabulary (DryBreaker) before sampling.
  std::vector<std::string> sequence_breakers = {"\n", ":", "\"", "*"};

  bool active() const { return multiplier != 0.0f && base >= 1.0f && penalty_last_n != 0; }
};

// Throws specdec::Error naming the parameter when a value is outside its range (multiplier and
// base finite and >= 0, allowed_length >= 0, penalty_last_n >= -1).
void check_dry_params(const DryParams& params);

// A sequence breaker in tokens: a token whose text holds the breaker (tail empty), or a token
// whose text ends with the breaker's first characters followed by the tokens of the rest.
struct DryBreaker {
  int32_t head = 0;
  std::vector<int32_t> tail;
  bool operator==(const DryBreaker&) const = default;
  auto operator<=>(const DryBreaker&) const = default;
};

// The breakers of a vocabulary, llama.cpp's way: every token whose text contains a breaker is
// one; a token whose text ends with a proper prefix of it heads one whose tail is the rest of the
// breaker tokenized (at most 20 tokens; breakers are cut at 40 bytes). token_text(id) is the
// token's text with control tokens spelled out; tokenize(text) tokenizes without special tokens.
// The result is sorted (by head, then tail) and holds each breaker once.
template <typename TokenText, typename Tokenize>
std::vector<DryBreaker> dry_breakers(const std::vector<std::string>& breakers, int32_t n_vocab,
                                     const TokenText& token_text, const Tokenize& tokenize);

// The penalty of every token that would extend a repeat in `window` (the text's last
// penalty_last_n tokens, oldest first): `out` becomes the (token, amount to subtract) pairs,
// sorted by token. `breakers` must be sorted by head (dry_breakers' order), which makes each
// token's breakers a binary search: a breaker such as "e" is held by tens of thousands of tokens.
void dry_penalties(const DryParams& params, std::span<const DryBreaker> breakers,
                   std::span<const int32_t> window, std::vector<std::pair<int32_t, float>>& out);

template <typename TokenText, typename Tokenize>
std::vector<DryBreaker> dry_breakers(const std::vector<std::string>& breakers, int32_t n_vocab,
                                     const TokenText& token_text, const Tokenize& tokenize) {
  constexpr size_t kMaxBytes = 40;
  constexpr size_t kMaxTail = 20;
  std::vector<DryBreaker> out;
  const auto add = [&out](DryBreaker b) { out.push_back(std::move(b)); };
  for (std::string str : breakers) {
    if (str.empty()) continue;
    if (str.size() > kMaxBytes) str.resize(kMaxBytes);
    // The tail depends only on how much of the breaker the token holds: tokenized once per
    // length, not once per token (thousands of tokens end with a common first byte).
    std::vector<std::optional<std::vector<int32_t>>> tails(str.size());
    for (int32_t id = 0; id < n_vocab; ++id) {
      const std::string& word = token_text(id);
      if (word.find(str) != std::string::npos) {
        add({id, {}});
        continue;
      }
      // Each place where the word's end begins the breaker: the rest of it must follow.
      for (size_t pos = word.find(str[0]); pos != std::string::npos;
           pos = word.find(str[0], pos + 1)) {
        const size_t len = word.size() - pos;
        if (len >= str.size() || word.compare(pos, len, str, 0, len) != 0) continue;
        std::optional<std::vector<int32_t>>& tail = tails[len];
        if (!tail) {
          tail = tokenize(str.substr(len));
          if (tail->size() > kMaxTail) tail->resize(kMaxTail);
        }
        add({id, *tail});
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace specdec
