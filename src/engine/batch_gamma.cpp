#include "engine/batch_gamma.h"

#include <algorithm>
#include <cmath>

namespace specdec {
namespace {

// A target pass over `rows` rows, in decode steps alone: flat_row_cost for each row past the
// first up to flat_rows, row_cost for each beyond.
double pass_cost(const BatchCost& cost, double rows) {
  const double flat = std::max(1.0, static_cast<double>(cost.flat_rows));
  return 1.0 + (std::min(rows, flat) - 1.0) * cost.flat_row_cost +
         std::max(0.0, rows - flat) * cost.row_cost;
}

}  // namespace

double batch_gamma_gain(const BatchCost& cost, int32_t active, double acceptance, int32_t gamma) {
  const double n = std::max(1, active);
  const double a = std::clamp(acceptance, 0.0, 0.999);
  const double tokens = (1.0 - std::pow(a, gamma + 1)) / (1.0 - a);
  const double shared = pass_cost(cost, n);  // n rows in one pass
  const double pass = pass_cost(cost, n * (gamma + 1));
  const double drafts = gamma * cost.draft_cost * shared;
  return tokens * shared / (pass + drafts);
}

int32_t batch_gamma_cap(const BatchCost& cost, int32_t active, double acceptance) {
  if (active <= 1) return kNoGammaCap;
  constexpr int32_t kMaxGamma = 8;
  int32_t best = 0;
  double best_gain = 1.0;
  for (int32_t g = 1; g <= kMaxGamma; ++g) {
    const double gain = batch_gamma_gain(cost, active, acceptance, g);
    if (gain > best_gain) best = g, best_gain = gain;
  }
  return best;
}

bool catch_up_pays(const BatchCost& cost, int32_t lag, int32_t tokens_left, int32_t active,
                   double gain) {
  if (lag <= 0) return true;
  if (tokens_left <= 0) return false;
  if (active <= 1) return static_cast<int64_t>(lag) <= 4 * static_cast<int64_t>(tokens_left);
  if (!(gain > 1.0)) return false;
  const double n = active;
  const double read = n * lag * cost.draft_read_cost;
  const double saved = tokens_left * pass_cost(cost, n) * (1.0 - 1.0 / gain);
  return read <= saved;
}

}  // namespace specdec
