#include "server/anthropic_api.h"

#include <array>
#include <limits>
#include <utility>

#include "common/error.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/reasoning.h"
#include "server/translated_request.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kMaxTokensLimit = 1 << 24;

// A block's "type" (every content block has one).
std::string block_type(const ordered_json& block, const std::string& param) {
  return required_string(require_object(block, param), "type", param);
}

std::string text_of(const ordered_json& block, const std::string& param) {
  return required_string(block, "text", param);
}

// Text given as a string or as an array of text blocks (system, tool_result content); blocks
// are joined by newlines, as separate paragraphs of one turn.
std::string text_or_text_blocks(const ordered_json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) wrong_type(param, "a string or an array of text blocks", v);
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) {
    const std::string p = str_cat(param, "[", k, "]");
    const std::string type = block_type(v[k], p);
    if (type != "text") {
      bad_field(p + ".type", str_cat("is '", type, "'; only text blocks are supported here"),
                "unsupported_value");
    }
    if (k > 0) out += "\n";
    out += text_of(v[k], p);
  }
  return out;
}

[[noreturn]] void unsupported_block(const std::string& param, const std::string& type) {
  bad_field(param + ".type",
            str_cat("is '", type, "', which this server cannot take (a text-only model: text, ",
                    "tool_use and tool_result blocks are supported)"),
            "unsupported_value");
}

struct Turns {
  ordered_json messages = ordered_json::array();  // OpenAI chat messages
  std::string prefill;
};

