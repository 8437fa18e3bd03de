#include "server/best_of.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace specdec::server {

double mean_token_logprob(const GenerationResult& result) {
  if (result.logprobs.empty()) return -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (const TokenLogprob& t : result.logprobs) sum += t.logprob;
  return sum / static_cast<double>(result.logprobs.size());
}

std::vector<size_t> best_of_choices(std::span<const GenerationResult> results, size_t per_prompt,
                                    size_t n) {
  if (per_prompt == 0 || n > per_prompt || results.size() % per_prompt != 0) {
    fail("best_of: ", results.size(), " sequences are not prompts of ", per_prompt, " to choose ",
         n, " from");
  }
  std::vector<double> score(results.size());
  for (size_t i = 0; i < results.size(); ++i) score[i] = mean_token_logprob(results[i]);
  std::vector<size_t> chosen;
  for (size_t begin = 0; begin < results.size(); begin += per_prompt) {
    std::vector<size_t> order(per_prompt);
    std::iota(order.begin(), order.end(), begin);
    std::stable_sort(order.begin(), order.end(),
                     [&score](size_t a, size_t b) { return score[a] > score[b]; });
    chosen.insert(chosen.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return chosen;
}

}  // namespace specdec::server
