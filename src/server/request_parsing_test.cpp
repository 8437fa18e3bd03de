// Every validation rule of the request parser: each bad input gives an ApiError with the right
// status, parameter and code, never another exception; good inputs give the documented values.
#include "server/request_parsing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"

namespace specdec::server {
namespace {

ApiError error_of(Endpoint e, const std::string& body) {
  try {
    parse_request(e, body);
  } catch (const ApiError& err) {
    return err;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

void expect_400(Endpoint e, const std::string& body, const std::string& param,
                const std::string& code) {
  const ApiError err = error_of(e, body);
  EXPECT_EQ(err.status(), 400) << body;
  EXPECT_EQ(err.type(), "invalid_request_error") << body;
  EXPECT_EQ(err.param(), param) << body << ": " << err.what();
  EXPECT_EQ(err.code(), code) << body << ": " << err.what();
}

constexpr auto kCmpl = Endpoint::Completions;
constexpr auto kChat = Endpoint::ChatCompletions;

TEST(RequestParsing, CompletionDefaultsFollowOpenAI) {
  const CompletionRequest r = parse_request(kCmpl, R"({"model":"m","prompt":"hi"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_FALSE(r.prompts[0].tokens.has_value());
  EXPECT_FALSE(r.echo);
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_FALSE(r.sampling.temperature_last);  // vLLM's order: the temperature first
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.speculative);
  EXPECT_FALSE(r.draft_max.has_value());
}

TEST(RequestParsing, EveryParameterIsRead) {
  const CompletionRequest r =
      parse_request(kCmpl, R"({"prompt":["p"],"max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,
                 "min_p":0.1,"seed":-5,"stop":["a","","b"],"n":1,"stream":true,
                 "stream_options":{"include_usage":true},"speculative":false,"draft_max":4,
                 "ignore_eos":true,"user":"ignored","frequency_penalty":0,
                 "temperature_last":true})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "p");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.sampling.temperature_last);
  EXPECT_EQ(r.seed, static_cast<uint64_t>(-5));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));  // empty stop strings dropped
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(r.speculative);
  EXPECT_EQ(r.draft_max, 4);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_TRUE(r.stop_token_ids.empty());
  EXPECT_EQ(r.min_tokens, 0);
  const CompletionRequest v = parse_request(
      kCmpl, R"({"prompt":"x","stop_token_ids":[5,0],"min_tokens":3,"max_tokens":3})");
  EXPECT_EQ(v.stop_token_ids, (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(v.min_tokens, 3);
  EXPECT_TRUE(parse_request(kCmpl, R"({"prompt":"x","stop_token_ids":[]})").stop_token_ids.empty());
}

// OpenAI's four prompt forms; token ids are taken as given (the server checks them against the
// vocabulary).
TEST(RequestParsing, PromptsAreStringsOrTokenIdsOneOrMany) {
  const CompletionRequest ids = parse_request(kCmpl, R"({"prompt":[5,0,7]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].tokens, (std::vector<int32_t>{5, 0, 7}));
  const CompletionRequest one_list = parse_request(kCmpl, R"({"prompt":[[9,8]]})");
  ASSERT_EQ(one_list.prompts.size(), 1u);
  EXPECT_EQ(one_list.prompts[0].tokens, (std::vector<int32_t>{9, 8}));
  const CompletionRequest many = parse_request(kCmpl, R"({"prompt":["a",[1,2],"b"],"n":2})");
  ASSERT_EQ(many.prompts.size(), 3u);
  EXPECT_EQ(many.prompts[0].text, "a");
  EXPECT_FALSE(many.prompts[0].tokens.has_value());
  EXPECT_EQ(many.prompts[1].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(many.prompts[2].text, "b");
  EXPECT_EQ(many.n, 2);
  // 64 choices in all is the limit: 4 prompts x 16, or 64 prompts.
  std::string sixty_four = R"({"prompt":[)";
  for (int i = 0; i < 64; ++i) sixty_four += i ? R"(,"p")" : R"("p")";
  EXPECT_EQ(parse_request(kCmpl, sixty_four + "]}").prompts.size(), 64u);
  expect_400(kCmpl, sixty_four + R"(,"p"]})", "prompt", "invalid_value");
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":["a","b","c","d"],"n":16})").prompts.size(), 4u);
}

// echo (completions): the prompt comes back before the text; max_tokens 0 is then allowed.
TEST(RequestParsing, EchoAllowsMaxTokensZero) {
  const CompletionRequest r =
      parse_request(kCmpl, R"({"prompt":"x","echo":true,"max_tokens":0,"logprobs":1})");
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_EQ(r.logprobs, 1);
  EXPECT_FALSE(parse_request(kCmpl, R"({"prompt":"x","echo":false})").echo);
  EXPECT_FALSE(r.tokens_as_ids);
  EXPECT_EQ(r.prompt_logprobs, -1);
  EXPECT_EQ(
      parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"prompt_logprobs":3})")
          .prompt_logprobs,
      3);
  EXPECT_TRUE(
      parse_request(kCmpl, R"({"prompt":"x","return_tokens_as_token_ids":true})").tokens_as_ids);
  EXPECT_FALSE(
      parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"echo":false})").echo);
}

