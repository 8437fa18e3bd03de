#include "server/request_defaults.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "server/anthropic_api.h"
#include "server/legacy_functions.h"
#include "server/native_api.h"
#include "server/ollama_api.h"
#include "server/request_parsing.h"
#include "server/responses_api.h"

namespace specdec::server {
namespace {

using nlohmann::json;

const char* kChat = R"({"messages": [{"role": "user", "content": "hi"}]})";

RequestDefaults defaults(json fields) { return RequestDefaults{std::move(fields)}; }

TEST(RequestDefaults, FillOnlyWhatTheBodyLeavesOutOrSendsAsNull) {
  json body = {{"temperature", 0.2}, {"top_p", nullptr}, {"model", "m"}};
  fill_defaults(body, defaults({{"temperature", 0.9}, {"top_p", 0.5}, {"max_tokens", 7}}));
  EXPECT_EQ(body["temperature"], 0.2);  // the client's value wins
  EXPECT_EQ(body["top_p"], 0.5);        // null: "the default", the server's
  EXPECT_EQ(body["max_tokens"], 7);     // absent
  EXPECT_EQ(body["model"], "m");
  json array = json::array();
  fill_defaults(array, defaults({{"temperature", 0.9}}));  // not an object: left for the parser
  EXPECT_TRUE(array.empty());
}

// As llama-server reads it: a request's reasoning budget of -1 (or its alias
// thinking_budget_tokens at -1) is the server's --reasoning-budget; any other value is the
// request's own.
TEST(RequestDefaults, AReasoningBudgetOfMinusOneIsTheServers) {
  const RequestDefaults d = defaults({{"reasoning_budget_tokens", 64}});
  auto budget = [&d](const char* extra) {
    std::string body = kChat;
    body.insert(body.size() - 1, extra);
    return parse_request(Endpoint::ChatCompletions, body, d).reasoning_budget;
  };
  EXPECT_EQ(budget(""), 64);
  EXPECT_EQ(budget(R"(,"reasoning_budget_tokens":-1)"), 64);
  EXPECT_EQ(budget(R"(,"thinking_budget_tokens":-1)"), 64);
  EXPECT_EQ(budget(R"(,"reasoning_budget_tokens":null)"), 64);
  EXPECT_EQ(budget(R"(,"reasoning_budget_tokens":0)"), 0);
  EXPECT_EQ(budget(R"(,"reasoning_budget_tokens":8)"), 8);
  EXPECT_EQ(budget(R"(,"thinking_budget_tokens":8)"), 8);
  // Both given: reasoning_budget_tokens is the one read.
  EXPECT_EQ(budget(R"(,"reasoning_budget_tokens":8,"thinking_budget_tokens":3)"), 8);
  EXPECT_EQ(budget(R"(,"reasoning_budget_tokens":-1,"thinking_budget_tokens":3)"), 64);
  // Without a server default -1 stays "no budget".
  EXPECT_EQ(parse_request(Endpoint::ChatCompletions,
                          R"({"messages": [{"role": "user", "content": "hi"}],)"
                          R"("reasoning_budget_tokens": -1})",
                          defaults(json::object()))
                .reasoning_budget,
            -1);
}

TEST(RequestDefaults, TheOpenAiEndpointsTakeThemWhereTheRequestSaysNothing) {
  const RequestDefaults d = defaults({{"temperature", 0.3},
                                      {"top_k", 20},
                                      {"max_tokens", 64},
                                      {"seed", 11},
                                      {"repeat_penalty", 1.2},
                                      {"repeat_last_n", 32},
                                      {"samplers", {"penalties", "top_k", "temperature"}}});
  const CompletionRequest r = parse_request(Endpoint::ChatCompletions, kChat, d);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.3f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_EQ(r.seed, 11u);
  EXPECT_FLOAT_EQ(r.penalties.repetition_penalty, 1.2f);
  EXPECT_EQ(r.penalties.last_n, 32);
  EXPECT_EQ(r.samplers, (std::vector<std::string>{"penalties", "top_k", "temperature"}));
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);  // OpenAI's own default where the server has none

  // The request's own values win; max_completion_tokens wins over the default max_tokens too.
  const CompletionRequest own = parse_request(
      Endpoint::ChatCompletions,
      R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 1.5, "seed": 3,
          "max_completion_tokens": 9, "samplers": ["temperature", "top_k"]})",
      d);
  EXPECT_FLOAT_EQ(own.sampling.temperature, 1.5f);
  EXPECT_EQ(own.seed, 3u);
  EXPECT_EQ(own.max_tokens, 9);
  EXPECT_EQ(own.samplers, (std::vector<std::string>{"temperature", "top_k"}));
  EXPECT_FLOAT_EQ(own.penalties.repetition_penalty, 1.0f);  // its list leaves the penalties out

  // Without defaults, exactly what the endpoint did before.
  const CompletionRequest plain = parse_request(Endpoint::Completions, R"({"prompt": "x"})");
  EXPECT_FLOAT_EQ(plain.sampling.temperature, 1.0f);
  EXPECT_FALSE(plain.max_tokens.has_value());
  EXPECT_FALSE(plain.seed.has_value());

  bool legacy = false;
  EXPECT_EQ(parse_chat_request(kChat, legacy, d).max_tokens, 64);
}

