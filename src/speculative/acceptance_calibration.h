// What the draft's confidence in a token is worth: the chance that the target accepts it,
// learned from the run's own rounds. The adaptive draft length (drafter.h) multiplies these
// chances to judge whether another draft pays; the draft's raw top probability is a poor
// estimate of them, and worst at low temperatures, where filtering and sharpening push q's top
// probability towards 1 whether or not the target agrees (on the Qwen2.5-Coder pair at T = 0.3,
// a cap of 8 accepted 44 % of drafts against 60 % at a cap of 3, and ran 20 % slower).
//
// Confidences fall into bins (finer towards 1, where most drafts are); each bin keeps decayed
// counts of tested and accepted drafts, started from a prior that trusts the confidence itself.
// Estimates depend only on earlier rounds, never on the draft being judged, so a length rule
// built on them stays exact.
#pragma once

#include <array>

namespace specdec {

class AcceptanceCalibration {
 public:
  static constexpr int kBins = 8;
  // Upper edges of bins 0..kBins-2; the last bin runs to 1.
  static constexpr std::array<double, kBins - 1> kEdges = {0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.995};
  // Weight of the prior, in drafts: a bin follows its own record after a handful of tests.
  static constexpr double kPriorWeight = 4.0;
  // Per observation in a bin, older ones count this much less: about the last 50 drafts of that
  // bin decide, so the estimate follows a run whose text changes character.
  static constexpr double kDecay = 0.98;

  // Estimated P(accept) of a draft the draft model gave this confidence (its top probability).
  double estimate(double confidence) const;
  // A verified draft of that confidence was accepted or not.
  void observe(double confidence, bool accepted);

  static int bin(double confidence);

 private:
  std::array<double, kBins> tested_{}, accepted_{};
};

}  // namespace specdec