TEST(RequestParsing, NullMeansDefaultAndIntegralFloatsAreIntegers) {
  const CompletionRequest r = parse_request(
      kCmpl, R"({"prompt":"x","max_tokens":null,"temperature":null,"stop":null,"n":1.0,
                 "seed":3.0})");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.seed, 3u);
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x","stop":"END"})").stop,
            (std::vector<std::string>{"END"}));
}

TEST(RequestParsing, ChatMessages) {
  const CompletionRequest r =
      parse_request(kChat, R"({"messages":[{"role":"developer","content":"be brief"},
                             {"role":"user","content":[{"type":"text","text":"a"},
                                                       {"type":"text","text":"b"}]},
                             {"role":"assistant","content":null}],
                 "max_completion_tokens":9,"max_tokens":3})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);
}

TEST(RequestParsing, AFinalAssistantMessageIsContinuedOnlyWhenAsked) {
  const std::string turns =
      R"("messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"The"}])";
  const CompletionRequest plain = parse_request(kChat, "{" + turns + "}");
  EXPECT_EQ(plain.messages.size(), 2u);  // a finished turn; a new one opens
  EXPECT_TRUE(plain.add_generation_prompt);
  EXPECT_EQ(plain.prefill, "");
  for (const char* flags : {R"("continue_final_message":true)",
                            R"("continue_final_message":true,"add_generation_prompt":false)"}) {
    const CompletionRequest r = parse_request(kChat, "{" + turns + "," + flags + "}");
    ASSERT_EQ(r.messages.size(), 1u) << flags;
    EXPECT_EQ(r.prefill, "The");
    EXPECT_TRUE(r.add_generation_prompt);  // the template opens the turn the prefill is in
  }
  const CompletionRequest closed =
      parse_request(kChat, "{" + turns + R"(,"add_generation_prompt":false})");
  EXPECT_FALSE(closed.add_generation_prompt);
  EXPECT_EQ(closed.messages.size(), 2u);
  expect_400(kChat, "{" + turns + R"(,"continue_final_message":true,"add_generation_prompt":true})",
             "add_generation_prompt", "invalid_value");
  expect_400(kChat, R"({"messages":[{"role":"user","content":"x"}],"continue_final_message":true})",
             "continue_final_message", "invalid_value");
  expect_400(kChat,
             R"({"messages":[{"role":"assistant","content":"x"}],"continue_final_message":true})",
             "continue_final_message", "invalid_value");
  expect_400(kChat, "{" + turns + R"(,"continue_final_message":1})", "continue_final_message",
             "invalid_type");
}

TEST(RequestParsing, ChatTemplateKwargsSwitchThinkingOnly) {
  const std::string user = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_FALSE(parse_request(kChat, "{" + user + "}").enable_thinking.has_value());
  EXPECT_EQ(
      parse_request(kChat, "{" + user + R"(,"chat_template_kwargs":{"enable_thinking":false}})")
          .enable_thinking,
      false);
  EXPECT_EQ(
      parse_request(kChat, "{" + user + R"(,"chat_template_kwargs":{"enable_thinking":true}})")
          .enable_thinking,
      true);
  EXPECT_FALSE(parse_request(kChat, "{" + user + R"(,"chat_template_kwargs":{}})")
                   .enable_thinking.has_value());
  expect_400(kChat, "{" + user + R"(,"chat_template_kwargs":{"custom":1}})",
             "chat_template_kwargs.custom", "unsupported_value");
  expect_400(kChat, "{" + user + R"(,"chat_template_kwargs":{"enable_thinking":"no"}})",
             "chat_template_kwargs.enable_thinking", "invalid_type");
  expect_400(kChat, "{" + user + R"(,"chat_template_kwargs":[1]})", "chat_template_kwargs",
             "invalid_type");
}

TEST(RequestParsing, ReasoningFormatAsLlamaServerNamesIt) {
  const std::string user = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(parse_request(kChat, "{" + user + "}").reasoning_format, ReasoningFormat::Auto);
  EXPECT_EQ(parse_request(kChat, "{" + user + R"(,"reasoning_format":"none"})").reasoning_format,
            ReasoningFormat::None);
  EXPECT_EQ(
      parse_request(kChat, "{" + user + R"(,"reasoning_format":"deepseek"})").reasoning_format,
      ReasoningFormat::Deepseek);
  EXPECT_EQ(parse_request(kChat, "{" + user + R"(,"reasoning_format":"auto"})").reasoning_format,
            ReasoningFormat::Auto);
  EXPECT_EQ(parse_request(kChat, "{" + user + R"(,"reasoning_format":"deepseek-legacy"})")
                .reasoning_format,
            ReasoningFormat::DeepseekLegacy);
  expect_400(kChat, "{" + user + R"(,"reasoning_format":"raw"})", "reasoning_format",
             "invalid_value");
  expect_400(kChat, "{" + user + R"(,"reasoning_format":0})", "reasoning_format", "invalid_type");
  EXPECT_EQ(reasoning_format_named("None"), std::nullopt);  // llama.cpp's names are lower case
  // llama-server's reasoning budget: -1 (none) unless given.
  EXPECT_EQ(parse_request(kChat, "{" + user + "}").reasoning_budget, -1);
  const CompletionRequest b = parse_request(
      kChat, "{" + user + R"(,"reasoning_budget_tokens":64,"reasoning_budget_message":"Done."})");
  EXPECT_EQ(b.reasoning_budget, 64);
  EXPECT_EQ(b.reasoning_budget_message, "Done.");
  expect_400(kChat, "{" + user + R"(,"reasoning_budget_tokens":-2})", "reasoning_budget_tokens",
             "invalid_value");
  // llama-server's alias, read where reasoning_budget_tokens is absent.
  EXPECT_EQ(parse_request(kChat, "{" + user + R"(,"thinking_budget_tokens":12})").reasoning_budget,
            12);
  expect_400(kChat, "{" + user + R"(,"thinking_budget_tokens":"12"})", "thinking_budget_tokens",
             "invalid_type");
  expect_400(kChat, "{" + user + R"(,"reasoning_budget_message":[]})", "reasoning_budget_message",
             "invalid_type");
}

