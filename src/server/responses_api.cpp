#include "server/responses_api.h"

#include <algorithm>
#include <array>

#include "common/error.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/reasoning.h"
#include "server/translated_request.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A message's content: a string, or parts of text (input_text, output_text, text, refusal).
std::string content_text(const ordered_json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(param, "a string or an array of content parts", content);
  std::string out;
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string p = str_cat(param, "[", k, "]");
    const ordered_json& part = content[k];
    require_object(part, p);
    const std::string type = required_string(part, "type", p);
    if (type == "input_text" || type == "output_text" || type == "text") {
      out += required_string(part, "text", p);
    } else if (type == "refusal") {
      out += required_string(part, "refusal", p);
    } else {
      bad_field(p + ".type",
                str_cat("is '", type, "'; this server takes text only (input_text, output_text)"),
                "unsupported_value");
    }
  }
  return out;
}

// input: a string (one user message) or items: messages, function_call and
// function_call_output items (a tool call and its result), reasoning items (skipped).
ordered_json translate_input(const ordered_json& body) {
  ordered_json messages = ordered_json::array();
  if (const ordered_json* instructions = field(body, "instructions")) {
    if (!instructions->is_string()) wrong_type("instructions", "a string", *instructions);
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const ordered_json* input = field(body, "input");
  if (input == nullptr) bad_field("input", "is required", "missing_required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
    return messages;
  }
  if (!input->is_array()) wrong_type("input", "a string or an array of input items", *input);
  if (input->empty()) bad_field("input", "must not be empty");
  for (size_t i = 0; i < input->size(); ++i) {
    const std::string p = str_cat("input[", i, "]");
    const ordered_json& item = (*input)[i];
    require_object(item, p);
    const ordered_json* type = field(item, "type");
    if (type != nullptr && !type->is_string()) wrong_type(p + ".type", "a string", *type);
    const std::string t = type != nullptr ? type->get<std::string>() : "message";
    if (t == "message") {
      const std::string role = required_string(item, "role", p);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        bad_field(p + ".role",
                  str_cat("must be user, assistant, system or developer, got '", role, "'"));
      }
      const auto content = item.find("content");
      if (content == item.end()) bad_field(p + ".content", "is required", "missing_required");
      messages.push_back({{"role", role}, {"content", content_text(*content, p + ".content")}});
    } else if (t == "function_call") {
      ordered_json call = {{"id", required_string(item, "call_id", p)},
                           {"type", "function"},
                           {"function",
                            {{"name", required_string(item, "name", p)},
                             {"arguments", required_string(item, "arguments", p)}}}};
      // Calls belong to the assistant turn they follow (or open one).
      if (messages.empty() || messages.back()["role"] != "assistant") {
        messages.push_back({{"role", "assistant"}, {"content", ""}});
      }
      messages.back()["tool_calls"].push_back(std::move(call));
    } else if (t == "function_call_output") {
      const auto output = item.find("output");
      if (output == item.end()) bad_field(p + ".output", "is required", "missing_required");
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", required_string(item, "call_id", p)},
                          {"content", content_text(*output, p + ".output")}});
    } else if (t != "reasoning") {
      bad_field(
          p + ".type",
          str_cat("is '", t, "'; input items here are messages, function_call and ",
                  "function_call_output (nothing is stored, so item_reference cannot be served)"),
          "unsupported_value");
    }
  }
  if (messages.empty()) bad_field("input", "holds no message");
  return messages;
}

// Function tools {type: function, name, description, parameters, strict} as chat tools.
ordered_json translate_tools(const ordered_json& tools) {
  if (!tools.is_array()) wrong_type("tools", "an array", tools);
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = str_cat("tools[", i, "]");
    const ordered_json& t = tools[i];
    require_object(t, p);
    const std::string type = required_string(t, "type", p);
    if (type != "function") {
      bad_field(p + ".type",
                str_cat("is '", type, "'; only function tools run here (the hosted tools, such as ",
                        "web_search or file_search, are OpenAI's services)"),
                "unsupported_value");
    }
    ordered_json f = {{"name", t.contains("name") ? t["name"] : ordered_json()}};
    for (const char* key : {"description", "parameters", "strict"}) {
      if (const ordered_json* v = field(t, key)) f[key] = *v;
    }
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

ordered_json translate_tool_choice(const ordered_json& c) {
  if (c.is_string()) return c;  // auto, none, required: the chat endpoint's words
  if (!c.is_object()) wrong_type("tool_choice", "a string or an object", c);
  const std::string type = required_string(c, "type", "tool_choice");
  if (type != "function") {
    bad_field("tool_choice.type", str_cat("must be function, got '", type, "'"),
              "unsupported_value");
  }
  return {{"type", "function"},
          {"function", {{"name", required_string(c, "name", "tool_choice")}}}};
}

// text.format {type: text | json_object | json_schema (name, schema, strict)} as
// response_format.
void translate_text(const ordered_json& text, ordered_json& chat) {
  require_object(text, "text");
  const ordered_json* format = field(text, "format");
  if (format == nullptr) return;
  require_object(*format, "text.format");
  const std::string type = required_string(*format, "type", "text.format");
  if (type == "text") return;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    ordered_json spec = {{"name", format->value("name", std::string("output"))}};
    const auto schema = format->find("schema");
    if (schema == format->end() || !schema->is_object()) {
      bad_field("text.format.schema", "must be a JSON Schema object", "invalid_type");
    }
    spec["schema"] = *schema;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  } else {
    bad_field("text.format.type",
              str_cat("must be text, json_object or json_schema, got '", type, "'"));
  }
}

