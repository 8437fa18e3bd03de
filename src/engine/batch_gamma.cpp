#include "engine/batch_gamma.h"

#include <algorithm>

namespace specdec {

int32_t batch_gamma_cap(int32_t verify_rows, int32_t active) {
  if (active <= 1) return kNoGammaCap;
  return std::max(0, verify_rows / active - 1);
}

bool catch_up_pays(int32_t lag, int32_t tokens_left, int32_t active) {
  if (lag <= 0) return true;
  if (tokens_left <= 0) return false;
  return static_cast<int64_t>(lag) * std::max(1, active) <= 4 * static_cast<int64_t>(tokens_left);
}

}  // namespace specdec
