// Drafts that score only part of the vocabulary (CausalLM::logit_ids, FR-Spec): q is zero
// outside the subset, and speculative sampling must still give exactly the target's
// distribution (chi-square against enumeration, as for full drafts), and greedy output must
// still equal target-only greedy output. Target tokens outside the subset can then only come
// from corrections and bonus tokens, which is what these tests exercise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "sampling/chi_square.h"
#include "speculative/drafter.h"
#include "speculative/exactness_harness_test_util.h"

namespace specdec {
namespace {

using testing::exact_joint;
using testing::FakeLM;
using testing::greedy_reference;
using testing::joint_counts;
using testing::params;

// A FakeLM that reports only the columns of `ids` (ascending).
class SubsetLM : public CausalLM {
 public:
  SubsetLM(FakeLM& full, std::vector<int32_t> ids) : full_(full), ids_(std::move(ids)) {}
  int32_t n_vocab() const override { return full_.n_vocab(); }
  int32_t length() const override { return full_.length(); }
  int32_t capacity() const override { return full_.capacity(); }
  void truncate(int32_t n) override { full_.truncate(n); }
  std::span<const int32_t> logit_ids() const override { return ids_; }
  void forward(std::span<const int32_t> tokens, std::vector<float>& logits) override {
    full_.forward(tokens, all_);
    const auto v = static_cast<size_t>(full_.n_vocab()), w = ids_.size();
    logits.resize(tokens.size() * w);
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (size_t c = 0; c < w; ++c) logits[t * w + c] = all_[t * v + static_cast<size_t>(ids_[c])];
    }
  }

 private:
  FakeLM& full_;
  std::vector<int32_t> ids_;
  std::vector<float> all_;
};

struct Pair {
  explicit Pair(int32_t vocab, std::vector<int32_t> ids)
      : target(vocab, 1, 2.0f),
        full_draft(vocab, 2, 0.0f, 1 << 20, &target, 1.0f),
        draft(full_draft, std::move(ids)) {}
  FakeLM target;
  FakeLM full_draft;
  SubsetLM draft;
};

TEST(VocabSubsetDraft, JointDistributionIsTheTargetsWithATruncatedDraft) {
  // 6-token vocabulary, the draft scores 3 of them: half the target's mass can only be reached
  // through corrections. 3-token continuations (216 cells), fixed seeds, level 1e-4 per fit.
  Pair m(6, {0, 2, 3});
  int config = 0;
  for (int gamma : {1, 3, 5}) {
    for (const SamplingParams& sp : {params(1.0f), params(0.7f, 0.9f), params(1.2f, 1.0f, 4)}) {
      const std::vector<int32_t> prompt{config % 6, (config * 5 + 1) % 6};
      Rng rng(500 + config);
      SpeculativeDecoder dec(m.target, &m.draft, sp, gamma, rng);
      int64_t accepted = 0;
      const std::vector<int64_t> counts = joint_counts(
          dec, 6, prompt, 3, 40000, [&accepted](const DecodeStats& s) { accepted += s.accepted; });
      const ChiSquareResult r = chi_square_test(counts, exact_joint(m.target, sp, prompt, 3));
      EXPECT_EQ(r.impossible, 0) << "gamma " << gamma;
      EXPECT_GT(r.p_value, 1e-4) << "gamma " << gamma << " T " << sp.temperature << " stat "
                                 << r.stat << " dof " << r.dof;
      EXPECT_GT(accepted, 0);
      ++config;
    }
  }
}

// The drafter's q lives on the subset, in vocabulary ids: the softmax of the subset's logits
// alone, zero elsewhere, and each drafted token is one of its ids. (Exactness does not depend on
// this, since any q is allowed, but speed does: a drafter that left q in column indices would
// draft the wrong tokens.)
TEST(VocabSubsetDraft, DrafterQIsTheSubsetSoftmaxInVocabularyIds) {
  Pair m(6, {3, 4, 5});
  ModelDrafter drafter(m.draft);
  std::vector<int32_t> prompt = {1, 2}, drafts;
  std::vector<Distribution> q;
  Rng rng(3);
  drafter.start(prompt, 0);
  const int32_t n = drafter.propose(prompt, 4, params(1.0f), rng, drafts, q);
  ASSERT_EQ(n, 4);
  for (int32_t i = 0; i < n; ++i) {
    const Distribution& qi = q[static_cast<size_t>(i)];
    EXPECT_EQ(qi.n_vocab, 6);
    for (int32_t id : qi.ids) EXPECT_TRUE(id >= 3 && id <= 5) << id;
    EXPECT_GT(qi.prob(drafts[static_cast<size_t>(i)]), 0.0f);
    // q is the softmax over the subset's logits alone.
    const std::vector<int32_t> ctx = [&] {
      std::vector<int32_t> c = prompt;
      c.insert(c.end(), drafts.begin(), drafts.begin() + i);
      return c;
    }();
    const std::vector<float> l = m.full_draft.logits_for(ctx);
    double z = 0;
    for (int32_t id = 3; id <= 5; ++id)
      z += std::exp(static_cast<double>(l[static_cast<size_t>(id)]));
    for (int32_t id = 3; id <= 5; ++id) {
      EXPECT_NEAR(qi.prob(id), std::exp(static_cast<double>(l[static_cast<size_t>(id)])) / z, 1e-5);
    }
  }
}

TEST(VocabSubsetDraft, GreedyOutputEqualsTargetGreedy) {
  Pair m(7, {0, 1, 5, 6});
  m.target.set_rounding(true);  // exact ties: the tie rule too
  Rng prompts(9);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<int32_t> prompt;
    for (int i = 0; i <= trial % 3; ++i)
      prompt.push_back(static_cast<int32_t>(prompts.uniform() * 7));
    const std::vector<int32_t> want = greedy_reference(m.target, prompt, 20);
    for (int gamma : {1, 2, 4, 8}) {
      Rng rng(1);
      SpeculativeDecoder dec(m.target, &m.draft, params(0.0f), gamma, rng);
      dec.start(prompt, 20);
      dec.run();
      ASSERT_EQ(std::vector<int32_t>(dec.generated().begin(), dec.generated().end()), want)
          << "trial " << trial << " gamma " << gamma;
    }
  }
}

TEST(VocabSubsetDraft, TargetMustScoreTheWholeVocabulary) {
  FakeLM full(5, 1, 2.0f);
  SubsetLM target(full, {0, 1});
  FakeLM draft(5, 2, 1.0f);
  Rng rng(1);
  EXPECT_THROW(SpeculativeDecoder(target, &draft, params(1.0f), 3, rng), Error);
}

}  // namespace
}  // namespace specdec
