#include "server/legacy_functions.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "server/openai_format.h"
#include "server/refusal_test_support.h"

namespace specdec::server {
namespace {

using nlohmann::ordered_json;

const ordered_json kWeather = {{"name", "get_weather"},
                               {"description", "Current weather in a city"},
                               {"parameters",
                                {{"type", "object"},
                                 {"properties", {{"city", {{"type", "string"}}}}},
                                 {"required", {"city"}}}}};
const ordered_json kAdd = {
    {"name", "add"},
    {"parameters", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}};
const ordered_json kUser = ordered_json::array({{{"role", "user"}, {"content", "Weather?"}}});

CompletionRequest parse(const ordered_json& body, bool& legacy) {
  return parse_chat_request(body.dump(), legacy);
}

TEST(LegacyFunctions, TheDeprecatedFormIsRecognisedWhereverItIsUsed) {
  EXPECT_FALSE(uses_legacy_functions({{"messages", kUser}}));
  EXPECT_FALSE(uses_legacy_functions({{"messages", kUser}, {"functions", nullptr}}));
  EXPECT_FALSE(uses_legacy_functions({{"messages", kUser}, {"functions", ordered_json::array()}}));
  EXPECT_FALSE(uses_legacy_functions(
      {{"messages", kUser}, {"tools", {{{"type", "function"}, {"function", kWeather}}}}}));
  EXPECT_TRUE(uses_legacy_functions({{"messages", kUser}, {"functions", {kWeather}}}));
  EXPECT_TRUE(uses_legacy_functions({{"messages", kUser}, {"function_call", "auto"}}));
  EXPECT_TRUE(uses_legacy_functions(
      {{"messages", {{{"role", "function"}, {"name", "add"}, {"content", "3"}}}}}));
  EXPECT_TRUE(
      uses_legacy_functions({{"messages",
                              {{{"role", "assistant"},
                                {"content", nullptr},
                                {"function_call", {{"name", "add"}, {"arguments", "{}"}}}}}}}));
}

TEST(LegacyFunctions, TheBodyIsTheToolsFormItStandsFor) {
  const ordered_json body = {
      {"messages",
       {kUser[0],
        {{"role", "assistant"},
         {"content", nullptr},
         {"function_call", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Oslo\"}"}}}},
        {{"role", "function"}, {"name", "get_weather"}, {"content", "{\"temp\":3}"}}}},
      {"functions", {kWeather, kAdd}},
      {"function_call", {{"name", "add"}}},
      {"temperature", 0}};
  const ordered_json tools = legacy_functions_as_tools(body);
  EXPECT_EQ(tools["tools"], ordered_json({{{"type", "function"}, {"function", kWeather}},
                                          {{"type", "function"}, {"function", kAdd}}}));
  EXPECT_EQ(tools["tool_choice"],
            ordered_json({{"type", "function"}, {"function", {{"name", "add"}}}}));
  EXPECT_EQ(tools["parallel_tool_calls"], false);
  EXPECT_FALSE(tools.contains("functions"));
  EXPECT_FALSE(tools.contains("function_call"));
  EXPECT_EQ(tools["temperature"], 0);
  const ordered_json& m = tools["messages"];
  EXPECT_EQ(m[0], kUser[0]);
  EXPECT_FALSE(m[1].contains("function_call"));
  EXPECT_EQ(
      m[1]["tool_calls"],
      ordered_json({{{"type", "function"}, {"function", body["messages"][1]["function_call"]}}}));
  EXPECT_EQ(m[2]["role"], "tool");
  EXPECT_EQ(m[2]["content"], "{\"temp\":3}");

  for (const char* choice : {"none", "auto"}) {
    EXPECT_EQ(legacy_functions_as_tools(
                  {{"functions", {kAdd}}, {"function_call", choice}})["tool_choice"],
              choice);
  }
}

