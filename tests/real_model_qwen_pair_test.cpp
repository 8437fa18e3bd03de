// The default real pair: Qwen2.5-Coder-0.5B-Instruct drafting for Qwen2.5-Coder-1.5B-Instruct
// (Q4_K_M), the pair scripts/run.sh uses. Greedy speculative output must equal target-only
// greedy output token for token (chat and raw prompts, several gammas), seeded sampled runs must
// repeat, and `specdec verify`'s statistical check must pass at a sample size CI can afford
// (docs/benchmarks.md records a run with 2,000 continuations per prompt).
//
// The 1.5B decodes at ~15 tokens/s on 2 threads, so every test here is short: few tokens, and the
// target-only references are computed once per prompt.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/draft_vocab.h"
#include "engine/engine.h"
#include "engine/self_check.h"
#include "engine/token_ranking.h"
#include "grammar/json_schema.h"
#include "server/tool_calls.h"
#include "support/cli_runner.h"
#include "support/decode_stats_checks.h"
#include "support/real_models.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/infill_prompt.h"

namespace specdec {
namespace {

constexpr const char* kTarget = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
constexpr const char* kDraft = "qwen2.5-coder-0.5b-instruct.gguf";

class RealModelQwenPair : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto target = testing::require_real_model(kTarget);
    auto draft = testing::require_real_model(kDraft);
    if (!target || !draft) return;
    target_path_ = new std::string(*target);
    draft_path_ = new std::string(*draft);
    target_ = new LoadedModel(LoadedModel::load(*target));
    draft_ = new LoadedModel(LoadedModel::load(*draft));
  }
  static void TearDownTestSuite() {
    delete draft_;
    delete target_;
    delete draft_path_;
    delete target_path_;
    draft_ = target_ = nullptr;
  }
  void SetUp() override {
    if (target_ == nullptr) {
      GTEST_SKIP() << testing::missing_model_message(kTarget) << " / "
                   << testing::missing_model_message(kDraft);
    }
  }
  static EngineOptions engine_options() {
    EngineOptions eo;
    eo.n_ctx = 512;
    eo.n_threads = 2;
    return eo;
  }
  static LoadedModel* target_;
  static LoadedModel* draft_;
  static std::string* target_path_;
  static std::string* draft_path_;
};
LoadedModel* RealModelQwenPair::target_ = nullptr;
LoadedModel* RealModelQwenPair::draft_ = nullptr;
std::string* RealModelQwenPair::target_path_ = nullptr;
std::string* RealModelQwenPair::draft_path_ = nullptr;

std::string chatml(const std::string& user) {
  return "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
         "assistant.<|im_end|>\n<|im_start|>user\n" +
         user + "<|im_end|>\n<|im_start|>assistant\n";
}

// The model's own template renders a user message with Qwen's default system message, as
// llama.cpp's Jinja rendering of it does; the prompts below are written the same way.
TEST_F(RealModelQwenPair, ChatTemplateAddsQwensDefaultSystemMessage) {
  Engine plain(*target_, nullptr, engine_options());
  const std::vector<ChatMessage> msgs = {{"user", "Write a haiku."}};
  EXPECT_EQ(plain.chat_template().apply(msgs, true), chatml("Write a haiku."));
}

// 8 prompts (4 chat, 4 raw) x gamma 1, 3, 5, 8, 20 tokens each: the bitwise equality that
// lossless greedy speculation promises.
TEST_F(RealModelQwenPair, GreedyOutputEqualsTargetOnlyForChatAndRawPromptsAndGammas) {
  Engine plain(*target_, nullptr, engine_options());
  Engine spec(*target_, draft_, engine_options());
  const std::vector<std::string> prompts = {
      chatml("Write a Python function that reverses a string."),
      chatml("Summarize in two sentences why the sky is blue."),
      chatml("What is 17 * 23? Answer with the number only."),
      chatml("Explain what a hash map is."),
      "def quicksort(arr):\n",
      "The capital of France is",
      "// C++: print the numbers 1 to 10\n#include <iostream>\n",
      "Once upon a time, in a small village,",
  };
  int64_t rounds = 0, rejected_rounds = 0, accepted = 0;
  for (const std::string& text : prompts) {
    const std::vector<int32_t> prompt = plain.tokenize_prompt(text);
    GenerationOptions go;
    go.max_tokens = 20;
    go.sampling.temperature = 0;
    const GenerationResult expected = plain.generate(prompt, go, {});
    ASSERT_GT(expected.tokens.size(), 0u) << text;
    for (int32_t gamma : {1, 3, 5, 8}) {
      go.draft_max = gamma;
      const GenerationResult got = spec.generate(prompt, go, {});
      EXPECT_EQ(got.tokens, expected.tokens) << text << " gamma " << gamma;
      EXPECT_EQ(got.text, expected.text) << text << " gamma " << gamma;
      EXPECT_TRUE(got.stats.speculative);
      rounds += got.stats.spec.rounds;
      accepted += got.stats.spec.accepted;
      rejected_rounds += got.stats.spec.rounds - got.stats.spec.accepted_hist.back();
    }
  }
  // Equality only means something if both paths of the rule ran: drafts accepted, and rounds
  // that ended in a rejection (a correction and a rollback of both caches).
  EXPECT_GT(accepted, rounds);
  EXPECT_GT(rejected_rounds, 0);
}

