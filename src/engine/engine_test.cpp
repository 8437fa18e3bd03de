#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "grammar/grammar.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

// Greedy generation of max_tokens tokens past any end token, drafting up to 4 tokens a round.
GenerationOptions greedy_drafting(int32_t max_tokens) {
  GenerationOptions go;
  go.max_tokens = max_tokens;
  go.sampling.temperature = 0;
  go.ignore_eos = true;
  go.draft_max = 4;
  return go;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TinyModelSpec spec;
    model_ = std::make_unique<LoadedModel>(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("m.gguf"))));
  }
  GenerationResult run(int32_t n_ctx, int32_t max_tokens, std::vector<std::string> stop = {}) {
    EngineOptions eo;
    eo.n_ctx = n_ctx;
    Engine engine(*model_, nullptr, eo);
    GenerationOptions go;
    go.max_tokens = max_tokens;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.stop = std::move(stop);
    return engine.generate(std::vector<int32_t>(10, 65), go, {});
  }
  std::unique_ptr<LoadedModel> model_;
};

TEST(SharedPrefix, CountsTheLeadingTokensBothHold) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 9}, c = {1, 2};
  EXPECT_EQ(shared_prefix(a, b), 2u);
  EXPECT_EQ(shared_prefix(a, c), 2u);  // all of the shorter one
  EXPECT_EQ(shared_prefix(c, a), 2u);
  EXPECT_EQ(shared_prefix(a, {}), 0u);
  EXPECT_EQ(shared_prefix(a, a), 4u);
}

TEST_F(EngineTest, FinishReasonsTellLengthFromAFullContext) {
  // 16 slots, 10 prompt tokens: the last prompt token and 6 more fit, so 7 can be generated.
  GenerationResult full = run(16, 100);
  EXPECT_EQ(full.finish, FinishReason::ContextFull);
  EXPECT_EQ(full.tokens.size(), 7u);
  GenerationResult until_full = run(16, -1);
  EXPECT_EQ(until_full.finish, FinishReason::ContextFull);
  EXPECT_EQ(until_full.tokens, full.tokens);
  GenerationResult length = run(16, 3);
  EXPECT_EQ(length.finish, FinishReason::Length);
  EXPECT_EQ(length.tokens.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 3), length.tokens);
}

TEST_F(EngineTest, StopStringEndsTheTextBeforeIt) {
  GenerationResult all = run(64, 20);
  ASSERT_GE(all.text.size(), 4u);
  const std::string stop = all.text.substr(2, 2);
  GenerationResult cut = run(64, 20, {stop});
  EXPECT_EQ(cut.finish, FinishReason::Stop);
  EXPECT_EQ(cut.text, all.text.substr(0, all.text.find(stop)));
}

TEST_F(EngineTest, PromptThatFillsTheContextIsRefused) { EXPECT_THROW(run(10, 5), Error); }

// Code completion's ends (llama-server's n_indent and t_max_predict_ms), on a text a grammar
// fixes: a line indented less than the block ends the text before its first character, and
// a time limit ends it once a newline is out. What streams out is the text.
TEST_F(EngineTest, IndentLimitAndNewlineTimeLimitEndTheText) {
  EngineOptions eo;
  eo.n_ctx = 160;
  Engine engine(*model_, nullptr, eo);
  const std::string code = "if x:\n    y = 1\n    z = 2\nw = 3\n";
  GenerationOptions go;
  go.max_tokens = 80;
  go.sampling.temperature = 0;
  go.grammar =
      Grammar::parse(str_cat("root ::= \"if x:\\n    y = 1\\n    z = 2\\nw = 3\\n\" ", "[a-z]+"));
  const std::vector<int32_t> prompt(4, 65);
  std::string streamed;
  const auto collect = [&streamed](std::string_view t) {
    streamed += t;
    return true;
  };
  const GenerationResult full = engine.generate(prompt, go, collect);
  ASSERT_EQ(full.text.substr(0, code.size()), code);
  ASSERT_GT(full.text.size(), code.size());

  go.min_indent = 4;
  streamed.clear();
  const GenerationResult cut = engine.generate(prompt, go, collect);
  EXPECT_EQ(cut.text, "if x:\n    y = 1\n    z = 2\n");
  EXPECT_EQ(streamed, cut.text);
  EXPECT_EQ(cut.finish, FinishReason::Stop);
  EXPECT_EQ(cut.stop_text, "");
  go.min_indent = 2;  // every line of the block has 4
  EXPECT_EQ(engine.generate(prompt, go, {}).text, cut.text);

  go.min_indent = 0;
  go.newline_time_limit_ms = 1e-6;  // over as soon as a newline is out
  streamed.clear();
  const GenerationResult timed = engine.generate(prompt, go, collect);
  EXPECT_EQ(timed.finish, FinishReason::Length);
  EXPECT_EQ(std::count(timed.text.begin(), timed.text.end(), '\n'), 1) << timed.text;
  EXPECT_EQ(timed.text.substr(0, 6), "if x:\n");
  EXPECT_EQ(full.text.substr(0, timed.text.size()), timed.text);
  EXPECT_EQ(streamed, timed.text);
  go.newline_time_limit_ms = 60'000;  // never reached here
  EXPECT_EQ(engine.generate(prompt, go, {}).text, full.text);
}

