// A request's own LoRA scales (GenerationOptions::lora_scales, llama-server's per-request
// `lora`): its text is the target's at those scales, speculative or not, alone or sharing passes
// with requests at other scales; cached prompt rows are reused and shared only at the scales they
// were computed at, and slot files carry them.
#include <gtest/gtest.h>

#include <cmath>
#include <latch>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/slot_file.h"
#include "model/lora.h"
#include "support/tiny_lora.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

class EngineLora : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    spec.arch = "qwen2";
    target_path_ = testing::write_tiny_model(spec, testing::temp_path("lt.gguf"));
    testing::TinyLoraSpec second;
    second.seed = 11;
    second.matrices = {"blk.0.attn_k.weight", "blk.1.ffn_gate.weight", "blk.0.ffn_down.weight"};
    adapters_ = {testing::write_tiny_lora(spec, {}, testing::temp_path("la.gguf")),
                 testing::write_tiny_lora(spec, second, testing::temp_path("lb.gguf"))};
    target_ = std::make_unique<LoadedModel>(adapted({1.0f, 1.0f}));
    spec.seed = 5;
    spec.n_layer = 1;
    draft_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("ld.gguf"))));
  }

  // The target loaded with both adapters at these scales (none: the base model).
  LoadedModel adapted(const std::vector<float>& scales) const {
    LoadedModel m = LoadedModel::load(target_path_);
    std::vector<std::pair<std::string, float>> files;
    for (size_t i = 0; i < scales.size(); ++i) files.emplace_back(adapters_[i], scales[i]);
    add_lora_files(*m.model, files);
    return m;
  }

  // What the target alone (no draft, one slot) generates at these scales.
  std::vector<int32_t> alone(const std::vector<float>& scales, const std::vector<int32_t>& prompt,
                             const GenerationOptions& o) const {
    LoadedModel m = adapted(scales);
    EngineOptions eo;
    eo.n_ctx = 256;
    Engine engine(m, nullptr, eo);
    GenerationOptions plain = o;
    plain.lora_scales.reset();
    return engine.generate(prompt, plain, {}).tokens;
  }

  std::string target_path_;
  std::vector<std::string> adapters_;
  std::unique_ptr<LoadedModel> target_, draft_;
};

std::vector<int32_t> prompt_of(int32_t start, int32_t n) {
  std::vector<int32_t> p;
  for (int32_t t = 0; t < 20; ++t) p.push_back(50 + (t * 7) % 90);  // a shared head
  for (int32_t t = 0; t < n; ++t) p.push_back(start + t);
  return p;
}

GenerationOptions greedy(std::vector<float> scales) {
  GenerationOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  o.draft_max = 3;
  o.sampling.temperature = 0;
  if (!scales.empty()) o.lora_scales = std::move(scales);
  return o;
}

TEST_F(EngineLora, ARequestRunsAtItsOwnScalesAndReusesOnlyRowsComputedAtThem) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_.get(), eo);
  EXPECT_EQ(engine.lora_scales(), (std::vector<float>{1.0f, 1.0f}));
  const std::vector<int32_t> p = prompt_of(150, 6);

  const GenerationResult loaded = engine.generate(p, greedy({}), {});
  EXPECT_GT(loaded.stats.spec.rounds, 0);
  EXPECT_EQ(loaded.tokens, alone({1.0f, 1.0f}, p, greedy({})));
  const std::vector<int32_t> base = alone({}, p, greedy({}));
  EXPECT_NE(loaded.tokens, base) << "the adapters must change the text for the test to mean it";

  // Scales 0: the base model's text, its prompt read again (the slot's rows were at 1, 1).
  const GenerationResult off = engine.generate(p, greedy({0.0f, 0.0f}), {});
  EXPECT_EQ(off.tokens, base);
  EXPECT_EQ(off.stats.cached_tokens, 0);

  const GenerationResult half = engine.generate(p, greedy({0.5f, -1.0f}), {});
  EXPECT_EQ(half.tokens, alone({0.5f, -1.0f}, p, greedy({})));
  EXPECT_EQ(half.stats.cached_tokens, 0);
  // The next turn at the same scales reuses the conversation so far.
  std::vector<int32_t> follow = engine.slot_history(0);
  follow.insert(follow.end(), {60, 61});
  // What a server's slot choice sees: the history at these scales, nothing at others.
  EXPECT_EQ(engine.reusable_prefix(0, follow, std::vector<float>{0.5f, -1.0f}), follow.size() - 2);
  EXPECT_EQ(engine.reusable_prefix(0, follow, std::nullopt), 0u);
  EXPECT_EQ(engine.reusable_prefix(0, follow, std::vector<float>{0.5f}), 0u);
  const GenerationResult next = engine.generate(follow, greedy({0.5f, -1.0f}), {});
  EXPECT_EQ(next.stats.cached_tokens, static_cast<int32_t>(follow.size()) - 3);
  EXPECT_EQ(next.tokens, alone({0.5f, -1.0f}, follow, greedy({})));

  // New default scales (POST /lora-adapters) serve the requests that give none.
  engine.set_lora_scales(std::vector<float>{0.0f, 0.0f});
  EXPECT_EQ(engine.lora_scales(), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(engine.generate(p, greedy({}), {}).tokens, base);

  // Scales that do not fit the adapters are refused, naming them.
  EXPECT_THROW(engine.generate(p, greedy({1.0f}), {}), Error);
  EXPECT_THROW(engine.generate(p, greedy({1.0f, std::nanf("")}), {}), Error);
  EXPECT_THROW(engine.set_lora_scales(std::vector<float>{1.0f, 1.0f, 1.0f}), Error);
  EXPECT_THROW(engine.set_lora_scales(std::vector<float>{INFINITY, 1.0f}), Error);
  EXPECT_EQ(engine.lora_scales(), (std::vector<float>{0.0f, 0.0f}));
}

