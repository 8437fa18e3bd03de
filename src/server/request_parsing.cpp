#include "server/request_parsing.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.h"
#include "grammar/json_schema.h"
#include "grammar/regex_gbnf.h"
#include "sampling/logprobs.h"
#include "sampling/sampler_sequence.h"
#include "server/json_fields.h"

namespace specdec::server {
namespace {

using nlohmann::json;

// llama-server's DRY fields (an extension here): dry_multiplier, dry_base, dry_allowed_length,
// dry_penalty_last_n and dry_sequence_breakers (strings; [] for none), with its defaults.
void get_dry(const json& j, DryParams& dry) {
  dry.multiplier = static_cast<float>(get_number(j, "dry_multiplier", 0.0, 0.0, 1e6));
  dry.base = static_cast<float>(get_number(j, "dry_base", 1.75, 0.0, 1e6));
  constexpr int64_t kMaxLength = 1 << 24;
  if (auto n = get_int(j, "dry_allowed_length", 0, kMaxLength)) {
    dry.allowed_length = static_cast<int32_t>(*n);
  }
  if (auto n = get_int(j, "dry_penalty_last_n", -1, kMaxLength)) {
    dry.penalty_last_n = static_cast<int32_t>(*n);
  }
  if (const json* b = field(j, "dry_sequence_breakers")) {
    constexpr size_t kMaxBreakers = 64;
    if (!b->is_array()) wrong_type("dry_sequence_breakers", "an array of strings", *b);
    if (b->size() > kMaxBreakers) {
      throw invalid_request(str_cat("'dry_sequence_breakers' may hold at most ", kMaxBreakers,
                                    " strings, got ", b->size()),
                            "dry_sequence_breakers", "invalid_value");
    }
    dry.sequence_breakers.clear();
    for (const json& s : *b) {
      if (!s.is_string()) wrong_type("dry_sequence_breakers", "an array of strings", *b);
      dry.sequence_breakers.push_back(s.get<std::string>());
    }
  }
}

// presence_penalty, frequency_penalty (OpenAI), repetition_penalty (vLLM; llama-server's
// repeat_penalty too, the vLLM name winning when both are given) and logit_bias (OpenAI: an
// object from token ids, as strings, to biases). Token ids are checked against the vocabulary
// once the model is known (HttpServer).
PenaltyParams get_penalties(const json& j) {
  PenaltyParams pp;
  pp.presence_penalty = static_cast<float>(get_number(j, "presence_penalty", 0.0, -2.0, 2.0));
  pp.frequency_penalty = static_cast<float>(get_number(j, "frequency_penalty", 0.0, -2.0, 2.0));
  for (const char* name : {"repeat_penalty", "repetition_penalty"}) {
    const double rep = get_number(j, name, pp.repetition_penalty, 0.0, 10.0);
    if (!(rep > 0.0)) {
      throw invalid_request(str_cat("'", name, "' must be above 0, got ", rep), name,
                            "invalid_value");
    }
    pp.repetition_penalty = static_cast<float>(rep);
  }
  // llama-server's and Ollama's window (an extension here): given, the three penalties follow
  // llama.cpp's rule over the last N tokens of the prompt and the text; -1 is all of them.
  if (auto n = get_int(j, "repeat_last_n", -1, PenaltyParams::kWholeText)) {
    pp.last_n = *n == -1 ? PenaltyParams::kWholeText : static_cast<int32_t>(*n);
  }
  get_dry(j, pp.dry);
  const json* bias = field(j, "logit_bias");
  if (bias == nullptr) return pp;
  require_object(*bias, "logit_bias");
  constexpr size_t kMaxBiased = 1024;
  if (bias->size() > kMaxBiased) {
    throw invalid_request(
        str_cat("'logit_bias' may name at most ", kMaxBiased, " tokens, got ", bias->size()),
        "logit_bias", "invalid_value");
  }
  for (const auto& [key, value] : bias->items()) {
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (key.empty() || ec != std::errc() || end != key.data() + key.size() || id < 0) {
      throw invalid_request(str_cat("'logit_bias' keys must be token ids, got '", key, "'"),
                            "logit_bias", "invalid_value");
    }
    if (!value.is_number()) wrong_type(str_cat("logit_bias.", key), "a number", value);
    const double b = value.get<double>();
    if (!(b >= -100.0 && b <= 100.0)) {
      throw invalid_request(
          str_cat("'logit_bias' values must be between -100 and 100, got ", b, " for token ", key),
          "logit_bias", "invalid_value");
    }
    pp.logit_bias.emplace_back(id, static_cast<float>(b));
  }
  return pp;
}

// A JSON Schema given as an object, or as JSON text (vLLM's guided_json takes either). `ordered`
// is the same value parsed with its keys in order (properties are generated in the schema's
// order; the plain parse sorts them).
std::string schema_gbnf(const json& schema, const nlohmann::ordered_json& ordered,
                        const std::string& param) {
  if (schema.is_string()) {
    const std::string text = schema.get<std::string>();
    if (json_nesting_depth(text) > kMaxJsonDepth) {
      throw invalid_request(str_cat("'", param, "' is nested deeper than ", kMaxJsonDepth), param,
                            "invalid_value");
    }
    const json parsed = json::parse(text, nullptr, false);
    if (parsed.is_discarded()) {
      throw invalid_request(str_cat("'", param, "' is not valid JSON"), param, "invalid_value");
    }
    return schema_gbnf(parsed, nlohmann::ordered_json::parse(text), param);
  }
  if (!schema.is_object() && !schema.is_boolean())
    wrong_type(param, "a JSON Schema object", schema);
  try {
    return json_schema_gbnf(ordered);
  } catch (const Error& e) {
    throw invalid_request(str_cat("'", param, "': ", e.what()), param, "invalid_value");
  }
}

// guided_choice: an alternation of the exact strings.
std::string choice_gbnf(const json& c, const std::string& param) {
  if (!c.is_array() || c.empty()) wrong_type(param, "a non-empty array of strings", c);
  std::string rule = "root ::= ";
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].is_string()) wrong_type(param, "a non-empty array of strings", c);
    rule.append(i > 0 ? " | " : "").append(gbnf_literal(c[i].get<std::string>()));
  }
  return rule + "\n";
}

