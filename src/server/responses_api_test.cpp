#include "server/responses_api.h"

#include <gtest/gtest.h>

#include "server/refusal_test_support.h"

namespace specdec::server {
namespace {

using nlohmann::json;

ResponsesRequest parse(const json& body) { return parse_responses_request(body.dump()); }

// The refused field's name, as the error names it (param and message).
std::string refused(const json& body) { return testing::refused_field(parse, body); }

TEST(ResponsesApi, InputItemsBecomeTheChatTurnsTheyMean) {
  const ResponsesRequest r =
      parse({{"model", "m"},
             {"instructions", "Be brief."},
             {"max_output_tokens", 40},
             {"input",
              {{{"role", "user"}, {"content", "Weather in Oslo?"}},
               {{"type", "message"},
                {"role", "assistant"},
                {"content", {{{"type", "output_text"}, {"text", "Checking."}}}}},
               {{"type", "function_call"},
                {"call_id", "call_1"},
                {"name", "get_weather"},
                {"arguments", R"({"city":"Oslo"})"}},
               {{"type", "reasoning"}, {"summary", json::array()}},
               {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "-3 C"}},
               {{"role", "developer"},
                {"content",
                 {{{"type", "input_text"}, {"text", "Answer in "}},
                  {{"type", "input_text"}, {"text", "words."}}}}}}}});
  const std::vector<ChatMessage>& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Checking.");  // the call joins the turn it follows
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].content, "-3 C");
  EXPECT_EQ(m[4].role, "system");  // developer is the system role
  EXPECT_EQ(m[4].content, "Answer in words.");
  EXPECT_EQ(r.chat.max_tokens, 40);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 40);
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["text"], json({{"format", {{"type", "text"}}}}));
  // A string input is one user message; no max_output_tokens leaves the length open.
  const ResponsesRequest s = parse({{"input", "hi"}});
  ASSERT_EQ(s.chat.messages.size(), 1u);
  EXPECT_EQ(s.chat.messages[0].role, "user");
  EXPECT_FALSE(s.chat.max_tokens.has_value());
  EXPECT_TRUE(s.echo["instructions"].is_null());
}