TEST(RequestDefaults, TheServersLimitEndsAtTheContextWhereTheClientsIsRefused) {
  const RequestDefaults d = defaults({{"max_tokens", 500}});
  // 100 prompt tokens in a context of 256: the server's 500 becomes the 156 left.
  const CompletionRequest server = parse_request(Endpoint::ChatCompletions, kChat, d);
  EXPECT_TRUE(server.max_tokens_from_server);
  EXPECT_EQ(resolve_max_tokens(server, 100, 256), 156);
  EXPECT_EQ(resolve_max_tokens(server, 100, 1024), 500);
  // The client's own 500 is a 400, as without defaults; so is a prompt that fills the context.
  const CompletionRequest own = parse_request(
      Endpoint::ChatCompletions,
      R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 500})", d);
  EXPECT_FALSE(own.max_tokens_from_server);
  EXPECT_THROW(resolve_max_tokens(own, 100, 256), ApiError);
  EXPECT_THROW(resolve_max_tokens(server, 256, 256), ApiError);
  EXPECT_FALSE(parse_request(Endpoint::ChatCompletions, kChat).max_tokens_from_server);
}

TEST(RequestDefaults, TheServersDefaultsComeBeforeLlamaServersOnCompletion) {
  const RequestDefaults d = defaults({{"temperature", 0.1},
                                      {"top_k", 5},
                                      {"min_p", 0.2},
                                      {"max_tokens", 12},
                                      {"seed", 4},
                                      {"samplers", "kpmt"}});
  NativeRequest r = parse_native_request(NativeEndpoint::Completion, R"({"prompt": "x"})", d);
  EXPECT_FLOAT_EQ(r.base.sampling.temperature, 0.1f);
  EXPECT_EQ(r.base.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r.base.sampling.min_p, 0.2f);
  EXPECT_FLOAT_EQ(r.base.sampling.top_p, 0.95f);  // llama-server's, the server has none
  EXPECT_EQ(r.n_predict, 12);
  EXPECT_EQ(r.base.max_tokens, 12);
  EXPECT_EQ(r.base.seed, 4u);
  EXPECT_EQ(r.base.samplers, (std::vector<std::string>{"top_k", "top_p", "min_p", "temperature"}));
  EXPECT_TRUE(r.base.sampling.temperature_last);

  // The request's own: n_predict -1 (no limit) and seed -1 (random) are not replaced.
  r = parse_native_request(NativeEndpoint::Completion,
                           R"({"prompt": "x", "n_predict": -1, "seed": -1, "top_k": 0})", d);
  EXPECT_EQ(r.n_predict, -1);
  EXPECT_FALSE(r.base.max_tokens.has_value());
  EXPECT_FALSE(r.base.seed.has_value());
  EXPECT_EQ(r.base.sampling.top_k, 0);
  r = parse_native_request(NativeEndpoint::Completion, R"({"prompt": "x", "max_tokens": 3})", d);
  EXPECT_EQ(r.n_predict, 3);
}

TEST(RequestDefaults, TheServersDefaultsComeBeforeOllamasOwn) {
  const RequestDefaults d =
      defaults({{"temperature", 0.0}, {"repeat_penalty", 1.0}, {"max_tokens", 20}});
  OllamaRequest r =
      parse_ollama_chat(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})", d);
  EXPECT_EQ(r.request.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.request.penalties.repetition_penalty, 1.0f);
  EXPECT_EQ(r.request.sampling.top_k, 40);  // Ollama's, the server has none
  EXPECT_EQ(r.request.max_tokens, 20);
  // num_predict -1 asks for no limit: the server's max_tokens does not apply.
  r = parse_ollama_generate(R"({"model": "m", "prompt": "hi", "options": {"num_predict": -1}})", d);
  EXPECT_FALSE(r.request.max_tokens.has_value());
  r = parse_ollama_generate(
      R"({"model": "m", "prompt": "hi", "options": {"temperature": 0.5, "num_predict": 4}})", d);
  EXPECT_FLOAT_EQ(r.request.sampling.temperature, 0.5f);
  EXPECT_EQ(r.request.max_tokens, 4);

  // /api/show reports the defaults a request gets.
  const std::string params = ollama_show_json(ModelFacts{}, d)["parameters"];
  EXPECT_NE(params.find("temperature 0.0\n"), std::string::npos) << params;
  EXPECT_NE(params.find("top_k 40\n"), std::string::npos) << params;
  EXPECT_NE(params.find("repeat_penalty 1.0\n"), std::string::npos) << params;
}

