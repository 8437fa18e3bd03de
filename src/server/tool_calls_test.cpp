#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "server/api_error.h"

namespace specdec::server {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

const std::vector<std::string> kNames = {"get_weather", "add"};

TEST(ToolCalls, RepliesSplitIntoContentAndCalls) {
  const SplitReply one = split_tool_calls(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>",
      kNames, 1);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_weather");
  EXPECT_EQ(one.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(one.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(one.calls[0].id.size(), 29u);
  EXPECT_EQ(one.content, "");
  // Text around calls is content; two calls get different ids, the same seed the same ones.
  const std::string two_text =
      "Let me check.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": "
      "\\\"Oslo\\\"}\"}\n</tool_call>\n";
  const SplitReply two = split_tool_calls(two_text, kNames, 7);
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.content, "Let me check.");
  EXPECT_EQ(two.calls[1].arguments, R"({"city":"Oslo"})");  // a string holding JSON, unwrapped
  EXPECT_NE(two.calls[0].id, two.calls[1].id);
  EXPECT_EQ(split_tool_calls(two_text, kNames, 7).calls[0].id, two.calls[0].id);
  // Anything that does not parse as calls stays content, whole.
  for (const char* text :
       {"no calls here", "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}",  // not closed
        "<tool_call>{not json}</tool_call>",
        "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",  // unknown tool
        "<tool_call>{\"name\": \"add\", \"arguments\": [1]}</tool_call>",   // not an object
        "<tool_call>{\"name\": \"add\"}</tool_call>"}) {
    const SplitReply r = split_tool_calls(text, kNames, 1);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCalls, StreamingHoldsBackFromTheFirstCallMarker) {
  EXPECT_EQ(streamable_content("Hello"), 5u);
  EXPECT_EQ(streamable_content("Hello <tool"), 6u);  // may become a call
  EXPECT_EQ(streamable_content("Hello <"), 6u);
  EXPECT_EQ(streamable_content("a<b"), 3u);  // cannot
  EXPECT_EQ(streamable_content("x\n<tool_call>\n{"), 2u);
  EXPECT_EQ(streamable_content(""), 0u);
  // A reply that opens like a fenced call is held whole until it shows what it is.
  for (const char* opening :
       {"`", "``", "```", "```j", "```json", "\n```json\n", "```json\n{", "```json\n{\n  \"na",
        "```\n{\"name\"", "```json\n[", "```json\n[ {", "```json\n{\"name\": \"add\""}) {
    EXPECT_EQ(streamable_content(opening), 0u) << opening;
  }
  for (const char* other :
       {"```python\n", "```json\n[1", "```json\n{\"a\"", "`x", "Sure: ```json"}) {
    EXPECT_EQ(streamable_content(other), std::string_view(other).size()) << other;
  }
}

TEST(ToolCalls, AReplyOfFencedCallObjectsIsCalls) {
  // Qwen2.5-Coder's way of calling under tool_choice auto.
  const std::string coder =
      "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"city\": \"Paris\"\n  "
      "}\n}\n```";
  const SplitReply one = split_tool_calls(coder, kNames, 3);
  ASSERT_EQ(one.calls.size(), 1u) << coder;
  EXPECT_EQ(one.calls[0].name, "get_weather");
  EXPECT_EQ(one.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(one.content, "");
  // Several blocks, a bare fence, an array of calls.
  const SplitReply more = split_tool_calls(
      "\n```\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n```\n\n```json\n[{\"name\": "
      "\"add\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {}}]\n```\n",
      kNames, 3);
  ASSERT_EQ(more.calls.size(), 3u);
  EXPECT_EQ(more.calls[2].name, "get_weather");
  EXPECT_NE(more.calls[0].id, more.calls[1].id);
  // All or nothing: prose around the block, another language, an unknown tool, a block that is
  // not a call, or one left open, and the reply is content.
  for (const std::string& text :
       {"Here it is:\n" + coder, coder + "\nDone.", std::string("```python\nprint(1)\n```"),
        std::string("```json\n{\"name\": \"rm\", \"arguments\": {}}\n```"),
        std::string("```json\n{\"city\": \"Paris\"}\n```"),
        std::string("```json\n{\"name\": \"add\", \"arguments\": {}}\n"),
        std::string("```json\n[]\n```")}) {
    const SplitReply r = split_tool_calls(text, kNames, 1);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  // A reply with <tool_call> blocks is read by those alone.
  EXPECT_TRUE(split_tool_calls("<tool_call>{bad}</tool_call>\n" + coder, kNames, 1).calls.empty());
}

std::shared_ptr<const Grammar> grammar_of(
    const std::vector<std::pair<std::string, ordered_json>>& tools, bool parallel) {
  std::string root;
  const std::string gbnf = tool_calls_gbnf(tools, parallel, root);
  return Grammar::parse(gbnf, root);
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.accept(text) && s.complete();
}

TEST(ToolCalls, TheCallGrammarAllowsExactlyCallsToTheToolsWithValidArguments) {
  const ordered_json weather = ordered_json::parse(
      R"({"type": "object", "properties": {"city": {"type": "string"},
          "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]})");
  // References inside a tool's parameters resolve within them.
  const ordered_json add = ordered_json::parse(
      R"({"$defs": {"n": {"type": "integer"}}, "type": "object",
          "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}},
          "required": ["a", "b"]})");
  const auto g = grammar_of({{"get_weather", weather}, {"add", add}}, true);
  const std::string w =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 3}}\n</tool_call>";
  const std::string a =
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>";
  EXPECT_TRUE(accepts(g, w));
  EXPECT_TRUE(accepts(g, a));
  EXPECT_TRUE(accepts(g, w + "\n" + a));
  EXPECT_FALSE(accepts(g, ""));
  EXPECT_FALSE(accepts(g, "Sure! " + w));
  EXPECT_FALSE(
      accepts(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\", \"days\": 9}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  // One call only without parallel calls.
  const auto single = grammar_of({{"get_weather", weather}, {"add", add}}, false);
  EXPECT_TRUE(accepts(single, a));
  EXPECT_FALSE(accepts(single, w + "\n" + a));
  // What the model then writes parses back.
  const SplitReply back = split_tool_calls(w + "\n" + a, kNames, 3);
  ASSERT_EQ(back.calls.size(), 2u);
  EXPECT_EQ(back.calls[1].arguments, R"({"a":1,"b":-2})");
}

ToolRequest parse(const std::string& body) {
  return parse_tools(json::parse(body), ordered_json::parse(body));
}

std::string error_param(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(no error)";
}

TEST(ToolCalls, ToolsAndToolChoiceAreValidated) {
  const std::string tool = R"({"type": "function", "function": {"name": "add", "parameters":
      {"type": "object", "properties": {"a": {"type": "integer"}}}}})";
  const ToolRequest r = parse(R"({"tools": [)" + tool + "]}");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].name, "add");
  EXPECT_EQ(r.choice, ToolChoice::kAuto);
  // auto: the model may answer in words; a call it opens with <tool_call> must be valid.
  ASSERT_NE(r.grammar, nullptr);
  EXPECT_TRUE(r.lazy);
  EXPECT_TRUE(accepts(r.grammar,
                      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n"
                      "</tool_call>"));
  EXPECT_NE(json::parse(r.tools[0].definition).at("function").at("parameters"), nullptr);
  const ToolRequest required = parse(R"({"tools": [)" + tool + R"(], "tool_choice": "required"})");
  EXPECT_NE(required.grammar, nullptr);
  EXPECT_FALSE(required.lazy);
  const ToolRequest named =
      parse(R"({"tools": [)" + tool +
            R"(], "tool_choice": {"type": "function", "function": {"name": "add"}}})");
  EXPECT_EQ(named.choice, ToolChoice::kNamed);
  EXPECT_NE(named.grammar, nullptr);
  EXPECT_TRUE(parse(R"({"tools": [)" + tool + R"(], "tool_choice": "none"})").tools.empty());

  EXPECT_EQ(error_param(R"({"tools": {}})"), "tools");
  EXPECT_EQ(error_param(R"({"tools": [{"type": "retrieval"}]})"), "tools[0]");
  EXPECT_EQ(error_param(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})"),
            "tools[0].function.name");
  EXPECT_EQ(error_param(R"({"tools": [)" + tool + "," + tool + "]}"), "tools[1].function.name");
  EXPECT_EQ(error_param(R"({"tools": [{"type": "function", "function": {"name": "f",
                "parameters": 3}}]})"),
            "tools[0].function.parameters");
  EXPECT_EQ(error_param(R"({"tools": [)" + tool + R"(], "tool_choice": "sometimes"})"),
            "tool_choice");
  EXPECT_EQ(error_param(R"({"tools": [)" + tool +
                        R"(], "tool_choice": {"type": "function", "function": {"name": "sub"}}})"),
            "tool_choice");
  EXPECT_EQ(error_param(R"({"tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(error_param(R"({"tools": [)" + tool + R"(], "parallel_tool_calls": "yes"})"),
            "parallel_tool_calls");
  // A schema the grammar cannot hold is refused when the call must follow it.
  EXPECT_EQ(error_param(R"({"tools": [{"type": "function", "function": {"name": "f",
                "parameters": {"type": "object", "properties": {"x": {"multipleOf": 3}}}}}],
                "tool_choice": "required"})"),
            "tools");
  // Under auto the same schema leaves the calls unconstrained instead.
  const ToolRequest loose = parse(R"({"tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"multipleOf": 3}}}}}]})");
  EXPECT_EQ(loose.grammar, nullptr);
  EXPECT_FALSE(loose.lazy);
  EXPECT_EQ(loose.tools.size(), 1u);
}

}  // namespace
}  // namespace specdec::server