// GenerationOptions::draft_context: a draft with a long prompt to read reads only its last
// tokens. With the target as its own draft every draft passes when it reads everything; a
// window shows as rejections (its q conditions on the suffix alone). The greedy text stays the
// target's, and the follow-up turn after a windowed one, reading everything again, passes
// every draft: its draft did not take the windowed cache (no prefix of the history) for one.
TEST_F(EngineTest, AWindowedDraftKeepsTheGreedyTextAndIsNotReusedAsAPrefix) {
  LoadedModel same = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("self.gguf")));
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*model_, &same, eo);
  Engine plain_engine(*model_, nullptr, eo);
  std::vector<int32_t> turn;
  for (int i = 0; i < 40; ++i) turn.push_back(65 + (i * 7) % 26);
  for (int32_t context : {1, 0, 1, 1, 0}) {
    GenerationOptions go = greedy_drafting(16);
    go.draft_context = context;
    const GenerationResult spec = engine.generate(turn, go, {});
    const GenerationResult plain = plain_engine.generate(turn, go, {});
    ASSERT_EQ(spec.tokens, plain.tokens) << "context " << context << " at " << turn.size();
    ASSERT_GT(spec.stats.spec.drafted, 0);
    if (context == 0) {
      EXPECT_EQ(spec.stats.spec.accepted, spec.stats.spec.drafted) << turn.size();
    } else {
      EXPECT_LT(spec.stats.spec.accepted, spec.stats.spec.drafted) << turn.size();
    }
    turn.insert(turn.end(), spec.tokens.begin(), spec.tokens.end());
    for (int i = 0; i < 20; ++i) turn.push_back(70 + i % 5);  // the next user message
  }
}

// Every architecture speculates losslessly: greedy text with a draft (another seed and fewer
// layers: a model that disagrees often, so rounds are rejected and rolled back) is target-only
// greedy text, token for token.
TEST(EngineArchitectures, GreedySpeculationIsTargetOnlyOnEachArchitecture) {
  for (const char* arch : {"llama", "qwen2", "gemma3", "qwen3"}) {
    testing::TinyModelSpec spec;
    spec.arch = arch;
    spec.n_layer = spec.arch == "gemma3" ? 6 : 2;
    spec.sliding_window = 8;
    spec.n_embd = 128;  // heads of 32, which q8_0 caches need
    LoadedModel target = LoadedModel::load(
        testing::write_tiny_model(spec, testing::temp_path(std::string(arch) + "-t.gguf")));
    spec.seed = 7;
    spec.n_layer = 1;
    LoadedModel draft_model = LoadedModel::load(
        testing::write_tiny_model(spec, testing::temp_path(std::string(arch) + "-d.gguf")));
    // With f32, f16 and q8_0 KV caches (the target-only run on the same type).
    for (const KvTypes kv_types :
         {KvTypes{}, KvTypes{KvType::F16, KvType::F16}, KvTypes{KvType::Q8_0, KvType::Q8_0}}) {
      EngineOptions eo;
      eo.n_ctx = 128;
      eo.kv_types = kv_types;
      Engine spec_engine(target, &draft_model, eo);
      Engine plain(target, nullptr, eo);
      GenerationOptions go = greedy_drafting(32);
      const std::vector<int32_t> prompt = {72, 101, 108, 108, 111, 32, 119};
      const GenerationResult with_draft = spec_engine.generate(prompt, go, {});
      EXPECT_EQ(with_draft.tokens, plain.generate(prompt, go, {}).tokens)
          << arch << ", K and V " << kv_type_name(kv_types.k);
      EXPECT_GT(with_draft.stats.spec.drafted, with_draft.stats.spec.accepted) << arch;
    }
  }
}