TEST(ResponsesApi, ToolsToolChoiceAndTextFormat) {
  const json params = {
      {"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  const ResponsesRequest r =
      parse({{"input", "add"},
             {"tools", {{{"type", "function"}, {"name", "add"}, {"parameters", params}}}},
             {"tool_choice", {{"type", "function"}, {"name", "add"}}},
             {"parallel_tool_calls", false},
             {"temperature", 0.5},
             {"seed", 3}});
  ASSERT_EQ(r.chat.tools.tools.size(), 1u);
  EXPECT_EQ(json::parse(r.chat.tools.tools[0].definition)["function"]["parameters"], params);
  EXPECT_EQ(r.chat.tools.choice, ToolChoice::kNamed);
  EXPECT_FALSE(r.chat.tools.parallel);
  EXPECT_NE(r.chat.grammar, nullptr);
  EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.5f);
  EXPECT_EQ(r.chat.seed, 3u);
  EXPECT_EQ(r.echo["tools"][0]["name"], "add");
  EXPECT_EQ(parse({{"input", "x"},
                   {"tools", {{{"type", "function"}, {"name", "add"}}}},
                   {"tool_choice", "required"}})
                .chat.tools.choice,
            ToolChoice::kRequired);
  EXPECT_NE(parse({{"input", "x"}, {"text", {{"format", {{"type", "json_object"}}}}}}).chat.grammar,
            nullptr);
  EXPECT_NE(
      parse({{"input", "x"},
             {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", params}}}}}})
          .chat.grammar,
      nullptr);
  EXPECT_EQ(parse({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}}).chat.grammar,
            nullptr);
}

TEST(ResponsesApi, RefusalsNameTheResponsesFields) {
  EXPECT_EQ(refused(json::object()), "input");
  EXPECT_EQ(refused({{"input", json::array()}}), "input");
  EXPECT_EQ(refused({{"input", 3}}), "input");
  EXPECT_EQ(refused({{"input", "x"}, {"previous_response_id", "resp_1"}}), "previous_response_id");
  EXPECT_EQ(refused({{"input", "x"}, {"conversation", "conv_1"}}), "conversation");
  EXPECT_EQ(refused({{"input", "x"}, {"background", true}}), "background");
  EXPECT_EQ(refused({{"input", "x"}, {"top_logprobs", 3}}), "top_logprobs");
  EXPECT_EQ(refused({{"input", "x"}, {"include", {"message.output_text.logprobs"}}}), "include");
  EXPECT_EQ(refused({{"input", "x"}, {"max_output_tokens", 0}}), "max_output_tokens");
  EXPECT_EQ(refused({{"input", "x"}, {"temperature", 3}}), "temperature");
  EXPECT_EQ(refused({{"input", {{{"role", "robot"}, {"content", "x"}}}}}), "input[0].role");
  EXPECT_EQ(refused({{"input", {{{"role", "user"}}}}}), "input[0].content");
  EXPECT_EQ(
      refused(
          {{"input",
            {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}}}}}}}),
      "input[0].content[0].type");
  EXPECT_EQ(refused({{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}}), "input[0].type");
  EXPECT_EQ(refused({{"input", {{{"type", "function_call"}, {"name", "f"}}}}}), "input[0].call_id");
  EXPECT_EQ(refused({{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}), "tools[0].type");
  EXPECT_EQ(refused({{"input", "x"}, {"tools", {{{"type", "function"}, {"name", "bad name"}}}}}),
            "tools[0].name");
  EXPECT_EQ(refused({{"input", "x"},
                     {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", 3}}}}}),
            "tools[0].parameters");
  EXPECT_EQ(refused({{"input", "x"}, {"tool_choice", {{"type", "file_search"}}}}),
            "tool_choice.type");
  EXPECT_EQ(refused({{"input", "x"}, {"text", {{"format", {{"type", "xml"}}}}}}),
            "text.format.type");
  EXPECT_EQ(refused({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}}),
            "text.format.schema");
}

GenerationResult result_of(std::string text, FinishReason finish) {
  GenerationResult r;
  r.text = std::move(text);
  r.finish = finish;
  r.stats.prompt_tokens = 30;
  r.stats.cached_tokens = 20;
  r.stats.generated_tokens = 7;
  return r;
}

TEST(ResponsesApi, TheResponseObject) {
  ResponsesMeta meta{"resp_abc", 99, "m", {}, 1, parse({{"input", "x"}}).echo};
  const json doc = response_json(meta, result_of("Hello", FinishReason::EndOfGeneration));
  EXPECT_EQ(doc["id"], "resp_abc");
  EXPECT_EQ(doc["object"], "response");
  EXPECT_EQ(doc["status"], "completed");
  EXPECT_TRUE(doc["incomplete_details"].is_null());
  EXPECT_EQ(doc["created_at"], 99);
  ASSERT_EQ(doc["output"].size(), 1u);
  EXPECT_EQ(doc["output"][0]["id"], "msg_abc");
  EXPECT_EQ(doc["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(doc["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(doc["usage"], json({{"input_tokens", 30},
                                {"input_tokens_details", {{"cached_tokens", 20}}},
                                {"output_tokens", 7},
                                {"output_tokens_details", {{"reasoning_tokens", 0}}},
                                {"total_tokens", 37}}));
  EXPECT_EQ(doc["temperature"], 1.0);  // the request's settings, defaults filled in
  EXPECT_EQ(doc["store"], false);
  for (FinishReason f : {FinishReason::Length, FinishReason::ContextFull}) {
    const json cut = response_json(meta, result_of("Hel", f));
    EXPECT_EQ(cut["status"], "incomplete");
    EXPECT_EQ(cut["incomplete_details"]["reason"], "max_output_tokens");
  }
  const json empty = response_in_progress_json(meta);
  EXPECT_EQ(empty["status"], "in_progress");
  EXPECT_EQ(empty["output"], json::array());
}

TEST(ResponsesApi, CallsAreFunctionCallItems) {
  ResponsesMeta meta{"resp_abc", 1, "m", {"add"}, 5, json::object()};
  const std::string text =
      "Adding.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>";
  const json items = output_items(meta, result_of(text, FinishReason::EndOfGeneration));
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0]["content"][0]["text"], "Adding.");
  EXPECT_EQ(items[1]["type"], "function_call");
  EXPECT_EQ(items[1]["id"], "fc_abc_0");
  EXPECT_EQ(items[2]["id"], "fc_abc_1");
  EXPECT_TRUE(items[1]["call_id"].get<std::string>().starts_with("call_"));
  EXPECT_NE(items[1]["call_id"], items[2]["call_id"]);
  EXPECT_EQ(items[1]["name"], "add");
  EXPECT_EQ(json::parse(items[2]["arguments"].get<std::string>()), json({{"a", 2}}));
  // Calls alone: no message item.
  const json only = output_items(meta, result_of(text.substr(8), FinishReason::EndOfGeneration));
  EXPECT_EQ(only.size(), 2u);
  EXPECT_EQ(only[0]["type"], "function_call");
}

TEST(ResponsesApi, AThinkingModelsReasoningIsAReasoningItem) {
  ResponsesMeta meta{"resp_abc", 1, "m", {"add"}, 5, json::object(), ReasoningMode{/*split=*/true}};
  const std::string call =
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  const json doc = response_json(
      meta, result_of("<think>\nAdd.\n</think>\n\nOK.\n" + call, FinishReason::Stop), 4);
  const json& items = doc["output"];
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0], json({{"id", "rs_abc"},
                            {"type", "reasoning"},
                            {"status", "completed"},
                            {"summary", json::array()},
                            {"content", {{{"type", "reasoning_text"}, {"text", "Add."}}}}}));
  EXPECT_EQ(items[1]["content"][0]["text"], "OK.");
  EXPECT_EQ(items[2]["type"], "function_call");
  EXPECT_EQ(doc["usage"]["output_tokens_details"]["reasoning_tokens"], 4);
  // No reasoning in the reply: no item.
  EXPECT_EQ(output_items(meta, result_of("Hi", FinishReason::Stop))[0]["type"], "message");
  // A reply cut inside its reasoning: the reasoning item alone, no empty message after it.
  const json cut = output_items(meta, result_of("<think>\nStill adding", FinishReason::Length));
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0]["content"][0]["text"], "Still adding");
  // An empty reply without reasoning still answers with its (empty) message.
  const json empty = output_items(meta, result_of("", FinishReason::Length));
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0]["content"][0]["text"], "");
  const json opening = reasoning_item_json(meta, "", false);
  EXPECT_EQ(opening["status"], "in_progress");
  EXPECT_EQ(opening["content"], json::array());
}

