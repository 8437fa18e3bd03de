// Model::forward_batch: several sequences in one pass give, row for row, the bits each gets
// alone (batch invariance across sequences), leave each cache as a lone pass would, and refuse
// bad arguments before touching any cache.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/vocab_subset.h"

namespace specdec {
namespace {

using testing::bitwise_equal;
using testing::forward_all;
using testing::TinyModel;
using testing::TinyModelSpec;

std::vector<int32_t> some_tokens(size_t n, int32_t salt) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 31 + salt * 17) % 300);
  return t;
}

std::vector<int32_t> iota_from(size_t n, int32_t first) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Sequences with different histories (cache lengths 0, 5, 37, 11) and pass widths (1, 4, 9, 2,
// like a decode step, verify passes and a prefill chunk), run together and alone.
TEST(ForwardBatch, EachSequenceGetsTheBitsItGetsAlone) {
  for (const char* arch : {"llama", "qwen2", "gemma3", "qwen3"}) {
    TinyModelSpec spec;
    spec.arch = arch;
    spec.n_layer = spec.arch == "gemma3" ? 6 : 2;
    spec.sliding_window = 8;
    TinyModel m(spec, std::string(arch) + "-batch.gguf");
    const ModelConfig& c = m.model->config();
    const std::vector<int32_t> history = {0, 5, 37, 11}, width = {1, 4, 9, 2};
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<KvCache> together, alone;
      std::vector<std::vector<int32_t>> tokens, positions, rows;
      std::vector<std::vector<float>> expected, logits;
      for (size_t q = 0; q < history.size(); ++q) {
        together.emplace_back(c, 64);
        alone.emplace_back(c, 64);
        const auto h = static_cast<size_t>(history[q]);
        if (h > 0) {
          forward_all(*m.model, together.back(), some_tokens(h, 100 + int32_t(q)), 0, pool);
          forward_all(*m.model, alone.back(), some_tokens(h, 100 + int32_t(q)), 0, pool);
        }
        tokens.push_back(some_tokens(static_cast<size_t>(width[q]), int32_t(q)));
        positions.push_back(iota_from(tokens.back().size(), history[q]));
        // Logits of every row but, for the widest, not the first (rows are a subset).
        rows.push_back(iota_from(tokens.back().size(), 0));
        if (rows.back().size() > 3) rows.back().erase(rows.back().begin());
        logits.emplace_back(rows.back().size() * static_cast<size_t>(c.n_vocab));
      }
      for (size_t q = 0; q < history.size(); ++q) {
        std::vector<float> out(rows[q].size() * static_cast<size_t>(c.n_vocab));
        m.model->forward(tokens[q], positions[q], alone[q], rows[q], out.data(), pool);
        expected.push_back(std::move(out));
      }
      std::vector<Model::SequenceRows> batch;
      for (size_t q = 0; q < history.size(); ++q) {
        batch.push_back({tokens[q], positions[q], &together[q], rows[q], logits[q].data()});
      }
      m.model->forward_batch(batch, pool);
      for (size_t q = 0; q < history.size(); ++q) {
        EXPECT_TRUE(bitwise_equal(logits[q], expected[q])) << arch << " seq " << q;
        EXPECT_EQ(together[q].length(), alone[q].length());
        // The caches hold the same K/V: a next step on each agrees too.
        const int32_t next = together[q].length();
        EXPECT_TRUE(bitwise_equal(forward_all(*m.model, together[q], {7}, next, pool),
                                  forward_all(*m.model, alone[q], {7}, next, pool)))
            << arch << " seq " << q << " after";
      }
    }
  }
}

TEST(ForwardBatch, WorksWithAVocabularySubsetAndEmptySequences) {
  TinyModelSpec spec;
  TinyModel m(spec, "batch-subset.gguf");
  const ModelConfig& c = m.model->config();
  ThreadPool pool(2);
  std::vector<int32_t> ids(100);
  std::iota(ids.begin(), ids.end(), 50);
  const VocabSubset subset = VocabSubset::from_ids(ids, c.n_vocab);
  const auto w = static_cast<size_t>(subset.width());
  KvCache a(c, 32), b(c, 32), a1(c, 32), b1(c, 32), empty(c, 32);
  const std::vector<int32_t> ta = {3, 4, 5}, tb = {9}, pa = {0, 1, 2}, pb = {0}, ra = {0, 2},
                             rb = {0}, none;
  std::vector<float> la(2 * w), lb(w), ea(2 * w), eb(w);
  m.model->forward(ta, pa, a1, ra, ea.data(), pool, &subset);
  m.model->forward(tb, pb, b1, rb, eb.data(), pool, &subset);
  const std::vector<Model::SequenceRows> batch = {{ta, pa, &a, ra, la.data(), &subset},
                                                  {none, none, &empty, none, nullptr, &subset},
                                                  {tb, pb, &b, rb, lb.data(), &subset}};
  m.model->forward_batch(batch, pool);
  EXPECT_TRUE(bitwise_equal(la, ea));
  EXPECT_TRUE(bitwise_equal(lb, eb));
  EXPECT_EQ(empty.length(), 0);
}