// GenerationOptions::decoded_counter follows the committed tokens as they come: at least the
// tokens behind the text streamed so far, rising, and all of them once generate returns.
TEST_F(EngineTest, TheDecodedCounterFollowsTheCommittedTokens) {
  GenerationOptions go = greedy_drafting(24);
  go.decoded_counter = std::make_shared<std::atomic<int32_t>>(0);
  std::vector<int32_t> seen;
  EngineOptions eo;
  eo.n_ctx = 128;
  Engine e(*model_, model_.get(), eo);  // its own draft: rounds of 4 accepted drafts and a bonus
  const GenerationResult r =
      e.generate(std::vector<int32_t>{72, 101, 108, 108, 111}, go, [&](std::string_view) {
        seen.push_back(go.decoded_counter->load());
        return true;
      });
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_GE(seen.front(), 1);
  EXPECT_GT(seen.back(), seen.front());
  EXPECT_EQ(go.decoded_counter->load(), static_cast<int32_t>(r.tokens.size()));
  EXPECT_EQ(r.tokens.size(), 24u);
}

// The draft's caches take their own types (EngineOptions::draft_kv_types): a q8_0 draft beside
// an f32 or f16 target keeps greedy text target-only text. The types reach the draft's cache and
// only it: the target here has 16-wide heads, which q8_0 refuses, and the draft 32-wide ones, so
// a q8_0 draft works while a q8_0 target, or a q8_0 draft of 16-wide heads, is refused.
TEST(EngineDraftCaches, TheDraftKeepsItsOwnCacheTypesAndTheTextStaysExact) {
  testing::TinyModelSpec spec;  // 64 wide, 4 heads: 16-wide heads
  LoadedModel target =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("dc-t.gguf")));
  spec.seed = 7;
  spec.n_layer = 1;
  LoadedModel narrow_draft =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("dc-d16.gguf")));
  spec.n_embd = 128;  // 32-wide heads
  LoadedModel draft =
      LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("dc-d32.gguf")));
  GenerationOptions go = greedy_drafting(32);
  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111, 32, 119};
  for (const KvTypes target_types : {KvTypes{}, KvTypes{KvType::F16, KvType::F16}}) {
    for (const KvTypes draft_types :
         {KvTypes{KvType::Q8_0, KvType::Q8_0}, KvTypes{KvType::Q8_0, KvType::F16}}) {
      EngineOptions eo;
      eo.n_ctx = 128;
      eo.kv_types = target_types;
      Engine plain(target, nullptr, eo);
      eo.draft_kv_types = draft_types;
      Engine spec_engine(target, &draft, eo);
      const GenerationResult with_draft = spec_engine.generate(prompt, go, {});
      EXPECT_EQ(with_draft.tokens, plain.generate(prompt, go, {}).tokens)
          << "target " << kv_types_name(target_types) << ", draft " << kv_types_name(draft_types);
      EXPECT_GT(with_draft.stats.spec.drafted, with_draft.stats.spec.accepted);  // rolled back
    }
  }
  EngineOptions q8_target;
  q8_target.n_ctx = 128;
  q8_target.kv_types = {KvType::Q8_0, KvType::Q8_0};
  q8_target.draft_kv_types = KvTypes{};
  EXPECT_THROW(Engine(target, &draft, q8_target), Error);
  EngineOptions q8_draft;
  q8_draft.n_ctx = 128;
  q8_draft.draft_kv_types = KvTypes{KvType::F32, KvType::Q8_0};
  EXPECT_THROW(Engine(target, &narrow_draft, q8_draft), Error);
  EXPECT_NO_THROW(Engine(target, &draft, q8_draft));
}