TEST(RequestParsing, MalformedBodies) {
  for (const char* body :
       {"", "{", "not json", "{\"prompt\":\"x\",}", "\xff\xfe", "{\"prompt\":\"\xc3\x28\"}"}) {
    expect_400(kCmpl, body, "", "invalid_json");
  }
  for (const char* body : {"[]", "\"x\"", "3", "null"}) {
    expect_400(kCmpl, body, "body", "invalid_type");
  }
}

TEST(RequestParsing, WrongTypes) {
  struct Case {
    Endpoint e;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {kCmpl, R"({"prompt":3})", "prompt"},
      {kCmpl, R"({"prompt":[true]})", "prompt[0]"},
      {kCmpl, R"({"prompt":["a",[]]})", "prompt[1]"},
      {kCmpl, R"({"prompt":["a",{}]})", "prompt[1]"},
      {kCmpl, R"({"prompt":{}})", "prompt"},
      {kCmpl, R"({"prompt":"x","model":1})", "model"},
      {kCmpl, R"({"prompt":"x","max_tokens":"5"})", "max_tokens"},
      {kCmpl, R"({"prompt":"x","max_tokens":2.5})", "max_tokens"},
      {kCmpl, R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {kCmpl, R"({"prompt":"x","top_p":true})", "top_p"},
      {kCmpl, R"({"prompt":"x","top_k":1.5})", "top_k"},
      {kCmpl, R"({"prompt":"x","min_p":[]})", "min_p"},
      {kCmpl, R"({"prompt":"x","seed":"1"})", "seed"},
      {kCmpl, R"({"prompt":"x","stop":5})", "stop"},
      {kCmpl, R"({"prompt":"x","stop":["a",1]})", "stop"},
      {kCmpl, R"({"prompt":"x","n":"1"})", "n"},
      {kCmpl, R"({"prompt":"x","stream":"yes"})", "stream"},
      {kCmpl, R"({"prompt":"x","stream_options":true})", "stream_options"},
      {kCmpl, R"({"prompt":"x","stream_options":{"include_usage":1}})", "include_usage"},
      {kCmpl, R"({"prompt":"x","speculative":1})", "speculative"},
      {kCmpl, R"({"prompt":"x","draft_max":"4"})", "draft_max"},
      {kCmpl, R"({"prompt":"x","ignore_eos":0})", "ignore_eos"},
      {kChat, R"({"messages":"hi"})", "messages"},
      {kChat, R"({"messages":["hi"]})", "messages[0]"},
      {kChat, R"({"messages":[{"content":"hi"}]})", "messages[0].role"},
      {kChat, R"({"messages":[{"role":1,"content":"hi"}]})", "messages[0].role"},
      {kChat, R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {kChat, R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":{}}]})",
       "messages[1].content"},
  };
  for (const Case& c : cases) expect_400(c.e, c.body, c.param, "invalid_type");
}

TEST(RequestParsing, OutOfRangeAndUnsupportedValues) {
  struct Case {
    Endpoint e;
    const char* body;
    const char* param;
    const char* code;
  };
  const Case cases[] = {
      {kCmpl, R"({"prompt":"x","max_tokens":0})", "max_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","max_tokens":-1})", "max_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","max_tokens":99999999999})", "max_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","max_tokens":18446744073709551615})", "max_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","temperature":-0.1})", "temperature", "invalid_value"},
      {kCmpl, R"({"prompt":"x","temperature":2.5})", "temperature", "invalid_value"},
      {kCmpl, R"({"prompt":"x","top_p":1.5})", "top_p", "invalid_value"},
      {kCmpl, R"({"prompt":"x","top_k":-1})", "top_k", "invalid_value"},
      {kCmpl, R"({"prompt":"x","min_p":2})", "min_p", "invalid_value"},
      {kCmpl, R"({"prompt":"x","n":17})", "n", "invalid_value"},
      {kCmpl, R"({"prompt":"x","n":3,"best_of":2})", "best_of", "invalid_value"},
      {kCmpl, R"({"prompt":"x","best_of":17})", "best_of", "invalid_value"},
      {kCmpl, R"({"prompt":"x","best_of":3,"stream":true})", "best_of", "unsupported_value"},
      {kCmpl, R"({"prompt":["a","b","c","d","e"],"best_of":16})", "best_of", "invalid_value"},
      {kCmpl, R"({"prompt":"x","n":0})", "n", "invalid_value"},
      {kCmpl, R"({"prompt":"x","draft_max":0})", "draft_max", "invalid_value"},
      {kCmpl, R"({"prompt":"x","draft_max":65})", "draft_max", "invalid_value"},
      {kCmpl, R"({"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13",
                 "14","15","16","17"]})",
       "stop", "invalid_value"},
      {kCmpl, R"({"prompt":[]})", "prompt", "invalid_value"},
      {kCmpl, R"({"prompt":[1,-2]})", "prompt", "invalid_value"},
      {kCmpl, R"({"prompt":[1,2.5]})", "prompt", "invalid_value"},
      {kCmpl, R"({"prompt":[1,"a"]})", "prompt", "invalid_value"},
      {kCmpl, R"({"prompt":[[1],[3000000000]]})", "prompt[1]", "invalid_value"},
      {kCmpl, R"({"prompt":["a","b","c","d","e"],"n":13})", "n", "invalid_value"},
      {kCmpl, R"({"prompt":"x","echo":false,"max_tokens":0})", "max_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","echo":true,"max_tokens":-1})", "max_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","echo":1})", "echo", "invalid_type"},
      {kCmpl, R"({"prompt":"x","stop_token_ids":5})", "stop_token_ids", "invalid_type"},
      {kCmpl, R"({"prompt":"x","stop_token_ids":["a"]})", "stop_token_ids", "invalid_type"},
      {kCmpl, R"({"prompt":"x","stop_token_ids":[1,-1]})", "stop_token_ids", "invalid_value"},
      {kCmpl, R"({"prompt":"x","min_tokens":-1})", "min_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","prompt_logprobs":21})", "prompt_logprobs", "invalid_value"},
      {kCmpl, R"({"prompt":"x","prompt_logprobs":1,"stream":true})", "prompt_logprobs",
       "unsupported_value"},
      {kCmpl, R"({"prompt":"x","min_tokens":5,"max_tokens":4})", "min_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","return_tokens_as_token_ids":"yes"})", "return_tokens_as_token_ids",
       "invalid_type"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"echo":true})", "echo",
       "unsupported_value"},
      {kCmpl, R"({"prompt":"x","logprobs":21})", "logprobs", "invalid_value"},
      {kCmpl, R"({"prompt":"x","logprobs":true})", "logprobs", "invalid_type"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})", "logprobs",
       "invalid_type"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs",
       "invalid_value"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
       "top_logprobs", "invalid_value"},
      {kCmpl, R"({"model":"m"})", "prompt", "missing_required"},
      {kCmpl, R"({"prompt":null})", "prompt", "missing_required"},
      {kChat, R"({"model":"m"})", "messages", "missing_required"},
      {kChat, R"({"messages":[]})", "messages", "invalid_value"},
      {kChat, R"({"messages":[{"role":"function","content":"x"}]})", "messages[0].role",
       "invalid_value"},
      {kChat, R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":3}}]}]})",
       "messages[0].tool_calls[0]", "invalid_value"},
      {kChat, R"({"messages":[{"role":"assistant","tool_calls":{}}]})", "messages[0].tool_calls",
       "invalid_type"},
      {kCmpl, R"({"prompt":"x","tool_choice":"required"})", "tools", "unsupported_value"},
      {kChat, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
       "messages[0].content", "invalid_value"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})",
       "max_completion_tokens", "invalid_value"},
      {kCmpl, R"({"prompt":"x","presence_penalty":2.5})", "presence_penalty", "invalid_value"},
      {kCmpl, R"({"prompt":"x","frequency_penalty":-3})", "frequency_penalty", "invalid_value"},
      {kCmpl, R"({"prompt":"x","repetition_penalty":0})", "repetition_penalty", "invalid_value"},
      {kCmpl, R"({"prompt":"x","repeat_penalty":11})", "repeat_penalty", "invalid_value"},
      {kCmpl, R"({"prompt":"x","logit_bias":{"abc":1}})", "logit_bias", "invalid_value"},
      {kCmpl, R"({"prompt":"x","logit_bias":{"-1":1}})", "logit_bias", "invalid_value"},
      {kCmpl, R"({"prompt":"x","logit_bias":{"12x":1}})", "logit_bias", "invalid_value"},
      {kCmpl, R"({"prompt":"x","logit_bias":{"99999999999":1}})", "logit_bias", "invalid_value"},
      {kCmpl, R"({"prompt":"x","logit_bias":{"5":101}})", "logit_bias", "invalid_value"},
      {kCmpl, R"({"prompt":"x","response_format":{"type":"yaml"}})", "response_format",
       "unsupported_value"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":"json"})",
       "response_format", "invalid_type"},
      {kCmpl, R"({"prompt":"x","response_format":{"type":"json_schema"}})", "response_format",
       "invalid_value"},
      {kCmpl, R"({"prompt":"x","grammar":"root ::= \"a"})", "grammar", "invalid_value"},
      {kCmpl, R"({"prompt":"x","grammar":"root ::= undefined-rule"})", "grammar", "invalid_value"},
      {kCmpl, R"({"prompt":"x","grammar":7})", "grammar", "invalid_type"},
      {kCmpl, R"({"prompt":"x","json_schema":{"type":"string","pattern":"(a)\\1"}})", "json_schema",
       "invalid_value"},
      {kCmpl, R"({"prompt":"x","guided_json":"{not json"})", "guided_json", "invalid_value"},
      {kCmpl, R"({"prompt":"x","guided_choice":[]})", "guided_choice", "invalid_type"},
      {kCmpl, R"({"prompt":"x","guided_choice":["a",1]})", "guided_choice", "invalid_type"},
      {kCmpl, R"j({"prompt":"x","guided_regex":"a(?=b)"})j", "guided_regex", "invalid_value"},
      {kCmpl, R"({"prompt":"x","guided_regex":["a"]})", "guided_regex", "invalid_type"},
      {kCmpl, R"({"prompt":"x","guided_regex":"a","guided_choice":["a"]})", "guided_regex",
       "invalid_value"},
      {kCmpl, R"({"prompt":"x","structured_outputs":"json"})", "structured_outputs",
       "invalid_type"},
      {kCmpl, R"({"prompt":"x","structured_outputs":{"whitespace_pattern":" "}})",
       "structured_outputs.whitespace_pattern", "unsupported_value"},
      {kCmpl, R"({"prompt":"x","structured_outputs":{"regex":"a","choice":["a"]}})",
       "structured_outputs.regex", "invalid_value"},
      {kCmpl, R"({"prompt":"x","structured_outputs":{"json_object":1}})",
       "structured_outputs.json_object", "invalid_type"},
      {kCmpl, R"({"prompt":"x","structured_outputs":{"grammar":"root ::= x"}})",
       "structured_outputs.grammar", "invalid_value"},
      {kCmpl, R"({"prompt":"x","structured_outputs":{"json":{"multipleOf":2}}})",
       "structured_outputs.json", "invalid_value"},
      {kCmpl, R"({"prompt":"x","grammar":"root ::= \"a\"","json_schema":{}})", "json_schema",
       "invalid_value"},
      {kChat,
       R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},
           "guided_grammar":"root ::= \"a\""})",
       "guided_grammar", "invalid_value"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
       "tools[0].function", "invalid_value"},
      {kCmpl, R"({"prompt":"x","suffix":3})", "suffix", "invalid_type"},
      {kCmpl, R"({"prompt":"x","suffix":"tail","echo":true})", "suffix", "invalid_value"},
      {kCmpl, R"({"prompt":[1,2],"suffix":"tail"})", "suffix", "invalid_value"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"suffix":"tail"})", "suffix",
       "unsupported_value"},
  };
  for (const Case& c : cases) expect_400(c.e, c.body, c.param, c.code);
}