TEST(ForwardBatch, EachSequenceScoresItsOwnVocabulary) {
  // A draft's subset is per prompt: sequences with different subsets (and one with the whole
  // vocabulary) share a pass, each gets bitwise what it gets alone.
  TinyModelSpec spec;
  TinyModel m(spec, "batch-subsets.gguf");
  const ModelConfig& c = m.model->config();
  ThreadPool pool(2);
  std::vector<int32_t> ids_a(60), ids_b(90);
  std::iota(ids_a.begin(), ids_a.end(), 10);
  std::iota(ids_b.begin(), ids_b.end(), 100);
  ids_b.push_back(12);  // overlapping the other subset
  const VocabSubset sa = VocabSubset::from_ids(ids_a, c.n_vocab);
  const VocabSubset sb = VocabSubset::from_ids(ids_b, c.n_vocab);
  const auto wa = static_cast<size_t>(sa.width()), wb = static_cast<size_t>(sb.width());
  const auto wf = static_cast<size_t>(c.n_vocab);
  const std::vector<int32_t> t1 = {3, 4, 5}, t2 = {9, 8}, t3 = {7}, t4 = {2, 6}, p3 = {0, 1, 2},
                             p2 = {0, 1}, p1 = {0}, r1 = {2}, r2 = {0, 1}, r3 = {0};
  // Sequences 1 and 4 share subset a; 2 has b; 3 the whole vocabulary.
  std::vector<float> e1(wa), e2(2 * wb), e3(wf), e4(2 * wa);
  {
    KvCache k1(c, 16), k2(c, 16), k3(c, 16), k4(c, 16);
    m.model->forward(t1, p3, k1, r1, e1.data(), pool, &sa);
    m.model->forward(t2, p2, k2, r2, e2.data(), pool, &sb);
    m.model->forward(t3, p1, k3, r3, e3.data(), pool);
    m.model->forward(t4, p2, k4, r2, e4.data(), pool, &sa);
  }
  KvCache k1(c, 16), k2(c, 16), k3(c, 16), k4(c, 16);
  std::vector<float> l1(wa), l2(2 * wb), l3(wf), l4(2 * wa);
  const std::vector<Model::SequenceRows> batch = {{t1, p3, &k1, r1, l1.data(), &sa},
                                                  {t2, p2, &k2, r2, l2.data(), &sb},
                                                  {t3, p1, &k3, r3, l3.data(), nullptr},
                                                  {t4, p2, &k4, r2, l4.data(), &sa}};
  m.model->forward_batch(batch, pool);
  EXPECT_TRUE(bitwise_equal(l1, e1));
  EXPECT_TRUE(bitwise_equal(l2, e2));
  EXPECT_TRUE(bitwise_equal(l3, e3));
  EXPECT_TRUE(bitwise_equal(l4, e4));
  // A subset made for another head is refused before anything changes.
  const VocabSubset wrong = VocabSubset::from_ids(ids_a, c.n_vocab + 1);
  KvCache k5(c, 16);
  const std::vector<Model::SequenceRows> bad = {{t3, p1, &k5, r3, l3.data(), nullptr},
                                                {t3, p1, &k1, r3, l3.data(), &wrong}};
  EXPECT_THROW(m.model->forward_batch(bad, pool), Error);
  EXPECT_EQ(k5.length(), 0);
}