TEST(ResponsesApi, EffortNoneSwitchesThinkingOffAndTheOthersOn) {
  EXPECT_FALSE(parse({{"input", "x"}}).chat.enable_thinking.has_value());
  EXPECT_EQ(parse({{"input", "x"}, {"reasoning", {{"effort", "none"}}}}).chat.enable_thinking,
            false);
  // On: over a server's --reasoning-budget 0 too.
  EXPECT_EQ(parse({{"input", "x"}, {"reasoning", {{"effort", "high"}, {"summary", "auto"}}}})
                .chat.enable_thinking,
            true);
  EXPECT_FALSE(parse({{"input", "x"}, {"reasoning", nullptr}}).chat.enable_thinking.has_value());
  EXPECT_EQ(refused({{"input", "x"}, {"reasoning", {{"effort", "extreme"}}}}), "reasoning.effort");
  EXPECT_EQ(refused({{"input", "x"}, {"reasoning", {{"effort", 3}}}}), "reasoning.effort");
  EXPECT_EQ(refused({{"input", "x"}, {"reasoning", "high"}}), "reasoning");
}

TEST(ResponsesApi, EventsAreNumberedInOrder) {
  ResponseEvents events;
  EXPECT_EQ(events({{"type", "response.created"}}),
            "event: response.created\ndata: {\"sequence_number\":0,\"type\":\"response.created\"}"
            "\n\n");
  EXPECT_NE(events({{"type", "response.in_progress"}}).find("\"sequence_number\":1"),
            std::string::npos);
}

}  // namespace
}  // namespace specdec::server