TEST(RequestParsing, TokenizeAndDetokenizeBodies) {
  EXPECT_EQ(parse_tokenize(R"({"content":"hi"})").text, "hi");             // llama-server
  EXPECT_EQ(parse_tokenize(R"({"prompt":"yo","model":"m"})").text, "yo");  // vLLM
  EXPECT_EQ(parse_tokenize(R"({"prompt":"yo","model":"m"})").model, "m");
  const TokenizeRequest chat =
      parse_tokenize(R"({"messages":[{"role":"user","content":"x"}],"with_pieces":true})");
  EXPECT_TRUE(chat.chat);
  EXPECT_TRUE(chat.with_pieces);
  ASSERT_EQ(chat.messages.size(), 1u);
  EXPECT_EQ(parse_detokenize(R"({"tokens":[1,2,3]})").tokens, (std::vector<int32_t>{1, 2, 3}));
  const auto bad = [](auto parse, const char* body, const char* param, const char* code) {
    try {
      parse(body);
      ADD_FAILURE() << "no error for " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      EXPECT_EQ(e.param(), param) << body;
      EXPECT_EQ(e.code(), code) << body;
    }
  };
  bad(parse_tokenize, R"({})", "content", "missing_required");
  bad(parse_tokenize, R"({"content":5})", "content", "invalid_type");
  bad(parse_tokenize, R"({"messages":[]})", "messages", "invalid_value");
  bad(parse_tokenize, R"([1])", "body", "invalid_type");
  bad(parse_detokenize, R"({})", "tokens", "missing_required");
  bad(parse_detokenize, R"({"tokens":"1 2"})", "tokens", "invalid_type");
  bad(parse_detokenize, R"({"tokens":[1,-2]})", "tokens", "invalid_value");
  bad(parse_detokenize, R"({"tokens":[1.5]})", "tokens", "invalid_value");
  bad(parse_detokenize, R"({"tokens":[99999999999]})", "tokens", "invalid_value");
}