TEST(ForwardBatch, HiddenStatesShareAPassWithLogitsAndSubsets) {
  // An embedding request's rows (hidden states, no head) in a pass between sequences that want
  // logits over the same subset: each gets bitwise what it gets alone, and the logit sequences
  // around it still share their head product.
  TinyModelSpec spec;
  TinyModel m(spec, "batch-hidden.gguf");
  const ModelConfig& c = m.model->config();
  ThreadPool pool(2);
  std::vector<int32_t> ids(80);
  std::iota(ids.begin(), ids.end(), 20);
  const VocabSubset sub = VocabSubset::from_ids(ids, c.n_vocab);
  const auto w = static_cast<size_t>(sub.width()), e = static_cast<size_t>(c.n_embd);
  const std::vector<int32_t> t1 = {3, 4, 5}, t2 = {9, 8, 7, 6}, t3 = {2, 6}, p3 = {0, 1, 2},
                             p4 = {0, 1, 2, 3}, p2 = {0, 1}, r1 = {2}, r_all = {0, 1, 2, 3},
                             r3 = {0, 1};
  std::vector<float> e1(w), e2(4 * e), e3(2 * w), last(e);
  {
    KvCache k1(c, 16), k2(c, 16), k3(c, 16);
    m.model->forward(t1, p3, k1, r1, e1.data(), pool, &sub);
    const Model::SequenceRows alone{t2, p4, &k2, r_all, nullptr, nullptr, e2.data()};
    m.model->forward_batch(std::span<const Model::SequenceRows>(&alone, 1), pool);
    m.model->forward(t3, p2, k3, r3, e3.data(), pool, &sub);
    // Only the last row asked for: the state is the same bits as with every row.
    KvCache k4(c, 16);
    const std::vector<int32_t> r_last = {3};
    const Model::SequenceRows one{t2, p4, &k4, r_last, nullptr, nullptr, last.data()};
    m.model->forward_batch(std::span<const Model::SequenceRows>(&one, 1), pool);
  }
  EXPECT_TRUE(bitwise_equal(last, std::vector<float>(e2.end() - static_cast<long>(e), e2.end())));
  KvCache k1(c, 16), k2(c, 16), k3(c, 16);
  std::vector<float> l1(w), h2(4 * e), l3(2 * w);
  const std::vector<Model::SequenceRows> batch = {{t1, p3, &k1, r1, l1.data(), &sub},
                                                  {t2, p4, &k2, r_all, nullptr, &sub, h2.data()},
                                                  {t3, p2, &k3, r3, l3.data(), &sub}};
  m.model->forward_batch(batch, pool);
  EXPECT_TRUE(bitwise_equal(l1, e1));
  EXPECT_TRUE(bitwise_equal(h2, e2));
  EXPECT_TRUE(bitwise_equal(l3, e3));
  EXPECT_EQ(k2.length(), 4);
  // Rows asked for with neither output are refused.
  KvCache k5(c, 16);
  const Model::SequenceRows neither{t3, p2, &k5, r3, nullptr, nullptr, nullptr};
  EXPECT_THROW(m.model->forward_batch(std::span<const Model::SequenceRows>(&neither, 1), pool),
               Error);
  EXPECT_EQ(k5.length(), 0);
}

TEST(ForwardBatch, BadArgumentsLeaveEveryCacheUnchanged) {
  TinyModelSpec spec;
  TinyModel m(spec, "batch-bad.gguf");
  const ModelConfig& c = m.model->config();
  ThreadPool pool(1);
  KvCache a(c, 8), b(c, 4);
  const std::vector<int32_t> t = {1, 2}, p = {0, 1}, r = {1}, big(5, 1), bigp = iota_from(5, 0);
  std::vector<float> out(static_cast<size_t>(c.n_vocab) * 5);
  // The second sequence overflows its cache: nothing may have happened to the first.
  const std::vector<Model::SequenceRows> overflow = {{t, p, &a, r, out.data()},
                                                     {big, bigp, &b, {}, nullptr}};
  EXPECT_THROW(m.model->forward_batch(overflow, pool), Error);
  EXPECT_EQ(a.length(), 0);
  EXPECT_EQ(b.length(), 0);
  const std::vector<Model::SequenceRows> shared = {{t, p, &a, r, out.data()},
                                                   {t, p, &a, r, out.data()}};
  EXPECT_THROW(m.model->forward_batch(shared, pool), Error);
  const std::vector<Model::SequenceRows> no_cache = {{t, p, nullptr, r, out.data()}};
  EXPECT_THROW(m.model->forward_batch(no_cache, pool), Error);
  EXPECT_EQ(a.length(), 0);
}

}  // namespace
}  // namespace specdec