// guided_regex: the whole output matches the pattern (grammar/regex_gbnf.h).
std::string regex_rule(const json& r, const std::string& param) {
  if (!r.is_string()) wrong_type(param, "a string (a regular expression)", r);
  try {
    return str_cat(
        "root ::= ", regex_gbnf(r.get<std::string>(), RegexText::kPlain, RegexMatch::kWhole), "\n");
  } catch (const Error& e) {
    throw invalid_request(str_cat("'", param, "': ", e.what()), param, "invalid_value");
  }
}

// Structured output, whichever API names it: OpenAI's response_format (json_object, or
// json_schema with json_schema.schema; llama-server's json_object with a "schema"), llama.cpp's
// grammar (GBNF) and json_schema, vLLM's guided_json, guided_grammar, guided_choice and
// guided_regex, and their successor, vLLM's structured_outputs object. At most one may be given.
// The grammar is compiled here, so that a bad one is a 400 before anything runs. null: free text.
std::shared_ptr<const Grammar> get_grammar(const json& j, std::string_view body) {
  std::string gbnf, param;
  // The body again, with its keys in order, parsed only when a schema needs it.
  std::optional<nlohmann::ordered_json> ordered_body;
  const auto in_order = [&](std::initializer_list<const char*> path) {
    try {
      if (!ordered_body) ordered_body = nlohmann::ordered_json::parse(body);
      const nlohmann::ordered_json* at = &*ordered_body;
      for (const char* key : path) at = &at->at(key);
      return *at;
    } catch (const nlohmann::json::exception&) {  // parsed once already: not expected
      throw invalid_request("the request body could not be read again in order");
    }
  };
  const auto take = [&](const std::string& name, std::string text) {
    if (!param.empty()) {
      throw invalid_request(
          str_cat("'", param, "' and '", name, "' both constrain the output; ", "give one"), name,
          "invalid_value");
    }
    param = name;
    gbnf = std::move(text);
  };
  if (const json* f = field(j, "response_format")) {
    const json* type = f->is_object() ? field(*f, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      throw invalid_request("'response_format' must be an object with a string 'type'",
                            "response_format", "invalid_type");
    }
    const std::string t = type->get<std::string>();
    if (t == "json_object") {
      const json* schema = field(*f, "schema");
      take("response_format", schema != nullptr
                                  ? schema_gbnf(*schema, in_order({"response_format", "schema"}),
                                                "response_format.schema")
                                  : json_object_gbnf());
    } else if (t == "json_schema") {
      const json* spec = field(*f, "json_schema");
      if (spec == nullptr || !spec->is_object()) {
        throw invalid_request("'response_format' of type json_schema needs a 'json_schema' object",
                              "response_format", "invalid_value");
      }
      const json* schema = field(*spec, "schema");
      // OpenAI's schema is optional: without one, a JSON object.
      take("response_format",
           schema != nullptr
               ? schema_gbnf(*schema, in_order({"response_format", "json_schema", "schema"}),
                             "response_format.json_schema.schema")
               : json_object_gbnf());
    } else if (t != "text") {
      throw invalid_request(
          str_cat("unknown 'response_format' type '", t, "' (text, json_object or json_schema)"),
          "response_format", "unsupported_value");
    }
  }
  for (const char* name : {"grammar", "guided_grammar"}) {
    if (const json* g = field(j, name)) {
      if (!g->is_string()) wrong_type(name, "a string (GBNF)", *g);
      take(name, g->get<std::string>());
    }
  }
  for (const char* name : {"json_schema", "guided_json"}) {
    if (const json* s = field(j, name)) take(name, schema_gbnf(*s, in_order({name}), name));
  }
  if (const json* c = field(j, "guided_choice"))
    take("guided_choice", choice_gbnf(*c, "guided_choice"));
  if (const json* r = field(j, "guided_regex"))
    take("guided_regex", regex_rule(*r, "guided_regex"));
  // vLLM's current spelling (0.12 removed the guided_* fields): one object, one constraint.
  if (const json* so = field(j, "structured_outputs")) {
    require_object(*so, "structured_outputs");
    for (const auto& [key, v] : so->items()) {
      const std::string name = "structured_outputs." + key;
      if (v.is_null()) continue;
      if (key == "json") {
        take(name, schema_gbnf(v, in_order({"structured_outputs", "json"}), name));
      } else if (key == "regex") {
        take(name, regex_rule(v, name));
      } else if (key == "choice") {
        take(name, choice_gbnf(v, name));
      } else if (key == "grammar") {
        if (!v.is_string()) wrong_type(name, "a string (GBNF)", v);
        take(name, v.get<std::string>());
      } else if (key == "json_object") {
        if (!v.is_boolean()) wrong_type(name, "a boolean", v);
        if (v.get<bool>()) take(name, json_object_gbnf());
      } else if (key == "disable_fallback") {
        // A choice among vLLM's grammar backends; there is one here and it never falls back.
        if (!v.is_boolean()) wrong_type(name, "a boolean", v);
      } else {
        throw invalid_request(
            str_cat("'", name, "' is not supported (json, regex, choice, grammar ",
                    "and json_object are)"),
            name, "unsupported_value");
      }
    }
  }
  if (param.empty()) return nullptr;
  try {
    std::shared_ptr<const Grammar> grammar = Grammar::parse(gbnf);
    // Its start state too: a grammar too ambiguous to begin (thousands of alternatives at once)
    // is refused here, not by the generation it would start.
    GrammarState start(grammar);
    return grammar;
  } catch (const Error& e) {
    throw invalid_request(str_cat("'", param, "': ", e.what()), param, "invalid_value");
  }
}

}  // namespace