TEST(RequestParsing, SeveralChoices) {
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x"})").n, 1);
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x","n":16,"best_of":16})").n, 16);
  // best_of sequences, the n best returned: completions only, never streamed.
  const CompletionRequest best = parse_request(kCmpl, R"({"prompt":"x","n":2,"best_of":5})");
  EXPECT_EQ(best.n, 2);
  EXPECT_EQ(best.best_of, 5);
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x","n":3})").best_of, 3);
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x","best_of":2,"n":2,"stream":true})").best_of, 2);
  EXPECT_THROW(parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"best_of":2})"),
               ApiError);
  EXPECT_EQ(parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"n":3})").n, 3);
}

TEST(RequestParsing, SuffixIsReadForFillInTheMiddle) {
  const CompletionRequest r =
      parse_request(kCmpl, R"J({"prompt":["def f(x):","def g(y):"],"suffix":"\nprint(1)"})J");
  EXPECT_EQ(r.suffix, "\nprint(1)");
  EXPECT_TRUE(parse_request(kCmpl, R"({"prompt":"x","suffix":""})").suffix.empty());
}

// Every API's name for structured output compiles to a grammar that takes what it promises
// and refuses the rest (the grammar module's tests cover the grammars themselves).
TEST(RequestParsing, StructuredOutputFormsCompileToGrammars) {
  const auto accepts = [](const CompletionRequest& r, std::string_view text) {
    if (!r.grammar) return false;
    GrammarState state(r.grammar);
    return state.accept(text) && state.complete();
  };
  const CompletionRequest plain = parse_request(kCmpl, R"({"prompt":"x"})");
  EXPECT_EQ(plain.grammar, nullptr);
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x","response_format":{"type":"text"}})").grammar,
            nullptr);
  const CompletionRequest object =
      parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],
                               "response_format":{"type":"json_object"}})");
  EXPECT_TRUE(accepts(object, R"({"a": [1, 2.5, "x"], "b": null})"));
  EXPECT_FALSE(accepts(object, R"([1, 2])"));
  EXPECT_FALSE(accepts(object, R"({"a": 1)"));
  const char* schema = R"({"type":"object","properties":{"n":{"type":"integer"}},
                           "required":["n"],"additionalProperties":false})";
  for (const std::string& body :
       {str_cat(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":)",
                R"({"name":"n","strict":true,"schema":)", schema, "}}}"),
        str_cat(R"({"prompt":"x","response_format":{"type":"json_object","schema":)", schema, "}}"),
        str_cat(R"({"prompt":"x","json_schema":)", schema, "}"),
        str_cat(R"({"prompt":"x","guided_json":)", schema, "}"),
        str_cat(R"({"prompt":"x","guided_json":)", nlohmann::json(std::string(schema)).dump(),
                "}")}) {
    const CompletionRequest r = parse_request(kCmpl, body);
    EXPECT_TRUE(accepts(r, R"({"n": 42})")) << body;
    EXPECT_FALSE(accepts(r, R"({"n": "42"})")) << body;
    EXPECT_FALSE(accepts(r, R"({"n": 4, "m": 1})")) << body;
  }
  const CompletionRequest gbnf =
      parse_request(kCmpl, R"({"prompt":"x","grammar":"root ::= [a-c]+ \"!\""})");
  EXPECT_TRUE(accepts(gbnf, "abca!"));
  EXPECT_FALSE(accepts(gbnf, "abd!"));
  EXPECT_TRUE(
      accepts(parse_request(kCmpl, R"({"prompt":"x","guided_grammar":"root ::= \"q\""})"), "q"));
  const CompletionRequest choice =
      parse_request(kCmpl, R"({"prompt":"x","guided_choice":["yes","no","say \"hi\"\\"]})");
  EXPECT_TRUE(accepts(choice, "yes"));
  EXPECT_TRUE(accepts(choice, "no"));
  EXPECT_TRUE(accepts(choice, "say \"hi\"\\"));
  EXPECT_FALSE(accepts(choice, "yesno"));
  EXPECT_FALSE(accepts(choice, "maybe"));
  // guided_regex: the whole output matches.
  const CompletionRequest regex =
      parse_request(kCmpl, R"({"prompt":"x","guided_regex":"\\d{3}-[a-z]+"})");
  EXPECT_TRUE(accepts(regex, "123-abc"));
  EXPECT_FALSE(accepts(regex, "x123-abc"));
  EXPECT_FALSE(accepts(regex, "12-abc"));
  // vLLM's structured_outputs: the same constraints under one object.
  const auto so = [](const char* inner) {
    return parse_request(kCmpl, str_cat(R"({"prompt":"x","structured_outputs":)", inner, "}"));
  };
  EXPECT_TRUE(accepts(so(R"({"regex":"(yes|no)!"})"), "no!"));
  EXPECT_FALSE(accepts(so(R"({"regex":"(yes|no)!"})"), "maybe!"));
  EXPECT_TRUE(accepts(so(R"({"choice":["red","green"]})"), "green"));
  EXPECT_FALSE(accepts(so(R"({"choice":["red","green"]})"), "blue"));
  EXPECT_TRUE(accepts(so(R"({"grammar":"root ::= \"q\"+"})"), "qqq"));
  EXPECT_TRUE(accepts(so(R"({"json":{"type":"object","properties":{"n":{"type":"integer"}},
                                     "required":["n"]}})"),
                      R"({"n": 42})"));
  EXPECT_FALSE(accepts(so(R"({"json":"{\"type\":\"integer\"}"})"), "\"a\""));
  EXPECT_TRUE(accepts(so(R"({"json_object":true})"), R"({"a": [1]})"));
  EXPECT_FALSE(accepts(so(R"({"json_object":true})"), "[1]"));
  // Fields left null or false, and the backend switch, constrain nothing.
  EXPECT_EQ(so(R"({"json_object":false,"regex":null,"disable_fallback":true})").grammar, nullptr);
}