TEST(LegacyFunctions, ParsedItIsTheToolsRequestAndTheReplyTakesItsShape) {
  bool legacy = false;
  const CompletionRequest named = parse(
      {{"messages", kUser}, {"functions", {kWeather, kAdd}}, {"function_call", {{"name", "add"}}}},
      legacy);
  EXPECT_TRUE(legacy);
  ASSERT_EQ(named.tools.tools.size(), 2u);
  EXPECT_EQ(named.tools.tools[1].name, "add");
  EXPECT_EQ(named.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tools.named, "add");
  EXPECT_FALSE(named.tools.parallel);
  EXPECT_NE(named.grammar, nullptr);  // the call is certain

  const CompletionRequest automatic =
      parse({{"messages", kUser}, {"functions", {kWeather}}}, legacy);
  EXPECT_TRUE(legacy);
  EXPECT_EQ(automatic.tools.choice, ToolChoice::kAuto);
  EXPECT_EQ(automatic.grammar_trigger, std::string(kToolCallOpen));  // calls valid when they come

  // The same request in the tools form is read the same way, and answered in the tools form.
  const CompletionRequest modern =
      parse({{"messages", kUser},
             {"tools", {{{"type", "function"}, {"function", kWeather}}}},
             {"parallel_tool_calls", false}},
            legacy);
  EXPECT_FALSE(legacy);
  EXPECT_EQ(modern.tools.tools[0].definition, automatic.tools.tools[0].definition);
  // An empty "functions" beside tools is no function at all, as it always was.
  const CompletionRequest beside =
      parse({{"messages", kUser},
             {"functions", ordered_json::array()},
             {"tools", {{{"type", "function"}, {"function", kWeather}}}}},
            legacy);
  EXPECT_FALSE(legacy);
  EXPECT_EQ(beside.tools.tools.size(), 1u);
  EXPECT_EQ(modern.tools.parallel, automatic.tools.parallel);

  // A conversation that only records earlier function turns is answered as it asks.
  const CompletionRequest history =
      parse({{"messages",
              {kUser[0],
               {{"role", "assistant"},
                {"content", ""},
                {"function_call", {{"name", "get_weather"}, {"arguments", "{}"}}}},
               {{"role", "function"}, {"name", "get_weather"}, {"content", "3"}}}}},
            legacy);
  EXPECT_FALSE(legacy);
  ASSERT_EQ(history.messages.size(), 3u);
  ASSERT_EQ(history.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(history.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(history.messages[2].role, "tool");
}

TEST(LegacyFunctions, BadBodiesAreRefusedNamingTheFieldsTheClientSent) {
  const auto refused = [](const ordered_json& body) {
    return testing::refused_field(
        [](const nlohmann::json& b) {
          bool legacy = false;
          parse_chat_request(b.dump(), legacy);
        },
        nlohmann::json::parse(body.dump()));
  };
  const ordered_json tools = {{{"type", "function"}, {"function", kWeather}}};
  EXPECT_EQ(refused({{"messages", kUser}, {"functions", {kWeather}}, {"tools", tools}}),
            "functions");
  EXPECT_EQ(refused({{"messages", kUser},
                     {"functions", {kWeather}},
                     {"function_call", "auto"},
                     {"tool_choice", "auto"}}),
            "function_call");
  EXPECT_EQ(refused({{"messages", kUser}, {"functions", kWeather}}), "functions");
  EXPECT_EQ(refused({{"messages", kUser}, {"functions", {kWeather}}, {"function_call", "always"}}),
            "function_call");
  EXPECT_EQ(refused({{"messages", kUser}, {"functions", {kWeather}}, {"function_call", 3}}),
            "function_call");
  EXPECT_EQ(
      refused({{"messages", kUser}, {"functions", {kWeather}}, {"function_call", {{"x", 1}}}}),
      "function_call.name");
  // Errors of the tools form's parser, renamed.
  EXPECT_EQ(refused({{"messages", kUser}, {"functions", {{{"name", "bad name"}}}}}),
            "functions[0].name");
  EXPECT_EQ(refused({{"messages", kUser}, {"functions", {{{"name", "f"}, {"parameters", "no"}}}}}),
            "functions[0].parameters");
  EXPECT_EQ(
      refused(
          {{"messages", kUser}, {"functions", {kWeather}}, {"function_call", {{"name", "add"}}}}),
      "function_call");
  EXPECT_EQ(refused({{"messages", kUser}, {"function_call", {{"name", "add"}}}}), "function_call");
  // A message's call.
  const ordered_json call = {{"name", "add"}, {"arguments", "{}"}};
  EXPECT_EQ(
      refused({{"messages",
                {kUser[0], {{"role", "assistant"}, {"function_call", {{"arguments", "{}"}}}}}}}),
      "messages[1].function_call");
  EXPECT_EQ(refused({{"messages",
                      {kUser[0],
                       {{"role", "assistant"},
                        {"function_call", call},
                        {"tool_calls", {{{"type", "function"}, {"function", call}}}}}}}}),
            "messages[1].function_call");
  // A tools-form message's error keeps its name beside a translated one.
  EXPECT_EQ(refused({{"messages",
                      {kUser[0],
                       {{"role", "assistant"}, {"function_call", call}},
                       {{"role", "function"}, {"content", "1"}},
                       {{"role", "assistant"}, {"tool_calls", {{{"type", "function"}}}}}}}}),
            "messages[3].tool_calls[0]");
}

TEST(LegacyFunctions, TheReplyCarriesOneFunctionCall) {
  ResponseMeta meta{Endpoint::ChatCompletions, "chatcmpl-7", 5, "tiny", std::nullopt};
  meta.tool_names = {"get_weather", "add"};
  meta.legacy_functions = true;
  GenerationResult r;
  r.text = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  r.finish = FinishReason::Stop;
  const nlohmann::json doc = completion_json(meta, r);
  const nlohmann::json& choice = doc["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "function_call");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["message"]["function_call"],
            nlohmann::json({{"name", "add"}, {"arguments", "{\"a\":1}"}}));

  const std::vector<ToolCall> calls = {{"call_1", "add", "{\"a\":1}"}};
  const nlohmann::json chunk = tool_calls_chunk_json(meta, calls, true, nullptr, 0);
  const nlohmann::json& delta = chunk["choices"][0]["delta"];
  EXPECT_EQ(delta["function_call"], nlohmann::json({{"name", "add"}, {"arguments", "{\"a\":1}"}}));
  EXPECT_FALSE(delta.contains("tool_calls"));
  EXPECT_EQ(delta["role"], "assistant");
  EXPECT_EQ(final_chunk_json(meta, r, nullptr, 0, true)["choices"][0]["finish_reason"],
            "function_call");
  // Text without a call stays text.
  r.text = "It is sunny.";
  const nlohmann::json words = completion_json(meta, r);
  EXPECT_EQ(words["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(words["choices"][0]["message"]["content"], "It is sunny.");
  EXPECT_FALSE(words["choices"][0]["message"].contains("function_call"));

  meta.legacy_functions = false;  // the tools form
  r.text = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  EXPECT_EQ(completion_json(meta, r)["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(final_chunk_json(meta, r, nullptr, 0, true)["choices"][0]["finish_reason"],
            "tool_calls");
}

}  // namespace
}  // namespace specdec::server
