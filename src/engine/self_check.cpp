#include "engine/self_check.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.h"
#include "sampling/rng.h"

namespace specdec {
namespace {

using Sample = std::vector<std::vector<int32_t>>;

double total_variation(const std::vector<int64_t>& a, const std::vector<int64_t>& b, double na,
                       double nb) {
  double tv = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    tv += std::abs(static_cast<double>(a[i]) / na - static_cast<double>(b[i]) / nb);
  }
  return tv / 2;
}

// Counts per distinct continuation, over the union of both samples.
void histogram(const Sample& a, const Sample& b, std::vector<int64_t>& ca,
               std::vector<int64_t>& cb) {
  std::map<std::vector<int32_t>, size_t> bins;
  for (const auto* s : {&a, &b}) {
    for (const auto& seq : *s) bins.emplace(seq, bins.size());
  }
  ca.assign(bins.size(), 0);
  cb.assign(bins.size(), 0);
  for (const auto& seq : a) ++ca[bins.at(seq)];
  for (const auto& seq : b) ++cb[bins.at(seq)];
}

PromptCheck compare(const std::string& prompt, const Sample& plain, const Sample& spec,
                    uint64_t seed) {
  PromptCheck c;
  c.prompt = prompt;
  std::vector<int64_t> ca, cb;
  histogram(plain, spec, ca, cb);
  c.distinct = static_cast<int64_t>(ca.size());
  c.tv =
      total_variation(ca, cb, static_cast<double>(plain.size()), static_cast<double>(spec.size()));
  c.chi = chi_square_two_sample(ca, cb);
  // The empirical TV of two finite samples is positive even when they share a distribution;
  // re-splitting the pooled samples at random shows how large it is by chance alone.
  Sample pooled = plain;
  pooled.insert(pooled.end(), spec.begin(), spec.end());
  Rng rng(seed);
  constexpr int kResplits = 20;
  double sum = 0;
  for (int r = 0; r < kResplits; ++r) {
    for (size_t i = pooled.size() - 1; i > 0; --i) {
      std::swap(pooled[i], pooled[static_cast<size_t>(rng.uniform() * static_cast<double>(i + 1))]);
    }
    Sample x(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(plain.size()));
    Sample y(pooled.begin() + static_cast<std::ptrdiff_t>(plain.size()), pooled.end());
    std::vector<int64_t> cx, cy;
    histogram(x, y, cx, cy);
    sum += total_variation(cx, cy, static_cast<double>(x.size()), static_cast<double>(y.size()));
  }
  c.tv_null = sum / kResplits;
  return c;
}

}  // namespace

SelfCheckReport run_self_check(Engine& engine, const SelfCheckOptions& options,
                               const std::function<void(int64_t, int64_t)>& progress) {
  if (!engine.has_draft()) fail("verify needs a draft model (-md)");
  if (options.prompts.empty()) fail("verify needs at least one prompt");
  if (options.samples < 2) fail("verify needs at least 2 samples per prompt");
  if (options.tokens < 1) fail("verify needs at least 1 token per continuation");
  SelfCheckReport report;
  GenerationOptions go = options.generation;
  go.max_tokens = options.tokens;
  const int64_t total = static_cast<int64_t>(options.prompts.size()) * options.samples * 2;
  int64_t done = 0;
  double overlap_sum = 0;
  int64_t overlap_n = 0;
  const uint64_t base_seed = go.sampling.seed;
  for (size_t pi = 0; pi < options.prompts.size(); ++pi) {
    const std::vector<int32_t> prompt = engine.tokenize_prompt(options.prompts[pi]);
    Sample plain, spec;
    // Alternate the two modes so that nothing that drifts over the run favours one of them;
    // every sample has its own seed from one sequence.
    for (int32_t i = 0; i < options.samples; ++i) {
      for (bool speculative : {false, true}) {
        go.speculative = speculative;
        go.sampling.seed = base_seed + 2 * (pi * options.samples + i) + (speculative ? 1 : 0);
        GenerationResult r = engine.generate(prompt, go, {});
        (speculative ? spec : plain).push_back(r.tokens);
        if (speculative) {
          report.drafted += r.stats.spec.drafted;
          report.accepted += r.stats.spec.accepted;
          for (const RoundLog& l : r.stats.spec.log) {
            for (float o : l.overlap) overlap_sum += o;
            overlap_n += static_cast<int64_t>(l.overlap.size());
          }
        }
        if (progress) progress(++done, total);
      }
    }
    report.prompts.push_back(compare(options.prompts[pi], plain, spec, base_seed + pi));
  }
  // Bonferroni over prompts keeps the family-wise false-alarm rate at alpha.
  const double per_prompt_alpha = options.alpha / static_cast<double>(options.prompts.size());
  for (const PromptCheck& c : report.prompts) {
    if (c.chi.dof > 0 && c.chi.p_value < per_prompt_alpha) report.distribution_ok = false;
  }
  report.tested = overlap_n;
  if (overlap_n > 0) {
    report.acceptance_rate =
        static_cast<double>(report.accepted) / static_cast<double>(report.drafted);
    report.measured_acceptance =
        static_cast<double>(report.accepted) / static_cast<double>(overlap_n);
    report.analytic_acceptance = overlap_sum / static_cast<double>(overlap_n);
    // Each tested position is a Bernoulli trial with its own success probability; the variance
    // of the sum is at most that of equal probabilities, so this z is conservative.
    const double a = report.analytic_acceptance;
    const double se = std::sqrt(std::max(a * (1 - a), 1e-12) / static_cast<double>(overlap_n));
    report.acceptance_z = (report.measured_acceptance - a) / se;
    report.acceptance_ok = std::abs(report.acceptance_z) < 4.0;
  }
  return report;
}

}  // namespace specdec