// q8_0 KV caches on both models (integer key scores, tensor/q8_rows.h): greedy speculation
// still equals target-only output on the same cache type, and the 8-bit cache still knows the
// fact an f32 cache does.
TEST_F(RealModelQwenPair, GreedyOutputEqualsTargetOnlyOnQ8KvCaches) {
  EngineOptions eo = engine_options();
  eo.kv_types = {KvType::Q8_0, KvType::Q8_0};
  Engine plain(*target_, nullptr, eo);
  Engine spec(*target_, draft_, eo);
  int64_t rejected_rounds = 0;
  for (const std::string& text : {chatml("Write a Python function that reverses a string."),
                                  std::string("The capital of France is")}) {
    const std::vector<int32_t> prompt = plain.tokenize_prompt(text);
    GenerationOptions go;
    go.max_tokens = 16;
    go.sampling.temperature = 0;
    go.draft_max = 4;
    const GenerationResult expected = plain.generate(prompt, go, {});
    const GenerationResult got = spec.generate(prompt, go, {});
    EXPECT_EQ(got.tokens, expected.tokens) << text;
    EXPECT_GT(got.stats.spec.accepted, 0) << text;
    rejected_rounds += got.stats.spec.rounds - got.stats.spec.accepted_hist.back();
    if (text.starts_with("The capital")) {
      EXPECT_NE(expected.text.find("Paris"), std::string::npos) << expected.text;
    }
  }
  EXPECT_GT(rejected_rounds, 0);
}

// The corpus count shipped for this vocabulary (scripts/vocab/gen_token_ranking.py computed its
// fingerprint in Python from the GGUF's token strings) is recognised for both models.
TEST_F(RealModelQwenPair, ShippedTokenRankingIsRecognisedForBothModels) {
  const TokenRanking draft = rank_tokens(*draft_->tokenizer);
  EXPECT_GT(draft.counted, 20000);
  EXPECT_EQ(vocab_fingerprint(*draft_->tokenizer), vocab_fingerprint(*target_->tokenizer));
  EXPECT_EQ(rank_tokens(*target_->tokenizer).ids, draft.ids);
  // A space and a newline are among the ten most frequent tokens of code and prose.
  const std::vector<int32_t> first(draft.ids.begin(), draft.ids.begin() + 10);
  for (const char* text : {" ", "\n"}) {
    const std::vector<int32_t> ids = draft_->tokenizer->encode(text, false, false);
    ASSERT_EQ(ids.size(), 1u) << text;
    EXPECT_NE(std::find(first.begin(), first.end(), ids[0]), first.end()) << text;
  }
}

