// The arithmetic of `specdec bench`: medians and ranges over repeated runs, and the analytic
// model of speculative decoding (Leviathan et al. 2023) that measured speedups are compared
// with. Kept apart from the command so each formula has a unit test.
#pragma once

#include <cstdint>
#include <vector>

namespace specdec {

// Median of values (mean of the two middle ones for an even count); 0 for no values.
double median(std::vector<double> values);

struct Spread {
  double mean = 0, min = 0, max = 0;
};
Spread spread(const std::vector<double>& values);  // all zero for no values

// Expected tokens committed per round when each of gamma drafts is accepted independently with
// probability alpha: E = 1 + alpha + ... + alpha^gamma = (1 - alpha^(gamma+1)) / (1 - alpha).
// Summed term by term, so alpha = 1 gives gamma + 1 without a 0/0.
double expected_tokens_per_round(double alpha, int32_t gamma);

// Speedup over target-only decoding when a round costs gamma draft steps (each c target
// steps) plus one verify pass costing verify_cost target steps: E / (gamma * c + verify_cost).
// verify_cost = 1 is the paper's model (a verify pass costs one decode step).
double theoretical_speedup(double alpha, int32_t gamma, double c, double verify_cost = 1.0);

}  // namespace specdec