std::string responses_param(const std::string& p) {
  static const std::pair<std::string_view, std::string_view> kRenames[] = {
      {"response_format.json_schema.schema", "text.format.schema"},
      {"response_format", "text.format"},
      {"max_tokens", "max_output_tokens"},
      {"messages", "input"},
  };
  for (const auto& [from, to] : kRenames) {
    if (auto r = renamed_prefix(p, from, to)) return from == "messages" ? "input" : *r;
  }
  // tools[i].function.name -> tools[i].name
  if (auto t = tool_function_param(p)) return "tools" + t->index + t->rest;
  return p;
}

// Refused rather than ignored: each would change what the client gets.
void refuse_unsupported(const ordered_json& j) {
  if (field(j, "previous_response_id") != nullptr || field(j, "conversation") != nullptr) {
    const char* name =
        field(j, "previous_response_id") != nullptr ? "previous_response_id" : "conversation";
    bad_field(name,
              "needs stored responses, and this server stores none: send the whole conversation as "
              "input",
              "unsupported_value");
  }
  if (get_bool(j, "background", false)) {
    bad_field("background", "is not supported: responses run while the request waits",
              "unsupported_value");
  }
  if (field(j, "prompt") != nullptr) {
    bad_field("prompt", "(a stored prompt template) is not supported", "unsupported_value");
  }
  if (auto n = get_int(j, "top_logprobs", 0, 20); n && *n > 0) {
    bad_field("top_logprobs", "is not supported on /v1/responses; use /v1/chat/completions",
              "unsupported_value");
  }
  if (const ordered_json* include = field(j, "include")) {
    if (!include->is_array()) wrong_type("include", "an array of strings", *include);
    for (const ordered_json& v : *include) {
      if (v == "message.output_text.logprobs") {
        bad_field("include", "asks for logprobs, which /v1/responses does not return here",
                  "unsupported_value");
      }
    }
  }
}

}  // namespace

ResponsesRequest parse_responses_request(std::string_view body, const RequestDefaults& defaults) {
  const ordered_json j = parse_translated_body(body);
  refuse_unsupported(j);
  ordered_json chat = ordered_json::object();
  if (const ordered_json* m = field(j, "model")) chat["model"] = *m;
  chat["messages"] = translate_input(j);
  if (const ordered_json* m = field(j, "max_output_tokens")) chat["max_tokens"] = *m;
  // Sampling, and specdec's, vLLM's and llama-server's (grammar) extensions, as the chat
  // endpoint takes them.
  for (const char* name :
       {"temperature", "top_p", "parallel_tool_calls", "stream", "seed", "top_k", "min_p",
        "typical_p", "top_n_sigma", "xtc_probability", "xtc_threshold", "dynatemp_range",
        "dynatemp_exponent", "mirostat", "mirostat_tau", "mirostat_eta", "ignore_eos", "grammar"}) {
    if (const ordered_json* v = field(j, name)) chat[name] = *v;
  }
  copy_fields(j, chat, kSpeculativeFields);
  if (const ordered_json* t = field(j, "tools")) chat["tools"] = translate_tools(*t);
  if (const ordered_json* c = field(j, "tool_choice")) {
    chat["tool_choice"] = translate_tool_choice(*c);
  }
  if (const ordered_json* t = field(j, "text")) translate_text(*t, chat);
  // reasoning.effort "none" switches a thinking model's thinking off (the empty block, as
  // enable_thinking false writes it); other efforts switch it on (over a server's
  // --reasoning-budget 0), with no budget, since its template has none to set. summary: the
  // reasoning item carries the whole text, never a summary.
  if (const ordered_json* r = field(j, "reasoning"); r != nullptr && !r->is_null()) {
    require_object(*r, "reasoning");
    if (const ordered_json* effort = field(*r, "effort"); effort != nullptr && !effort->is_null()) {
      static constexpr std::array<std::string_view, 6> kEfforts = {"none",   "minimal", "low",
                                                                   "medium", "high",    "xhigh"};
      if (!effort->is_string() || std::find(kEfforts.begin(), kEfforts.end(),
                                            effort->get<std::string>()) == kEfforts.end()) {
        bad_field("reasoning.effort", "must be one of none, minimal, low, medium, high or xhigh");
      }
      chat["chat_template_kwargs"] = {{"enable_thinking", *effort != "none"}};
    }
  }
  ResponsesRequest out;
  out.chat = parse_translated_chat(chat, responses_param, defaults);
  // The client's value, else the server's default for the chat field it becomes, else the API's.
  const auto or_default = [&j, &defaults](const char* name, json fallback,
                                          const char* chat_name = nullptr) {
    if (const ordered_json* v = field(j, name)) return json::parse(v->dump());
    if (chat_name != nullptr) {
      if (const json* d = defaults.find(chat_name)) return *d;
    }
    return fallback;
  };
  out.echo = {{"instructions", or_default("instructions", nullptr)},
              {"max_output_tokens", or_default("max_output_tokens", nullptr, "max_tokens")},
              {"temperature", or_default("temperature", 1.0, "temperature")},
              {"top_p", or_default("top_p", 1.0, "top_p")},
              {"tools", or_default("tools", json::array())},
              {"tool_choice", or_default("tool_choice", "auto")},
              {"parallel_tool_calls", or_default("parallel_tool_calls", true)},
              {"text", or_default("text", {{"format", {{"type", "text"}}}})},
              {"metadata", or_default("metadata", json::object())},
              {"store", false}};
  return out;
}