// The draft as the CLI lays it out by default (blocks as --draft-type auto leaves them, head in
// frequency order, a per-prompt vocabulary subset), with the head requantized as well: the
// greedy text is still the target's, bit for bit.
TEST_F(RealModelQwenPair, GreedyOutputEqualsTargetOnlyWithTheCheapDraftLayout) {
  ModelLoadOptions layout;
  // The blocks as `--draft-type auto` (the CLI's default) leaves them: Q4_0 where the file's are
  // wider; and the head requantized too (--draft-head-type q4_0).
  layout.matrix_type = GgmlType::Q4_0;
  layout.matrix_type_only_where_smaller = true;
  layout.output_type = GgmlType::Q4_0;
  layout.output_ids = draft_head_order(*draft_->tokenizer, draft_->model->config().n_vocab);
  LoadedModel cheap = LoadedModel::load(*draft_path_, layout);
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  eo.draft_vocab = 32768;
  Engine spec(*target_, &cheap, eo);
  int64_t accepted = 0;
  for (const std::string& text :
       {chatml("Summarize: the Great Barrier Reef is the world's largest coral reef system."),
        std::string("def quicksort(arr):\n")}) {
    const std::vector<int32_t> prompt = plain.tokenize_prompt(text);
    GenerationOptions go;
    go.max_tokens = 20;
    go.sampling.temperature = 0;
    const GenerationResult expected = plain.generate(prompt, go, {});
    for (int32_t gamma : {3, 8}) {
      go.draft_max = gamma;
      const GenerationResult got = spec.generate(prompt, go, {});
      EXPECT_EQ(got.tokens, expected.tokens) << text << " gamma " << gamma;
      accepted += got.stats.spec.accepted;
    }
    EXPECT_LT(spec.draft_vocab_width(), 40000);
  }
  EXPECT_GT(accepted, 0);
}

// Penalties make each verify row's distribution depend on the drafts before it; with them the
// greedy text must still be the target's alone, with the default draft layout (vocabulary
// subset, hybrid lookup), and they must change the text.
TEST_F(RealModelQwenPair, GreedyOutputEqualsTargetOnlyWithPenaltiesAndLogitBias) {
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  eo.draft_vocab = 32768;
  Engine spec(*target_, draft_, eo);
  const std::vector<int32_t> prompt =
      plain.tokenize_prompt(chatml("Write a Python function that reverses a list."));
  GenerationOptions go;
  go.max_tokens = 24;
  go.sampling.temperature = 0;
  const GenerationResult unpenalized = plain.generate(prompt, go, {});
  go.penalties.frequency_penalty = 1.0f;
  go.penalties.repetition_penalty = 1.2f;
  go.penalties.logit_bias = {{unpenalized.tokens[2], -100.0f}};  // bans the answer's 3rd token
  const GenerationResult expected = plain.generate(prompt, go, {});
  EXPECT_NE(expected.tokens, unpenalized.tokens);
  go.hybrid = true;
  for (int32_t gamma : {3, 8}) {
    go.draft_max = gamma;
    // The draft reading the whole prompt, then only its last 16 tokens (draft_context).
    for (int32_t context : {0, 16}) {
      go.draft_context = context;
      const GenerationResult got = spec.generate(prompt, go, {});
      EXPECT_EQ(got.tokens, expected.tokens) << "gamma " << gamma << " context " << context;
      EXPECT_GT(got.stats.spec.accepted, 0);
    }
  }
}

// Scoring (echo with logprobs) reads a text's rows in multi-row passes, generation in decode
// steps and verify passes; the K-quant kernels' batch invariance makes them the same bits, so a
// generated token scores exactly the logprob its generation reported, and min_tokens keeps the
// greedy text equal to target-only's.
TEST_F(RealModelQwenPair, ScoringAGeneratedTextGivesItsGenerationsLogprobs) {
  EngineOptions eo = engine_options();
  eo.draft_vocab = 32768;
  Engine spec(*target_, draft_, eo);
  const std::vector<int32_t> prompt =
      spec.tokenize_prompt(chatml("Write a Python function that reverses a list."));
  GenerationOptions go;
  go.max_tokens = 12;
  go.sampling.temperature = 0;
  go.logprobs = 2;
  go.draft_max = 4;
  const GenerationResult gen = spec.generate(prompt, go, {});
  ASSERT_EQ(gen.tokens.size(), 12u);
  EXPECT_GT(gen.stats.spec.accepted, 0);
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), gen.tokens.begin(), gen.tokens.end());
  GenerationOptions score = go;
  score.max_tokens = 0;
  score.prompt_logprobs = 2;
  const GenerationResult scored = spec.generate(text, score, {});
  ASSERT_EQ(scored.prompt_logprobs.size(), text.size() - 1);
  for (size_t i = 0; i < gen.tokens.size(); ++i) {
    const TokenLogprob& p = scored.prompt_logprobs[prompt.size() - 1 + i];
    EXPECT_EQ(p.token, gen.tokens[i]);
    EXPECT_EQ(p.logprob, gen.logprobs[i].logprob) << i;
    EXPECT_EQ(p.top, gen.logprobs[i].top) << i;
  }
  // A one-word answer ends within a few tokens; min_tokens 8 holds its end back, with and
  // without speculation alike.
  Engine plain(*target_, nullptr, engine_options());
  const std::vector<int32_t> short_prompt =
      spec.tokenize_prompt(chatml("Answer with one word, yes or no: is water wet?"));
  GenerationOptions held = go;
  held.logprobs = -1;
  held.max_tokens = 12;
  const GenerationResult free_text = plain.generate(short_prompt, held, {});
  ASSERT_LT(free_text.tokens.size(), 8u);
  ASSERT_EQ(free_text.finish, FinishReason::EndOfGeneration);
  held.min_tokens = 8;
  const GenerationResult want = plain.generate(short_prompt, held, {});
  EXPECT_GT(want.tokens.size(), 8u);
  EXPECT_EQ(spec.generate(short_prompt, held, {}).tokens, want.tokens);
}