TEST(RequestParsing, AGrammarTooAmbiguousToStartIsRefused) {
  // 5,000 choices that all begin alike: the start state would need a stack for each.
  std::string choices;
  for (int i = 0; i < 5000; ++i) choices += str_cat(i > 0 ? "," : "", "\"a", i, "\"");
  const std::string body = str_cat(R"({"prompt":"x","guided_choice":[)", choices, "]}");
  expect_400(kCmpl, body, "guided_choice", "invalid_value");
  EXPECT_NE(std::string(error_of(kCmpl, body).what()).find("ambiguous"), std::string::npos);
}

TEST(RequestParsing, ASchemaGivenAsTextIsHeldToTheBodysDepthLimit) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const std::string body = str_cat(R"({"prompt":"x","guided_json":")", deep, R"("})");
  expect_400(kCmpl, body, "guided_json", "invalid_value");
  // Refused before it is parsed, not by the schema converter after.
  EXPECT_NE(std::string(error_of(kCmpl, body).what()).find("'guided_json' is nested deeper"),
            std::string::npos);
}

TEST(RequestParsing, PenaltiesAndLogitBiasAreRead) {
  const CompletionRequest r =
      parse_request(kCmpl, R"({"prompt":"x","presence_penalty":0.5,"frequency_penalty":-1.5,
                 "repeat_penalty":1.1,"logit_bias":{"15":-100,"7":2.5},
                 "response_format":{"type":"text"},"tools":[],"suffix":""})");
  EXPECT_FLOAT_EQ(r.penalties.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.penalties.frequency_penalty, -1.5f);
  EXPECT_FLOAT_EQ(r.penalties.repetition_penalty, 1.1f);  // llama-server's name
  ASSERT_EQ(r.penalties.logit_bias.size(), 2u);
  std::vector<std::pair<int32_t, float>> bias = r.penalties.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias[0], (std::pair<int32_t, float>{7, 2.5f}));
  EXPECT_EQ(bias[1], (std::pair<int32_t, float>{15, -100.0f}));
  // vLLM's name wins over llama-server's; absent means off.
  const CompletionRequest both =
      parse_request(kCmpl, R"({"prompt":"x","repeat_penalty":1.1,"repetition_penalty":1.3})");
  EXPECT_FLOAT_EQ(both.penalties.repetition_penalty, 1.3f);
  EXPECT_FALSE(parse_request(kCmpl, R"({"prompt":"x"})").penalties.active());
  EXPECT_TRUE(parse_request(kCmpl, R"({"prompt":"x","logit_bias":{"3":0}})").penalties.active());
}