// Logprobs come from the verify pass's rows when speculating and from single steps otherwise;
// batch-invariant kernels make them the same numbers, bit for bit, and the top list's first
// entry is the greedy token itself.
TEST_F(EngineTest, LogprobsAreTheSameWithAndWithoutSpeculation) {
  testing::TinyModelSpec other_spec;
  other_spec.seed = 7;  // another random model over the same vocabulary: drafts get rejected
  LoadedModel other =
      LoadedModel::load(testing::write_tiny_model(other_spec, testing::temp_path("d.gguf")));
  // The target as its own draft: every draft accepted, so the rows of accepted drafts and of
  // bonus tokens are checked too, not only corrections.
  LoadedModel same = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("same.gguf")));
  for (LoadedModel* draft : {&other, &same}) {
    EngineOptions eo;
    eo.n_ctx = 128;
    Engine engine(*model_, draft, eo);
    GenerationOptions go;
    go.max_tokens = 24;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.logprobs = 3;
    go.draft_max = 4;
    const std::vector<int32_t> prompt(10, 65);
    std::vector<TokenLogprob> streamed;
    const GenerationResult spec =
        engine.generate(prompt, go, {}, [&](std::span<const TokenLogprob> e) {
          streamed.insert(streamed.end(), e.begin(), e.end());
        });
    go.speculative = false;
    const GenerationResult plain = engine.generate(prompt, go, {});
    ASSERT_GT(spec.stats.spec.rounds, 0);
    if (draft == &other) {
      ASSERT_LT(spec.stats.spec.accepted, spec.stats.spec.drafted);  // rejections happened
    } else {
      ASSERT_EQ(spec.stats.spec.accepted, spec.stats.spec.drafted);
      ASSERT_GT(spec.stats.spec.accepted, 0);
    }
    ASSERT_EQ(spec.tokens, plain.tokens);
    ASSERT_EQ(spec.logprobs.size(), spec.tokens.size());
    ASSERT_EQ(plain.logprobs.size(), plain.tokens.size());
    ASSERT_EQ(streamed.size(), spec.logprobs.size());  // the callback saw every entry once
    for (size_t i = 0; i < spec.tokens.size(); ++i) {
      EXPECT_EQ(spec.logprobs[i].token, spec.tokens[i]);
      EXPECT_EQ(spec.logprobs[i].logprob, plain.logprobs[i].logprob) << i;
      EXPECT_EQ(streamed[i].logprob, spec.logprobs[i].logprob) << i;
      ASSERT_EQ(spec.logprobs[i].top.size(), 3u);
      EXPECT_EQ(spec.logprobs[i].top, plain.logprobs[i].top) << i;
      EXPECT_EQ(spec.logprobs[i].top[0].first, spec.tokens[i]);  // greedy: the most likely
      EXPECT_LE(spec.logprobs[i].logprob, 0.0f);
    }
    go.logprobs = -1;
    EXPECT_TRUE(engine.generate(prompt, go, {}).logprobs.empty());
  }
}

// min_tokens holds back what would end the text, stop_token_ids end it, with and without
// speculation alike: with the end token (or a stop token) forced by a logit bias, the text ends
// exactly after min_tokens tokens.
TEST_F(EngineTest, MinTokensAndStopTokenIdsDecideWhereTheTextEnds) {
  LoadedModel same = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("stop.gguf")));
  EngineOptions eo;
  eo.n_ctx = 128;
  Engine engine(*model_, &same, eo);
  const int32_t eos = engine.tokenizer().eos();
  ASSERT_GE(eos, 0);
  const std::vector<int32_t> prompt(10, 65);
  for (const bool speculative : {true, false}) {
    GenerationOptions go;
    go.max_tokens = 20;
    go.sampling.temperature = 0;
    go.draft_max = 4;
    go.speculative = speculative;
    go.penalties.logit_bias = {{eos, 100.0f}};
    EXPECT_EQ(engine.generate(prompt, go, {}).tokens, std::vector<int32_t>{eos});
    go.min_tokens = 5;
    const GenerationResult held = engine.generate(prompt, go, {});
    ASSERT_EQ(held.tokens.size(), 6u) << speculative;
    EXPECT_EQ(held.tokens.back(), eos);
    EXPECT_EQ(std::count(held.tokens.begin(), held.tokens.end(), eos), 1);
    EXPECT_EQ(held.finish, FinishReason::EndOfGeneration);
    // ignore_eos: the end token is ordinary text, so min_tokens does not hold it back.
    go.ignore_eos = true;
    go.max_tokens = 3;
    EXPECT_EQ(engine.generate(prompt, go, {}).tokens, std::vector<int32_t>(3, eos));
    // A stop token ends the text as the end token does, and min_tokens holds it back too.
    go.max_tokens = 20;
    go.penalties.logit_bias = {{70, 100.0f}};
    go.stop_token_ids = {70};
    go.min_tokens = 0;
    EXPECT_EQ(engine.generate(prompt, go, {}).tokens, std::vector<int32_t>{70});
    go.min_tokens = 3;
    const GenerationResult stopped = engine.generate(prompt, go, {});
    ASSERT_EQ(stopped.tokens.size(), 4u);
    EXPECT_EQ(stopped.tokens.back(), 70);
    EXPECT_EQ(stopped.finish, FinishReason::EndOfGeneration);
  }
  GenerationOptions bad;
  bad.stop_token_ids = {1 << 20};
  EXPECT_THROW(engine.generate(prompt, bad, {}), Error);
  bad.stop_token_ids = {};
  bad.min_tokens = -1;
  EXPECT_THROW(engine.generate(prompt, bad, {}), Error);
}