// Fill in the middle with Qwen2.5-Coder's FIM tokens (found by their text): the model writes a
// function body that fits the call after it, and speculation keeps the greedy text.
TEST_F(RealModelQwenPair, FillInTheMiddleWritesTheBodyWithTheSameGreedyText) {
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  eo.draft_vocab = 32768;
  Engine spec(*target_, draft_, eo);
  ASSERT_TRUE(plain.tokenizer().fim().has_value());
  const std::vector<int32_t> prompt =
      encode_fim_prompt(plain.tokenizer(), "def add(a, b):\n    ", "\n\nprint(add(2, 3))\n");
  GenerationOptions go;
  go.max_tokens = 16;
  go.sampling.temperature = 0;
  go.draft_max = 4;
  const GenerationResult want = plain.generate(prompt, go, {});
  EXPECT_NE(want.text.find("return a + b"), std::string::npos) << want.text;
  const GenerationResult got = spec.generate(prompt, go, {});
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_GT(got.stats.spec.accepted, 0);
}

// /infill's prompt on the real pair: Qwen2.5-Coder's repository-level markers are found, a chunk
// of another file is used (the body calls the helper it defines), the indentation limit ends
// the text at the end of the block, and the greedy text is the same with the draft.
TEST_F(RealModelQwenPair, RepositoryLevelInfillUsesTheOtherFileAndEndsWithTheBlock) {
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  eo.draft_vocab = 32768;
  Engine spec(*target_, draft_, eo);
  const std::optional<Tokenizer::FimTokens> fim = plain.tokenizer().fim();
  ASSERT_TRUE(fim.has_value());
  EXPECT_EQ(plain.tokenizer().token_text(fim->repo), "<|repo_name|>");
  EXPECT_EQ(plain.tokenizer().token_text(fim->file_sep), "<|file_sep|>");
  InfillInput in;
  in.extra = {{"geometry.py", "def circle_area_from_radius(r):\n    return 3.14159 * r * r\n"}};
  in.prefix = "from geometry import circle_area_from_radius\n\ndef total_area(radii):\n";
  in.suffix = "\n\nprint(total_area([1, 2]))\n";
  in.prompt = "    ";
  const std::vector<int32_t> prompt = encode_infill_prompt(plain.tokenizer(), in, 4096).tokens;
  EXPECT_EQ(prompt.front(), fim->repo);
  GenerationOptions go;
  go.max_tokens = 40;
  go.sampling.temperature = 0;
  go.draft_max = 4;
  go.min_indent = 4;
  const GenerationResult want = plain.generate(prompt, go, {});
  EXPECT_NE(want.text.find("circle_area_from_radius("), std::string::npos) << want.text;
  // Every line after the first stays inside the function's block.
  for (size_t nl = want.text.find('\n'); nl != std::string::npos && nl + 1 < want.text.size();
       nl = want.text.find('\n', nl + 1)) {
    EXPECT_EQ(want.text.compare(nl + 1, 4, "    "), 0) << want.text;
  }
  const GenerationResult got = spec.generate(prompt, go, {});
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  EXPECT_GT(got.stats.spec.accepted, 0);
}

