#include "speculative/acceptance_calibration.h"

#include <algorithm>

namespace specdec {

int AcceptanceCalibration::bin(double confidence) {
  int b = 0;
  while (b < kBins - 1 && confidence > kEdges[static_cast<size_t>(b)]) ++b;
  return b;
}

double AcceptanceCalibration::estimate(double confidence) const {
  const double c = std::clamp(confidence, 0.0, 1.0);
  const auto b = static_cast<size_t>(bin(c));
  return (accepted_[b] + kPriorWeight * c) / (tested_[b] + kPriorWeight);
}

void AcceptanceCalibration::observe(double confidence, bool accepted) {
  const auto b = static_cast<size_t>(bin(std::clamp(confidence, 0.0, 1.0)));
  tested_[b] = kDecay * tested_[b] + 1.0;
  accepted_[b] = kDecay * accepted_[b] + (accepted ? 1.0 : 0.0);
}

}  // namespace specdec