// llama-server reads its samplers list on the OpenAI-style endpoints too.
TEST(RequestParsing, TheSamplersListIsReadOnEveryEndpoint) {
  const CompletionRequest r = parse_request(
      kChat, R"({"messages":[{"role":"user","content":"x"}],"temperature":0.7,"top_p":0.9,
                 "min_p":0.1,"presence_penalty":0.5,"samplers":["penalties","top_k","top_p",
                 "temperature"]})");
  EXPECT_EQ(r.samplers, (std::vector<std::string>{"penalties", "top_p", "temperature"}));
  EXPECT_TRUE(r.sampling.temperature_last);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.0f);  // left out: off
  EXPECT_FLOAT_EQ(r.penalties.presence_penalty, 0.5f);
  const CompletionRequest letters =
      parse_request(kCmpl, R"({"prompt":"x","top_p":0.9,"samplers":"tp"})");
  EXPECT_FALSE(letters.sampling.temperature_last);
  // Without a list, OpenAI's (and vLLM's) order: the temperature first.
  EXPECT_TRUE(parse_request(kCmpl, R"({"prompt":"x"})").samplers.empty());
  expect_400(kCmpl, R"({"prompt":"x","top_p":0.9,"samplers":["top_p","temperature","min_p"],
                       "min_p":0.1})",
             "samplers", "invalid_value");
  expect_400(kCmpl, R"({"prompt":"x","samplers":{"top_k":1}})", "samplers", "invalid_type");
}

TEST(RequestParsing, ErrorMessagesNameTheParameterAndTheValue) {
  const ApiError err = error_of(kCmpl, R"({"prompt":"x","n":30})");
  EXPECT_NE(std::string(err.what()).find("'n'"), std::string::npos) << err.what();
  EXPECT_NE(std::string(err.what()).find("30"), std::string::npos) << err.what();
}

TEST(RequestParsing, UnknownModelIs404AndTheAliasesAreAccepted) {
  const std::vector<std::string> ids = {"SmolLM2", "specdec"};
  EXPECT_NO_THROW(check_model("", ids));
  EXPECT_NO_THROW(check_model("SmolLM2", ids));
  EXPECT_NO_THROW(check_model("specdec", ids));
  try {
    check_model("gpt-4", ids);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_EQ(e.code(), "model_not_found");
    EXPECT_EQ(e.param(), "model");
    EXPECT_NE(std::string(e.what()).find("gpt-4"), std::string::npos);
  }
}

