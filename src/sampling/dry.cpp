// dry_penalties follows llama.cpp's llama_sampler_dry_apply step by step (the rule, not its
// code): (1) the last breaker in the window caps how far back a repeat may reach; (2) for every
// earlier position, how many tokens ending there equal the window's last tokens (a Z-function of
// the reversed window, O(window)); (3) each such run of at least allowed_length makes the token
// that followed it a candidate, with the longest run; (4) the penalty, its exponent clamped so
// that the float stays finite, and never on a token that is a breaker by itself.
#include "sampling/dry.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "common/error.h"

namespace specdec {

void check_dry_params(const DryParams& p) {
  if (!(std::isfinite(p.multiplier) && p.multiplier >= 0.0f)) {
    fail("dry_multiplier must be a number >= 0 (0: off), got ", p.multiplier);
  }
  if (!(std::isfinite(p.base) && p.base >= 0.0f)) {
    fail("dry_base must be a number >= 0 (below 1: off), got ", p.base);
  }
  if (p.allowed_length < 0) fail("dry_allowed_length must be >= 0, got ", p.allowed_length);
  if (p.penalty_last_n < -1) {
    fail("dry_penalty_last_n must be >= -1 (-1: the whole text, 0: off), got ", p.penalty_last_n);
  }
}

void dry_penalties(const DryParams& params, std::span<const DryBreaker> breakers,
                   std::span<const int32_t> window, std::vector<std::pair<int32_t, float>>& out) {
  out.clear();
  if (!params.active()) return;
  const auto m = static_cast<int32_t>(window.size());
  if (m <= params.allowed_length) return;
  // r(i): the i-th token from the end (r(0) is the last).
  const auto r = [&](int32_t i) { return window[static_cast<size_t>(m - 1 - i)]; };

  // (1) Reading back from the end, the first token that heads a breaker whose tail follows it
  // limits a repeat to the tokens after that breaker.
  const auto headed_by = [&breakers](int32_t token) {
    const auto by_head = [](const DryBreaker& b, int32_t t) { return b.head < t; };
    const auto first = std::lower_bound(breakers.begin(), breakers.end(), token, by_head);
    auto last = first;
    while (last != breakers.end() && last->head == token) ++last;
    return std::span<const DryBreaker>(first, last);
  };
  int32_t rep_limit = m;
  for (int32_t i = 0; i < m; ++i) {
    int32_t longest = -1;
    for (const DryBreaker& b : headed_by(r(i))) {
      const auto len = static_cast<int32_t>(b.tail.size());
      if (len <= longest || len > i) continue;
      bool match = true;
      for (int32_t k = 0; k < len && match; ++k)
        match = b.tail[static_cast<size_t>(k)] == r(i - k - 1);
      if (match) longest = len;
    }
    if (longest >= 0) {
      rep_limit = i - longest;
      break;
    }
  }
  if (rep_limit < params.allowed_length) return;

  // (2) z[k]: how many tokens r(k), r(k+1), ... equal r(0), r(1), ...: the run of the window's end
  // that also ends k tokens earlier.
  thread_local std::vector<int32_t> z;
  z.assign(static_cast<size_t>(m), 0);
  for (int32_t k = 1, lt = 0, rt = 0; k < m; ++k) {
    int32_t n = 0;
    if (k < rt) n = std::min(rt - k, z[static_cast<size_t>(k - lt)]);
    while (k + n < m && r(n) == r(k + n)) ++n;
    z[static_cast<size_t>(k)] = n;
    if (k + n > rt) {
      lt = k;
      rt = k + n;
    }
  }

  // (3) A run ending at position j (oldest first: j = m - 1 - k) would be extended by the token
  // after it, window[j + 1]; each token keeps its longest run.
  thread_local std::unordered_map<int32_t, int32_t> longest_run;
  longest_run.clear();
  for (int32_t k = 1; k < m; ++k) {
    const int32_t run = std::min(z[static_cast<size_t>(k)], rep_limit);
    if (run < params.allowed_length) continue;
    const int32_t next = window[static_cast<size_t>(m - k)];
    auto [it, inserted] = longest_run.try_emplace(next, run);
    if (!inserted && it->second < run) it->second = run;
  }

  // (4) base^exponent stays below FLT_MAX.
  int32_t max_exponent = 0;
  if (params.base > 1.000001f) {
    max_exponent = static_cast<int32_t>(88.7228391f / std::log(params.base));
  }
  for (const auto& [token, run] : longest_run) {
    const std::span<const DryBreaker> own = headed_by(token);
    const bool breaks =
        std::any_of(own.begin(), own.end(), [](const DryBreaker& b) { return b.tail.empty(); });
    if (breaks) continue;
    int32_t exponent = run - params.allowed_length;
    if (max_exponent > 0) exponent = std::min(exponent, max_exponent);
    const double amount = params.multiplier * std::pow(static_cast<double>(params.base), exponent);
    out.emplace_back(token, static_cast<float>(amount));
  }
  // A fixed order (the map's is not), so that the same window gives the same list.
  std::sort(out.begin(), out.end());
}

}  // namespace specdec
