// Several slots generating at once on their own threads share forward passes
// (engine/batch_coordinator.h); each request's output must be exactly what it is alone: greedy
// text and tokens, seeded sampling, logprobs, with and without a draft model, whoever else runs.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

struct Request {
  std::vector<int32_t> prompt;
  GenerationOptions options;
};

std::vector<Request> requests() {
  std::vector<Request> out;
  for (int i = 0; i < 8; ++i) {
    Request r;
    for (int t = 0; t < 5 + 7 * i; ++t)
      r.prompt.push_back(static_cast<int32_t>(40 + (t * 13 + i * 29) % 200));
    r.options.max_tokens = 12 + 3 * i;
    r.options.ignore_eos = true;
    r.options.draft_max = 1 + i % 4;
    r.options.logprobs = 2;
    if (i % 2 == 1) {  // seeded sampling on every other request
      r.options.sampling.temperature = 0.8f;
      r.options.sampling.top_p = 0.9f;
      r.options.sampling.seed = 1000 + static_cast<uint64_t>(i);
    } else {
      r.options.sampling.temperature = 0;
    }
    if (i % 3 == 2) r.options.speculative = false;
    out.push_back(r);
  }
  return out;
}

void expect_same(const GenerationResult& a, const GenerationResult& b, size_t i) {
  EXPECT_EQ(a.tokens, b.tokens) << "request " << i;
  EXPECT_EQ(a.text, b.text) << "request " << i;
  EXPECT_EQ(a.finish, b.finish) << "request " << i;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << "request " << i;
  for (size_t t = 0; t < a.logprobs.size(); ++t) {
    EXPECT_EQ(a.logprobs[t].logprob, b.logprobs[t].logprob) << "request " << i << " token " << t;
    EXPECT_EQ(a.logprobs[t].top, b.logprobs[t].top) << "request " << i << " token " << t;
  }
}

class BatchedSlots : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    spec.arch = "qwen2";
    target_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("t.gguf"))));
    spec.seed = 5;
    spec.n_layer = 1;
    draft_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("d.gguf"))));
  }
  std::unique_ptr<LoadedModel> target_, draft_;
};

TEST_F(BatchedSlots, EachRequestGetsWhatItGetsAloneAmongAnyNumberOfOthers) {
  const std::vector<Request> reqs = requests();
  EngineOptions one;
  one.n_ctx = 256;
  one.n_threads = 2;
  Engine alone_engine(*target_, draft_.get(), one);
  std::vector<GenerationResult> alone;
  for (const Request& r : reqs) alone.push_back(alone_engine.generate(r.prompt, r.options, {}));

  for (int32_t n_slots : {2, 4, 8}) {
    EngineOptions eo = one;
    eo.n_slots = n_slots;
    eo.prefill_chunk = 4;  // prompts of 5..54 tokens: several chunks, interleaved with decoding
    Engine engine(*target_, draft_.get(), eo);
    std::mutex mu;
    int64_t shared_target_passes = 0, max_sequences = 0;
    engine.set_pass_observer([&](bool target, int64_t, int64_t sequences) {
      std::lock_guard lock(mu);
      if (target && sequences > 1) ++shared_target_passes;
      max_sequences = std::max(max_sequences, sequences);
    });
    // Whether the slots' generations overlap is up to the scheduler: on a loaded machine one
    // thread can run all its (millisecond) requests before another starts. So the threads start
    // together, and a round in which no pass was shared is run again (at most 3 rounds); every
    // round's outputs are checked. A coordinator that never batches fails all three.
    for (int round = 0; round < 3 && shared_target_passes == 0; ++round) {
      // Each slot's thread runs its share of the requests one after another (continuous
      // batching: a slot whose request ends takes the next while the others keep going).
      std::vector<GenerationResult> got(reqs.size());
      std::vector<std::thread> threads;
      std::latch start(n_slots);
      for (int32_t s = 0; s < n_slots; ++s) {
        threads.emplace_back([&, s] {
          start.arrive_and_wait();
          for (size_t i = static_cast<size_t>(s); i < reqs.size();
               i += static_cast<size_t>(n_slots)) {
            got[i] = engine.generate(reqs[i].prompt, reqs[i].options, {}, {}, s);
          }
        });
      }
      for (auto& t : threads) t.join();
      for (size_t i = 0; i < reqs.size(); ++i) expect_same(got[i], alone[i], i);
    }
    EXPECT_GT(shared_target_passes, 0) << n_slots << " slots never shared a pass in 3 rounds";
    EXPECT_GT(max_sequences, 1);
    EXPECT_LE(max_sequences, n_slots);
  }
}

TEST_F(BatchedSlots, AFailingRequestFailsAloneAndOthersFinish) {
  EngineOptions eo;
  eo.n_ctx = 64;
  eo.n_slots = 3;
  Engine engine(*target_, draft_.get(), eo);
  const std::vector<Request> reqs = requests();
  std::atomic<int> failures{0};
  std::vector<GenerationResult> got(2);
  std::thread bad([&] {
    try {
      engine.generate(std::vector<int32_t>(80, 50), reqs[0].options, {}, {}, 2);  // > n_ctx
    } catch (const Error&) {
      ++failures;
    }
  });
  std::thread a([&] { got[0] = engine.generate(reqs[0].prompt, reqs[0].options, {}, {}, 0); });
  std::thread b([&] { got[1] = engine.generate(reqs[1].prompt, reqs[1].options, {}, {}, 1); });
  bad.join();
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(got[0].tokens.size(), static_cast<size_t>(reqs[0].options.max_tokens));
  EXPECT_EQ(got[1].tokens.size(), static_cast<size_t>(reqs[1].options.max_tokens));
  EXPECT_THROW(engine.generate(reqs[0].prompt, reqs[0].options, {}, {}, 3), Error);  // no slot 3
}

TEST_F(BatchedSlots, ASlotKeepsItsPromptCache) {
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.n_slots = 2;
  Engine engine(*target_, draft_.get(), eo);
  Request r = requests()[0];
  const GenerationResult first = engine.generate(r.prompt, r.options, {}, {}, 1);
  const std::vector<int32_t> history = engine.slot_history(1);
  ASSERT_GE(history.size(), r.prompt.size());
  EXPECT_TRUE(std::equal(r.prompt.begin(), r.prompt.end(), history.begin()));
  EXPECT_TRUE(engine.slot_history(0).empty());
  // A follow-up turn on the same slot starts from the cached prefix and changes nothing.
  std::vector<int32_t> follow = history;
  follow.push_back(60);
  Request f = r;
  f.prompt = follow;
  const GenerationResult cached = engine.generate(f.prompt, f.options, {}, {}, 1);
  EngineOptions fresh_options;
  fresh_options.n_ctx = 256;
  Engine fresh(*target_, draft_.get(), fresh_options);
  expect_same(cached, fresh.generate(f.prompt, f.options, {}), 0);
}

}  // namespace
}  // namespace specdec
