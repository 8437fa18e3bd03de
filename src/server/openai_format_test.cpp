#include "server/openai_format.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace specdec::server {
namespace {

using nlohmann::json;

GenerationResult sample_result() {
  GenerationResult r;
  r.text = "Paris";
  r.finish = FinishReason::EndOfGeneration;
  r.stats.prompt_tokens = 7;
  r.stats.generated_tokens = 3;
  r.stats.decode_ms = 30;
  r.stats.speculative = true;
  r.stats.draft_max = 4;
  r.stats.spec.rounds = 1;
  r.stats.spec.drafted = 4;
  r.stats.spec.accepted = 2;
  r.stats.cached_tokens = 4;
  return r;
}

TEST(OpenAIFormat, CompletionShape) {
  const ResponseMeta meta{Endpoint::Completions, "cmpl-1", 123, "tiny", std::nullopt};
  const json doc = completion_json(meta, sample_result());
  EXPECT_EQ(doc["object"], "text_completion");
  EXPECT_EQ(doc["id"], "cmpl-1");
  EXPECT_EQ(doc["model"], "tiny");
  EXPECT_EQ(doc["choices"][0]["text"], "Paris");
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(doc["usage"], json({{"prompt_tokens", 7},
                                {"completion_tokens", 3},
                                {"total_tokens", 10},
                                {"prompt_tokens_details", {{"cached_tokens", 4}}}}));
  EXPECT_EQ(doc["specdec"]["rounds"], 1);
  EXPECT_EQ(doc["specdec"]["drafted"], 4);
  EXPECT_EQ(doc["specdec"]["accepted"], 2);
  EXPECT_DOUBLE_EQ(doc["specdec"]["acceptance_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(doc["specdec"]["tokens_per_second"].get<double>(), 100);
}

TEST(OpenAIFormat, ChatShapesAndChunks) {
  const ResponseMeta meta{Endpoint::ChatCompletions, "chatcmpl-1", 5, "tiny", std::nullopt};
  GenerationResult r = sample_result();
  r.finish = FinishReason::ContextFull;
  const json doc = completion_json(meta, r);
  EXPECT_EQ(doc["object"], "chat.completion");
  EXPECT_EQ(doc["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Paris"}}));
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "length");

  const json first = text_chunk_json(meta, "Pa", true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"content", "Pa"}, {"role", "assistant"}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(text_chunk_json(meta, "ris", false)["choices"][0]["delta"].contains("role"));
  const json last = final_chunk_json(meta, r);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["usage"]["total_tokens"], 10);
  EXPECT_TRUE(usage_chunk_json(meta, r.stats)["choices"].empty());
}