namespace {

std::string hex_of(const ResponsesMeta& meta) { return meta.id.substr(meta.id.find('_') + 1); }

}  // namespace

json reasoning_item_json(const ResponsesMeta& meta, std::string_view text, bool done) {
  json content = json::array();
  if (done) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", "rs_" + hex_of(meta)},
          {"type", "reasoning"},
          {"status", done ? "completed" : "in_progress"},
          {"summary", json::array()},
          {"content", std::move(content)}};
}

json output_items(const ResponsesMeta& meta, const GenerationResult& result) {
  const ReasoningSplit thought = meta.reasoning.of(result.text);
  const SplitReply reply =
      meta.tool_names.empty()
          ? SplitReply{thought.content, {}}
          : split_tool_calls(thought.content, meta.tool_names, meta.tool_id_seed);
  json items = json::array();
  const std::string hex = hex_of(meta);
  if (!thought.reasoning.empty())
    items.push_back(reasoning_item_json(meta, thought.reasoning, true));
  // A message item when there is text, or when nothing else would answer (an empty reply); a
  // reply cut inside its reasoning (max_output_tokens) is the reasoning item alone, as OpenAI's.
  if (!reply.content.empty() || (reply.calls.empty() && thought.reasoning.empty())) {
    items.push_back({{"id", "msg_" + hex},
                     {"type", "message"},
                     {"status", "completed"},
                     {"role", "assistant"},
                     {"content", json::array({{{"type", "output_text"},
                                               {"text", reply.content},
                                               {"annotations", json::array()},
                                               {"logprobs", json::array()}}})}});
  }
  for (size_t i = 0; i < reply.calls.size(); ++i) {
    items.push_back({{"id", str_cat("fc_", hex, "_", i)},
                     {"type", "function_call"},
                     {"status", "completed"},
                     {"call_id", reply.calls[i].id},
                     {"name", reply.calls[i].name},
                     {"arguments", reply.calls[i].arguments}});
  }
  return items;
}

namespace {

json response_base(const ResponsesMeta& meta, const char* status) {
  json doc = {{"id", meta.id},       {"object", "response"},    {"created_at", meta.created_at},
              {"status", status},    {"error", nullptr},        {"incomplete_details", nullptr},
              {"model", meta.model}, {"output", json::array()}, {"usage", nullptr}};
  for (const auto& [key, value] : meta.echo.items()) doc[key] = value;
  return doc;
}

}  // namespace

json response_in_progress_json(const ResponsesMeta& meta) {
  return response_base(meta, "in_progress");
}

json response_json(const ResponsesMeta& meta, const GenerationResult& result,
                   int64_t reasoning_tokens) {
  const bool cut =
      result.finish == FinishReason::Length || result.finish == FinishReason::ContextFull;
  json doc = response_base(meta, cut ? "incomplete" : "completed");
  if (cut) doc["incomplete_details"] = {{"reason", "max_output_tokens"}};
  doc["output"] = output_items(meta, result);
  const GenerationStats& s = result.stats;
  doc["usage"] = {{"input_tokens", s.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", s.cached_tokens}}},
                  {"output_tokens", s.generated_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
                  {"total_tokens", s.prompt_tokens + s.generated_tokens}};
  doc["specdec"] = specdec_stats_json(s);
  return doc;
}

std::string ResponseEvents::operator()(json event) {
  event["sequence_number"] = next_++;
  return str_cat("event: ", event.value("type", std::string()), "\ndata: ", to_wire(event), "\n\n");
}

}  // namespace specdec::server
