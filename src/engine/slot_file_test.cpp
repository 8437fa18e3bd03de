// Engine::save_slot / restore_slot / erase_slot and the slot file (engine/slot_file.h): a
// restored slot continues exactly as the slot that read the text itself would, in another
// engine too; a file that does not fit (another model, other cache types, corrupt, truncated,
// too long) is refused, leaving the slot as it was or, once entries were read, empty.
#include "engine/slot_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "common/stream_hash.h"
#include "engine/engine.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int t = 0; t < n; ++t) p.push_back(static_cast<int32_t>(40 + (t * 17 + salt) % 220));
  return p;
}

GenerationOptions greedy(int32_t max_tokens) {
  GenerationOptions go;
  go.max_tokens = max_tokens;
  go.sampling.temperature = 0;
  go.ignore_eos = true;
  go.draft_max = 3;
  return go;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

class SlotFile : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    spec.arch = "qwen2";
    target_ = load(spec, "slot_t.gguf");
    spec.seed = 2;
    other_target_ = load(spec, "slot_t2.gguf");  // the same shapes, other weights
    spec.seed = 5;
    spec.n_layer = 1;
    draft_ = load(spec, "slot_d.gguf");
    spec.seed = 6;
    other_draft_ = load(spec, "slot_d2.gguf");
  }
  static std::unique_ptr<LoadedModel> load(const testing::TinyModelSpec& spec,
                                           const std::string& name) {
    return std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path(name))));
  }
  static EngineOptions options(int32_t n_slots = 1, KvTypes types = {}) {
    EngineOptions eo;
    eo.n_ctx = 128;
    eo.n_slots = n_slots;
    eo.kv_types = types;
    return eo;
  }
  std::unique_ptr<LoadedModel> target_, other_target_, draft_, other_draft_;
  const std::string path_ = testing::temp_path("slot.bin");
};

TEST_F(SlotFile, ARestoredSlotGoesOnAsTheSlotThatReadTheText) {
  const std::vector<int32_t> first = prompt_of(40, 1);
  // The slot reads a prompt, answers, and is saved with its answer.
  Engine writer(*target_, draft_.get(), options());
  const GenerationResult answer = writer.generate(first, greedy(12), {});
  const Engine::SlotFileStats saved = writer.save_slot(0, path_);
  EXPECT_GE(saved.tokens, 40 + 11);  // the prompt and the answer's committed rows
  // All of the history whose rows the cache holds (the last token may still be pending).
  const auto n_history = static_cast<int32_t>(writer.slot_history(0).size());
  EXPECT_LE(saved.tokens, n_history);
  EXPECT_GE(saved.tokens, n_history - 1);
  EXPECT_GT(saved.draft_tokens, 0);
  EXPECT_EQ(saved.bytes, std::filesystem::file_size(path_));

  // A follow-up turn extends that text.
  std::vector<int32_t> follow = first;
  follow.insert(follow.end(), answer.tokens.begin(), answer.tokens.end());
  for (int32_t t : prompt_of(9, 7)) follow.push_back(t);
  Engine fresh(*target_, draft_.get(), options());
  const GenerationResult want = fresh.generate(follow, greedy(16), {});
  EXPECT_EQ(want.stats.cached_tokens, 0);

  // Another engine (another process, in effect) restores the file and answers the same.
  Engine reader(*target_, draft_.get(), options());
  const Engine::SlotFileStats restored = reader.restore_slot(0, path_);
  EXPECT_EQ(restored.tokens, saved.tokens);
  EXPECT_EQ(restored.draft_tokens, saved.draft_tokens);
  EXPECT_EQ(restored.bytes, saved.bytes);
  const std::vector<int32_t> history = reader.slot_history(0);
  EXPECT_EQ(history, std::vector<int32_t>(follow.begin(), follow.begin() + saved.tokens));
  const GenerationResult got = reader.generate(follow, greedy(16), {});
  EXPECT_EQ(got.stats.cached_tokens, saved.tokens);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);

  // Saved again, the restored slot's file is the same bytes (same text, same entries).
  Engine again(*target_, draft_.get(), options());
  again.restore_slot(0, path_);
  const std::string copy = testing::temp_path("slot_copy.bin");
  again.save_slot(0, copy);
  EXPECT_EQ(file_bytes(copy), file_bytes(path_));

  // Erased, the slot reuses nothing.
  const auto held = static_cast<int32_t>(reader.slot_history(0).size());
  const int32_t erased = reader.erase_slot(0);
  EXPECT_TRUE(erased == held || erased == held - 1) << erased << " of " << held;
  EXPECT_TRUE(reader.slot_history(0).empty());
  EXPECT_EQ(reader.generate(follow, greedy(16), {}).stats.cached_tokens, 0);
  EXPECT_THROW(reader.erase_slot(1), Error);
  EXPECT_THROW(reader.save_slot(-1, path_), Error);
}

