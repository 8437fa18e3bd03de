#include "server/anthropic_api.h"

#include <gtest/gtest.h>

#include "server/refusal_test_support.h"

namespace specdec::server {
namespace {

using nlohmann::json;

CompletionRequest parse(const json& body, bool count_only = false) {
  return parse_messages_request(body.dump(), count_only);
}

const json kUser = json::array({{{"role", "user"}, {"content", "hi"}}});

// The refused field's name, as the error names it (param and message).
std::string refused(const json& body) {
  return testing::refused_field([](const json& b) { return parse(b); }, body);
}

TEST(AnthropicApi, TurnsBecomeTheChatMessagesTheyMean) {
  const json body = {
      {"model", "m"},
      {"max_tokens", 50},
      {"system", json::array({{{"type", "text"}, {"text", "Be brief."}},
                              {{"type", "text"}, {"text", "Be kind."}}})},
      {"messages",
       json::array(
           {{{"role", "user"}, {"content", "What is 2+3?"}},
            {{"role", "assistant"},
             {"content", json::array({{{"type", "thinking"}, {"thinking", "hm"}},
                                      {{"type", "text"}, {"text", "Calling."}},
                                      {{"type", "tool_use"},
                                       {"id", "toolu_1"},
                                       {"name", "add"},
                                       {"input", {{"a", 2}, {"b", 3}}}}})}},
            {{"role", "user"},
             {"content",
              json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "5"}},
                           {{"type", "tool_result"},
                            {"tool_use_id", "toolu_2"},
                            {"is_error", true},
                            {"content", json::array({{{"type", "text"}, {"text", "timeout"}}})}},
                           {{"type", "text"}, {"text", "Thanks."}}})}}})}};
  const CompletionRequest r = parse(body);
  EXPECT_EQ(r.endpoint, Endpoint::ChatCompletions);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 50);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);  // Anthropic's default
  EXPECT_TRUE(r.prefill.empty());
  const std::vector<ChatMessage>& m = r.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.\nBe kind.");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Calling.");  // the thinking block is not the model's text
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].name, "add");
  EXPECT_EQ(json::parse(m[2].tool_calls[0].arguments), json({{"a", 2}, {"b", 3}}));
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].content, "5");
  EXPECT_EQ(m[4].role, "tool");
  EXPECT_EQ(m[4].content, "Error: timeout");
  EXPECT_EQ(m[5].role, "user");
  EXPECT_EQ(m[5].content, "Thanks.");
}

TEST(AnthropicApi, AFinalAssistantTurnIsThePrefill) {
  const CompletionRequest r =
      parse({{"max_tokens", 5},
             {"messages",
              {{{"role", "user"}, {"content", "Name a colour."}},
               {{"role", "assistant"},
                {"content", json::array({{{"type", "text"}, {"text", "The "}},
                                         {{"type", "text"}, {"text", "colour"}}})}}}}});
  EXPECT_EQ(r.prefill, "The colour");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  // With a tool_use block it is a finished turn, not a prefill.
  const CompletionRequest t =
      parse({{"max_tokens", 5},
             {"messages",
              {{{"role", "user"}, {"content", "Add."}},
               {{"role", "assistant"},
                {"content", json::array({{{"type", "tool_use"},
                                          {"id", "t"},
                                          {"name", "add"},
                                          {"input", json::object()}}})}}}}});
  EXPECT_TRUE(t.prefill.empty());
  EXPECT_EQ(t.messages.size(), 2u);
  EXPECT_EQ(refused({{"max_tokens", 5},
                     {"messages", {{{"role", "assistant"}, {"content", "Only a prefill"}}}}}),
            "messages");
}