TEST(RequestDefaults, AnthropicAndResponsesRequestsTakeThemToo) {
  const RequestDefaults d = defaults({{"temperature", 0.4}, {"top_p", 0.7}, {"max_tokens", 33}});
  const CompletionRequest a = parse_messages_request(
      R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})",
      /*count_only=*/false, d);
  EXPECT_FLOAT_EQ(a.sampling.temperature, 0.4f);
  EXPECT_FLOAT_EQ(a.sampling.top_p, 0.7f);
  EXPECT_EQ(a.max_tokens, 8);  // Anthropic's max_tokens is required, so always the client's

  const ResponsesRequest r = parse_responses_request(R"({"input": "hi", "top_p": 0.5})", d);
  EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.4f);
  EXPECT_FLOAT_EQ(r.chat.sampling.top_p, 0.5f);
  EXPECT_EQ(r.chat.max_tokens, 33);
  // The response object repeats what the request ran with.
  EXPECT_EQ(r.echo["temperature"], 0.4);
  EXPECT_EQ(r.echo["top_p"], 0.5);
  EXPECT_EQ(r.echo["max_output_tokens"], 33);
}

TEST(RequestDefaults, TheServersThinkingSwitchStaysUnlessTheRequestSetsIt) {
  // --reasoning-budget 0 --reasoning-format none.
  const RequestDefaults d = defaults(
      {{"chat_template_kwargs", {{"enable_thinking", false}}}, {"reasoning_format", "none"}});
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  CompletionRequest r = parse_request(Endpoint::ChatCompletions, "{" + user + "}", d);
  EXPECT_EQ(r.enable_thinking, false);
  EXPECT_EQ(r.reasoning_format, ReasoningFormat::None);
  // Variables merge one by one: an empty set keeps the server's, a request's own value wins.
  r = parse_request(Endpoint::ChatCompletions, "{" + user + R"(, "chat_template_kwargs": {}})", d);
  EXPECT_EQ(r.enable_thinking, false);
  r = parse_request(Endpoint::ChatCompletions,
                    "{" + user +
                        R"(, "chat_template_kwargs": {"enable_thinking": true},
                        "reasoning_format": "deepseek"})",
                    d);
  EXPECT_EQ(r.enable_thinking, true);
  EXPECT_EQ(r.reasoning_format, ReasoningFormat::Deepseek);
  // The other APIs' own switches win where they are sent and leave the server's where not.
  EXPECT_EQ(
      parse_ollama_chat(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})", d)
          .request.enable_thinking,
      false);
  EXPECT_EQ(
      parse_ollama_chat(
          R"({"model": "m", "think": true, "messages": [{"role": "user", "content": "hi"}]})", d)
          .request.enable_thinking,
      true);
  EXPECT_EQ(
      parse_messages_request(
          R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})",
          /*count_only=*/false, d)
          .enable_thinking,
      false);
  EXPECT_EQ(parse_messages_request(R"({"model": "m", "max_tokens": 8, "thinking": {"type":
                "enabled", "budget_tokens": 1024}, "messages": [{"role": "user", "content": "hi"}]})",
                                   /*count_only=*/false, d)
                .enable_thinking,
            true);
  EXPECT_EQ(parse_responses_request(R"({"input": "hi"})", d).chat.enable_thinking, false);
  EXPECT_EQ(parse_responses_request(R"({"input": "hi", "reasoning": {"effort": "low"}})", d)
                .chat.enable_thinking,
            true);
}

TEST(RequestDefaults, CheckedAsARequestThatSentThemWouldBe) {
  EXPECT_NO_THROW(check_request_defaults(defaults({{"temperature", 2.0}, {"max_tokens", 1}})));
  const auto param_of = [](json fields) {
    try {
      check_request_defaults(defaults(std::move(fields)));
    } catch (const ApiError& e) {
      return e.param();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(param_of({{"temperature", 2.5}}), "temperature");
  EXPECT_EQ(param_of({{"max_tokens", 0}}), "max_tokens");
  EXPECT_EQ(param_of({{"top_k", "many"}}), "top_k");
  // An order the engine does not apply, between two filters the defaults switch on.
  EXPECT_EQ(param_of({{"top_k", 40}, {"min_p", 0.1}, {"samplers", {"min_p", "top_k"}}}),
            "samplers");
  EXPECT_THROW(check_request_defaults(defaults(json::array())), Error);
}

}  // namespace
}  // namespace specdec::server
