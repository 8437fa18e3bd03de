// OpenAI tool calling on a Hermes-style chat template (Qwen2.5's: the tools listed in the system
// turn, calls written as <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>): the
// request's tools and tool_choice, the grammar that makes a call certain (tool_choice required
// or a named function), and the reply split into content and tool_calls, whole or as a stream.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace specdec::server {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolSpec {
  std::string name;
  std::string definition;  // the whole tool as JSON text, for the chat template
};

struct ToolRequest {
  std::vector<ToolSpec> tools;  // empty: no tools
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;     // kNamed: the function's name
  bool parallel = true;  // parallel_tool_calls: more than one call in a reply
  // kRequired and kNamed: the output is one or more calls (one unless parallel) to the allowed
  // tools with arguments valid under their parameter schemas. kAuto: the same calls' grammar,
  // lazy (`lazy` set): the reply is free until it opens a call with "<tool_call>", and the calls
  // are valid from there on; null when the schemas cannot be compiled (the calls are then
  // unconstrained, as before lazy grammars). Null for kNone.
  std::shared_ptr<const Grammar> grammar;
  bool lazy = false;
};

// Reads "tools", "tool_choice" and "parallel_tool_calls" ("functions", the deprecated form, is
// refused by the caller). `ordered` is the body with its keys in order (schemas keep their
// property order). Throws ApiError 400 naming the parameter.
ToolRequest parse_tools(const nlohmann::json& body, const nlohmann::ordered_json& ordered);

// The GBNF of tool calls: each "<tool_call>\n" + a JSON object {"name": <one of the tools>,
// "arguments": <valid under its parameters>} + "\n</tool_call>", one or (parallel) several
// separated by newlines; parameters a tool does not give are any JSON object. Start symbol:
// returned in `root`. Throws specdec::Error for a schema the converter does not support.
std::string tool_calls_gbnf(
    const std::vector<std::pair<std::string, nlohmann::ordered_json>>& tools, bool parallel,
    std::string& root);

struct ToolCall {
  std::string id;  // "call_" + 24 hex digits
  std::string name;
  std::string arguments;  // compact JSON text
};

struct SplitReply {
  std::string content;  // the text before the first call, trimmed (all of it when no call)
  std::vector<ToolCall> calls;
};

// Splits a reply: every complete <tool_call>...</tool_call> whose JSON names one of `names` (and
// whose arguments are an object) is a call; a reply whose call blocks do not all parse stays
// content as a whole (as vLLM's Hermes parser leaves it). A reply without call blocks that is
// nothing but fenced JSON blocks (```json) of such call objects is calls too: how Qwen2.5-Coder
// writes the calls it chooses. `id_seed` makes the ids.
SplitReply split_tool_calls(std::string_view text, const std::vector<std::string>& names,
                            uint64_t id_seed);

// Streaming: how much of `text` may be sent as content now. Text from the first "<tool_call>"
// on, and a trailing partial "<tool_call>", is held back until the reply ends; so is a reply
// that opens like a fenced call ("```json\n{\"name\"") until it ends or stops looking like one.
size_t streamable_content(std::string_view text);

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

}  // namespace specdec::server