TEST(AnthropicApi, SamplingStopsToolsAndFormat) {
  const json schema = {
      {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  const CompletionRequest r =
      parse({{"max_tokens", 5},
             {"messages", kUser},
             {"temperature", 0.5},
             {"top_p", 0.9},
             {"top_k", 7},
             {"stop_sequences", {"END", "STOP"}},
             {"stream", true},
             {"seed", 4},
             {"metadata", {{"user_id", "u"}}},
             {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
             {"tools", {{{"name", "add"}, {"description", "Adds."}, {"input_schema", schema}}}},
             {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}}});
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.seed, 4u);
  ASSERT_EQ(r.tools.tools.size(), 1u);
  EXPECT_EQ(r.tools.tools[0].name, "add");
  // Rendered into the prompt as the OpenAI tool the chat template knows.
  const json def = json::parse(r.tools.tools[0].definition);
  EXPECT_EQ(def["type"], "function");
  EXPECT_EQ(def["function"]["parameters"], schema);
  EXPECT_EQ(def["function"]["description"], "Adds.");
  EXPECT_EQ(r.tools.choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.tools.parallel);
  EXPECT_NE(r.grammar, nullptr);  // "any" makes the reply a call
  const CompletionRequest named = parse({{"max_tokens", 5},
                                         {"messages", kUser},
                                         {"tools", {{{"name", "add"}, {"input_schema", schema}}}},
                                         {"tool_choice", {{"type", "tool"}, {"name", "add"}}}});
  EXPECT_EQ(named.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tools.named, "add");
  const CompletionRequest formatted =
      parse({{"max_tokens", 5},
             {"messages", kUser},
             {"output_config", {{"format", {{"type", "json_schema"}, {"schema", schema}}}}}});
  EXPECT_NE(formatted.grammar, nullptr);
  // thinking switches a thinking template: enabled, disabled, or (adaptive) its default.
  EXPECT_EQ(r.enable_thinking, true);
  for (const auto& [type, want] : {std::pair<const char*, std::optional<bool>>{"disabled", false},
                                   {"adaptive", std::nullopt}}) {
    EXPECT_EQ(parse({{"max_tokens", 5}, {"messages", kUser}, {"thinking", {{"type", type}}}})
                  .enable_thinking,
              want)
        << type;
  }
  // count_tokens takes no max_tokens and ignores sampling.
  EXPECT_FALSE(parse({{"messages", kUser}}, true).max_tokens.has_value());
}

TEST(AnthropicApi, RefusalsNameAnthropicsFields) {
  const json base = {{"max_tokens", 5}, {"messages", kUser}};
  const auto with = [&](const char* key, const json& v) {
    json b = base;
    b[key] = v;
    return b;
  };
  EXPECT_EQ(refused({{"messages", kUser}}), "max_tokens");
  EXPECT_EQ(refused(with("max_tokens", 0)), "max_tokens");
  EXPECT_EQ(refused(with("max_tokens", "5")), "max_tokens");
  EXPECT_EQ(refused(with("messages", json::array())), "messages");
  EXPECT_EQ(refused(with("messages", {{{"role", "system"}, {"content", "x"}}})),
            "messages[0].role");
  EXPECT_EQ(refused(with("messages", {{{"role", "user"}}})), "messages[0].content");
  EXPECT_EQ(refused(with("messages", {{{"role", "user"},
                                       {"content", {{{"type", "document"}, {"source", {}}}}}}})),
            "messages[0].content[0].type");
  EXPECT_EQ(refused(with("messages", {{{"role", "user"}, {"content", {{{"text", "no type"}}}}}})),
            "messages[0].content[0].type");
  EXPECT_EQ(
      refused(with("messages", {{{"role", "user"},
                                 {"content", {{{"type", "tool_result"}, {"content", "x"}}}}}})),
      "messages[0].content[0].tool_use_id");
  EXPECT_EQ(
      refused(with(
          "messages",
          {{{"role", "user"}, {"content", "x"}},
           {{"role", "assistant"},
            {"content",
             {{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", "not an object"}}}}}})),
      "messages[1].content[0].input");
  EXPECT_EQ(refused(with("temperature", 1.5)), "temperature");
  EXPECT_EQ(refused(with("top_p", 2)), "top_p");
  EXPECT_EQ(refused(with("stop_sequences", "END")), "stop_sequences");
  EXPECT_EQ(refused(with("stop_sequences", {1})), "stop_sequences");
  EXPECT_EQ(refused(with("system", {{{"type", "image"}}})), "system[0].type");
  EXPECT_EQ(refused(with("tools", {{{"type", "bash_20250124"}, {"name", "bash"}}})),
            "tools[0].type");
  EXPECT_EQ(refused(with("tools", {{{"name", "f"}}})), "tools[0].input_schema");
  EXPECT_EQ(refused(with("tools", {{{"name", "no spaces"}, {"input_schema", json::object()}}})),
            "tools[0].name");
  EXPECT_EQ(refused(with("tool_choice", {{"type", "tool"}})), "tool_choice.name");
  EXPECT_EQ(refused(with("tool_choice", "auto")), "tool_choice");
  EXPECT_EQ(refused(with("output_config", {{"format", {{"type", "json_schema"}}}})),
            "output_config.format.schema");
  EXPECT_EQ(refused(with("thinking", {{"type", "sometimes"}})), "thinking.type");
  EXPECT_THROW(parse_messages_request("{\"max_tokens\": ", false), ApiError);
  EXPECT_THROW(parse_messages_request(std::string(100000, '['), false), ApiError);
  EXPECT_THROW(parse_messages_request("[]", false), ApiError);
}

TEST(AnthropicApi, ErrorsInAnthropicsShape) {
  const json e = anthropic_error_json(invalid_request("'x' is bad", "x"));
  EXPECT_EQ(e, json({{"type", "error"},
                     {"error", {{"type", "invalid_request_error"}, {"message", "'x' is bad"}}}}));
  const auto type_of = [](int status) {
    return anthropic_error_json(ApiError(status, "m", "t"))["error"]["type"].get<std::string>();
  };
  EXPECT_EQ(type_of(401), "authentication_error");
  EXPECT_EQ(type_of(404), "not_found_error");
  EXPECT_EQ(type_of(413), "request_too_large");
  EXPECT_EQ(type_of(503), "overloaded_error");
  EXPECT_EQ(type_of(500), "api_error");
}

GenerationResult result_of(std::string text, FinishReason finish, std::string stop_text = "") {
  GenerationResult r;
  r.text = std::move(text);
  r.finish = finish;
  r.stop_text = std::move(stop_text);
  r.stats.prompt_tokens = 30;
  r.stats.cached_tokens = 20;
  r.stats.generated_tokens = 7;
  return r;
}

TEST(AnthropicApi, MessageStopReasonsAndUsage) {
  MessagesMeta meta{"msg_1", "m", {}, 9};
  const json doc = message_json(meta, result_of("Hello", FinishReason::Stop, "\n\n"));
  EXPECT_EQ(doc["id"], "msg_1");
  EXPECT_EQ(doc["type"], "message");
  EXPECT_EQ(doc["role"], "assistant");
  EXPECT_EQ(doc["content"], json::array({{{"type", "text"}, {"text", "Hello"}}}));
  EXPECT_EQ(doc["stop_reason"], "stop_sequence");
  EXPECT_EQ(doc["stop_sequence"], "\n\n");
  EXPECT_EQ(doc["usage"], json({{"input_tokens", 10},
                                {"cache_creation_input_tokens", 0},
                                {"cache_read_input_tokens", 20},
                                {"output_tokens", 7}}));
  const auto reason = [](FinishReason f) {
    return std::string(anthropic_stop_reason(result_of("", f), false));
  };
  EXPECT_EQ(reason(FinishReason::EndOfGeneration), "end_turn");
  EXPECT_EQ(reason(FinishReason::Stop), "end_turn");  // a stop token, no stop string
  EXPECT_EQ(reason(FinishReason::Length), "max_tokens");
  EXPECT_EQ(reason(FinishReason::ContextFull), "model_context_window_exceeded");
  EXPECT_EQ(message_json(meta, result_of("", FinishReason::EndOfGeneration))["content"],
            json::array());
}

TEST(AnthropicApi, ToolCallsBecomeToolUseBlocks) {
  MessagesMeta meta{"msg_2", "m", {"add"}, 9};
  const std::string text =
      "Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n"
      "</tool_call>";
  const json doc = message_json(meta, result_of(text, FinishReason::EndOfGeneration));
  ASSERT_EQ(doc["content"].size(), 2u);
  EXPECT_EQ(doc["content"][0], json({{"type", "text"}, {"text", "Let me add."}}));
  const json& use = doc["content"][1];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_TRUE(use["id"].get<std::string>().starts_with("toolu_"));
  EXPECT_EQ(use["id"].get<std::string>().size(), 6u + 24u);
  EXPECT_EQ(use["name"], "add");
  EXPECT_EQ(use["input"], json({{"a", 2}, {"b", 3}}));
  EXPECT_EQ(doc["stop_reason"], "tool_use");
  EXPECT_TRUE(doc["stop_sequence"].is_null());
  // The stream's blocks carry the same call.
  const SplitReply split = split_reply(meta, text);
  ASSERT_EQ(split.calls.size(), 1u);
  EXPECT_EQ(split.calls[0].id, use["id"]);
  EXPECT_EQ(tool_use_block_start_json(1, split.calls[0])["content_block"]["input"], json::object());
  EXPECT_EQ(
      json::parse(
          input_json_delta_json(1, split.calls[0])["delta"]["partial_json"].get<std::string>()),
      use["input"]);
  const json delta = message_delta_json(result_of(text, FinishReason::EndOfGeneration), true);
  EXPECT_EQ(delta["delta"]["stop_reason"], "tool_use");
  // Without tools the same text is all text.
  MessagesMeta plain{"msg_3", "m", {}, 9};
  EXPECT_EQ(
      message_json(plain, result_of(text, FinishReason::EndOfGeneration))["content"][0]["text"],
      text);
}

TEST(AnthropicApi, AThinkingModelsReasoningIsAThinkingBlock) {
  MessagesMeta meta{"msg_5", "m", {"add"}, 9, ReasoningMode{/*split=*/true, /*opened=*/false}};
  const std::string call =
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>";
  const json doc = message_json(
      meta, result_of("<think>\nAdd them.\n</think>\n\nSure.\n" + call, FinishReason::Stop));
  ASSERT_EQ(doc["content"].size(), 3u);
  EXPECT_EQ(doc["content"][0],
            json({{"type", "thinking"}, {"thinking", "Add them."}, {"signature", ""}}));
  EXPECT_EQ(doc["content"][1], json({{"type", "text"}, {"text", "Sure."}}));
  EXPECT_EQ(doc["content"][2]["type"], "tool_use");
  EXPECT_EQ(doc["stop_reason"], "tool_use");
  // A prefill that opened the block: the reply starts inside it.
  meta.reasoning.opened = true;
  const json opened = message_json(meta, result_of("so 5.\n</think>\n\n5", FinishReason::Stop));
  EXPECT_EQ(opened["content"][0]["thinking"], "so 5.");
  EXPECT_EQ(opened["content"][1]["text"], "5");
  // Without the template's tags the same text is all text.
  const json plain = message_json({"msg_6", "m", {}, 9},
                                  result_of("<think>\nx\n</think>\n\ny", FinishReason::Stop));
  ASSERT_EQ(plain["content"].size(), 1u);
  EXPECT_EQ(plain["content"][0]["text"], "<think>\nx\n</think>\n\ny");
  // The stream's events.
  EXPECT_EQ(thinking_block_start_json(0)["content_block"],
            json({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}));
  EXPECT_EQ(thinking_delta_json(0, "Add")["delta"],
            json({{"type", "thinking_delta"}, {"thinking", "Add"}}));
  EXPECT_EQ(signature_delta_json(0)["delta"]["type"], "signature_delta");
}

TEST(AnthropicApi, EventsAreNamedByTheirType) {
  EXPECT_EQ(anthropic_event(message_stop_json()),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
  const std::string delta = anthropic_event(text_delta_json(0, "a\xff"));
  EXPECT_TRUE(delta.starts_with("event: content_block_delta\ndata: ")) << delta;
  EXPECT_NE(delta.find("\xEF\xBF\xBD"), std::string::npos);  // invalid UTF-8 replaced
  const json start = message_start_json({"msg_4", "m", {}, 0}, 12);
  EXPECT_EQ(start["message"]["usage"]["input_tokens"], 12);
  EXPECT_EQ(start["message"]["content"], json::array());
  EXPECT_TRUE(start["message"]["stop_reason"].is_null());
}

}  // namespace
}  // namespace specdec::server