// Structured output on the real pair: the greedy JSON is valid under the schema, and the same
// with the draft (drafts masked by the grammar too) as without; a sampled run stays valid.
TEST_F(RealModelQwenPair, JsonSchemaOutputIsValidAndTheSameWithSpeculation) {
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  eo.draft_vocab = 32768;
  Engine spec(*target_, draft_, eo);
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 24}, "language": {"enum": ["python", "rust"]},
      "lines": {"type": "integer"}}, "required": ["name", "language", "lines"]})");
  const auto grammar = Grammar::parse(json_schema_gbnf(schema));
  const std::vector<int32_t> prompt =
      plain.tokenize_prompt(chatml("Describe a Python function that reverses a list, as JSON."));
  GenerationOptions go;
  go.max_tokens = 48;
  go.sampling.temperature = 0;
  go.draft_max = 4;
  go.grammar = grammar;
  const GenerationResult want = plain.generate(prompt, go, {});
  EXPECT_EQ(want.finish, FinishReason::EndOfGeneration) << want.text;
  const auto doc = nlohmann::ordered_json::parse(want.text);
  EXPECT_EQ(doc.at("language"), "python") << want.text;
  EXPECT_TRUE(doc.at("lines").is_number_integer()) << want.text;
  const GenerationResult got = spec.generate(prompt, go, {});
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_GT(got.stats.spec.accepted, 0);
  go.sampling = {0.7f, 0, 0.9f, 0.0f, 99};
  const GenerationResult sampled = spec.generate(prompt, go, {});
  GrammarState state(grammar);
  EXPECT_TRUE(state.accept(sampled.text)) << sampled.text;
  if (sampled.finish == FinishReason::EndOfGeneration) {
    EXPECT_TRUE(state.complete()) << sampled.text;
  }
}

// Tool calling on the real pair: the GGUF's own template is recognised as having Qwen2.5's
// convention, a required call is a valid call to the tool, and the draft changes nothing.
TEST_F(RealModelQwenPair, RequiredToolCallIsValidAndTheSameWithSpeculation) {
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  Engine spec(*target_, draft_, eo);
  ASSERT_TRUE(plain.chat_template().supports_tools());
  const std::string body = R"({"tool_choice": "required", "tools": [{"type": "function",
      "function": {"name": "get_weather", "description": "Current weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city", "unit"]}}}]})";
  const server::ToolRequest tools =
      server::parse_tools(nlohmann::json::parse(body), nlohmann::ordered_json::parse(body));
  ASSERT_NE(tools.grammar, nullptr);
  const std::vector<ChatMessage> msgs = {{"user", "What's the weather in Paris, in celsius?"}};
  const std::vector<std::string> defs = {tools.tools[0].definition};
  const std::vector<int32_t> prompt =
      plain.tokenize_prompt(plain.chat_template().apply(msgs, true, defs));
  GenerationOptions go;
  go.max_tokens = 48;
  go.sampling.temperature = 0;
  go.draft_max = 4;
  go.grammar = tools.grammar;
  const GenerationResult want = plain.generate(prompt, go, {});
  EXPECT_EQ(want.finish, FinishReason::EndOfGeneration) << want.text;
  const server::SplitReply reply = server::split_tool_calls(want.text, {"get_weather"}, 1);
  ASSERT_EQ(reply.calls.size(), 1u) << want.text;
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  const auto args = nlohmann::json::parse(reply.calls[0].arguments);
  EXPECT_EQ(args.at("city"), "Paris") << want.text;
  EXPECT_EQ(args.at("unit"), "celsius") << want.text;
  const GenerationResult got = spec.generate(prompt, go, {});
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_GT(got.stats.spec.accepted, 0);
}

