// Several slots generating at once on their own threads share forward passes
// (engine/batch_coordinator.h); each request's output must be exactly what it is alone: greedy
// text and tokens, seeded sampling, logprobs, with and without a draft model, whoever else runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "grammar/grammar.h"
#include "model/lora.h"
#include "support/tiny_lora.h"
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
    if (i % 4 == 3) r.options.prompt_logprobs = 1;  // scoring its prompt too (echo + logprobs)
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
  ASSERT_EQ(a.prompt_logprobs.size(), b.prompt_logprobs.size()) << "request " << i;
  for (size_t t = 0; t < a.prompt_logprobs.size(); ++t) {
    EXPECT_EQ(a.prompt_logprobs[t].logprob, b.prompt_logprobs[t].logprob) << i << " " << t;
    EXPECT_EQ(a.prompt_logprobs[t].top, b.prompt_logprobs[t].top) << i << " " << t;
  }
}

// An engine's options for these tests: a 256-token context per slot, n_slots slots.
EngineOptions slot_options(int32_t n_slots) {
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.n_slots = n_slots;
  return eo;
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
  EngineOptions one = slot_options(1);
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

// Each request's output among others sharing passes (3 slots) is its output alone on the same
// KV cache types; prompts shared across slots copy rows of those types.
void expect_alone_among_others(LoadedModel& target, LoadedModel& draft, KvTypes kv_types) {
  const std::vector<Request> reqs = requests();
  EngineOptions one = slot_options(1);
  one.n_threads = 2;
  one.kv_types = kv_types;
  Engine alone_engine(target, &draft, one);
  std::vector<GenerationResult> alone;
  for (const Request& r : reqs) alone.push_back(alone_engine.generate(r.prompt, r.options, {}));
  EngineOptions eo = one;
  eo.n_slots = 3;
  eo.prefill_chunk = 4;
  Engine engine(target, &draft, eo);
  std::atomic<int64_t> shared{0};
  engine.set_pass_observer([&](bool is_target, int64_t, int64_t sequences) {
    if (is_target && sequences > 1) ++shared;
  });
  for (int round = 0; round < 3 && shared.load() == 0; ++round) {
    std::vector<GenerationResult> got(reqs.size());
    std::vector<std::thread> threads;
    std::latch start(eo.n_slots);
    for (int32_t s = 0; s < eo.n_slots; ++s) {
      threads.emplace_back([&, s] {
        start.arrive_and_wait();
        for (size_t i = static_cast<size_t>(s); i < reqs.size();
             i += static_cast<size_t>(eo.n_slots)) {
          got[i] = engine.generate(reqs[i].prompt, reqs[i].options, {}, {}, s);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < reqs.size(); ++i) expect_same(got[i], alone[i], i);
  }
  EXPECT_GT(shared.load(), 0) << "the slots never shared a pass in 3 rounds";
}

// f16 KV caches keep batching exact, as f32 ones do.
TEST_F(BatchedSlots, F16CachesGiveEachRequestWhatItGetsAlone) {
  expect_alone_among_others(*target_, *draft_, {KvType::F16, KvType::F16});
}

// So do q8_0 caches (on models with 32-wide heads, which q8_0's blocks need): key tiles are
// copied row by row between slots.
TEST_F(BatchedSlots, Q8CachesGiveEachRequestWhatItGetsAlone) {
  testing::TinyModelSpec spec;
  spec.arch = "qwen2";
  spec.n_embd = 128;  // 4 heads of 32
  LoadedModel target =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("t32.gguf")));
  spec.seed = 5;
  spec.n_layer = 1;
  LoadedModel draft =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("d32.gguf")));
  expect_alone_among_others(target, draft, {KvType::Q8_0, KvType::Q8_0});
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
  Engine engine(*target_, draft_.get(), slot_options(2));
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
  Engine fresh(*target_, draft_.get(), slot_options(1));
  expect_same(cached, fresh.generate(f.prompt, f.options, {}), 0);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// Two sampled requests on two slots at once, started together; returns the row counts of the
// target passes the two shared (each slot's rows: 1 for a plain step, γ + 1 for a verify pass).
// Retries (at most 3 times) until at least 4 passes were shared: whether the threads overlap is
// up to the scheduler.
std::vector<int64_t> shared_target_rows(LoadedModel& target, LoadedModel& draft, bool fixed_seed) {
  EngineOptions eo = slot_options(2);
  // Rows past BatchCost::flat_rows and draft steps dearer than any draft saves: γ 0 for the
  // capped requests. (The first flat_rows rows of a pass stay cheap whatever batch_row_cost
  // says, so with cheap drafts γ 1 would still pay at 2 slots: 2 x 2 rows.)
  eo.batch_row_cost = 10;
  Engine engine(target, &draft, eo);
  std::mutex mu;
  std::vector<int64_t> rows;
  engine.set_pass_observer([&](bool is_target, int64_t n_rows, int64_t sequences) {
    std::lock_guard lock(mu);
    if (is_target && sequences == 2) rows.push_back(n_rows);
  });
  for (int round = 0; round < 3 && rows.size() < 4; ++round) {
    rows.clear();
    std::latch start(2);
    std::vector<std::thread> threads;
    for (int32_t slot = 0; slot < 2; ++slot) {
      threads.emplace_back([&, slot] {
        GenerationOptions o;
        o.max_tokens = 60;
        o.ignore_eos = true;
        o.draft_max = 4;
        o.draft_length.draft_cost = 10;  // the seeded requests' γ is not adaptive: kept at 4
        o.sampling.temperature = 0.8f;
        o.sampling.seed = 7 + static_cast<uint64_t>(slot);
        o.fixed_seed = fixed_seed;
        const std::vector<int32_t> prompt{static_cast<int32_t>(41 + slot)};  // nothing to prefill
        start.arrive_and_wait();
        engine.generate(prompt, o, {}, {}, slot);
      });
    }
    for (auto& t : threads) t.join();
  }
  return rows;
}

TEST_F(BatchedSlots, OnlyASeededSampledRequestKeepsItsGammaInABatch) {
  // Unseeded: once both slots generate, both take plain steps (2 rows a pass); only a round
  // started while the other slot had not joined yet may verify more.
  const std::vector<int64_t> capped = shared_target_rows(*target_, *draft_, false);
  ASSERT_GE(capped.size(), 4u) << "the two slots never overlapped in 3 rounds";
  const auto plain = std::count(capped.begin(), capped.end(), 2);
  EXPECT_GE(plain, static_cast<int64_t>(capped.size()) / 2);
  // Seeded: every round keeps its 4 drafts whoever else runs (verify passes of 2 x 5 rows).
  const std::vector<int64_t> seeded = shared_target_rows(*target_, *draft_, true);
  ASSERT_GE(seeded.size(), 4u) << "the two slots never overlapped in 3 rounds";
  EXPECT_EQ(*std::max_element(seeded.begin(), seeded.end()), 10);
}

TEST_F(BatchedSlots, AlonePlainFirstTokenThenDrafts) {
  // A capped request alone on a multi-slot engine is not capped, but its first token is a plain
  // target step (its draft reads the prompt after it); a seeded one drafts from the first round.
  Engine engine(*target_, draft_.get(), slot_options(2));
  Engine alone(*target_, draft_.get(), slot_options(1));
  Request g = requests()[0];  // greedy
  g.options.draft_max = 4;
  g.options.max_tokens = 24;
  const GenerationResult greedy = engine.generate(g.prompt, g.options, {}, {}, 0);
  ASSERT_GE(greedy.stats.spec.log.size(), 2u);
  EXPECT_EQ(greedy.stats.spec.log[0].gamma, 0);
  EXPECT_EQ(greedy.stats.spec.log[1].gamma, 4);
  EXPECT_EQ(greedy.tokens, alone.generate(g.prompt, g.options, {}).tokens);
  Request r = requests()[1];  // sampled
  r.options.draft_max = 4;
  r.options.fixed_seed = true;
  const GenerationResult seeded = engine.generate(r.prompt, r.options, {}, {}, 1);
  ASSERT_FALSE(seeded.stats.spec.log.empty());
  EXPECT_EQ(seeded.stats.spec.log[0].gamma, 4);
  EXPECT_EQ(seeded.tokens, alone.generate(r.prompt, r.options, {}).tokens);
}

TEST_F(BatchedSlots, OneSlotWithDraftAfterFirstTokenReadsThePromptAfterTheFirstToken) {
  // `serve --parallel 1` (EngineOptions::draft_after_first_token): greedy and unseeded requests
  // take a plain first step, as batched slots do, and emit what `run` emits; a seeded one drafts
  // from the first round; a long prompt with a short answer is never read by the draft.
  EngineOptions serving = slot_options(1);
  serving.draft_after_first_token = true;
  Engine engine(*target_, draft_.get(), serving);
  Engine run(*target_, draft_.get(), slot_options(1));
  Request g = requests()[0];  // greedy
  g.options.draft_max = 4;
  g.options.max_tokens = 24;
  const GenerationResult greedy = engine.generate(g.prompt, g.options, {});
  ASSERT_GE(greedy.stats.spec.log.size(), 2u);
  EXPECT_EQ(greedy.stats.spec.log[0].gamma, 0);
  EXPECT_EQ(greedy.stats.spec.log[1].gamma, 4);
  const GenerationResult greedy_run = run.generate(g.prompt, g.options, {});
  EXPECT_EQ(greedy_run.stats.spec.log[0].gamma, 4);
  expect_same(greedy, greedy_run, 0);

  Request r = requests()[1];  // sampled
  r.options.draft_max = 4;
  r.options.fixed_seed = true;
  const GenerationResult seeded = engine.generate(r.prompt, r.options, {});
  ASSERT_FALSE(seeded.stats.spec.log.empty());
  EXPECT_EQ(seeded.stats.spec.log[0].gamma, 4);
  expect_same(seeded, run.generate(r.prompt, r.options, {}), 1);
  r.options.fixed_seed = false;
  const GenerationResult unseeded = engine.generate(r.prompt, r.options, {});
  ASSERT_FALSE(unseeded.stats.spec.log.empty());
  EXPECT_EQ(unseeded.stats.spec.log[0].gamma, 0);

  Request longer = requests()[7];  // 54 tokens
  longer.options.sampling.temperature = 0;
  longer.options.speculative = true;
  longer.options.max_tokens = 3;  // 54 > 4 x 2 tokens left after the first: never read
  const GenerationResult skipped = engine.generate(longer.prompt, longer.options, {});
  EXPECT_EQ(skipped.stats.spec.rounds, 0);
  EXPECT_EQ(skipped.tokens, run.generate(longer.prompt, longer.options, {}).tokens);
}

TEST_F(BatchedSlots, ALazyDraftSkipsALongPromptWithAShortAnswer) {
  // In a batch the draft reads a prompt only when it first drafts, and not at all when the
  // prompt outweighs what is left to generate (catch_up_pays): a 54-token prompt for 3 tokens
  // runs target-only, for 30 tokens it speculates; the text is the same as alone either way.
  Engine engine(*target_, draft_.get(), slot_options(2));
  Engine alone(*target_, draft_.get(), slot_options(1));
  Request r = requests()[7];  // 54 tokens, greedy after the override
  r.options.sampling.temperature = 0;
  r.options.speculative = true;
  for (int32_t n : {3, 30}) {
    r.options.max_tokens = n;
    const GenerationResult got = engine.generate(r.prompt, r.options, {}, {}, n == 3 ? 0 : 1);
    EXPECT_EQ(got.tokens, alone.generate(r.prompt, r.options, {}).tokens) << n;
    if (n == 3) {
      EXPECT_EQ(got.stats.spec.rounds, 0);
    } else {
      EXPECT_GT(got.stats.spec.rounds, 0);
    }
  }
}

TEST_F(BatchedSlots, ATargetOnlyTurnLeavesTheTargetsPrefixForASpeculativeOne) {
  // The draft's cache may hold less than the target's: a speculative follow-up to a target-only
  // turn reuses the target's whole prefix and lets the draft read what it lacks.
  Engine engine(*target_, draft_.get(), slot_options(2));
  Request r = requests()[0];
  r.options.speculative = false;
  engine.generate(r.prompt, r.options, {}, {}, 1);
  std::vector<int32_t> follow = engine.slot_history(1);
  follow.push_back(60);
  r.options.speculative = true;
  const GenerationResult cached = engine.generate(follow, r.options, {}, {}, 1);
  EXPECT_EQ(cached.stats.cached_tokens, static_cast<int32_t>(follow.size()) - 2);
  EXPECT_GT(cached.stats.spec.rounds, 0);
  Engine fresh(*target_, draft_.get(), slot_options(1));
  expect_same(cached, fresh.generate(follow, r.options, {}), 0);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// A prompt of a shared 20-token "system prompt" and a tail of its own.
std::vector<int32_t> with_system_prompt(int32_t tail_start, int32_t tail_len) {
  std::vector<int32_t> p;
  for (int32_t t = 0; t < 20; ++t) p.push_back(50 + (t * 7) % 90);
  for (int32_t t = 0; t < tail_len; ++t) p.push_back(tail_start + t);
  return p;
}

GenerationOptions greedy_spec(int32_t max_tokens) {
  GenerationOptions o;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  o.draft_max = 3;
  o.logprobs = 2;
  o.sampling.temperature = 0;
  return o;
}

TEST_F(BatchedSlots, APrefixAnotherSlotHoldsIsCopiedAndChangesNoBit) {
  Engine engine(*target_, draft_.get(), slot_options(3));
  Engine alone(*target_, draft_.get(), slot_options(1));
  const std::vector<int32_t> a = with_system_prompt(150, 6), b = with_system_prompt(170, 4);
  const GenerationResult ga = engine.generate(a, greedy_spec(12), {}, {}, 0);
  EXPECT_EQ(ga.stats.shared_tokens, 0);
  expect_same(ga, alone.generate(a, greedy_spec(12), {}), 0);

  // Slot 1 has never run: the system prompt comes from slot 0.
  const GenerationResult gb = engine.generate(b, greedy_spec(12), {}, {}, 1);
  EXPECT_EQ(gb.stats.cached_tokens, 20);
  EXPECT_EQ(gb.stats.shared_tokens, 20);
  EXPECT_GT(gb.stats.spec.rounds, 0);
  expect_same(gb, alone.generate(b, greedy_spec(12), {}), 1);

  // A follow-up turn to slot 0's conversation on slot 2: slot 0's whole history (prompt and
  // answer, all but the pending last token) is copied, the draft's entries with it, and a
  // sampled request gets the same text too.
  std::vector<int32_t> follow = engine.slot_history(0);
  follow.insert(follow.end(), {60, 61, 62});
  GenerationOptions sampled = greedy_spec(16);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 11;
  const GenerationResult gf = engine.generate(follow, sampled, {}, {}, 2);
  EXPECT_EQ(gf.stats.shared_tokens, static_cast<int32_t>(a.size() + ga.tokens.size()) - 1);
  EXPECT_EQ(gf.stats.cached_tokens, gf.stats.shared_tokens);
  expect_same(gf, alone.generate(follow, sampled, {}), 2);

  // Slot 1's own prefix (its history) is longer than what the others offer: nothing is copied.
  std::vector<int32_t> again = engine.slot_history(1);
  again.push_back(61);
  const GenerationResult gg = engine.generate(again, greedy_spec(8), {}, {}, 1);
  EXPECT_EQ(gg.stats.shared_tokens, 0);
  EXPECT_EQ(gg.stats.cached_tokens, static_cast<int32_t>(again.size()) - 2);
  expect_same(gg, alone.generate(again, greedy_spec(8), {}), 3);
}

// A scoring request (prompt_logprobs) reads its whole prompt with logits: it copies no prefix
// another slot offers, and what its slot offered before is withdrawn before its caches change,
// so a later request copies from a slot that still holds the rows.
TEST_F(BatchedSlots, AScoringRequestCopiesNoPrefixAndLeavesOthersTheirs) {
  Engine engine(*target_, draft_.get(), slot_options(3));
  Engine alone(*target_, draft_.get(), slot_options(1));
  const std::vector<int32_t> a = with_system_prompt(150, 6), b = with_system_prompt(170, 4);
  engine.generate(a, greedy_spec(6), {}, {}, 0);
  GenerationOptions score = greedy_spec(4);
  score.prompt_logprobs = 2;
  const GenerationResult sb = engine.generate(b, score, {}, {}, 1);
  EXPECT_EQ(sb.stats.cached_tokens, 0);
  EXPECT_EQ(sb.stats.shared_tokens, 0);
  ASSERT_EQ(sb.prompt_logprobs.size(), b.size() - 1);
  expect_same(sb, alone.generate(b, score, {}), 0);
  // Slot 0 scores a now: slot 2 finds the system prompt nowhere (slot 0's offer was withdrawn
  // when it began scoring; a scoring request offers nothing after it either), so it reads it.
  engine.generate(a, score, {}, {}, 0);
  const GenerationResult gb = engine.generate(b, greedy_spec(6), {}, {}, 2);
  EXPECT_EQ(gb.stats.shared_tokens, 0);
  expect_same(gb, alone.generate(b, greedy_spec(6), {}), 1);
  // A slot's own history after scoring is its cache as usual: the follow-up reuses it.
  std::vector<int32_t> follow = engine.slot_history(1);
  follow.push_back(61);
  const GenerationResult gf = engine.generate(follow, greedy_spec(4), {}, {}, 1);
  EXPECT_GE(gf.stats.cached_tokens, static_cast<int32_t>(follow.size()) - 2);
  expect_same(gf, alone.generate(follow, greedy_spec(4), {}), 2);
}

TEST_F(BatchedSlots, PrefixSharingCanBeTurnedOff) {
  EngineOptions eo = slot_options(2);
  eo.share_prefixes = false;
  Engine engine(*target_, draft_.get(), eo);
  engine.generate(with_system_prompt(150, 6), greedy_spec(6), {}, {}, 0);
  const GenerationResult gb =
      engine.generate(with_system_prompt(170, 4), greedy_spec(6), {}, {}, 1);
  EXPECT_EQ(gb.stats.cached_tokens, 0);
  EXPECT_EQ(gb.stats.shared_tokens, 0);
}

TEST_F(BatchedSlots, ARunningSlotOffersItsPromptWhileItGenerates) {
  // Slot 1 starts while slot 0 is still generating (or just after: the threads decide), and
  // copies the prompt slot 0 read, with both generations batched together from then on.
  Engine engine(*target_, draft_.get(), slot_options(2));
  Engine alone(*target_, draft_.get(), slot_options(1));
  const std::vector<int32_t> a = with_system_prompt(150, 6), b = with_system_prompt(170, 4);
  std::latch first_text(1);
  bool signalled = false;
  GenerationResult ga, gb;
  std::thread ta([&] {
    ga = engine.generate(
        a, greedy_spec(60),
        [&](std::string_view) {
          if (!signalled) {
            signalled = true;
            first_text.count_down();
          }
          return true;
        },
        {}, 0);
    if (!signalled) first_text.count_down();
  });
  std::thread tb([&] {
    first_text.wait();
    gb = engine.generate(b, greedy_spec(20), {}, {}, 1);
  });
  ta.join();
  tb.join();
  EXPECT_EQ(gb.stats.shared_tokens, 20);
  expect_same(ga, alone.generate(a, greedy_spec(60), {}), 0);
  expect_same(gb, alone.generate(b, greedy_spec(20), {}), 1);
}

// A prompt of a shared n-token head and a tail of its own.
std::vector<int32_t> with_long_head(int32_t n, int32_t tail_start, int32_t tail_len) {
  std::vector<int32_t> p;
  for (int32_t t = 0; t < n; ++t) p.push_back(40 + (t * 17) % 190);
  for (int32_t t = 0; t < tail_len; ++t) p.push_back(tail_start + t);
  return p;
}

// Runs `first` and `second` on threads of their own, `second` once `first`'s first target pass
// has run: that pass's observer waits until `second` is about to start, then `settle` more (for
// it to get somewhere meanwhile), so that `second` starts while `first` is still reading.
void start_second_at_first_target_pass(Engine& engine, std::chrono::milliseconds settle,
                                       const std::function<void()>& first,
                                       const std::function<void()>& second) {
  std::latch second_starting(1);
  std::atomic<bool> waiting{true};
  engine.set_pass_observer([&](bool target, int64_t, int64_t) {
    if (target && waiting.exchange(false)) {
      second_starting.wait();
      std::this_thread::sleep_for(settle);
    }
  });
  std::thread a(first);
  std::thread b([&] {
    while (waiting.load()) std::this_thread::yield();
    second_starting.count_down();
    second();
  });
  a.join();
  b.join();
  engine.set_pass_observer({});
}

TEST_F(BatchedSlots, ASlotStartingWhileAnotherReadsTheSamePromptHeadWaitsAndCopiesIt) {
  // Slot 1 starts while slot 0 is reading a 100-token head both prompts share, in chunks of 4:
  // instead of computing the head a second time in the same passes, slot 1 waits for slot 0's
  // rows and copies them (all of them: slot 0 offers them chunk by chunk, and the head ends on
  // a chunk's edge). Slot 0's first pass waits until slot 1 is about to start.
  EngineOptions eo = slot_options(2);
  eo.prefill_chunk = 4;
  Engine engine(*target_, draft_.get(), eo);
  Engine alone(*target_, draft_.get(), slot_options(1));
  const std::vector<int32_t> a = with_long_head(100, 150, 6), b = with_long_head(100, 170, 4);
  GenerationOptions sampled = greedy_spec(12);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 5;
  GenerationResult ga, gb;
  start_second_at_first_target_pass(
      engine, std::chrono::milliseconds(0),
      [&] { ga = engine.generate(a, greedy_spec(12), {}, {}, 0); },
      [&] { gb = engine.generate(b, sampled, {}, {}, 1); });
  EXPECT_EQ(ga.stats.shared_tokens, 0);
  EXPECT_EQ(gb.stats.shared_tokens, 100);
  expect_same(ga, alone.generate(a, greedy_spec(12), {}), 0);
  expect_same(gb, alone.generate(b, sampled, {}), 1);
}

TEST_F(BatchedSlots, ADraftCopiesPromptRowsAnotherSlotsDraftReadSinceTheRequestStarted) {
  // Slot 0 read the head with its target alone; slot 1 speculated on it, so its draft read the
  // head too. Slot 2's request copies the target's rows from slot 0 (the first slot offering
  // the longest prefix) and no draft rows from it; as its draft reads the prompt it copies the
  // head's rows from slot 1's draft. A seeded sampled request shows any wrong draft entry.
  Engine engine(*target_, draft_.get(), slot_options(3));
  Engine alone(*target_, draft_.get(), slot_options(1));
  GenerationOptions plain = greedy_spec(6);
  plain.speculative = false;
  engine.generate(with_long_head(30, 150, 0), plain, {}, {}, 0);
  const GenerationResult g1 =
      engine.generate(with_long_head(30, 160, 3), greedy_spec(40), {}, {}, 1);
  EXPECT_EQ(g1.stats.shared_tokens, 30);
  EXPECT_EQ(g1.stats.draft_shared_tokens, 0);
  EXPECT_GT(g1.stats.spec.rounds, 0);  // its draft read the prompt
  GenerationOptions sampled = greedy_spec(12);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 9;
  const std::vector<int32_t> c = with_long_head(30, 170, 3);
  const GenerationResult g2 = engine.generate(c, sampled, {}, {}, 2);
  EXPECT_EQ(g2.stats.shared_tokens, 30);
  EXPECT_EQ(g2.stats.draft_shared_tokens, 30);
  expect_same(g2, alone.generate(c, sampled, {}), 2);
}

TEST_F(BatchedSlots, ALazyDraftReadsAPrefixThatCameBackEvenForAShortAnswer) {
  // One slot, drafts after the first token: a 64-token prompt for 8 tokens is not worth the
  // draft's reading (lag > 4 x tokens left) and runs without drafts; the next request reuses
  // the prompt's 60-token head, which counts as recurring, so its draft reads it now (and the
  // requests after it find it in the draft's cache). The text is what it is alone either way.
  EngineOptions eo = slot_options(1);
  eo.draft_after_first_token = true;
  Engine engine(*target_, draft_.get(), eo);
  Engine alone(*target_, draft_.get(), slot_options(1));
  const std::vector<int32_t> a = with_long_head(60, 150, 4), b = with_long_head(60, 170, 4);
  const GenerationResult ga = engine.generate(a, greedy_spec(8), {});
  EXPECT_EQ(ga.stats.spec.rounds, 0);
  const GenerationResult gb = engine.generate(b, greedy_spec(8), {});
  EXPECT_EQ(gb.stats.cached_tokens, 60);
  EXPECT_GT(gb.stats.spec.rounds, 0);
  expect_same(gb, alone.generate(b, greedy_spec(8), {}), 1);
}

TEST_F(BatchedSlots, OneDraftReadsAPromptHeadTwoSlotsStartOnAndTheOtherCopiesIt) {
  // Slot 0 read a 60-token head with its target alone. Slots 1 and 2 start on it with tails of
  // their own and copy its target rows. Slot 1's first pass waits until slot 2 is about to
  // start, so that slot 2 joins the batch in time for their prefills to end in one pass (slot 1
  // has 5 rows to read, slot 2 has 2, in chunks of 4) and their drafts to start reading the
  // head in the same iteration (120 tokens to generate make the read pay for two slots): the
  // first to claim it reads it, and the other drafts nothing until it can copy those rows (all
  // but less than a prefill chunk of them).
  EngineOptions eo = slot_options(3);
  eo.prefill_chunk = 4;
  Engine engine(*target_, draft_.get(), eo);
  Engine alone(*target_, draft_.get(), slot_options(1));
  GenerationOptions plain = greedy_spec(4);
  plain.speculative = false;
  engine.generate(with_long_head(60, 150, 0), plain, {}, {}, 0);
  const std::vector<int32_t> b = with_long_head(60, 160, 6), c = with_long_head(60, 170, 3);
  GenerationResult gb, gc;
  start_second_at_first_target_pass(  // slot 2 joins during the 50 ms
      engine, std::chrono::milliseconds(50),
      [&] { gb = engine.generate(b, greedy_spec(120), {}, {}, 1); },
      [&] { gc = engine.generate(c, greedy_spec(120), {}, {}, 2); });
  EXPECT_EQ(gb.stats.shared_tokens, 60);
  EXPECT_EQ(gc.stats.shared_tokens, 60);
  EXPECT_GT(gb.stats.spec.rounds, 0);
  EXPECT_GT(gc.stats.spec.rounds, 0);
  const int32_t copied = std::max(gb.stats.draft_shared_tokens, gc.stats.draft_shared_tokens);
  EXPECT_GT(copied, 60 - 4);
  EXPECT_EQ(std::min(gb.stats.draft_shared_tokens, gc.stats.draft_shared_tokens), 0);
  expect_same(gb, alone.generate(b, greedy_spec(120), {}), 1);
  expect_same(gc, alone.generate(c, greedy_spec(120), {}), 2);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

TEST_F(BatchedSlots, ASeededDraftReadingFirstOffersNoStaleTargetRows) {
  // Slot 0 held another text (its target's rows for it stay in the cache until the target reads
  // the new prompt). A seeded sampled request's draft reads its prompt before its target does;
  // the rows the slot offers meanwhile must be the new prompt's, not the old text's at the same
  // positions. Slot 1 starts on the same head while slot 0's target is still reading (slot 0's
  // first target pass waits for it) and copies whatever slot 0 offers: its greedy text shows any
  // stale row. (Most likely what changed a seeded request's text once in the CI run of
  // 2026-12-06.)
  EngineOptions eo = slot_options(2);
  eo.prefill_chunk = 4;
  Engine engine(*target_, draft_.get(), eo);
  Engine alone(*target_, draft_.get(), slot_options(1));
  GenerationOptions plain = greedy_spec(4);
  plain.speculative = false;
  engine.generate(with_long_head(50, 200, 0), plain, {}, {}, 0);  // nothing in common with a, b
  const std::vector<int32_t> a = with_system_prompt(150, 20), b = with_system_prompt(170, 4);
  GenerationOptions sampled = greedy_spec(12);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 21;
  GenerationResult ga, gb;
  start_second_at_first_target_pass(  // slot 1 copies during the 50 ms
      engine, std::chrono::milliseconds(50), [&] { ga = engine.generate(a, sampled, {}, {}, 0); },
      [&] { gb = engine.generate(b, greedy_spec(12), {}, {}, 1); });
  EXPECT_EQ(ga.stats.cached_tokens, 0);
  EXPECT_GT(ga.stats.spec.rounds, 0);
  expect_same(ga, alone.generate(a, sampled, {}), 0);
  expect_same(gb, alone.generate(b, greedy_spec(12), {}), 1);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// One request of the traffic below, as a slot's thread sent it.
struct Sent {
  std::vector<int32_t> prompt;
  GenerationOptions options;
  GenerationResult result;
  bool comparable = true;  // false: an unseeded sampled request (a fresh draw; γ follows the batch)
};

TEST_F(BatchedSlots, MixedTrafficOnSharedHeadsGivesEachRequestItsTextAlone) {
  // Three slots, each sending a run of requests with random kinds (greedy, seeded, unseeded
  // sampled, without speculation; with and without hybrid prompt lookup and the adaptive draft
  // length, as `serve` runs them by default), prompts on heads the slots share (two of them
  // sharing their first 20 tokens), follow-up turns of the slot's own history, and random
  // starts, so that slots read, offer, copy and drop prompt rows while others generate; the
  // draft scores a vocabulary subset of its own per request; some follow a grammar (from their
  // start or after a trigger) among unconstrained ones; some run the target's LoRA adapter at
  // their own scale (its prompt rows must not reach a request at another scale); some are
  // cancelled. The plan is fixed per slot; the interleaving is up to the threads. Every greedy
  // and seeded request's output must be what it is alone: a stale or wrong copied row, or a draw
  // that follows the batch, shows.
  EngineOptions eo = slot_options(3);
  eo.prefill_chunk = 4;
  eo.draft_vocab = 100;  // of 300: each prompt's and answer's own tokens join the subset
  // The fixture's target with one adapter (default scale 1).
  testing::TinyModelSpec spec;
  spec.arch = "qwen2";
  LoadedModel target =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("mixed-t.gguf")));
  const std::vector<std::pair<std::string, float>> adapter = {
      {testing::write_tiny_lora(spec, {}, testing::temp_path("mixed-l.gguf")), 1.0f}};
  add_lora_files(*target.model, adapter);
  Engine engine(target, draft_.get(), eo);
  // Three heads: the second shares the first's first 20 tokens, the third nothing.
  const std::vector<int32_t> first = with_long_head(40, 0, 0);
  std::vector<int32_t> second(first.begin(), first.begin() + 20);
  for (int32_t t = 0; t < 20; ++t) second.push_back(45 + (t * 11) % 170);
  const std::vector<std::vector<int32_t>> heads = {first, second, with_system_prompt(150, 4)};
  // Passes that take a while (as a real model's do) leave the threads time to interleave.
  engine.set_pass_observer(
      [](bool, int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(300)); });
  // A bounded JSON shape (as in grammar_constraint_test.cpp), so that constrained texts end.
  const auto grammar = Grammar::parse(R"(
root  ::= "{" key ": " value "}"
key   ::= "\"" [a-e] [a-e]? "\""
value ::= [0-9] [0-9]? | "true" | "null"
)");
  constexpr int kPerSlot = 6;
  std::atomic<int> cancelled{0}, constrained{0}, scaled{0};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<Sent>> sent(3);
    std::vector<std::thread> threads;
    std::latch start(3);
    for (int32_t slot = 0; slot < 3; ++slot) {
      threads.emplace_back([&, slot] {
        std::mt19937 rng(static_cast<uint32_t>(100 * round + slot));
        std::mt19937 knobs(static_cast<uint32_t>(7 + 100 * round + slot));  // the drafters'
        start.arrive_and_wait();
        for (int i = 0; i < kPerSlot; ++i) {
          Sent r;
          std::vector<int32_t> history = engine.slot_history(slot);
          if (!history.empty() && history.size() < 180 && rng() % 3 == 0) {
            r.prompt = std::move(history);  // a follow-up turn
          } else {
            r.prompt = heads[rng() % heads.size()];
          }
          for (uint32_t t = 0, n = 1 + rng() % 6; t < n; ++t)
            r.prompt.push_back(static_cast<int32_t>(60 + rng() % 150));
          r.options = greedy_spec(6 + static_cast<int32_t>(rng() % 12));
          r.options.hybrid = knobs() % 2 == 0;
          r.options.draft_length.adaptive = knobs() % 2 == 0;
          // Structured output: a grammar masks this slot's rows (target's and draft's) in
          // passes it shares with unconstrained slots, from its start or after a trigger.
          if (const uint32_t g = knobs() % 4; g == 0) {
            r.options.grammar = grammar;
          } else if (g == 1) {
            r.options.grammar = grammar;
            r.options.grammar_trigger = "a";
          }
          // The adapter at the default scale, off, or at a scale of the request's own.
          if (const uint32_t l = knobs() % 4; l == 1) {
            r.options.lora_scales = std::vector<float>{0.0f};
          } else if (l >= 2) {
            r.options.lora_scales = std::vector<float>{l == 2 ? 0.5f : -1.0f};
          }
          switch (rng() % 4) {
            case 0:
              break;  // greedy, speculative
            case 1:
              r.options.speculative = false;
              break;
            default:
              r.options.sampling.temperature = 0.9f;
              r.options.sampling.seed = rng();
              r.options.fixed_seed = rng() % 3 != 0;
              r.comparable = r.options.fixed_seed;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
          // Some of the unseeded ones are cancelled after a few pieces of text, as a client that
          // goes away; the rows their slot offered and the history it keeps must still hold.
          const uint32_t cancel_after = !r.comparable && knobs() % 2 == 0 ? 1 + knobs() % 4 : 0;
          uint32_t pieces = 0;
          const TextCallback on_text = [&](std::string_view) {
            return cancel_after == 0 || ++pieces < cancel_after;
          };
          r.result = engine.generate(r.prompt, r.options, on_text, {}, slot);
          if (r.result.finish == FinishReason::Cancelled) ++cancelled;
          if (r.options.grammar && r.comparable) ++constrained;
          if (r.options.lora_scales && r.comparable) ++scaled;
          sent[static_cast<size_t>(slot)].push_back(std::move(r));
        }
      });
    }
    for (auto& t : threads) t.join();
    EngineOptions one = eo;
    one.n_slots = 1;
    Engine alone(target, draft_.get(), one);
    for (size_t slot = 0; slot < 3; ++slot) {
      for (size_t i = 0; i < sent[slot].size(); ++i) {
        const Sent& r = sent[slot][i];
        if (!r.comparable) continue;
        SCOPED_TRACE("round " + std::to_string(round) + " slot " + std::to_string(slot));
        expect_same(r.result, alone.generate(r.prompt, r.options, {}), i);
        if (r.options.grammar && r.options.grammar_trigger.empty()) {
          GrammarState state(grammar);  // the constraint held: the text is the grammar's
          EXPECT_TRUE(state.accept(r.result.text)) << i << ": " << r.result.text;
          if (r.result.finish == FinishReason::Stop) {
            EXPECT_TRUE(state.complete()) << i;
          }
        }
      }
    }
  }
  EXPECT_GT(cancelled.load(), 0);    // the plan cancels some
  EXPECT_GT(constrained.load(), 2);  // and compares some constrained ones
  EXPECT_GT(scaled.load(), 2);       // and some at scales of their own
}

}  // namespace
}  // namespace specdec
