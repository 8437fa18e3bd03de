#include "server/tool_calls.h"

#include <algorithm>
#include <optional>
#include <set>

#include "common/error.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace specdec::server {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr size_t kMaxTools = 128;

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// Rewrites the document-relative references of a schema that will live at `base` (a JSON
// pointer fragment such as "#/$defs/t0") inside a larger document. Values that are data, not
// schemas (const, enum, default, examples), are left alone.
void rebase_refs(ordered_json& schema, const std::string& base) {
  if (schema.is_array()) {
    for (ordered_json& v : schema) rebase_refs(v, base);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, v] : schema.items()) {
    if (key == "$ref" && v.is_string()) {
      const std::string ref = v.get<std::string>();
      if (!ref.empty() && ref[0] == '#') v = base + ref.substr(1);
      continue;
    }
    if (key == "const" || key == "enum" || key == "default" || key == "examples") continue;
    rebase_refs(v, base);
  }
}

std::string trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string call_id(uint64_t& state) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  for (int part = 0; part < 2; ++part) {
    uint64_t v = splitmix(state);
    for (int i = 0; i < 12; ++i, v >>= 4) id += kHex[v & 15];
  }
  return id;
}

}  // namespace

ToolRequest parse_tools(const json& body, const ordered_json& ordered) {
  ToolRequest out;
  const auto tools_it = body.find("tools");
  const bool has_tools = tools_it != body.end() && !tools_it->is_null();
  std::vector<std::pair<std::string, ordered_json>> schemas;
  if (has_tools) {
    if (!tools_it->is_array()) bad_field("tools", "must be an array of tools", "invalid_type");
    if (tools_it->size() > kMaxTools)
      bad_field("tools", str_cat("holds over ", kMaxTools, " tools"));
    std::set<std::string> names;
    for (size_t i = 0; i < tools_it->size(); ++i) {
      const json& t = (*tools_it)[i];
      const ordered_json& ot = ordered.at("tools").at(i);
      const std::string p = str_cat("tools[", i, "]");
      if (!t.is_object() || t.value("type", json()) != "function") {
        bad_field(p, "must be {\"type\": \"function\", \"function\": {...}}");
      }
      const auto f = t.find("function");
      if (f == t.end() || !f->is_object()) bad_field(p + ".function", "must be an object");
      const auto name = f->find("name");
      if (name == f->end() || !name->is_string() ||
          !valid_function_name(name->get<std::string>())) {
        bad_field(p + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
      }
      const std::string n = name->get<std::string>();
      if (!names.insert(n).second) bad_field(p + ".function.name", str_cat("repeats '", n, "'"));
      const auto desc = f->find("description");
      if (desc != f->end() && !desc->is_null() && !desc->is_string()) {
        bad_field(p + ".function.description", "must be a string", "invalid_type");
      }
      ordered_json params = {{"type", "object"}};
      const auto pit = f->find("parameters");
      if (pit != f->end() && !pit->is_null()) {
        if (!pit->is_object())
          bad_field(p + ".function.parameters", "must be a JSON Schema object");
        params = ot.at("function").at("parameters");
      }
      out.tools.push_back({n, ot.dump()});
      schemas.emplace_back(n, std::move(params));
    }
  }
  const auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") {
        out.choice = ToolChoice::kNone;
      } else if (c == "auto") {
        out.choice = ToolChoice::kAuto;
      } else if (c == "required") {
        out.choice = ToolChoice::kRequired;
      } else {
        bad_field("tool_choice", "must be none, auto, required or {\"type\": \"function\", ...}");
      }
    } else if (choice->is_object()) {
      const auto f = choice->find("function");
      if (choice->value("type", json()) != "function" || f == choice->end() || !f->is_object() ||
          !f->contains("name") || !(*f)["name"].is_string()) {
        bad_field("tool_choice", "must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      out.choice = ToolChoice::kNamed;
      out.named = (*f)["name"].get<std::string>();
      const bool known = std::any_of(out.tools.begin(), out.tools.end(),
                                     [&](const ToolSpec& t) { return t.name == out.named; });
      if (!known)
        bad_field("tool_choice", str_cat("names '", out.named, "', which is not among the tools"));
    } else {
      bad_field("tool_choice", "must be a string or an object", "invalid_type");
    }
    if (out.tools.empty() && out.choice != ToolChoice::kNone) {
      bad_field("tool_choice", "needs tools");
    }
  }
  const auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean())
      bad_field("parallel_tool_calls", "must be a boolean", "invalid_type");
    out.parallel = parallel->get<bool>();
  }
  // "none": the model is not told about the tools, so it writes a message.
  if (out.choice == ToolChoice::kNone) out.tools.clear();
  if (out.choice == ToolChoice::kRequired || out.choice == ToolChoice::kNamed) {
    if (out.choice == ToolChoice::kNamed) {
      std::erase_if(schemas, [&](const auto& s) { return s.first != out.named; });
    }
    try {
      std::string root;
      const std::string gbnf = tool_calls_gbnf(schemas, out.parallel, root);
      out.grammar = Grammar::parse(gbnf, root);
      GrammarState start(out.grammar);  // too ambiguous to begin: refused here
    } catch (const Error& e) {
      bad_field("tools", str_cat("cannot constrain the call: ", e.what()));
    }
  } else if (out.choice == ToolChoice::kAuto && !out.tools.empty()) {
    // A call the model chooses to write is made valid too; a schema the converter cannot take
    // leaves it free (auto worked without a grammar before, and must not start failing).
    try {
      std::string root;
      const std::string gbnf = tool_calls_gbnf(schemas, out.parallel, root);  // sets root
      out.grammar = Grammar::parse(gbnf, root);
      GrammarState start(out.grammar);
      out.lazy = true;
    } catch (const Error&) {
      out.grammar = nullptr;
    }
  }
  return out;
}

