// Consistency checks of a run's speculative statistics, shared by the real-model tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "speculative/decode_stats.h"

namespace specdec::testing {

// The accepted-count histogram adds up to the rounds and to the accepted drafts, and no more
// drafts were accepted than proposed.
inline void expect_histogram_adds_up(const DecodeStats& s) {
  int64_t hist_rounds = 0, hist_accepted = 0;
  for (size_t k = 0; k < s.accepted_hist.size(); ++k) {
    hist_rounds += s.accepted_hist[k];
    hist_accepted += static_cast<int64_t>(k) * s.accepted_hist[k];
  }
  EXPECT_EQ(hist_rounds, s.rounds);
  EXPECT_EQ(hist_accepted, s.accepted);
  EXPECT_LE(s.accepted, s.drafted);
}

}  // namespace specdec::testing