TEST_F(SlotFile, AVersion1FileIsReadAtTheDefaultLoraScales) {
  // Version 1 files (before the LoRA scales were written) are read too: their target rows count
  // as computed at the default scales, which without adapters is the model alone.
  const std::vector<int32_t> first = prompt_of(30, 3);
  Engine writer(*target_, draft_.get(), options());
  writer.generate(first, greedy(6), {});
  const Engine::SlotFileStats saved = writer.save_slot(0, path_);
  std::vector<uint8_t> bytes = file_bytes(path_);
  // Version 2: magic, version, n, the tokens, then n_lora (0 here), then the sections.
  const size_t lora_at = 16 + 4 * static_cast<size_t>(saved.tokens);
  ASSERT_EQ(bytes[8], 2);
  ASSERT_EQ(bytes[lora_at], 0);
  bytes.erase(bytes.begin() + static_cast<ptrdiff_t>(lora_at),
              bytes.begin() + static_cast<ptrdiff_t>(lora_at) + 4);
  bytes[8] = 1;
  bytes.resize(bytes.size() - 8);
  StreamHash hash;
  hash.update(bytes.data(), bytes.size());
  const uint64_t digest = hash.digest();
  const auto* d = reinterpret_cast<const uint8_t*>(&digest);
  bytes.insert(bytes.end(), d, d + 8);
  const std::string v1 = testing::temp_path("slot-v1.bin");
  write_bytes(v1, bytes);
  Engine reader(*target_, draft_.get(), options());
  EXPECT_EQ(reader.restore_slot(0, v1).tokens, saved.tokens);
  std::vector<int32_t> follow = reader.slot_history(0);
  follow.push_back(61);
  const GenerationResult got = reader.generate(follow, greedy(8), {});
  EXPECT_EQ(got.stats.cached_tokens, static_cast<int32_t>(follow.size()) - 1);
  Engine fresh(*target_, draft_.get(), options());
  EXPECT_EQ(got.tokens, fresh.generate(follow, greedy(8), {}).tokens);
  // read_slot_file asks for the target's fingerprint with no scales (null) for it, and holds
  // the section to what it answers: here another model's.
  KvCache cache(target_->model->config(), 128, {});
  bool asked = false;
  try {
    read_slot_file(v1, {&cache, 0}, 300, {}, {}, [&](const std::vector<float>* scales) {
      asked = true;
      EXPECT_EQ(scales, nullptr);
      return uint64_t{12345};
    });
    ADD_FAILURE() << "a section of another fingerprint was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(asked);
}

TEST_F(SlotFile, SavesAPrefixAndWorksWithoutOrWithAnotherDraft) {
  const std::vector<int32_t> prompt = prompt_of(30, 3);
  Engine writer(*target_, draft_.get(), options());
  writer.generate(prompt, greedy(8), {});
  // The prompt alone (what llama-cli's --prompt-cache keeps).
  const Engine::SlotFileStats saved = writer.save_slot(0, path_, 30);
  EXPECT_EQ(saved.tokens, 30);

  std::vector<int32_t> next = prompt;
  for (int32_t t : prompt_of(6, 9)) next.push_back(t);
  Engine fresh(*target_, nullptr, options());
  const GenerationResult want = fresh.generate(next, greedy(10), {});
  // Into an engine without a draft: the draft's rows are skipped.
  Engine no_draft(*target_, nullptr, options());
  EXPECT_EQ(no_draft.restore_slot(0, path_).draft_tokens, 0);
  const GenerationResult a = no_draft.generate(next, greedy(10), {});
  EXPECT_EQ(a.stats.cached_tokens, 30);
  EXPECT_EQ(a.tokens, want.tokens);
  // With another draft model: its rows are skipped too, and the text is the target's.
  Engine other(*target_, other_draft_.get(), options());
  EXPECT_EQ(other.restore_slot(0, path_).draft_tokens, 0);
  const GenerationResult b = other.generate(next, greedy(10), {});
  EXPECT_EQ(b.stats.cached_tokens, 30);
  EXPECT_EQ(b.tokens, want.tokens);
  // A file written without a draft restores into an engine with one (which then reads it).
  no_draft.save_slot(0, path_);
  Engine with_draft(*target_, draft_.get(), options());
  const Engine::SlotFileStats r = with_draft.restore_slot(0, path_);
  EXPECT_GT(r.tokens, 30);
  EXPECT_EQ(r.draft_tokens, 0);
}

TEST_F(SlotFile, ADraftReadingAContextWindowIsSavedWithWhereItStarts) {
  const std::vector<int32_t> prompt = prompt_of(60, 2);
  GenerationOptions go = greedy(12);
  go.draft_context = 16;  // the draft reads only the last 16 tokens: its rows start past 0
  Engine writer(*target_, draft_.get(), options());
  const GenerationResult first = writer.generate(prompt, go, {});
  const Engine::SlotFileStats saved = writer.save_slot(0, path_);
  EXPECT_GT(saved.draft_tokens, 0);
  EXPECT_LT(saved.draft_tokens, saved.tokens - 40);
  // Only the prompt: the draft's rows within it.
  const std::string prefix = testing::temp_path("slot_prefix.bin");
  const int32_t prefix_rows = writer.save_slot(0, prefix, 50).draft_tokens;
  EXPECT_GT(prefix_rows, 0);
  EXPECT_LT(prefix_rows, saved.draft_tokens);

  std::vector<int32_t> follow = prompt;
  follow.insert(follow.end(), first.tokens.begin(), first.tokens.end());
  for (int32_t t : prompt_of(4, 5)) follow.push_back(t);
  // The writer's own slot, going on, and an engine that restored the file: the same drafts
  // (the same draft rows), so the same rounds, not only the same text.
  const GenerationResult want = writer.generate(follow, go, {});
  Engine reader(*target_, draft_.get(), options());
  EXPECT_EQ(reader.restore_slot(0, path_).draft_tokens, saved.draft_tokens);
  const GenerationResult got = reader.generate(follow, go, {});
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.stats.spec.drafted, want.stats.spec.drafted);
  EXPECT_EQ(got.stats.spec.accepted, want.stats.spec.accepted);
  Engine from_prefix(*target_, draft_.get(), options());
  from_prefix.restore_slot(0, prefix);
  EXPECT_EQ(from_prefix.generate(follow, go, {}).tokens, want.tokens);
}

