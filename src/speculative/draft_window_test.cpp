// A draft that reads only the last tokens of a long text (ModelDrafter::set_context_window):
// its q conditions on a suffix, which any q may, so the output must still be exactly the
// target's (chi-square against enumeration at T > 0, token equality at T = 0), and the draft
// must really read no more than the window.
#include <gtest/gtest.h>

#include "sampling/chi_square.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::exact_joint;
using testing::FakeLM;
using testing::greedy_reference;
using testing::joint_counts;
using testing::Models;
using testing::params;

TEST(DraftWindow, AWindowedDraftKeepsTheTargetsDistribution) {
  // 3-token continuations over 5 tokens (125 cells) after a 6-token prompt; the draft reads the
  // last 2 tokens only. Level 1e-4 per fit.
  Models m(5, 1.0f);
  int config = 0;
  for (int window : {1, 2}) {
    for (int gamma : {1, 3}) {
      for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f)}) {
        const std::vector<int32_t> prompt{config % 5, 1, 4, (config * 3) % 5, 2, config % 3};
        ModelDrafter drafter(m.draft);
        drafter.set_context_window(window);
        Rng rng(3000 + config);
        SpeculativeDecoder dec(m.target, drafter, sp, gamma, rng);
        int64_t accepted = 0;
        const std::vector<int64_t> counts =
            joint_counts(dec, 5, prompt, 3, 40000,
                         [&accepted](const DecodeStats& s) { accepted += s.accepted; });
        const ChiSquareResult r = chi_square_test(counts, exact_joint(m.target, sp, prompt, 3));
        EXPECT_EQ(r.impossible, 0) << "window " << window << " gamma " << gamma;
        EXPECT_GT(r.p_value, 1e-4) << "window " << window << " gamma " << gamma << " T "
                                   << sp.temperature << " stat " << r.stat << " dof " << r.dof;
        EXPECT_GT(accepted, 0);
        ++config;
      }
    }
  }
}

TEST(DraftWindow, GreedyEqualsTargetGreedyWithAnyWindow) {
  Models m(7, 1.0f);
  m.target.set_rounding(true);
  Rng prompts(21);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 1 + trial % 8; ++i) {
      prompt.push_back(static_cast<int32_t>(prompts.uniform() * 7));
    }
    const std::vector<int32_t> want = greedy_reference(m.target, prompt, 24);
    for (int window : {1, 3, 5}) {
      for (bool lazy : {false, true}) {
        for (int gamma : {1, 4, 8}) {
          ModelDrafter drafter(m.draft);
          drafter.set_context_window(window);
          drafter.set_lazy_start(lazy);
          Rng rng(1);
          SpeculativeDecoder dec(m.target, drafter, params(0.0f), gamma, rng);
          dec.start(prompt, 24);
          dec.run();
          ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
              << "trial " << trial << " window " << window << " gamma " << gamma;
        }
      }
    }
  }
}

TEST(DraftWindow, TheDraftReadsOnlyTheWindowAndSaysSo) {
  Models m(6, 1.0f);
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5, 0, 1, 2, 3, 4};  // 10 tokens
  {
    ModelDrafter drafter(m.draft);
    drafter.set_context_window(4);
    drafter.start(prompt, 0);  // reads all but the pending token: 9 > 4, so the last 4
    EXPECT_TRUE(drafter.windowed());
    EXPECT_EQ(m.draft.length(), 4);
    EXPECT_EQ(drafter.committed(), 9);
    EXPECT_EQ(drafter.lag(10), 1);
  }
  {
    ModelDrafter drafter(m.draft);
    drafter.set_context_window(4);
    drafter.set_lazy_start(true);
    drafter.start(prompt, 0);
    EXPECT_EQ(drafter.lag(10), 4);  // what the first proposal will read, not 10
    std::vector<int32_t> drafts;
    std::vector<Distribution> q;
    Rng rng(1);
    const int32_t n = drafter.propose(prompt, 3, params(0.0f), rng, drafts, q);
    EXPECT_TRUE(drafter.windowed());
    EXPECT_EQ(m.draft.length(), 4 + n - 1);  // the window, then the drafts it ran
  }
  {
    ModelDrafter drafter(m.draft);  // a text within the window: read whole, as without one
    drafter.set_context_window(20);
    drafter.start(prompt, 0);
    EXPECT_FALSE(drafter.windowed());
    EXPECT_EQ(m.draft.length(), 9);
  }
}

// A follow-up turn on the same cache: the rows a windowed read left, at base(), are kept for the
// part of the text the new prompt shares, so the draft reads only what is new; without a
// window, or when the new prompt leaves the re-based rows behind, they are dropped.
TEST(DraftWindow, AFollowUpTurnKeepsTheRebasedRows) {
  Models m(6, 1.0f);
  const std::vector<int32_t> first{1, 2, 3, 4, 5, 0, 1, 2, 3, 4};  // 10 tokens
  int32_t base = 0;
  {
    ModelDrafter drafter(m.draft);
    drafter.set_context_window(4);
    drafter.start(first, 0);
    base = drafter.base();
    EXPECT_EQ(base, 5);  // it holds first[5..9)
  }
  std::vector<int32_t> next = first;
  next.insert(next.end(), {5, 0});  // 12 tokens sharing the first 10
  {
    ModelDrafter drafter(m.draft);
    drafter.set_context_window(4);
    drafter.set_cache_base(base);
    drafter.set_lazy_start(true);
    drafter.start(next, 9);  // the target shares 9 tokens of it
    EXPECT_EQ(drafter.base(), 5);
    EXPECT_EQ(drafter.committed(), 9);
    EXPECT_EQ(m.draft.length(), 4);  // the kept rows: first[5..9)
    EXPECT_EQ(drafter.lag(12), 3);   // only the new tokens are read
  }
  {
    ModelDrafter drafter(m.draft);  // a prompt that shares less than the base: dropped
    drafter.set_context_window(4);
    drafter.set_cache_base(5);
    drafter.start(next, 3);
    EXPECT_EQ(drafter.committed(), 11);
    EXPECT_EQ(drafter.base(), 7);  // re-read through the window: next[7..11)
  }
  {
    ModelDrafter drafter(m.draft);  // no window: the whole text, so the re-based rows go
    drafter.set_cache_base(7);
    drafter.set_lazy_start(true);
    drafter.start(next, 9);
    EXPECT_EQ(drafter.base(), 0);
    EXPECT_EQ(drafter.committed(), 0);
    EXPECT_EQ(m.draft.length(), 0);
  }
}

}  // namespace
}  // namespace specdec