std::string tool_calls_gbnf(const std::vector<std::pair<std::string, ordered_json>>& tools,
                            bool parallel, std::string& root) {
  // One document: each tool's parameters under $defs/t<i> (its references rebased there), and
  // the call objects as alternatives.
  ordered_json defs = ordered_json::object();
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string key = str_cat("t", i);
    ordered_json params = tools[i].second;
    rebase_refs(params, "#/$defs/" + key);
    defs[key] = std::move(params);
    ordered_json call = {
        {"type", "object"},
        {"properties",
         {{"name", {{"const", tools[i].first}}}, {"arguments", {{"$ref", "#/$defs/" + key}}}}},
        {"required", {"name", "arguments"}},
        {"additionalProperties", false}};
    calls.push_back(std::move(call));
  }
  ordered_json doc = {{"$defs", std::move(defs)}};
  if (calls.size() == 1) {
    for (auto& [k, v] : calls[0].items()) doc[k] = v;
  } else {
    doc["anyOf"] = std::move(calls);
  }
  std::string gbnf = json_schema_gbnf(doc);
  // A start symbol of our own, under a name the converter did not use.
  root = "tool-calls";
  while (gbnf.find("\n" + root + " ::=") != std::string::npos ||
         gbnf.rfind(root + " ::=", 0) == 0) {
    root += "-x";
  }
  const std::string one = root + "-one";
  gbnf += str_cat("\n", one, R"( ::= "<tool_call>\n" root "\n</tool_call>")", "\n");
  gbnf += str_cat(root, " ::= ", one, parallel ? str_cat(R"( ( "\n" )", one, " )*") : "", "\n");
  return gbnf;
}

namespace {

// A call object {"name": one of `names`, "arguments": an object, or the JSON text of one}.
std::optional<ToolCall> call_of(const json& call, const std::vector<std::string>& names) {
  const auto name = call.is_object() ? call.find("name") : call.end();
  const auto args = call.is_object() ? call.find("arguments") : call.end();
  if (!call.is_object() || name == call.end() || !name->is_string() || args == call.end() ||
      std::find(names.begin(), names.end(), name->get<std::string>()) == names.end()) {
    return std::nullopt;
  }
  json arguments = *args;
  if (arguments.is_string()) arguments = json::parse(arguments.get<std::string>(), nullptr, false);
  if (!arguments.is_object()) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), arguments.dump()};
}

constexpr std::string_view kSpace = " \t\r\n";
constexpr std::string_view kFence = "```";

std::string_view skip_space(std::string_view s) {
  const size_t start = s.find_first_not_of(kSpace);
  return start == std::string_view::npos ? std::string_view() : s.substr(start);
}