TEST(OpenAIFormat, SeveralChoicesShareOnePromptAndSumTheirTokens) {
  const ResponseMeta meta{Endpoint::ChatCompletions, "chatcmpl-2", 5, "tiny", std::nullopt};
  std::vector<GenerationResult> rs = {sample_result(), sample_result()};
  rs[1].text = "Lyon";
  rs[1].finish = FinishReason::Length;
  rs[1].stats.generated_tokens = 5;
  rs[1].stats.decode_ms = 50;
  rs[1].stats.spec.rounds = 2;
  const json doc = completion_json(meta, rs);
  ASSERT_EQ(doc["choices"].size(), 2u);
  EXPECT_EQ(doc["choices"][0]["index"], 0);
  EXPECT_EQ(doc["choices"][1]["index"], 1);
  EXPECT_EQ(doc["choices"][1]["message"]["content"], "Lyon");
  EXPECT_EQ(doc["choices"][1]["finish_reason"], "length");
  // One prompt; the choices' tokens added up; the slowest choice's time.
  EXPECT_EQ(doc["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(doc["usage"]["completion_tokens"], 8);
  EXPECT_EQ(doc["usage"]["total_tokens"], 15);
  EXPECT_EQ(doc["specdec"]["rounds"], 3);
  EXPECT_EQ(doc["specdec"]["drafted"], 8);
  EXPECT_DOUBLE_EQ(doc["specdec"]["decode_ms"].get<double>(), 50);
  EXPECT_EQ(text_chunk_json(meta, "x", true, nullptr, 1)["choices"][0]["index"], 1);
  EXPECT_EQ(final_chunk_json(meta, rs[1], nullptr, 1)["choices"][0]["index"], 1);
}

// Two control tokens (<|endoftext|> = 0, the end token, and <|im_start|> = 1) and "a" = 2,
// "b" = 3, "ab" = 4: enough to render logprobs by token text.
Tokenizer tiny_tokenizer() {
  VocabData vocab;
  vocab.pre = "gpt2";
  vocab.tokens = {"<|endoftext|>", "<|im_start|>", "a", "b", "ab"};
  vocab.token_types = {kTokenControl, kTokenControl, kTokenNormal, kTokenNormal, kTokenNormal};
  vocab.merges = {"a b"};
  vocab.eos = 0;
  return Tokenizer::from_vocab(vocab);
}

// echo: the prompt's tokens come first in a choice's logprobs, the first without a logprob
// (nothing precedes it), then the generated tokens with offsets past the echoed prompt.
TEST(OpenAIFormat, EchoedPromptLogprobsComeFirst) {
  const Tokenizer tok = tiny_tokenizer();
  ResponseMeta meta{Endpoint::Completions, "cmpl-3", 5, "tiny", LogprobFormat{&tok, false}};
  const int32_t a = 2, b = 3;
  // The prompt spelled out <|im_start|> (control, id 1): listed by name, and counted by the
  // offsets because the echoed text shows it.
  const EchoedPrompt prompt{"<|im_start|>ab", {1, a, b}};
  std::vector<TokenLogprob> entries(2);
  entries[0] = {a, -0.5f, {{a, -0.5f}, {b, -1.5f}}};
  entries[1] = {b, -2.0f, {{a, -0.25f}, {b, -2.0f}}};
  const json echo = echo_logprobs_json(meta, prompt, entries);
  EXPECT_EQ(echo["tokens"], json({"<|im_start|>", "a", "b"}));
  EXPECT_EQ(echo["token_logprobs"], json({nullptr, -0.5, -2.0}));
  EXPECT_TRUE(echo["top_logprobs"][0].is_null());
  EXPECT_EQ(echo["top_logprobs"][2], json({{"a", -0.25}, {"b", -2.0}}));
  EXPECT_EQ(echo["text_offset"], json({0, 12, 13}));
  // A control token the tokenizer added (not in the text) takes no room in it.
  const json added = echo_logprobs_json(meta, EchoedPrompt{"ab", {1, a, b}}, entries);
  EXPECT_EQ(added["text_offset"], json({0, 0, 1}));
  EXPECT_THROW(echo_logprobs_json(meta, prompt, std::span(entries).first(1)), Error);

  GenerationResult r = sample_result();
  r.text = "b";
  r.prompt_logprobs = entries;
  r.logprobs = {TokenLogprob{b, -0.75f, {{b, -0.75f}}}};
  const std::vector<EchoedPrompt> echoes = {prompt};
  const json doc = completion_json(meta, std::span(&r, 1), echoes);
  const json& choice = doc["choices"][0];
  EXPECT_EQ(choice["text"], "<|im_start|>abb");
  EXPECT_EQ(choice["logprobs"]["tokens"], json({"<|im_start|>", "a", "b", "b"}));
  EXPECT_EQ(choice["logprobs"]["token_logprobs"], json({nullptr, -0.5, -2.0, -0.75}));
  EXPECT_EQ(choice["logprobs"]["text_offset"], json({0, 12, 13, 14}));
  ASSERT_EQ(choice["logprobs"]["top_logprobs"].size(), 4u);
  // vLLM's return_tokens_as_token_ids names every token by its id.
  meta.logprobs->token_ids = true;
  const json ids = completion_json(meta, std::span(&r, 1), echoes)["choices"][0]["logprobs"];
  EXPECT_EQ(ids["tokens"], json({"token_id:1", "token_id:2", "token_id:3", "token_id:3"}));
  EXPECT_EQ(ids["top_logprobs"][1], json({{"token_id:2", -0.5}, {"token_id:3", -1.5}}));
  // Without logprobs the text is echoed all the same.
  meta.logprobs.reset();
  const json plain = completion_json(meta, std::span(&r, 1), echoes);
  EXPECT_EQ(plain["choices"][0]["text"], "<|im_start|>abb");
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

// vLLM's prompt_logprobs: null, then per token a map id -> {logprob, rank, decoded_token} with
// the token itself and its top_n alternatives.
TEST(OpenAIFormat, PromptLogprobsInVllmsShape) {
  const Tokenizer tok = tiny_tokenizer();
  const std::vector<int32_t> prompt = {2, 3, 3};
  std::vector<TokenLogprob> entries(2);
  entries[0] = {3, -1.5f, {{2, -0.5f}, {3, -1.5f}, {4, -1.5f}}, 2};
  entries[1] = {3, -3.0f, {{2, -0.25f}, {4, -1.0f}}, 5};
  const json pl = prompt_logprobs_json(tok, prompt, entries, 2);
  ASSERT_EQ(pl.size(), 3u);
  EXPECT_TRUE(pl[0].is_null());
  EXPECT_EQ(pl[1], json({{"2", {{"logprob", -0.5}, {"rank", 1}, {"decoded_token", "a"}}},
                         {"3", {{"logprob", -1.5}, {"rank", 2}, {"decoded_token", "b"}}}}));
  // The prompt token is listed with its own rank even outside the top 2.
  EXPECT_EQ(pl[2].size(), 3u);
  EXPECT_EQ(pl[2]["3"], json({{"logprob", -3.0}, {"rank", 5}, {"decoded_token", "b"}}));
  EXPECT_EQ(pl[2]["4"]["rank"], 2);
  EXPECT_EQ(prompt_logprobs_json(tok, prompt, entries, 0)[1].size(), 1u);
  EXPECT_THROW(prompt_logprobs_json(tok, prompt, std::span(entries).first(1), 1), Error);
}

// Several prompts: usage counts each prompt once, however many choices it has.
TEST(OpenAIFormat, SeveralPromptsCountEachPromptOnce) {
  std::vector<GenerationResult> rs(4, sample_result());
  rs[2].stats.prompt_tokens = 11;
  rs[2].stats.cached_tokens = 0;
  const GenerationStats two = combined_stats(rs, 2);
  EXPECT_EQ(two.prompt_tokens, 18);
  EXPECT_EQ(two.cached_tokens, 4);
  EXPECT_EQ(two.generated_tokens, 12);
  EXPECT_EQ(combined_stats(rs).prompt_tokens, 7);  // one prompt, four choices
  EXPECT_EQ(combined_stats(rs, 1).prompt_tokens, 32);
}

TEST(OpenAIFormat, SseFramingAndInvalidUtf8) {
  const std::string ev = sse_event(json{{"t", std::string("a\xff")}});
  EXPECT_EQ(ev.rfind("data: ", 0), 0u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  EXPECT_NE(ev.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD, not an exception
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAIFormat, ErrorShape) {
  const json e = error_json(invalid_request("bad n", "n", "invalid_value"));
  EXPECT_EQ(e, json({{"error",
                      {{"message", "bad n"},
                       {"type", "invalid_request_error"},
                       {"param", "n"},
                       {"code", "invalid_value"}}}}));
  const json e2 = error_json(ApiError(500, "boom", "server_error"));
  EXPECT_TRUE(e2["error"]["param"].is_null());
  EXPECT_TRUE(e2["error"]["code"].is_null());
}

TEST(OpenAIFormat, Models) {
  const json m = models_json("SmolLM2", 9);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "SmolLM2");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["type"], "model");  // Anthropic's fields beside OpenAI's
  EXPECT_EQ(m["data"][0]["display_name"], "SmolLM2");
  EXPECT_EQ(m["data"][0]["created_at"], "1970-01-01T00:00:09Z");
  EXPECT_EQ(m["has_more"], false);
  EXPECT_EQ(models_json("m", 1764892800)["data"][0]["created_at"], "2025-12-05T00:00:00Z");
}

}  // namespace
}  // namespace specdec::server