json parse_json_value(std::string_view body) {
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    throw invalid_request(
        str_cat("the request body nests JSON deeper than ", kMaxJsonDepth, " levels"), "",
        "invalid_json");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw invalid_request("the request body is not valid JSON", "", "invalid_json");
  }
  return j;
}

json parse_body(std::string_view body) {
  json j = parse_json_value(body);
  if (!j.is_object()) wrong_type("body", "a JSON object", j);
  return j;
}

std::string get_model(const json& j) {
  const json* m = field(j, "model");
  if (m == nullptr) return "";
  if (!m->is_string()) wrong_type("model", "a string", *m);
  return m->get<std::string>();
}

namespace {

std::vector<std::string> get_stop(const json& body) {
  const json* v = field(body, "stop");
  if (v == nullptr) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStopStrings) {
      throw invalid_request(
          str_cat("'stop' holds at most ", kMaxStopStrings, " strings, got ", v->size()), "stop",
          "invalid_value");
    }
    for (const json& s : *v) {
      if (!s.is_string()) wrong_type("stop", "a string or an array of strings", *v);
      out.push_back(s.get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", *v);
  }
  // An empty stop string would match everywhere; OpenAI ignores it, so do we.
  std::erase(out, std::string());
  return out;
}

}  // namespace

std::optional<std::vector<int32_t>> get_token_ids(const json& v, const std::string& param) {
  if (!v.is_array() || v.empty() || !v[0].is_number()) return std::nullopt;
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw invalid_request(str_cat("'", param, "' must hold token ids (integers >= 0)"), param,
                            "invalid_value");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::vector<PromptInput> get_prompt_forms(const json& v, const std::string& param, size_t max_items,
                                          const char* items) {
  if (v.is_string()) return {PromptInput{v.get<std::string>(), std::nullopt}};
  if (!v.is_array()) wrong_type(param, "a string, an array of strings or of token ids", v);
  if (v.empty()) {
    throw invalid_request(str_cat("'", param, "' is an empty array"), param, "invalid_value");
  }
  if (auto ids = get_token_ids(v, param)) return {PromptInput{"", std::move(ids)}};
  if (v.size() > max_items) {
    throw invalid_request(
        str_cat("at most ", max_items, " ", items, " per request, got ", v.size()), param,
        "invalid_value");
  }
  std::vector<PromptInput> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& p = v[i];
    const std::string name = str_cat(param, "[", i, "]");
    if (p.is_string()) {
      out.push_back({p.get<std::string>(), std::nullopt});
    } else if (auto ids = get_token_ids(p, name)) {
      out.push_back({"", std::move(ids)});
    } else {
      wrong_type(name, "a string or a non-empty array of token ids", p);
    }
  }
  return out;
}