TEST_F(EngineLora, SlotsAtOtherScalesSharePassesButNotPromptRows) {
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.n_slots = 3;
  eo.n_threads = 2;
  eo.prefill_chunk = 4;
  Engine engine(*target_, draft_.get(), eo);
  std::mutex mu;
  int64_t shared_passes = 0;
  engine.set_pass_observer([&](bool target, int64_t, int64_t sequences) {
    const std::lock_guard lock(mu);
    if (target && sequences > 1) ++shared_passes;
  });
  const std::vector<std::vector<float>> scales = {{1.0f, 1.0f}, {0.0f, 0.0f}, {0.25f, 2.0f}};
  std::vector<std::vector<int32_t>> want;
  for (size_t s = 0; s < scales.size(); ++s) {
    want.push_back(
        alone(scales[s], prompt_of(150 + 10 * static_cast<int32_t>(s), 5), greedy(scales[s])));
  }
  // Three requests at three scales at once, each twice in a row: each gets its text alone. The
  // threads start together, but on a loaded machine one can finish its (millisecond) requests
  // before another starts, so a round whose passes happened not to overlap is run again, at
  // most 8 rounds; every round's texts are checked.
  for (int round = 0; round < 8 && shared_passes == 0; ++round) {
    for (int32_t s = 0; s < 3; ++s) engine.erase_slot(s);
    std::vector<std::vector<std::vector<int32_t>>> got(3);
    std::latch start(3);
    std::vector<std::thread> threads;
    for (int32_t s = 0; s < 3; ++s) {
      threads.emplace_back([&, s] {
        start.arrive_and_wait();
        for (int again = 0; again < 2; ++again) {
          const std::vector<float>& mine = scales[static_cast<size_t>(s)];
          got[static_cast<size_t>(s)].push_back(
              engine.generate(prompt_of(150 + 10 * s, 5), greedy(mine), {}, {}, s).tokens);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (size_t s = 0; s < 3; ++s) {
      for (const std::vector<int32_t>& tokens : got[s]) EXPECT_EQ(tokens, want[s]) << "slot " << s;
    }
  }
  EXPECT_GT(shared_passes, 0) << "the slots never shared a pass in 8 rounds";

  // Slot 0 holds the shared head at 1, 1 and slot 1 at 0, 0: a request at 0.25, 2 on slot 2
  // copies neither (its own rows are at its scales, read by itself); one at 0, 0 copies slot 1's.
  engine.erase_slot(2);
  const std::vector<int32_t> p = prompt_of(200, 4);
  const GenerationResult other = engine.generate(p, greedy(scales[2]), {}, {}, 2);
  EXPECT_EQ(other.stats.shared_tokens, 0);
  EXPECT_EQ(other.tokens, alone(scales[2], p, greedy({})));
  engine.erase_slot(2);
  const GenerationResult same = engine.generate(p, greedy(scales[1]), {}, {}, 2);
  EXPECT_EQ(same.stats.shared_tokens, 20);
  EXPECT_EQ(same.tokens, alone(scales[1], p, greedy({})));
}

TEST_F(EngineLora, ASlotFileHoldsRowsAtTheScalesTheyWereComputedAt) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_.get(), eo);
  const std::vector<int32_t> p = prompt_of(150, 6);
  engine.generate(p, greedy({0.5f, 0.0f}), {});
  const std::string path = testing::temp_path("lora-slot.bin");
  const int32_t saved = engine.save_slot(0, path).tokens;
  EXPECT_GT(saved, 0);
  std::vector<int32_t> follow = engine.slot_history(0);
  follow.push_back(61);
  // The file says its rows are at 0.5, 0 (the default scales are 1, 1): restored at those, a
  // request at them reuses the rows, and gets what the target alone at them gives.
  engine.erase_slot(0);
  EXPECT_EQ(engine.restore_slot(0, path).tokens, saved);
  const GenerationResult next = engine.generate(follow, greedy({0.5f, 0.0f}), {});
  EXPECT_EQ(next.stats.cached_tokens, saved);
  EXPECT_EQ(next.tokens, alone({0.5f, 0.0f}, follow, greedy({})));
  // For a request at the default scales they are another model's rows: none is reused.
  engine.restore_slot(0, path);
  EXPECT_EQ(engine.reusable_prefix(0, follow, std::nullopt), 0u);
  const GenerationResult other = engine.generate(follow, greedy({}), {});
  EXPECT_EQ(other.stats.cached_tokens, 0);
  EXPECT_EQ(other.tokens, alone({1.0f, 1.0f}, follow, greedy({})));
  // A file at scales of another count (another set of adapters) is refused before the slot
  // changes.
  const std::vector<int32_t> held = engine.slot_history(0);
  KvCache cache(target_->model->config(), 8, {});
  const std::string three = testing::temp_path("lora-slot-3.bin");
  write_slot_file(three, {}, {&cache, 1}, {}, 0, 0, std::vector<float>{1.0f, 1.0f, 1.0f});
  try {
    engine.restore_slot(0, three);
    ADD_FAILURE() << "a slot file at 3 scales was restored for 2 adapters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LoRA"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.slot_history(0), held);
}

}  // namespace
}  // namespace specdec