TEST(RequestParsing, ContextLimitsAndDefaults) {
  CompletionRequest cmpl = parse_request(kCmpl, R"({"prompt":"x"})");
  EXPECT_EQ(resolve_max_tokens(cmpl, 10, 100), 16);  // OpenAI's completions default
  EXPECT_EQ(resolve_max_tokens(cmpl, 90, 100), 10);  // ... clipped to the room left
  CompletionRequest chat = parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(resolve_max_tokens(chat, 10, 100), 90);  // chat: the rest of the context
  cmpl.max_tokens = 90;
  EXPECT_EQ(resolve_max_tokens(cmpl, 10, 100), 90);  // exactly fills the context

  cmpl.max_tokens = 91;
  try {
    resolve_max_tokens(cmpl, 10, 100);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "context_length_exceeded");
    const std::string m = e.what();
    for (const char* n : {"100", "101", "10", "91"}) {
      EXPECT_NE(m.find(n), std::string::npos) << n << " in " << m;
    }
  }
  for (int32_t prompt_tokens : {0, 100, 150}) {
    try {
      resolve_max_tokens(chat, prompt_tokens, 100);
      FAIL() << prompt_tokens;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
}

}  // namespace
}  // namespace specdec::server

namespace specdec::server {
namespace {

TEST(RequestParsing, LogprobsOnBothEndpoints) {
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt":"x"})").logprobs, -1);
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt":"x","logprobs":0})").logprobs, 0);
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt":"x","logprobs":5})").logprobs, 5);
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions, "{" + msgs + "}").logprobs, -1);
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions, "{" + msgs + R"(,"logprobs":false})").logprobs,
            -1);
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions, "{" + msgs + R"(,"logprobs":true})").logprobs,
            0);
  EXPECT_EQ(
      parse_request(Endpoint::ChatCompletions, "{" + msgs + R"(,"logprobs":true,"top_logprobs":4})")
          .logprobs,
      4);
}

TEST(RequestParsing, JsonNestingDepthSkipsStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": "[[[{{{"}]})"), 3u);
  EXPECT_EQ(json_nesting_depth(R"({"a": "\"[[[\""})"), 1u);
  EXPECT_EQ(json_nesting_depth("12"), 0u);
}

TEST(RequestParsing, DeeplyNestedBodiesAreRefusedBeforeParsing) {
  const std::string deep = R"({"prompt": "x", "stop": )" + std::string(100000, '[') + "]";
  try {
    parse_request(Endpoint::Completions, deep);
    FAIL() << "accepted a body nested 100000 levels deep";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_json");
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  // Within the limit the usual validation answers (here: stop must hold strings).
  const std::string ok_depth = R"({"prompt": "x", "stop": [[[1]]]})";
  EXPECT_THROW(parse_request(Endpoint::Completions, ok_depth), ApiError);
}

TEST(RequestParsing, InvalidUtf8InAStringIsInvalidJson) {
  try {
    parse_request(Endpoint::Completions, "{\"prompt\": \"\xff\xfe\"}");
    FAIL() << "accepted invalid UTF-8";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_json");
  }
}

}  // namespace
}  // namespace specdec::server

namespace specdec::server {
namespace {

// llama-server's per-request speculative settings, on every completion endpoint it reads them.
TEST(RequestParsing, LlamaServersSpeculativeFields) {
  const CompletionRequest none =
      parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}]})");
  EXPECT_FALSE(none.draft_min.has_value());
  EXPECT_FALSE(none.draft_p_min.has_value());
  const CompletionRequest r = parse_request(
      kCmpl,
      R"({"prompt":"x","speculative.n_max":6,"speculative.n_min":2,"speculative.p_min":0.8})");
  EXPECT_EQ(r.draft_max, 6);
  EXPECT_EQ(r.draft_min, 2);
  ASSERT_TRUE(r.draft_p_min.has_value());
  EXPECT_FLOAT_EQ(*r.draft_p_min, 0.8f);
  EXPECT_TRUE(r.speculative);
  // n_max 0 is llama-server's "no drafts": no speculation.
  const CompletionRequest off =
      parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"speculative.n_max":0})");
  EXPECT_FALSE(off.speculative);
  EXPECT_FALSE(off.draft_max.has_value());
  // The same value under both names is fine; two values are not.
  EXPECT_EQ(parse_request(kCmpl, R"({"prompt":"x","draft_max":3,"speculative.n_max":3})").draft_max,
            3);
  expect_400(kCmpl, R"({"prompt":"x","draft_max":3,"speculative.n_max":4})", "speculative.n_max",
             "invalid_value");
  expect_400(kCmpl, R"({"prompt":"x","speculative.n_max":65})", "speculative.n_max",
             "invalid_value");
  expect_400(kCmpl, R"({"prompt":"x","speculative.n_min":-1})", "speculative.n_min",
             "invalid_value");
  expect_400(kChat, R"({"messages":[{"role":"user","content":"x"}],"speculative.p_min":1.5})",
             "speculative.p_min", "invalid_value");
  expect_400(kChat, R"({"messages":[{"role":"user","content":"x"}],"speculative.p_min":"high"})",
             "speculative.p_min", "invalid_type");
  expect_400(kChat, R"({"messages":[{"role":"user","content":"x"}],"speculative.n_min":2.5})",
             "speculative.n_min", "invalid_type");
}

}  // namespace
}  // namespace specdec::server