// A reply that is nothing but fenced JSON blocks (```json or ```), each a call object or an
// array of them: how Qwen2.5-Coder writes a call it chooses (tool_choice auto), ignoring the
// <tool_call> tags its template asks for. All or nothing: anything else in the reply, or a
// block that is not a call to one of the tools, and there are no calls.
std::vector<ToolCall> fenced_calls(std::string_view text, const std::vector<std::string>& names) {
  std::vector<ToolCall> calls;
  for (std::string_view s = skip_space(text); !s.empty(); s = skip_space(s)) {
    if (!s.starts_with(kFence)) return {};
    s.remove_prefix(kFence.size());
    const size_t eol = s.find('\n');
    if (eol == std::string_view::npos) return {};
    const std::string_view lang = s.substr(0, eol);
    if (!skip_space(lang).empty() && lang.substr(0, lang.find_last_not_of(kSpace) + 1) != "json") {
      return {};
    }
    const size_t close = s.find(kFence, eol + 1);
    if (close == std::string_view::npos) return {};
    const json body = json::parse(s.substr(eol + 1, close - eol - 1), nullptr, false);
    const json items = body.is_array() ? body : json::array({body});
    if (items.empty()) return {};
    for (const json& item : items) {
      std::optional<ToolCall> call = call_of(item, names);
      if (!call) return {};
      calls.push_back(std::move(*call));
    }
    s.remove_prefix(close + kFence.size());
  }
  return calls;
}

// Whether a reply that starts like this (leading space aside) may still be a fenced call:
// "```", optionally "json", a newline, optionally "[", "{" and "\"name\"" (spaces allowed
// between).
bool may_open_fenced_call(std::string_view text) {
  const auto prefix_of = [](std::string_view s, std::string_view whole) {
    return s.size() <= whole.size() && whole.substr(0, s.size()) == s;
  };
  std::string_view s = skip_space(text);
  if (s.size() < kFence.size()) return prefix_of(s, kFence);
  if (!s.starts_with(kFence)) return false;
  s.remove_prefix(kFence.size());
  if (s.starts_with("json")) {
    s.remove_prefix(4);
  } else if (prefix_of(s, "json")) {
    return true;
  }
  if (s.empty()) return true;
  if (s.front() != '\n') return false;
  s = skip_space(s);
  if (!s.empty() && s.front() == '[') s = skip_space(s.substr(1));  // an array of calls
  if (s.empty()) return true;
  if (s.front() != '{') return false;
  s = skip_space(s.substr(1));
  return s.size() < 6 ? prefix_of(s, "\"name\"") : s.starts_with("\"name\"");
}

}  // namespace

SplitReply split_tool_calls(std::string_view text, const std::vector<std::string>& names,
                            uint64_t id_seed) {
  SplitReply out;
  std::string rest;  // the text outside the call blocks
  size_t at = 0;
  bool ok = true;
  while (true) {
    const size_t open = text.find(kToolCallOpen, at);
    if (open == std::string_view::npos) {
      rest += text.substr(at);
      break;
    }
    rest += text.substr(at, open - at);
    const size_t body = open + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    if (close == std::string_view::npos) {
      ok = false;  // cut short (max_tokens) or malformed
      break;
    }
    std::optional<ToolCall> call =
        call_of(json::parse(text.substr(body, close - body), nullptr, false), names);
    if (!call) {
      ok = false;
      break;
    }
    out.calls.push_back(std::move(*call));
    at = close + kToolCallClose.size();
  }
  if (!ok) return {std::string(text), {}};
  if (out.calls.empty()) {
    out.calls = fenced_calls(text, names);
    if (out.calls.empty()) return {std::string(text), {}};
    rest.clear();
  }
  uint64_t state = id_seed;
  for (ToolCall& c : out.calls) c.id = call_id(state);
  out.content = trimmed(rest);
  return out;
}

size_t streamable_content(std::string_view text) {
  if (may_open_fenced_call(text)) return 0;  // held until the reply shows what it is
  if (const size_t open = text.find(kToolCallOpen); open != std::string_view::npos) return open;
  for (size_t k = std::min(text.size(), kToolCallOpen.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == kToolCallOpen.substr(0, k)) return text.size() - k;
  }
  return text.size();
}

}  // namespace specdec::server