namespace {

// The completions endpoint's prompts.
std::vector<PromptInput> get_prompts(const json& body) {
  const json* v = field(body, "prompt");
  if (v == nullptr) throw invalid_request("'prompt' is required", "prompt", "missing_required");
  return get_prompt_forms(*v, "prompt", static_cast<size_t>(kMaxChoicesPerRequest), "prompts");
}

// Message content is a string or OpenAI's array of parts; only text parts can be used.
std::string get_content(const json& msg, size_t index) {
  const std::string param = str_cat("messages[", index, "].content");
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string text;
    for (const json& part : *it) {
      if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        throw invalid_request(str_cat("'", param,
                                      "' parts must be {\"type\": \"text\", \"text\": "
                                      "string}; other part types are not supported"),
                              param, "invalid_value");
      }
      text += part["text"].get<std::string>();
    }
    return text;
  }
  wrong_type(param, "a string or an array of text parts", *it);
}

std::vector<ChatMessage> get_messages(const json& body) {
  const json* v = field(body, "messages");
  if (v == nullptr) throw invalid_request("'messages' is required", "messages", "missing_required");
  if (!v->is_array()) wrong_type("messages", "an array", *v);
  if (v->empty())
    throw invalid_request("'messages' must not be empty", "messages", "invalid_value");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = str_cat("messages[", i, "]");
    require_object(m, param);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      throw invalid_request(str_cat("'", param, ".role' must be a string"), param + ".role",
                            "invalid_type");
    }
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      throw invalid_request(
          str_cat("'", param, ".role' must be system, user, assistant or tool, got '",
                  role->get<std::string>(), "'"),
          param + ".role", "invalid_value");
    }
    ChatMessage msg{r, get_content(m, i), {}};
    if (const json* calls = field(m, "tool_calls"); calls != nullptr && r == "assistant") {
      const std::string cp = param + ".tool_calls";
      if (!calls->is_array()) wrong_type(cp, "an array", *calls);
      for (size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const json* f = c.is_object() ? field(c, "function") : nullptr;
        const json* name = f != nullptr && f->is_object() ? field(*f, "name") : nullptr;
        const json* args = f != nullptr && f->is_object() ? field(*f, "arguments") : nullptr;
        if (name == nullptr || !name->is_string() || (args != nullptr && !args->is_string())) {
          throw invalid_request(
              str_cat("'", cp, "[", k,
                      "]' must be {\"type\": \"function\", \"function\": {\"name\": string, "
                      "\"arguments\": string}}"),
              str_cat(cp, "[", k, "]"), "invalid_value");
        }
        msg.tool_calls.push_back(
            {name->get<std::string>(), args != nullptr ? args->get<std::string>() : "{}"});
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// vLLM's continue_final_message and add_generation_prompt: the final assistant message is left
// open and continued (the two are its way of asking for a prefill), or the prompt ends after
// the last turn without opening the assistant's.
void get_continuation(const json& j, CompletionRequest& r) {
  const bool continue_final = get_bool(j, "continue_final_message", false);
  r.add_generation_prompt = get_bool(j, "add_generation_prompt", !continue_final);
  if (!continue_final) return;
  if (r.add_generation_prompt) {
    throw invalid_request(
        "'continue_final_message' continues the last message, so 'add_generation_prompt' "
        "cannot open a new one: leave it out or set it to false",
        "add_generation_prompt", "invalid_value");
  }
  const ChatMessage& last = r.messages.back();
  if (last.role != "assistant" || !last.tool_calls.empty() || r.messages.size() < 2) {
    throw invalid_request(
        "'continue_final_message' needs a final assistant message with text (and no tool "
        "calls) after the turns it answers",
        "continue_final_message", "invalid_value");
  }
  // The template opens the assistant turn; the text goes in after it.
  r.prefill = last.content;
  r.messages.pop_back();
  r.add_generation_prompt = true;
}

// vLLM's and llama-server's chat_template_kwargs. The template is not run as Jinja here, so of
// its variables only enable_thinking (a thinking template's switch) can be set; another is a
// 400 rather than silently ignored.
void get_template_kwargs(const json& j, CompletionRequest& r) {
  const json* kw = field(j, "chat_template_kwargs");
  if (kw == nullptr) return;
  require_object(*kw, "chat_template_kwargs");
  for (const auto& [key, value] : kw->items()) {
    const std::string param = "chat_template_kwargs." + key;
    if (key != "enable_thinking") {
      throw invalid_request(str_cat("'", param, "' is not supported: the chat template is not run ",
                                    "as Jinja here; only enable_thinking can be set"),
                            param, "unsupported_value");
    }
    if (!value.is_boolean()) wrong_type(param, "a boolean", value);
    r.enable_thinking = value.get<bool>();
  }
}

// llama-server's reasoning_format (server/reasoning.h).
void get_reasoning_format(const json& j, CompletionRequest& r) {
  const json* f = field(j, "reasoning_format");
  if (f == nullptr) return;
  if (!f->is_string()) wrong_type("reasoning_format", "a string", *f);
  const std::string name = f->get<std::string>();
  const std::optional<ReasoningFormat> format = reasoning_format_named(name);
  if (!format) {
    throw invalid_request(
        str_cat("reasoning_format must be ", kReasoningFormatNames, ", got '", name, "'"),
        "reasoning_format", "invalid_value");
  }
  r.reasoning_format = *format;
}

}  // namespace

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

const char* reasoning_budget_field(const json& body) {
  return field(body, "reasoning_budget_tokens") == nullptr &&
                 field(body, "thinking_budget_tokens") != nullptr
             ? "thinking_budget_tokens"
             : "reasoning_budget_tokens";
}

CompletionRequest parse_request(Endpoint endpoint, std::string_view body,
                                const RequestDefaults& defaults) {
  // No request needs more than a few levels; a body of a million '[' is an attack on the
  // parser's and the destructor's recursion, refused before parsing.
  bool client_max_tokens = false;  // the body's own limit, before the server's defaults
  const json j = [&] {
    json parsed = parse_body(body);
    client_max_tokens =
        field(parsed, "max_tokens") != nullptr || field(parsed, "max_completion_tokens") != nullptr;
    fill_defaults(parsed, defaults);
    return parsed;
  }();
  CompletionRequest r;
  r.endpoint = endpoint;
  r.model = get_model(j);
  if (endpoint == Endpoint::Completions) {
    r.prompts = get_prompts(j);
  } else {
    r.messages = get_messages(j);
    get_continuation(j, r);
    get_template_kwargs(j, r);
    get_reasoning_format(j, r);
    r.reasoning_budget = static_cast<int32_t>(
        get_int(j, reasoning_budget_field(j), -1, std::numeric_limits<int32_t>::max())
            .value_or(-1));
    if (const json* m = field(j, "reasoning_budget_message")) {
      if (!m->is_string()) wrong_type("reasoning_budget_message", "a string", *m);
      r.reasoning_budget_message = m->get<std::string>();
    }
  }
  constexpr int64_t kMaxTokens = 1 << 24;
  // echo with max_tokens 0 scores a prompt without generating (completions only).
  if (endpoint == Endpoint::Completions) r.echo = get_bool(j, "echo", false);
  r.max_tokens = get_int(j, "max_tokens", r.echo ? 0 : 1, kMaxTokens);
  if (endpoint == Endpoint::ChatCompletions) {
    // The newer name; it wins when both are given, as in OpenAI's API.
    if (auto m = get_int(j, "max_completion_tokens", 1, kMaxTokens)) r.max_tokens = m;
  }
  r.max_tokens_from_server = r.max_tokens.has_value() && !client_max_tokens;
  r.sampling.temperature = static_cast<float>(get_number(j, "temperature", 1.0, 0.0, 2.0));
  r.sampling.top_p = static_cast<float>(get_number(j, "top_p", 1.0, 0.0, 1.0));
  if (auto k = get_int(j, "top_k", 0, 1 << 24)) r.sampling.top_k = static_cast<int32_t>(*k);
  r.sampling.min_p = static_cast<float>(get_number(j, "min_p", 0.0, 0.0, 1.0));
  // As in llama-server: typical_p 1 or more and top_n_sigma 0 or less are off; typical_p 0 keeps
  // the one most typical token.
  r.sampling.typical_p =
      static_cast<float>(std::min(1.0, get_number(j, "typical_p", 1.0, 0.0, 1e9)));
  r.sampling.top_n_sigma = static_cast<float>(get_number(j, "top_n_sigma", -1.0, -1e9, 1e9));
  r.sampling.xtc_probability = static_cast<float>(get_number(j, "xtc_probability", 0.0, 0.0, 1.0));
  r.sampling.xtc_threshold = static_cast<float>(get_number(j, "xtc_threshold", 0.1, 0.0, 1.0));
  r.sampling.dynatemp_range = static_cast<float>(get_number(j, "dynatemp_range", 0.0, 0.0, 1e6));
  r.sampling.dynatemp_exponent =
      static_cast<float>(get_number(j, "dynatemp_exponent", 1.0, 0.0, 1e6));
  if (auto m = get_int(j, "mirostat", 0, 2)) r.sampling.mirostat = static_cast<int32_t>(*m);
  r.sampling.mirostat_tau = static_cast<float>(get_number(j, "mirostat_tau", 5.0, 0.0, 1e6));
  r.sampling.mirostat_eta = static_cast<float>(get_number(j, "mirostat_eta", 0.1, 0.0, 1e6));
  // text-generation-webui's name for llama.cpp's order: the filters at temperature 1, the
  // temperature applied to their survivors.
  r.sampling.temperature_last = get_bool(j, "temperature_last", false);
  if (auto s = get_int(j, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max())) {
    r.seed = static_cast<uint64_t>(*s);
  }
  r.stop = get_stop(j);
  r.penalties = get_penalties(j);
  if (const json* l = field(j, "lora")) r.lora = parse_lora_entries(*l, "lora");
  // llama-server reads its samplers list on every endpoint: the stages it leaves out are off and
  // the temperature stands where it puts it; an order specdec would not apply is a 400.
  if (const json* s = field(j, "samplers")) {
    const char* expected = "an array of sampler names or a string of their letters";
    std::vector<std::string> sequence;
    if (s->is_string()) {
      sequence = sampler_names_of_letters(s->get<std::string>());
    } else if (s->is_array()) {
      for (const json& name : *s) {
        if (!name.is_string()) wrong_type("samplers", expected, *s);
        sequence.push_back(canonical_sampler_name(name.get<std::string>()));
      }
    } else {
      wrong_type("samplers", expected, *s);
    }
    try {
      r.samplers = apply_sampler_sequence(sequence, r.sampling, r.penalties);
    } catch (const Error& e) {
      throw invalid_request(e.what(), "samplers", "invalid_value");
    }
  }
  // Bounded by the server's slots when it submits (HttpServer::Impl::submit_jobs).
  if (auto slot = get_int(j, "id_slot", -1, 255)) r.id_slot = static_cast<int32_t>(*slot);
  // n choices are n sequences (HttpServer submits one job each).
  if (auto n = get_int(j, "n", 1, kMaxChoices)) r.n = static_cast<int32_t>(*n);
  // best_of (the legacy completions API's; OpenAI's and vLLM's): best_of sequences per prompt,
  // the n best returned. Elsewhere only the trivial value (all of the n) is taken.
  r.best_of = r.n;
  if (auto b = get_int(j, "best_of", 1, kMaxChoices)) {
    if (endpoint != Endpoint::Completions && *b != r.n) {
      throw invalid_request(str_cat("'best_of' other than n is supported by /v1/completions ",
                                    "only, got best_of ", *b, " with n ", r.n),
                            "best_of", "invalid_value");
    }
    if (*b < r.n) {
      throw invalid_request(
          str_cat("best_of must be at least n, got best_of ", *b, " with n ", r.n), "best_of",
          "invalid_value");
    }
    r.best_of = static_cast<int32_t>(*b);
  }
  if (const size_t choices = r.prompts.size() * static_cast<size_t>(r.best_of);
      choices > static_cast<size_t>(kMaxChoicesPerRequest)) {
    throw invalid_request(
        str_cat("at most ", kMaxChoicesPerRequest,
                " sequences (prompts x n, or x best_of) per request, got ", choices),
        r.best_of > r.n ? "best_of" : "n", "invalid_value");
  }
  if (endpoint == Endpoint::ChatCompletions && get_bool(j, "echo", false)) {
    throw invalid_request("'echo' is supported by /v1/completions only", "echo",
                          "unsupported_value");
  }
  r.grammar = get_grammar(j, body);
  // What would change the output's form is refused rather than ignored: the deprecated
  // function-calling form where it is not read (/v1/chat/completions translates it first:
  // server/legacy_functions.h), and tools where no chat template renders them.
  if (const json* f = field(j, "functions"); f != nullptr && !(f->is_array() && f->empty())) {
    throw invalid_request(
        "'functions' (deprecated) is read by /v1/chat/completions only; use 'tools'", "functions",
        "unsupported_value");
  }
  const json* tools = field(j, "tools");
  const bool no_tools = tools == nullptr || (tools->is_array() && tools->empty());
  if (!no_tools || field(j, "tool_choice") != nullptr) {
    if (endpoint != Endpoint::ChatCompletions) {
      throw invalid_request("'tools' are supported by /v1/chat/completions only", "tools",
                            "unsupported_value");
    }
    r.tools = parse_tools(j, nlohmann::ordered_json::parse(body));
    if (r.tools.grammar && r.tools.lazy) {
      // A structured output format, if any, holds for the whole reply instead.
      if (!r.grammar) {
        r.grammar = r.tools.grammar;
        r.grammar_trigger = std::string(kToolCallOpen);
      }
    } else if (r.tools.grammar) {
      if (r.grammar) {
        throw invalid_request(
            "'tool_choice' (required or a function) and a structured output format both "
            "constrain the output; give one",
            "tool_choice", "invalid_value");
      }
      r.grammar = r.tools.grammar;
    }
  }
  if (const json* s = field(j, "suffix")) {
    if (!s->is_string()) wrong_type("suffix", "a string", *s);
    r.suffix = s->get<std::string>();
    if (!r.suffix.empty() && endpoint == Endpoint::ChatCompletions) {
      throw invalid_request("'suffix' is supported by /v1/completions only", "suffix",
                            "unsupported_value");
    }
    if (!r.suffix.empty() && r.echo) {
      throw invalid_request("'echo' and 'suffix' cannot be used together", "suffix",
                            "invalid_value");
    }
    for (const PromptInput& p : r.prompts) {
      if (!r.suffix.empty() && p.tokens) {
        throw invalid_request("'suffix' needs text prompts, not token ids", "suffix",
                              "invalid_value");
      }
    }
  }
  // Completions: "logprobs": N (0..20) alternatives per token (OpenAI allows 5, vLLM 20).
  // Chat: "logprobs": true, with "top_logprobs": N (0..20) alternatives.
  if (endpoint == Endpoint::Completions) {
    if (auto n = get_int(j, "logprobs", 0, kMaxTopLogprobs)) r.logprobs = static_cast<int32_t>(*n);
  } else {
    const bool want = get_bool(j, "logprobs", false);
    const auto top = get_int(j, "top_logprobs", 0, kMaxTopLogprobs);
    if (top && !want) {
      throw invalid_request("'top_logprobs' needs \"logprobs\": true", "top_logprobs",
                            "invalid_value");
    }
    if (want) r.logprobs = static_cast<int32_t>(top.value_or(0));
  }
  r.tokens_as_ids = get_bool(j, "return_tokens_as_token_ids", false);
  r.stream = get_bool(j, "stream", false);
  if (r.stream && r.best_of > r.n) {
    throw invalid_request(
        "'best_of' greater than n cannot be streamed: the best are known only "
        "once all have ended",
        "best_of", "unsupported_value");
  }
  if (auto n = get_int(j, "prompt_logprobs", 0, kMaxTopLogprobs)) {
    if (r.stream) {
      throw invalid_request("'prompt_logprobs' cannot be streamed", "prompt_logprobs",
                            "unsupported_value");
    }
    r.prompt_logprobs = static_cast<int32_t>(*n);
  }
  if (const json* so = field(j, "stream_options")) {
    require_object(*so, "stream_options");
    r.include_usage = get_bool(*so, "include_usage", false);
  }
  r.speculative = get_bool(j, "speculative", true);
  if (auto g = get_int(j, "draft_max", 1, kMaxDraftMax)) r.draft_max = static_cast<int32_t>(*g);
  if (auto g = get_int(j, "speculative.n_max", 0, kMaxDraftMax)) {
    if (r.draft_max && *r.draft_max != *g) {
      throw invalid_request("'draft_max' and 'speculative.n_max' are one setting: give one of them",
                            "speculative.n_max", "invalid_value");
    }
    if (*g == 0) {
      r.speculative = false;
    } else {
      r.draft_max = static_cast<int32_t>(*g);
    }
  }
  if (auto g = get_int(j, "speculative.n_min", 0, kMaxDraftMax)) {
    r.draft_min = static_cast<int32_t>(*g);
  }
  if (field(j, "speculative.p_min") != nullptr) {
    r.draft_p_min = static_cast<float>(get_number(j, "speculative.p_min", 0.0, 0.0, 1.0));
  }
  r.ignore_eos = get_bool(j, "ignore_eos", false);
  if (const json* ids = field(j, "stop_token_ids")) {
    if (!ids->is_array()) wrong_type("stop_token_ids", "an array of token ids", *ids);
    if (ids->size() > kMaxStopTokenIds) {
      throw invalid_request(
          str_cat("at most ", kMaxStopTokenIds, " stop_token_ids, got ", ids->size()),
          "stop_token_ids", "invalid_value");
    }
    if (auto list = get_token_ids(*ids, "stop_token_ids")) r.stop_token_ids = std::move(*list);
    if (!ids->empty() && r.stop_token_ids.empty()) {
      wrong_type("stop_token_ids", "an array of token ids", *ids);
    }
  }
  if (auto m = get_int(j, "min_tokens", 0, kMaxTokens)) r.min_tokens = static_cast<int32_t>(*m);
  if (r.max_tokens && r.min_tokens > *r.max_tokens) {
    throw invalid_request(
        str_cat("min_tokens (", r.min_tokens, ") exceeds max_tokens (", *r.max_tokens, ")"),
        "min_tokens", "invalid_value");
  }
  return r;
}

void check_model(const std::string& requested, std::span<const std::string> ids) {
  if (requested.empty()) return;
  for (const auto& id : ids) {
    if (id == requested) return;
  }
  throw ApiError(404,
                 str_cat("the model '", requested, "' does not exist (this server has '",
                         ids.empty() ? std::string() : ids.front(), "')"),
                 "invalid_request_error", "model", "model_not_found");
}

TokenizeRequest parse_tokenize(std::string_view body) {
  const json j = parse_body(body);
  TokenizeRequest r;
  r.model = get_model(j);
  r.with_pieces = get_bool(j, "with_pieces", false);
  if (field(j, "messages") != nullptr) {
    CompletionRequest c;
    c.messages = get_messages(j);
    get_continuation(j, c);
    r.messages = std::move(c.messages);
    r.add_generation_prompt = c.add_generation_prompt;
    r.prefill = std::move(c.prefill);
    r.chat = true;
    return r;
  }
  // llama-server calls the text "content", vLLM "prompt".
  for (const char* name : {"content", "prompt"}) {
    if (const json* v = field(j, name)) {
      if (!v->is_string()) wrong_type(name, "a string", *v);
      r.text = v->get<std::string>();
      return r;
    }
  }
  throw invalid_request("'content' (or 'prompt', or 'messages') is required", "content",
                        "missing_required");
}

DetokenizeRequest parse_detokenize(std::string_view body) {
  const json j = parse_body(body);
  DetokenizeRequest r;
  r.model = get_model(j);
  const json* v = field(j, "tokens");
  if (v == nullptr) throw invalid_request("'tokens' is required", "tokens", "missing_required");
  if (!v->is_array()) wrong_type("tokens", "an array of token ids", *v);
  if (v->empty()) return r;  // detokenizes to ""
  auto ids = get_token_ids(*v, "tokens");
  if (!ids) {  // its first element is no number
    throw invalid_request("'tokens' must hold token ids (integers >= 0)", "tokens",
                          "invalid_value");
  }
  r.tokens = std::move(*ids);
  return r;
}

int32_t resolve_max_tokens(const CompletionRequest& request, int32_t prompt_tokens, int32_t n_ctx) {
  const char* what = request.endpoint == Endpoint::Completions ? "prompt" : "messages";
  if (prompt_tokens <= 0) {
    throw invalid_request("the prompt is empty after tokenization", what, "invalid_value");
  }
  if (prompt_tokens >= n_ctx) {
    throw invalid_request(str_cat("the prompt has ", prompt_tokens,
                                  " tokens but the context holds ", n_ctx, " tokens"),
                          what, "context_length_exceeded");
  }
  if (!request.max_tokens) {
    return request.endpoint == Endpoint::Completions ? std::min(16, n_ctx - prompt_tokens)
                                                     : n_ctx - prompt_tokens;
  }
  const int64_t total = int64_t{prompt_tokens} + *request.max_tokens;
  if (total > n_ctx && request.max_tokens_from_server) return n_ctx - prompt_tokens;
  if (total > n_ctx) {
    throw invalid_request(
        str_cat("this model's context holds ", n_ctx, " tokens, but ", total, " were requested (",
                prompt_tokens, " in the prompt + ", *request.max_tokens,
                " max_tokens); reduce the prompt or max_tokens"),
        "max_tokens", "context_length_exceeded");
  }
  return *request.max_tokens;
}

}  // namespace specdec::server
