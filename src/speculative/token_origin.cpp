#include "speculative/token_origin.h"

namespace specdec {

const char* token_origin_name(TokenOrigin origin) {
  switch (origin) {
    case TokenOrigin::Target:
      return "target";
    case TokenOrigin::Draft:
      return "draft";
    case TokenOrigin::Correction:
      return "correction";
    case TokenOrigin::Bonus:
      return "bonus";
  }
  return "?";
}

int64_t OriginCounts::of(TokenOrigin origin) const {
  switch (origin) {
    case TokenOrigin::Target:
      return target;
    case TokenOrigin::Draft:
      return draft;
    case TokenOrigin::Correction:
      return correction;
    case TokenOrigin::Bonus:
      return bonus;
  }
  return 0;
}

OriginCounts count_origins(std::span<const TokenOrigin> origins) {
  OriginCounts c;
  for (TokenOrigin o : origins) {
    switch (o) {
      case TokenOrigin::Target:
        ++c.target;
        break;
      case TokenOrigin::Draft:
        ++c.draft;
        break;
      case TokenOrigin::Correction:
        ++c.correction;
        break;
      case TokenOrigin::Bonus:
        ++c.bonus;
        break;
    }
  }
  return c;
}

}  // namespace specdec