// GenerationOptions::prompt_logprobs scores a text: scoring the prompt plus what a greedy
// generation produced gives, for the generated tokens, exactly the logprobs the generation
// reported (batch-invariant rows: a prompt row and a decode or verify row are the same bits).
TEST_F(EngineTest, PromptLogprobsScoreATextAsItsGenerationDid) {
  LoadedModel same = LoadedModel::load(
      testing::write_tiny_model(testing::TinyModelSpec{}, testing::temp_path("score.gguf")));
  EngineOptions eo;
  eo.n_ctx = 128;
  Engine engine(*model_, &same, eo);
  GenerationOptions go;
  go.max_tokens = 12;
  go.sampling.temperature = 0;
  go.ignore_eos = true;
  go.logprobs = 3;
  go.draft_max = 3;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 10; ++i) prompt.push_back(65 + (i * 5) % 26);
  const GenerationResult gen = engine.generate(prompt, go, {});
  ASSERT_EQ(gen.tokens.size(), 12u);
  EXPECT_TRUE(gen.prompt_logprobs.empty());

  std::vector<int32_t> text = prompt;
  text.insert(text.end(), gen.tokens.begin(), gen.tokens.end());
  GenerationOptions score = go;
  score.max_tokens = 0;
  score.prompt_logprobs = 3;
  std::vector<std::vector<TokenLogprob>> calls;
  // The slot's cache holds this text's first 21 tokens: they must be read again, with logits.
  const GenerationResult scored = engine.generate(
      text, score, {},
      [&](std::span<const TokenLogprob> e) { calls.emplace_back(e.begin(), e.end()); });
  EXPECT_TRUE(scored.tokens.empty());
  EXPECT_EQ(scored.finish, FinishReason::Length);
  EXPECT_EQ(scored.stats.cached_tokens, 0);
  ASSERT_EQ(scored.prompt_logprobs.size(), text.size() - 1);
  for (size_t i = 0; i < gen.tokens.size(); ++i) {
    const TokenLogprob& p = scored.prompt_logprobs[prompt.size() - 1 + i];
    EXPECT_EQ(p.token, gen.tokens[i]);
    EXPECT_EQ(p.logprob, gen.logprobs[i].logprob) << i;
    EXPECT_EQ(p.top, gen.logprobs[i].top) << i;
  }
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    EXPECT_EQ(scored.prompt_logprobs[i].token, text[i + 1]);
    EXPECT_EQ(scored.prompt_logprobs[i].top.size(), 3u);
  }
  // The callback got the prompt's entries first, in one call, and nothing else.
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_EQ(calls[0].size(), scored.prompt_logprobs.size());
  EXPECT_EQ(calls[0].back().logprob, scored.prompt_logprobs.back().logprob);

  // Scoring and generating in one request: the prompt's scores are the same, and the text
  // generated after them is the plain request's (a draft that read a longer cache before is cut
  // back: its stale rows would change the drafts, and with them nothing but speed; the target's
  // would change the text).
  GenerationOptions both = go;
  both.prompt_logprobs = 1;
  const GenerationResult again = engine.generate(prompt, both, {});
  EXPECT_EQ(again.tokens, gen.tokens);
  ASSERT_EQ(again.prompt_logprobs.size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    EXPECT_EQ(again.prompt_logprobs[i].logprob, scored.prompt_logprobs[i].logprob) << i;
  }
  // On another prompt the draft (the target itself) must not keep the rows of the text before:
  // with them its drafts would condition on the wrong tokens and be rejected.
  std::vector<int32_t> other;
  for (int i = 0; i < 10; ++i) other.push_back(70 + (i * 3) % 20);
  const GenerationResult fresh = engine.generate(other, both, {});
  ASSERT_GT(fresh.stats.spec.drafted, 0);
  EXPECT_EQ(fresh.stats.spec.accepted, fresh.stats.spec.drafted);
  GenerationOptions bad = go;
  bad.prompt_logprobs = kMaxTopLogprobs + 1;
  EXPECT_THROW(engine.generate(prompt, bad, {}), Error);
}

}  // namespace
}  // namespace specdec