// tool_choice auto, as the server runs it (the calls' grammar lazy, from "<tool_call>" on): the
// 1.5B coder answers with its call in a fenced JSON block instead, which the reply's split reads
// as the call a required choice gives; the same tokens with speculation.
TEST_F(RealModelQwenPair, AutoToolCallInTheCodersFencedJsonIsReadAsTheCall) {
  EngineOptions eo = engine_options();
  Engine plain(*target_, nullptr, eo);
  Engine spec(*target_, draft_, eo);
  const std::string tools_json = R"([{"type": "function",
      "function": {"name": "get_weather", "description": "Current weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city", "unit"]}}}])";
  const auto parse = [&](const char* choice) {
    const std::string body =
        std::string(R"({"tool_choice": ")") + choice + R"(", "tools": )" + tools_json + "}";
    return server::parse_tools(nlohmann::json::parse(body), nlohmann::ordered_json::parse(body));
  };
  const server::ToolRequest tools = parse("auto");
  ASSERT_NE(tools.grammar, nullptr);
  ASSERT_TRUE(tools.lazy);
  const std::vector<ChatMessage> msgs = {{"user", "What's the weather in Paris, in celsius?"}};
  const std::vector<int32_t> prompt = plain.tokenize_prompt(
      plain.chat_template().apply(msgs, true, std::vector<std::string>{tools.tools[0].definition}));
  GenerationOptions go;
  go.max_tokens = 64;
  go.sampling.temperature = 0;
  go.draft_max = 4;
  go.grammar = tools.grammar;
  go.grammar_trigger = std::string(server::kToolCallOpen);
  const GenerationResult want = plain.generate(prompt, go, {});
  EXPECT_EQ(want.finish, FinishReason::EndOfGeneration) << want.text;
  const server::SplitReply reply = server::split_tool_calls(want.text, {"get_weather"}, 1);
  ASSERT_EQ(reply.calls.size(), 1u) << want.text;
  EXPECT_EQ(reply.content, "");
  EXPECT_EQ(spec.generate(prompt, go, {}).tokens, want.tokens);
  go.grammar = parse("required").grammar;
  go.grammar_trigger.clear();
  const server::SplitReply forced =
      server::split_tool_calls(plain.generate(prompt, go, {}).text, {"get_weather"}, 1);
  ASSERT_EQ(forced.calls.size(), 1u);
  EXPECT_EQ(reply.calls[0].name, forced.calls[0].name);
  EXPECT_EQ(reply.calls[0].arguments, forced.calls[0].arguments);
}

TEST_F(RealModelQwenPair, SampledRunsRepeatWithTheSeedAndStatsAddUp) {
  Engine spec(*target_, draft_, engine_options());
  const std::vector<int32_t> prompt =
      spec.tokenize_prompt(chatml("Name three uses of the Python dict type."));
  GenerationOptions go;
  go.max_tokens = 24;
  go.sampling = {0.7f, 0, 0.9f, 0.0f, 4321};
  go.draft_max = 4;
  const GenerationResult a = spec.generate(prompt, go, {});
  const GenerationResult b = spec.generate(prompt, go, {});
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.stats.generated_tokens, static_cast<int32_t>(a.tokens.size()));
  const DecodeStats& s = a.stats.spec;
  testing::expect_histogram_adds_up(s);
  // A different seed changes the text (24 tokens at T 0.7: equal by chance is negligible).
  go.sampling.seed = 4322;
  EXPECT_NE(spec.generate(prompt, go, {}).tokens, a.tokens);
}

// `specdec verify`'s check at CI size: 48 two-token continuations per prompt and mode at the
// reference's sampling settings. Small samples only have power against gross errors (a broken
// rule is caught by the chi-square tests on enumerable fakes); this proves the real pair runs
// the check end to end and that measured acceptance tracks the analytic sum of min(p, q).
TEST_F(RealModelQwenPair, SelfCheckPassesAtCiSampleSize) {
  Engine spec(*target_, draft_, engine_options());
  SelfCheckOptions so;
  so.prompts = {chatml("Write a haiku about code review."), "def fibonacci(n):\n"};
  so.samples = 48;
  so.tokens = 2;
  so.generation.sampling = {0.7f, 0, 0.9f, 0.0f, 99};
  so.generation.draft_max = 4;
  const SelfCheckReport r = run_self_check(spec, so);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.distribution_ok);
  EXPECT_TRUE(r.acceptance_ok) << "z = " << r.acceptance_z;
  EXPECT_GT(r.tested, 0);
  EXPECT_GT(r.analytic_acceptance, 0.2);
}

// The CLI on the pair: plain flags do the right thing, and the Qwen target refuses a draft with
// another vocabulary (SmolLM2's 49,152 tokens) with one clear line.
TEST_F(RealModelQwenPair, CliRunsThePairAndRejectsAForeignDraft) {
  const testing::CliResult r =
      testing::run_cli({"run", "-m", *target_path_, "-md", *draft_path_, "-p", "def add(a, b):\n",
                        "-n", "8", "--temp", "0", "-t", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("accepted"), std::string::npos) << r.err;

  auto smol = testing::find_real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!smol) GTEST_SKIP() << "SmolLM2 not cached; foreign-vocabulary case not run";
  const testing::CliResult bad =
      testing::run_cli({"run", "-m", *target_path_, "-md", *smol, "-p", "x", "-n", "1"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("vocabularies differ"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace specdec
