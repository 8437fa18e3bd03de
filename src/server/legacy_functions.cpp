#include "server/legacy_functions.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "common/error.h"
#include "server/json_fields.h"
#include "server/translated_request.h"

namespace specdec::server {

using nlohmann::ordered_json;

namespace {

// "functions", unless absent, null or an empty array (which clients send for "none", and which
// the parser has always accepted beside tools).
const ordered_json* given_functions(const ordered_json& body) {
  const ordered_json* f = field(body, "functions");
  return f != nullptr && !(f->is_array() && f->empty()) ? f : nullptr;
}

// A message with role "function": a function's result.
bool has_function_role(const ordered_json& m) {
  const ordered_json* role = field(m, "role");
  return role != nullptr && role->is_string() && role->get<std::string>() == "function";
}

bool is_legacy_message(const ordered_json& m) {
  return m.is_object() && (has_function_role(m) || field(m, "function_call") != nullptr);
}

// "function_call" as a tool_choice: "none" and "auto" as they are, {"name": n} as the named
// function.
ordered_json tool_choice_of(const ordered_json& call) {
  if (call.is_string()) {
    const std::string s = call.get<std::string>();
    if (s != "none" && s != "auto") {
      bad_field("function_call",
                str_cat("must be \"none\", \"auto\" or {\"name\": ...}, got '", s, "'"));
    }
    return call;
  }
  if (!call.is_object()) wrong_type("function_call", "a string or an object", call);
  const ordered_json* name = field(call, "name");
  if (name == nullptr || !name->is_string()) {
    bad_field("function_call.name", "must be a string", "invalid_type");
  }
  return {{"type", "function"}, {"function", {{"name", *name}}}};
}

ordered_json translated_messages(const ordered_json& messages) {
  ordered_json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    ordered_json& m = out[i];
    if (!is_legacy_message(m)) continue;
    const std::string param = str_cat("messages[", i, "]");
    if (has_function_role(m)) m["role"] = "tool";  // the function's result, as a tool's
    const ordered_json* call = field(m, "function_call");
    if (call == nullptr) continue;
    if (field(m, "tool_calls") != nullptr) {
      bad_field(param + ".function_call", "and 'tool_calls' cannot both be given: give one");
    }
    // The call keeps its shape ({"name", "arguments"}); the tools form's parser checks it.
    m["tool_calls"] = ordered_json::array({{{"type", "function"}, {"function", *call}}});
    m.erase("function_call");
  }
  return out;
}

}  // namespace

bool uses_legacy_functions(const ordered_json& body) {
  if (given_functions(body) != nullptr || field(body, "function_call") != nullptr) return true;
  const ordered_json* messages = field(body, "messages");
  if (messages == nullptr || !messages->is_array()) return false;
  for (const ordered_json& m : *messages) {
    if (is_legacy_message(m)) return true;
  }
  return false;
}

ordered_json legacy_functions_as_tools(const ordered_json& body) {
  ordered_json out = body;
  if (const ordered_json* functions = given_functions(body)) {
    if (!functions->is_array()) wrong_type("functions", "an array", *functions);
    if (field(body, "tools") != nullptr) {
      bad_field("functions", "(deprecated) and 'tools' cannot both be given: give one");
    }
    ordered_json tools = ordered_json::array();
    for (const ordered_json& f : *functions)
      tools.push_back({{"type", "function"}, {"function", f}});
    out["tools"] = std::move(tools);
    out.erase("functions");
    // The deprecated reply has room for one call.
    out["parallel_tool_calls"] = false;
  }
  if (const ordered_json* call = field(body, "function_call")) {
    if (field(body, "tool_choice") != nullptr) {
      bad_field("function_call", "(deprecated) and 'tool_choice' cannot both be given: give one");
    }
    out["tool_choice"] = tool_choice_of(*call);
    out.erase("function_call");
  }
  if (const ordered_json* messages = field(body, "messages"); messages && messages->is_array()) {
    out["messages"] = translated_messages(*messages);
  }
  return out;
}

std::string legacy_functions_param(const std::string& param) {
  // tools[i].function.x -> functions[i].x; tools[i] and tools[i].type -> functions[i]...
  if (auto t = tool_function_param(param)) return "functions" + t->index + t->rest;
  if (auto r = renamed_prefix(param, "tools", "functions")) return *r;
  if (auto r = renamed_prefix(param, "tool_choice", "function_call")) return *r;
  return param;
}

CompletionRequest parse_chat_request(std::string_view body, bool& legacy_reply,
                                     const RequestDefaults& defaults) {
  legacy_reply = false;
  // Every use of the deprecated form spells "function"; bodies without it are read once.
  if (body.find("function") == std::string_view::npos) {
    return parse_request(Endpoint::ChatCompletions, body, defaults);
  }
  const ordered_json j = parse_translated_body(body);
  if (!uses_legacy_functions(j)) {
    return parse_request(Endpoint::ChatCompletions, body, defaults);
  }
  legacy_reply = given_functions(j) != nullptr || field(j, "function_call") != nullptr;
  // The messages that used the form: an error in their calls names their "function_call".
  std::vector<bool> legacy_messages;
  if (const ordered_json* messages = field(j, "messages"); messages && messages->is_array()) {
    for (const ordered_json& m : *messages) legacy_messages.push_back(is_legacy_message(m));
  }
  const bool request_fields = legacy_reply;
  return parse_translated_chat(
      legacy_functions_as_tools(j),
      [&](const std::string& p) {
        if (p.starts_with("messages[")) {
          const size_t close = p.find(']');
          size_t i = legacy_messages.size();
          std::from_chars(p.data() + 9, p.data() + std::min(close, p.size()), i);
          if (i < legacy_messages.size() && legacy_messages[i] &&
              renamed_prefix(p.substr(close + 1), ".tool_calls", "")) {
            return p.substr(0, close + 1) + ".function_call";
          }
          return p;
        }
        return request_fields ? legacy_functions_param(p) : p;
      },
      defaults);
}

}  // namespace specdec::server