TEST_F(SlotFile, ARestoredSlotOffersItsTextToTheOtherSlots) {
  const std::vector<int32_t> system = prompt_of(48, 4);
  Engine writer(*target_, draft_.get(), options());
  writer.generate(system, greedy(1), {});
  writer.save_slot(0, path_, 48);
  Engine shared(*target_, draft_.get(), options(3));
  shared.restore_slot(2, path_);
  std::vector<int32_t> request = system;
  for (int32_t t : prompt_of(5, 11)) request.push_back(t);
  const GenerationResult got = shared.generate(request, greedy(10), {}, {}, 0);
  EXPECT_EQ(got.stats.shared_tokens, 48);
  Engine fresh(*target_, draft_.get(), options());
  EXPECT_EQ(got.tokens, fresh.generate(request, greedy(10), {}).tokens);
}

TEST_F(SlotFile, RefusesWhatDoesNotFitKeepingTheSlotUntilItsEntriesAreRead) {
  const std::vector<int32_t> prompt = prompt_of(40, 5);
  Engine writer(*target_, draft_.get(), options());
  writer.generate(prompt, greedy(4), {});
  writer.save_slot(0, path_, 40);
  const std::vector<uint8_t> good = file_bytes(path_);

  // Refused with `why`; a file refused before its entries are read leaves the slot as it was
  // (it then reuses what it held), one that fails while they are read leaves it empty.
  enum Slot { Kept, Emptied };
  const auto refused = [&](Engine& e, const std::string& file, const std::string& why, Slot after) {
    const std::vector<int32_t> before = prompt_of(20, 8);
    e.generate(before, greedy(2), {});  // something cached before
    const std::vector<int32_t> held = e.slot_history(0);
    try {
      e.restore_slot(0, file);
      ADD_FAILURE() << "restored: " << why;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(why), std::string::npos) << err.what();
    }
    if (after == Emptied) {
      EXPECT_TRUE(e.slot_history(0).empty()) << why;
      return;
    }
    EXPECT_EQ(e.slot_history(0), held) << why;
    std::vector<int32_t> again = before;
    again.push_back(77);
    const GenerationResult r = e.generate(again, greedy(4), {});
    EXPECT_EQ(r.stats.cached_tokens, 20) << why;
  };
  Engine other(*other_target_, draft_.get(), options());
  refused(other, path_, "another model", Kept);
  Engine f16(*target_, draft_.get(), options(1, {KvType::F16, KvType::F16}));
  refused(f16, path_, "where this one stores f16", Kept);
  EngineOptions small = options();
  small.n_ctx = 32;
  Engine short_ctx(*target_, draft_.get(), small);
  refused(short_ctx, path_, "context holds 32", Kept);

  Engine e(*target_, draft_.get(), options());
  refused(e, testing::temp_path("no_such_slot.bin"), "cannot open", Kept);
  const std::string bad = testing::temp_path("bad_slot.bin");
  std::vector<uint8_t> bytes = good;
  bytes[bytes.size() / 2] ^= 0x01;  // one bit inside the target's rows
  write_bytes(bad, bytes);
  refused(e, bad, "corrupt", Emptied);
  write_bytes(bad, std::vector<uint8_t>(good.begin(), good.begin() + good.size() - 100));
  refused(e, bad, "truncated", Emptied);
  bytes = good;
  bytes.push_back(0);
  write_bytes(bad, bytes);
  refused(e, bad, "past its end", Emptied);
  bytes = good;
  bytes[0] = 'X';
  write_bytes(bad, bytes);
  refused(e, bad, "not a specdec slot file", Kept);
  bytes = good;
  bytes[8] = 9;  // the version
  write_bytes(bad, bytes);
  refused(e, bad, "version 9", Kept);
  bytes = good;
  bytes[16] = 0xff;  // the first token's id, now outside the vocabulary
  bytes[17] = 0xff;
  write_bytes(bad, bytes);
  refused(e, bad, "outside this vocabulary", Kept);
  bytes = good;
  bytes[16 + 4 * 40 + 2] = 0x01;  // n_lora, after the 40 tokens: 65536 scales
  write_bytes(bad, bytes);
  refused(e, bad, "65536 LoRA scales", Kept);
  bytes = good;
  bytes[16 + 4 * 40] = 0x01;  // one scale for a target without adapters
  write_bytes(bad, bytes);
  refused(e, bad, "LoRA scales do not fit", Kept);
  const std::string dir = testing::temp_path("slot_dir");
  std::filesystem::create_directories(dir);
  refused(e, dir, "not a regular file", Kept);

  // After all that the slot still works, and the good file still restores.
  EXPECT_EQ(e.restore_slot(0, path_).tokens, 40);
  // A save to a directory that does not exist fails without leaving anything behind.
  EXPECT_THROW(e.save_slot(0, testing::temp_path("missing_dir/x.bin")), Error);
}

}  // namespace
}  // namespace specdec