// A user turn: its text blocks become user messages and its tool_result blocks tool messages,
// in their order.
void add_user_turn(const ordered_json& content, const std::string& param, Turns& out) {
  if (content.is_string()) {
    out.messages.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  if (!content.is_array()) wrong_type(param, "a string or an array of content blocks", content);
  if (content.empty()) bad_field(param, "must not be empty");
  std::string text;
  bool has_text = false;
  const auto flush = [&] {
    if (has_text) out.messages.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string p = str_cat(param, "[", k, "]");
    const std::string type = block_type(content[k], p);
    if (type == "text") {
      if (has_text) text += "\n";
      text += text_of(content[k], p);
      has_text = true;
    } else if (type == "tool_result") {
      flush();
      const ordered_json& b = content[k];
      const std::string id = required_string(b, "tool_use_id", p);
      std::string result;
      if (const ordered_json* c = field(b, "content"))
        result = text_or_text_blocks(*c, p + ".content");
      // The model has no other channel for a failed call than the result's text.
      if (get_bool(b, "is_error", false)) result = "Error: " + result;
      out.messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else {
      unsupported_block(p, type);
    }
  }
  flush();
}

// An assistant turn: text, and tool_use blocks as OpenAI tool calls; thinking blocks (which a
// client returns as it got them from another model) are not the model's text and are dropped.
void add_assistant_turn(const ordered_json& content, const std::string& param, bool last,
                        Turns& out) {
  std::string text;
  ordered_json calls = ordered_json::array();
  if (content.is_string()) {
    text = content.get<std::string>();
  } else if (content.is_array()) {
    for (size_t k = 0; k < content.size(); ++k) {
      const std::string p = str_cat(param, "[", k, "]");
      const std::string type = block_type(content[k], p);
      const ordered_json& b = content[k];
      if (type == "text") {
        text += text_of(b, p);
      } else if (type == "tool_use") {
        const std::string id = required_string(b, "id", p);
        const std::string name = required_string(b, "name", p);
        const auto input = b.find("input");
        if (input == b.end() || !input->is_object()) {
          bad_field(p + ".input", "must be an object", "invalid_type");
        }
        calls.push_back({{"id", id},
                         {"type", "function"},
                         {"function", {{"name", name}, {"arguments", input->dump()}}}});
      } else if (type != "thinking" && type != "redacted_thinking") {
        unsupported_block(p, type);
      }
    }
  } else {
    wrong_type(param, "a string or an array of content blocks", content);
  }
  if (last && calls.empty()) {
    out.prefill = std::move(text);  // the reply continues it
    return;
  }
  ordered_json m = {{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  out.messages.push_back(std::move(m));
}

Turns translate_messages(const ordered_json& body) {
  const ordered_json* v = field(body, "messages");
  if (v == nullptr) bad_field("messages", "is required", "missing_required");
  if (!v->is_array()) wrong_type("messages", "an array", *v);
  if (v->empty()) bad_field("messages", "must not be empty");
  Turns out;
  if (const ordered_json* s = field(body, "system")) {
    out.messages.push_back({{"role", "system"}, {"content", text_or_text_blocks(*s, "system")}});
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string p = str_cat("messages[", i, "]");
    const ordered_json& m = require_object((*v)[i], p);
    const std::string r = required_string(m, "role", p);
    const auto content = m.find("content");
    if (content == m.end() || content->is_null()) bad_field(p + ".content", "is required");
    if (r == "user") {
      add_user_turn(*content, p + ".content", out);
    } else if (r == "assistant") {
      add_assistant_turn(*content, p + ".content", i + 1 == v->size(), out);
    } else {
      bad_field(p + ".role",
                str_cat("must be user or assistant, got '", r, "' (a system prompt goes in the ",
                        "top-level 'system' field)"));
    }
  }
  if (out.messages.empty())
    bad_field("messages", "holds only the prefill; a user turn must come first");
  return out;
}

ordered_json translate_tools(const ordered_json& tools) {
  if (!tools.is_array()) wrong_type("tools", "an array", tools);
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = str_cat("tools[", i, "]");
    const ordered_json& t = require_object(tools[i], p);
    if (const ordered_json* type = field(t, "type"); type != nullptr && *type != "custom") {
      bad_field(
          p + ".type",
          str_cat("is ", type->dump(), "; Anthropic's server tools are not available here, only ",
                  "client tools (no type, or \"custom\") with an input_schema"),
          "unsupported_value");
    }
    const std::string name = required_string(t, "name", p);
    const auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object()) {
      bad_field(p + ".input_schema", "must be a JSON Schema object", "invalid_type");
    }
    ordered_json f = {{"name", name}};
    if (const ordered_json* d = field(t, "description")) {
      if (!d->is_string()) wrong_type(p + ".description", "a string", *d);
      f["description"] = *d;
    }
    f["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

// tool_choice {type: auto | any | tool (with name) | none, disable_parallel_tool_use} as
// OpenAI's tool_choice and parallel_tool_calls.
void translate_tool_choice(const ordered_json& c, ordered_json& oai) {
  require_object(c, "tool_choice");
  const std::string type = block_type(c, "tool_choice");
  if (type == "auto") {
    oai["tool_choice"] = "auto";
  } else if (type == "any") {
    oai["tool_choice"] = "required";
  } else if (type == "none") {
    oai["tool_choice"] = "none";
  } else if (type == "tool") {
    const std::string name = required_string(c, "name", "tool_choice");
    oai["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  } else {
    bad_field("tool_choice.type", str_cat("must be auto, any, tool or none, got '", type, "'"));
  }
  if (get_bool(c, "disable_parallel_tool_use", false)) oai["parallel_tool_calls"] = false;
}

// Anthropic's name for a field the chat-completions rules reported by its OpenAI name.
std::string anthropic_param(const std::string& p) {
  static const std::array<std::pair<std::string_view, std::string_view>, 5> kRenames = {{
      {"response_format.json_schema.schema", "output_config.format.schema"},
      {"response_format", "output_config.format"},
      {"parallel_tool_calls", "tool_choice.disable_parallel_tool_use"},
      {"stop", "stop_sequences"},
      {"max_completion_tokens", "max_tokens"},
  }};
  for (const auto& [from, to] : kRenames) {
    if (auto r = renamed_prefix(p, from, to)) return *r;
  }
  // tools[i].function.parameters... -> tools[i].input_schema..., tools[i].function.x -> tools[i].x
  if (auto t = tool_function_param(p)) {
    if (auto r = renamed_prefix(t->rest, ".parameters", ".input_schema"))
      return "tools" + t->index + *r;
    return "tools" + t->index + t->rest;
  }
  if (p.starts_with("messages[")) return "messages";  // indices differ after the translation
  return p;
}

}  // namespace

CompletionRequest parse_messages_request(std::string_view body, bool count_only,
                                         const RequestDefaults& defaults) {
  const ordered_json j = parse_translated_body(body);

  ordered_json oai = ordered_json::object();
  if (const ordered_json* m = field(j, "model")) oai["model"] = *m;
  Turns turns = translate_messages(j);
  oai["messages"] = std::move(turns.messages);
  if (!count_only) {
    if (field(j, "max_tokens") == nullptr)
      bad_field("max_tokens", "is required", "missing_required");
    oai["max_tokens"] = *get_int(j, "max_tokens", 1, kMaxTokensLimit);
    // Anthropic's ranges (temperature 0..1, its default 1).
    get_number(j, "temperature", 1.0, 0.0, 1.0);
    for (const char* name : {"temperature", "top_p", "top_k", "stream"}) {
      if (const ordered_json* v = field(j, name)) oai[name] = *v;
    }
    if (const ordered_json* s = field(j, "stop_sequences")) {
      if (!s->is_array()) wrong_type("stop_sequences", "an array of strings", *s);
      oai["stop"] = *s;
    }
    // specdec's own extensions and llama-server's GBNF grammar, as the chat endpoint takes them.
    for (const char* name : {"seed", "min_p", "typical_p", "top_n_sigma", "xtc_probability",
                             "xtc_threshold", "dynatemp_range", "dynatemp_exponent", "mirostat",
                             "mirostat_tau", "mirostat_eta", "ignore_eos", "grammar"}) {
      if (const ordered_json* v = field(j, name)) oai[name] = *v;
    }
    copy_fields(j, oai, kSpeculativeFields);
  }
  if (const ordered_json* t = field(j, "tools")) oai["tools"] = translate_tools(*t);
  if (const ordered_json* c = field(j, "tool_choice")) translate_tool_choice(*c, oai);
  if (const ordered_json* cfg = field(j, "output_config"); cfg != nullptr && !count_only) {
    require_object(*cfg, "output_config");
    if (const ordered_json* f = field(*cfg, "format")) {
      const std::string type = block_type(*f, "output_config.format");
      if (type != "json_schema") {
        bad_field("output_config.format.type", str_cat("must be json_schema, got '", type, "'"));
      }
      const auto schema = f->find("schema");
      if (schema == f->end() || !schema->is_object()) {
        bad_field("output_config.format.schema", "must be a JSON Schema object", "invalid_type");
      }
      oai["response_format"] = {{"type", "json_schema"},
                                {"json_schema", {{"name", "output"}, {"schema", *schema}}}};
    }
    // effort: how long a reasoning model thinks; this model does not, so it changes nothing.
  }
  // thinking: {type: enabled | disabled | adaptive}. A thinking model's template is switched
  // off by disabled (and left to reason otherwise); its reasoning comes back as a thinking
  // block. Other models do not reason, so for them it changes nothing.
  std::optional<bool> thinking;
  if (const ordered_json* t = field(j, "thinking")) {
    const std::string type = block_type(*t, "thinking");
    if (type != "enabled" && type != "disabled" && type != "adaptive") {
      bad_field("thinking.type",
                str_cat("must be enabled, disabled or adaptive, got '", type, "'"));
    }
    if (type != "adaptive") thinking = type == "enabled";
    // budget_tokens: how many tokens the reasoning may take, llama-server's reasoning budget
    // (engine/reasoning_budget.h: then the block is closed for it and the answer follows).
    if (const ordered_json* b = field(*t, "budget_tokens"); b != nullptr && type == "enabled") {
      if (!b->is_number_integer() || b->get<int64_t>() < 0 ||
          b->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        bad_field("thinking.budget_tokens", "must be a non-negative integer", "invalid_type");
      }
      oai["reasoning_budget_tokens"] = b->get<int64_t>();
    }
  }

  CompletionRequest out =
      parse_translated_chat(oai, anthropic_param, count_only ? RequestDefaults{} : defaults);
  out.prefill = std::move(turns.prefill);
  // Unsaid, the server's default (--reasoning-budget) stays.
  if (thinking) out.enable_thinking = thinking;
  return out;
}

json anthropic_error_json(const ApiError& error) {
  const char* type = "api_error";
  switch (error.status()) {
    case 400:
    case 405:
    case 408:
    case 414:
    case 431:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "not_found_error";
      break;
    case 413:
      type = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      break;
    case 503:
      type = "overloaded_error";
      break;
    default:
      type = error.status() < 500 ? "invalid_request_error" : "api_error";
  }
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", error.what()}}}};
}

SplitReply split_reply(const MessagesMeta& meta, std::string_view text) {
  if (meta.tool_names.empty()) return SplitReply{std::string(text), {}};
  SplitReply reply = split_tool_calls(text, meta.tool_names, meta.tool_id_seed);
  for (ToolCall& c : reply.calls) {
    if (c.id.starts_with("call_")) c.id = "toolu_" + c.id.substr(5);
  }
  return reply;
}

const char* anthropic_stop_reason(const GenerationResult& result, bool tool_use) {
  if (tool_use) return "tool_use";
  switch (result.finish) {
    case FinishReason::Stop:
      return result.stop_text.empty() ? "end_turn" : "stop_sequence";
    case FinishReason::Length:
      return "max_tokens";
    case FinishReason::ContextFull:
      return "model_context_window_exceeded";
    case FinishReason::EndOfGeneration:
    case FinishReason::Cancelled:
      break;
  }
  return "end_turn";
}

namespace {

json stop_sequence_json(const GenerationResult& result, bool tool_use) {
  if (tool_use || result.finish != FinishReason::Stop || result.stop_text.empty()) return nullptr;
  return result.stop_text;
}

json tool_input(const ToolCall& call) {
  json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  return input.is_object() ? input : json::object();  // split_tool_calls keeps only objects
}

}  // namespace

json anthropic_usage_json(const GenerationStats& s) {
  return json{{"input_tokens", s.prompt_tokens - s.cached_tokens},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", s.cached_tokens},
              {"output_tokens", s.generated_tokens}};
}

json message_json(const MessagesMeta& meta, const GenerationResult& result) {
  const ReasoningSplit thought = meta.reasoning.of(result.text);
  const SplitReply reply = split_reply(meta, thought.content);
  const bool tool_use = !reply.calls.empty();
  json content = json::array();
  if (!thought.reasoning.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", thought.reasoning}, {"signature", ""}});
  }
  if (!reply.content.empty()) content.push_back({{"type", "text"}, {"text", reply.content}});
  for (const ToolCall& c : reply.calls) {
    content.push_back(
        {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", tool_input(c)}});
  }
  return json{{"id", meta.id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", meta.model},
              {"content", std::move(content)},
              {"stop_reason", anthropic_stop_reason(result, tool_use)},
              {"stop_sequence", stop_sequence_json(result, tool_use)},
              {"usage", anthropic_usage_json(result.stats)},
              {"specdec", specdec_stats_json(result.stats)}};
}

std::string anthropic_event(const json& data) {
  return str_cat("event: ", data.value("type", std::string("message")), "\ndata: ", to_wire(data),
                 "\n\n");
}

json message_start_json(const MessagesMeta& meta, int32_t prompt_tokens) {
  return json{{"type", "message_start"},
              {"message",
               {{"id", meta.id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", meta.model},
                {"content", json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", 0}}}}}};
}

json text_block_start_json(int32_t index) {
  return json{{"type", "content_block_start"},
              {"index", index},
              {"content_block", {{"type", "text"}, {"text", ""}}}};
}

json thinking_block_start_json(int32_t index) {
  return json{{"type", "content_block_start"},
              {"index", index},
              {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}};
}

json thinking_delta_json(int32_t index, std::string_view thinking) {
  return json{{"type", "content_block_delta"},
              {"index", index},
              {"delta", {{"type", "thinking_delta"}, {"thinking", thinking}}}};
}

json signature_delta_json(int32_t index) {
  return json{{"type", "content_block_delta"},
              {"index", index},
              {"delta", {{"type", "signature_delta"}, {"signature", ""}}}};
}

json text_delta_json(int32_t index, std::string_view text) {
  return json{{"type", "content_block_delta"},
              {"index", index},
              {"delta", {{"type", "text_delta"}, {"text", text}}}};
}

json tool_use_block_start_json(int32_t index, const ToolCall& call) {
  return json{
      {"type", "content_block_start"},
      {"index", index},
      {"content_block",
       {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", json::object()}}}};
}

json input_json_delta_json(int32_t index, const ToolCall& call) {
  return json{{"type", "content_block_delta"},
              {"index", index},
              {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}};
}

json block_stop_json(int32_t index) {
  return json{{"type", "content_block_stop"}, {"index", index}};
}

json message_delta_json(const GenerationResult& result, bool tool_use) {
  return json{{"type", "message_delta"},
              {"delta",
               {{"stop_reason", anthropic_stop_reason(result, tool_use)},
                {"stop_sequence", stop_sequence_json(result, tool_use)}}},
              {"usage", anthropic_usage_json(result.stats)},
              {"specdec", specdec_stats_json(result.stats)}};
}

json message_stop_json() { return json{{"type", "message_stop"}}; }

}  // namespace specdec::server
