// Where each committed token came from, so that a front end can show it (specdec run --color)
// and tests can tie the per-token record to the round counters in DecodeStats.
#pragma once

#include <cstdint>
#include <span>

namespace specdec {

enum class TokenOrigin : uint8_t {
  Target,      // a target-only step (no draft model, no room to draft, or no lookup match)
  Draft,       // a draft the verifier accepted (from the draft model or from prompt lookup)
  Correction,  // the target's token after a rejected draft (resampled from max(0, p - q))
  Bonus,       // the target's extra token after all drafts of a round were accepted
};

const char* token_origin_name(TokenOrigin origin);  // "target", "draft", "correction", "bonus"

struct OriginCounts {
  int64_t target = 0, draft = 0, correction = 0, bonus = 0;
  int64_t total() const { return target + draft + correction + bonus; }
  int64_t of(TokenOrigin origin) const;
};

OriginCounts count_origins(std::span<const TokenOrigin> origins);

}  // namespace specdec
