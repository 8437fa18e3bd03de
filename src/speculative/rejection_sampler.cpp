#include "speculative/rejection_sampler.h"

#include <vector>

#include "common/error.h"
#include "speculative/rejection_rules.h"

namespace specdec {

namespace {

// Residual masses at or below this are treated as zero (see sample_residual).
constexpr double kResidualEpsilon = 1e-6;

// q as a dense table over the vocabulary, so residual terms cost O(|p| + |q|) instead of a scan
// of q per id of p (which would be quadratic when no filter bounds the supports). The table is
// per thread, kept all-zero between uses.
class DenseView {
 public:
  explicit DenseView(const Distribution& d) : d_(d), table_(scratch()) {
    if (table_.size() < static_cast<size_t>(d.n_vocab))
      table_.resize(static_cast<size_t>(d.n_vocab));
    for (size_t i = 0; i < d.ids.size(); ++i) table_[static_cast<size_t>(d.ids[i])] = d.probs[i];
  }
  ~DenseView() {
    for (int32_t id : d_.ids) table_[static_cast<size_t>(id)] = 0.0f;
  }
  DenseView(const DenseView&) = delete;
  DenseView& operator=(const DenseView&) = delete;
  float operator[](int32_t id) const {
    return static_cast<size_t>(id) < table_.size() ? table_[static_cast<size_t>(id)] : 0.0f;
  }

 private:
  static std::vector<float>& scratch() {
    thread_local std::vector<float> table;
    return table;
  }
  const Distribution& d_;
  std::vector<float>& table_;
};

// Draws from norm(max(0, p - q)) with one uniform. Ids outside q's support have q = 0, so there
// the residual is p itself; ids outside p's support contribute nothing.
//
// When the residual mass R is ~0 we draw from p instead. This is exact: in exact arithmetic
// R = Σ max(0, p - q) = 1 - Σ min(p, q) is precisely the probability of reaching a rejection,
// and R = 0 means p = q, so the branch is unreachable. It is reached only when p and q agree up
// to float rounding (e.g. identical models), with probability <= R <= kResidualEpsilon; whatever
// it emits then moves the output distribution by at most R in total variation, below the
// resolution of the float probabilities themselves; p is the choice that keeps the emitted token
// a draw from the target (what the target alone would emit). The same fallback covers a draft token
// with q(y) = 0 (a caller contract violation: y was not drawn from q) when p = q.
int32_t sample_residual(const Distribution& p, const Distribution& q, bool only_on_q_support,
                        Rng& rng) {
  const DenseView dq(q);
  const auto residual = [&](size_t i) -> double {
    const float qx = dq[p.ids[i]];
    if (only_on_q_support && qx <= 0.0f) return 0.0;  // the ResidualOnDraftSupport bug
    const double r = static_cast<double>(p.probs[i]) - static_cast<double>(qx);
    return r > 0 ? r : 0.0;
  };
  double total = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) total += residual(i);
  if (total <= kResidualEpsilon) return sample(p, rng);
  const double u = rng.uniform() * total;
  double cum = 0;
  size_t last_positive = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double r = residual(i);
    if (r <= 0) continue;
    cum += r;
    last_positive = i;
    if (u < cum) return p.ids[i];
  }
  return p.ids[last_positive];  // u fell in the rounding sliver at the very end
}

}  // namespace

VerifyResult verify_drafts_with_rule(std::span<const int32_t> drafts,
                                     std::span<const Distribution> q,
                                     std::span<const Distribution> p, bool greedy, Rng& rng,
                                     RuleVariant rule) {
  const auto gamma = static_cast<int32_t>(drafts.size());
  if (p.size() != drafts.size() + 1) {
    fail("verify_drafts: need gamma + 1 target distributions, got ", p.size(), " for ", gamma);
  }
  if (!greedy && q.size() != drafts.size()) {
    fail("verify_drafts: need gamma draft distributions, got ", q.size(), " for ", gamma);
  }

  if (greedy) {
    // Speculative greedy = target greedy: a draft survives iff it is the target's argmax, and the
    // first mismatch is replaced by that argmax.
    for (int32_t i = 0; i < gamma; ++i) {
      const int32_t best = p[static_cast<size_t>(i)].argmax();
      if (drafts[static_cast<size_t>(i)] != best) return {i, best, false};
    }
    return {gamma, p[static_cast<size_t>(gamma)].argmax(), true};
  }

  for (int32_t i = 0; i < gamma; ++i) {
    const auto k = static_cast<size_t>(i);
    const int32_t y = drafts[k];
    const double qy = q[k].prob(y), py = p[k].prob(y);
    const double u = rng.uniform();  // drawn unconditionally: the stream order never depends on q
    bool accept;
    switch (rule) {
      case RuleVariant::AcceptAlways:
        accept = true;
        break;
      case RuleVariant::IgnoreRatio:
        accept = u < py;
        break;
      default:
        // u < p/q with u uniform in [0, 1) has probability min(1, p/q); written as u*q < p so that
        // q = 0 (y outside the draft's support: never sampled, but guarded) rejects without
        // dividing by zero.
        accept = qy > 0 && u * qy < py;
        break;
    }
    if (accept) continue;
    int32_t next;
    if (rule == RuleVariant::ResampleFromP) {
      next = sample(p[k], rng);
    } else {
      next = sample_residual(p[k], q[k], rule == RuleVariant::ResidualOnDraftSupport, rng);
    }
    return {i, next, false};
  }
  const size_t bonus_pos = rule == RuleVariant::BonusFromLastDraftPos && gamma > 0
                               ? static_cast<size_t>(gamma - 1)
                               : static_cast<size_t>(gamma);
  return {gamma, sample(p[bonus_pos], rng), true};
}

VerifyResult verify_drafts(std::span<const int32_t> drafts, std::span<const Distribution> q,
                           std::span<const Distribution> p, bool greedy, Rng& rng) {
  return verify_drafts_with_rule(drafts, q, p, greedy, rng, RuleVariant::Correct);
}

namespace {
template <RuleVariant R>
VerifyResult verify_as(std::span<const int32_t> drafts, std::span<const Distribution> q,
                       std::span<const Distribution> p, bool greedy, Rng& rng) {
  return verify_drafts_with_rule(drafts, q, p, greedy, rng, R);
}
}  // namespace

VerifyFn verifier_for(RuleVariant rule) {
  switch (rule) {
    case RuleVariant::Correct:
      return &verify_drafts;
    case RuleVariant::ResampleFromP:
      return &verify_as<RuleVariant::ResampleFromP>;
    case RuleVariant::ResidualOnDraftSupport:
      return &verify_as<RuleVariant::ResidualOnDraftSupport>;
    case RuleVariant::BonusFromLastDraftPos:
      return &verify_as<RuleVariant::BonusFromLastDraftPos>;
    case RuleVariant::AcceptAlways:
      return &verify_as<RuleVariant::AcceptAlways>;
    case RuleVariant::IgnoreRatio:
      return &verify_as<RuleVariant::IgnoreRatio>;
  }
  return &verify_drafts;
}

const char* rule_name(RuleVariant rule) {
  switch (rule) {
    case RuleVariant::Correct:
      return "Correct";
    case RuleVariant::ResampleFromP:
      return "ResampleFromP";
    case RuleVariant::ResidualOnDraftSupport:
      return "ResidualOnDraftSupport";
    case RuleVariant::BonusFromLastDraftPos:
      return "BonusFromLastDraftPos";
    case RuleVariant::AcceptAlways:
      return "AcceptAlways";
    case RuleVariant::IgnoreRatio:
      return "IgnoreRatio";
  }
  return "?";
}

}  // namespace specdec
