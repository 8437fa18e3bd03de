#include "server/ollama_api.h"

#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <utility>

#include "common/error.h"
#include "sampling/logprobs.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/translated_request.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Ollama's sampling defaults (its api.DefaultOptions), which its clients count on when they
// send no options: a request without them samples, as it would from Ollama.
constexpr double kDefaultTemperature = 0.8;
constexpr int kDefaultTopK = 40;
constexpr double kDefaultTopP = 0.9;
constexpr int kDefaultRepeatLastN = 64;
// Ollama's runner applies its repetition penalty by default (over the last repeat_last_n tokens
// of the prompt and the text, before top-k and the temperature).
constexpr double kDefaultRepeatPenalty = 1.1;

// Options that pass to the chat parser under the same name.
constexpr std::array<const char*, 14> kSamplingOptions = {"temperature",
                                                          "top_p",
                                                          "top_k",
                                                          "min_p",
                                                          "typical_p",
                                                          "seed",
                                                          "stop",
                                                          "mirostat",
                                                          "mirostat_tau",
                                                          "mirostat_eta",
                                                          "presence_penalty",
                                                          "repeat_penalty",
                                                          "frequency_penalty",
                                                          "repeat_last_n"};

std::string optional_string(const ordered_json& body, const char* name) {
  const ordered_json* v = field(body, name);
  if (v == nullptr) return "";
  if (!v->is_string()) wrong_type(name, "a string", *v);
  return v->get<std::string>();
}

// A sampler Ollama still documents but this engine does not have: refused unless it is set to
// its neutral value, so that nobody gets another sampler's text without knowing.
void refuse_unless_neutral(const ordered_json& options, const char* name, double neutral,
                           const char* why) {
  const ordered_json* v = field(options, name);
  if (v == nullptr) return;
  const std::string param = str_cat("options.", name);
  if (!v->is_number()) wrong_type(param, "a number", *v);
  if (v->get<double>() != neutral) bad_field(param, why, "unsupported_value");
}

// options -> the chat parser's fields; where the request sets none, the server's defaults, else
// Ollama's. `defaults` loses max_tokens when num_predict settles the length itself.
void translate_options(const ordered_json& body, ordered_json& out, RequestDefaults& defaults) {
  out["temperature"] = defaults.value_or("temperature", kDefaultTemperature);
  out["top_k"] = defaults.value_or("top_k", kDefaultTopK);
  out["top_p"] = defaults.value_or("top_p", kDefaultTopP);
  // Ollama (llama.cpp) applies its penalties to the last repeat_last_n tokens of the prompt and
  // the text (-1: all of them; 0: off): the chat parser's llama.cpp rule.
  out["repeat_last_n"] = defaults.value_or("repeat_last_n", kDefaultRepeatLastN);
  out["repeat_penalty"] = defaults.value_or("repeat_penalty", kDefaultRepeatPenalty);
  const ordered_json* o = field(body, "options");
  if (o == nullptr) return;
  require_object(*o, "options");
  for (const char* name : kSamplingOptions) {
    if (const ordered_json* v = field(*o, name)) out[name] = *v;
  }
  if (const ordered_json* v = field(*o, "num_predict")) {
    defaults = defaults.without({"max_tokens"});
    // -1: no limit, -2: fill the context (both: until the turn or the context ends).
    if (!v->is_number_integer()) wrong_type("options.num_predict", "an integer", *v);
    const int64_t n = v->get<int64_t>();
    if (n >= 0) {
      out["max_tokens"] = n;
    } else if (n != -1 && n != -2) {
      bad_field("options.num_predict",
                str_cat("must be a token count, -1 (no limit) or -2 (fill the context), got ", n));
    }
  }
  refuse_unless_neutral(*o, "tfs_z", 1, "must be 1: tail-free sampling is not available");
  // The rest are ignored: the options that configure how Ollama loads a model (num_ctx,
  // num_gpu, num_thread, use_mmap, ...), which a request cannot change on this server (clients
  // such as Open WebUI and Continue send num_ctx with every request), and unknown ones, which
  // Ollama too ignores (with a warning).
}

// format: "" (free text), "json" (any JSON object) or a JSON Schema object.
void translate_format(const ordered_json& body, ordered_json& out) {
  const ordered_json* f = field(body, "format");
  if (f == nullptr) return;
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    if (s.empty()) return;
    if (s != "json")
      bad_field("format", str_cat("must be \"json\" or a JSON schema, got \"", s, "\""));
    out["response_format"] = {{"type", "json_object"}};
    return;
  }
  if (!f->is_object()) wrong_type("format", "\"json\" or a JSON schema object", *f);
  out["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"name", "format"}, {"schema", *f}, {"strict", true}}}};
}

// The fields both endpoints share: stream (true unless false), think, logprobs, images at the
// top level, and the server's extensions (speculative, draft_max, ignore_eos).
void translate_common(const ordered_json& body, const std::string& model, ordered_json& out,
                      RequestDefaults& defaults) {
  out["model"] = model;
  out["stream"] = get_bool(body, "stream", true);
  // logprobs (with top_logprobs alternatives): the chat parser's fields; the completions form
  // takes the alternatives' count as its logprobs (parse_ollama_generate).
  if (const ordered_json* v = field(body, "logprobs")) out["logprobs"] = *v;
  if (const ordered_json* v = field(body, "top_logprobs")) out["top_logprobs"] = *v;
  if (const ordered_json* v = field(body, "ignore_eos")) out["ignore_eos"] = *v;
  copy_fields(body, out, kSpeculativeFields);
  translate_options(body, out, defaults);
  translate_format(body, out);
}

void refuse_images(const ordered_json& object, const std::string& param) {
  const ordered_json* v = field(object, "images");
  if (v == nullptr) return;
  if (!v->is_array()) wrong_type(param, "an array", *v);
  if (!v->empty()) {
    bad_field(param, "cannot be read: this server serves a text-only model", "unsupported_value");
  }
}

// keep_alive 0 (a number, or a duration string such as "0" or "0s"): unload.
bool keep_alive_zero(const ordered_json& body) {
  const ordered_json* v = field(body, "keep_alive");
  if (v == nullptr) return false;
  if (v->is_number()) return v->get<double>() == 0;
  if (!v->is_string()) wrong_type("keep_alive", "a number or a duration string", *v);
  const std::string s = v->get<std::string>();
  return s == "0" || s == "0s" || s == "0m" || s == "0h";
}

std::string required_model(const ordered_json& body) {
  const ordered_json* v = field(body, "model");
  if (v == nullptr) v = field(body, "name");  // the field's older name
  if (v == nullptr) bad_field("model", "is required", "missing_required");
  if (!v->is_string()) wrong_type("model", "a string", *v);
  if (v->get<std::string>().empty()) bad_field("model", "is required", "missing_required");
  return v->get<std::string>();
}

// An assistant message's tool calls: Ollama's {"function": {"name", "arguments": {...}}} as the
// chat parser's OpenAI calls (arguments as JSON text).
ordered_json translate_calls(const ordered_json& calls, const std::string& param, size_t turn) {
  if (!calls.is_array()) wrong_type(param, "an array", calls);
  ordered_json out = ordered_json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string p = str_cat(param, "[", k, "]");
    const ordered_json* function = field(require_object(calls[k], p), "function");
    if (function == nullptr) bad_field(p + ".function", "is required", "missing_required");
    const ordered_json& f = require_object(*function, p + ".function");
    const std::string name = required_string(f, "name", p + ".function");
    std::string arguments = "{}";
    if (const ordered_json* a = field(f, "arguments")) {
      if (a->is_object()) {
        arguments = a->dump();
      } else if (a->is_string()) {
        arguments = a->get<std::string>();  // some clients echo OpenAI's form
      } else {
        wrong_type(p + ".function.arguments", "an object", *a);
      }
    }
    out.push_back({{"id", str_cat("call_", turn, "_", k)},
                   {"type", "function"},
                   {"function", {{"name", name}, {"arguments", arguments}}}});
  }
  return out;
}

ordered_json translate_messages(const ordered_json& messages) {
  if (!messages.is_array()) wrong_type("messages", "an array", messages);
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string p = str_cat("messages[", i, "]");
    const ordered_json& m = require_object(messages[i], p);
    const std::string role = required_string(m, "role", p);
    refuse_images(m, p + ".images");
    std::string content;
    if (const ordered_json* c = field(m, "content")) {
      if (!c->is_string()) wrong_type(p + ".content", "a string", *c);
      content = c->get<std::string>();
    }
    ordered_json t = {{"role", role}, {"content", content}};
    if (const ordered_json* calls = field(m, "tool_calls");
        calls != nullptr && role == "assistant") {
      ordered_json translated = translate_calls(*calls, p + ".tool_calls", i);
      if (!translated.empty()) t["tool_calls"] = std::move(translated);
    }
    // A thinking field (returned by another model) is not this model's text; tool_name is
    // not part of the Hermes convention's tool turns.
    out.push_back(std::move(t));
  }
  return out;
}

std::string client_name(const std::string& p) {
  for (const char* name : kSamplingOptions) {
    if (p == name) return str_cat("options.", name);
  }
  if (p == "repetition_penalty") return "options.repeat_penalty";
  if (p == "max_tokens") return "options.num_predict";
  if (std::optional<std::string> r = renamed_prefix(p, "response_format", "format")) return *r;
  return p;
}

}  // namespace

std::string ollama_model_name(std::string_view name) {
  constexpr std::string_view kLatest = ":latest";
  if (name.size() > kLatest.size() && name.ends_with(kLatest)) {
    name.remove_suffix(kLatest.size());
  }
  return std::string(name);
}

namespace {

// What both endpoints start from: the body, the OpenAI body it is being translated into (its
// shared fields done), and the request with the model named.
struct Translation {
  ordered_json body, translated;
  OllamaRequest out;
  RequestDefaults defaults;  // the server's, for what the translated body leaves out
};

Translation begin_translation(std::string_view text, const RequestDefaults& defaults) {
  Translation t;
  t.defaults = defaults;
  t.body = parse_translated_body(text);
  t.out.model = required_model(t.body);
  // think: true, false, or an effort ("high", "medium", "low"), which here means true.
  if (const ordered_json* v = field(t.body, "think")) {
    if (!v->is_boolean() && !v->is_string()) wrong_type("think", "a boolean or a string", *v);
    t.out.think = !v->is_boolean() || v->get<bool>();
  }
  translate_common(t.body, t.out.model, t.translated, t.defaults);
  return t;
}

// Nothing to generate: Ollama loads the model (with keep_alive 0, unloads it) and says so.
OllamaRequest load_only(const ordered_json& body, const ordered_json& translated,
                        OllamaRequest out) {
  out.load_only = true;
  out.unload = keep_alive_zero(body);
  out.request.model = ollama_model_name(out.model);
  out.request.stream = translated["stream"].get<bool>();
  return out;
}

}  // namespace

OllamaRequest parse_ollama_chat(std::string_view body, const RequestDefaults& defaults) {
  Translation t = begin_translation(body, defaults);
  const ordered_json& j = t.body;
  ordered_json& chat = t.translated;
  OllamaRequest& out = t.out;
  const ordered_json* messages = field(j, "messages");
  if (messages == nullptr || (messages->is_array() && messages->empty())) {
    return load_only(j, chat, std::move(out));
  }
  chat["messages"] = translate_messages(*messages);
  // Ollama continues a final assistant message (a prefill) instead of answering after it.
  const ordered_json& last = chat["messages"].back();
  if (last["role"] == "assistant" && !last.contains("tool_calls") && chat["messages"].size() > 1) {
    chat["continue_final_message"] = true;
  }
  if (const ordered_json* tools = field(j, "tools")) {
    if (!tools->is_array()) wrong_type("tools", "an array", *tools);
    if (!tools->empty()) chat["tools"] = *tools;
  }
  // An extension (Ollama has no such field; its calls are the model's choice, tool_choice
  // auto): OpenAI's tool_choice, to force a call ("required") or a named function.
  if (const ordered_json* choice = field(j, "tool_choice")) chat["tool_choice"] = *choice;
  out.request = parse_translated_chat(chat, client_name, t.defaults);
  out.request.model = ollama_model_name(out.model);
  if (out.think) out.request.enable_thinking = out.think;  // else the server's default
  return out;
}

OllamaRequest parse_ollama_generate(std::string_view body, const RequestDefaults& defaults) {
  Translation t = begin_translation(body, defaults);
  const ordered_json& j = t.body;
  ordered_json& req = t.translated;
  OllamaRequest& out = t.out;
  const std::string prompt = optional_string(j, "prompt");
  const std::string suffix = optional_string(j, "suffix");
  const std::string system = optional_string(j, "system");
  out.raw = get_bool(j, "raw", false);
  refuse_images(j, "images");
  if (!optional_string(j, "template").empty()) {
    bad_field("template",
              "cannot be used: this server applies the chat template the GGUF file holds, not "
              "Ollama's Go templates (send raw: true with a prompt you formatted yourself)",
              "unsupported_value");
  }
  if (const ordered_json* c = field(j, "context")) {
    if (!c->is_array()) wrong_type("context", "an array of token ids", *c);
    for (size_t i = 0; i < c->size(); ++i) {
      const ordered_json& id = (*c)[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        bad_field(str_cat("context[", i, "]"), "must be a token id (a non-negative integer)");
      }
      out.context.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (prompt.empty() && suffix.empty()) return load_only(j, req, std::move(out));
  if (out.raw && !suffix.empty()) {
    bad_field("suffix", "cannot be used with raw: fill in the middle needs the model's markers",
              "unsupported_value");
  }
  if (out.raw || !suffix.empty()) {
    // The completions parser's logprobs is the alternatives' count (absent: none).
    const bool logprobs = get_bool(j, "logprobs", false);
    const std::optional<int64_t> top = get_int(j, "top_logprobs", 0, kMaxTopLogprobs);
    if (top && !logprobs) bad_field("top_logprobs", "needs \"logprobs\": true");
    req.erase("top_logprobs");
    req.erase("logprobs");
    if (logprobs) req["logprobs"] = top.value_or(0);
    req["prompt"] = prompt;
    if (!suffix.empty()) req["suffix"] = suffix;  // the FIM prompt ignores a system prompt
    out.request = parse_translated_request(Endpoint::Completions, req, client_name, t.defaults);
  } else {
    ordered_json messages = ordered_json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    req["messages"] = std::move(messages);
    out.request = parse_translated_chat(req, client_name, t.defaults);
    if (out.think) out.request.enable_thinking = out.think;  // else the server's default
  }
  out.request.model = ollama_model_name(out.model);
  return out;
}

std::string parse_ollama_show(std::string_view body) {
  return required_model(parse_translated_body(body));
}

json ollama_error_json(const ApiError& error) { return json{{"error", error.what()}}; }

namespace {

std::string rfc3339(int64_t unix_seconds) {
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return when;
}

json details_json(const ModelFacts& f) {
  return json{{"parent_model", ""},
              {"format", "gguf"},
              {"family", f.architecture},
              {"families", json::array({f.architecture})},
              {"parameter_size", f.size_label},
              {"quantization_level", f.quantization}};
}

json listed_model_json(const ModelFacts& f) {
  // Ollama lists every model with its tag; a name that has none gets Ollama's default.
  const std::string name = f.name.find(':') == std::string::npos ? f.name + ":latest" : f.name;
  return json{{"name", name},
              {"model", name},
              {"modified_at", rfc3339(f.modified)},
              {"size", f.file_bytes},
              {"details", details_json(f)}};
}

}  // namespace

json ollama_tags_json(const ModelFacts& facts) {
  return json{{"models", json::array({listed_model_json(facts)})}};
}

json ollama_show_json(const ModelFacts& f, const RequestDefaults& defaults) {
  json capabilities = json::array({"completion"});
  if (f.tools) capabilities.push_back("tools");
  if (f.insert) capabilities.push_back("insert");
  if (f.thinking) capabilities.push_back("thinking");
  const std::string arch = f.architecture;
  // context_length is the context this server serves, not the one the model was trained
  // for: clients size their prompts by it.
  json info = {{"general.architecture", arch},
               {"general.parameter_count", f.parameters},
               {"general.file_type_name", f.quantization},
               {arch + ".context_length", f.context},
               {arch + ".embedding_length", f.embedding},
               {arch + ".block_count", f.layers}};
  std::string modelfile =
      str_cat("# Served by specdec (an Ollama-compatible API)\nFROM ", f.file, "\n");
  if (!f.draft.empty())
    modelfile += str_cat("# draft model (speculative decoding): ", f.draft, "\n");
  return json{{"license", ""},
              {"modelfile", modelfile},
              {"parameters",
               str_cat("temperature ", defaults.value_or("temperature", kDefaultTemperature).dump(),
                       "\ntop_k ", defaults.value_or("top_k", kDefaultTopK).dump(), "\ntop_p ",
                       defaults.value_or("top_p", kDefaultTopP).dump(), "\nrepeat_penalty ",
                       defaults.value_or("repeat_penalty", kDefaultRepeatPenalty).dump(),
                       "\nnum_ctx ", f.context)},
              {"template", f.chat_template},
              {"details", details_json(f)},
              {"model_info", std::move(info)},
              {"capabilities", std::move(capabilities)},
              {"modified_at", rfc3339(f.modified)}};
}

json ollama_ps_json(const ModelFacts& f) {
  json m = listed_model_json(f);
  m.erase("modified_at");
  // Resident until the server stops: Ollama's clients read a far expiry as "kept loaded".
  m["expires_at"] = "2318-08-18T00:00:00Z";
  m["size_vram"] = 0;
  m["context_length"] = f.context;
  return json{{"models", json::array({std::move(m)})}};
}

std::string ollama_time_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const auto t = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char when[48];
  const size_t n = std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(when + n, sizeof when - n, ".%09lldZ", static_cast<long long>(ns % 1'000'000'000));
  return when;
}

namespace {

json head_json(const OllamaMeta& meta) {
  return json{{"model", meta.model}, {"created_at", ollama_time_now()}};
}

json message_json(std::string_view text) {
  return json{{"role", "assistant"}, {"content", std::string(text)}};
}

json calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json arguments = json::parse(calls[i].arguments, nullptr, /*allow_exceptions=*/false);
    if (arguments.is_discarded()) arguments = json::object();
    out.push_back({{"id", calls[i].id},
                   {"function",
                    {{"index", i}, {"name", calls[i].name}, {"arguments", std::move(arguments)}}}});
  }
  return out;
}

}  // namespace

json ollama_chunk_json(const OllamaMeta& meta, std::string_view text) {
  json doc = head_json(meta);
  if (meta.chat) {
    doc["message"] = message_json(text);
  } else {
    doc["response"] = std::string(text);
  }
  doc["done"] = false;
  return doc;
}

json ollama_thinking_chunk_json(const OllamaMeta& meta, std::string_view thinking) {
  json doc = ollama_chunk_json(meta, "");
  if (meta.chat) {
    doc["message"]["thinking"] = std::string(thinking);
  } else {
    doc["thinking"] = std::string(thinking);
  }
  return doc;
}

json ollama_tool_calls_chunk_json(const OllamaMeta& meta, const std::vector<ToolCall>& calls) {
  json doc = head_json(meta);
  json m = message_json("");
  m["tool_calls"] = calls_json(calls);
  doc["message"] = std::move(m);
  doc["done"] = false;
  return doc;
}

const char* ollama_done_reason(const GenerationResult& result) {
  switch (result.finish) {
    case FinishReason::Length:
    case FinishReason::ContextFull:
      return "length";
    default:
      return "stop";
  }
}

json ollama_done_json(const OllamaMeta& meta, const GenerationResult& result, int64_t total_ns,
                      const std::vector<int32_t>* context, const SplitReply* reply,
                      std::string_view thinking) {
  json doc = head_json(meta);
  if (meta.chat) {
    json m = message_json(reply != nullptr ? std::string_view(reply->content) : "");
    if (!thinking.empty()) m["thinking"] = std::string(thinking);
    if (reply != nullptr && !reply->calls.empty()) m["tool_calls"] = calls_json(reply->calls);
    doc["message"] = std::move(m);
  } else {
    doc["response"] = reply != nullptr ? std::string(reply->content) : "";
    if (!thinking.empty()) doc["thinking"] = std::string(thinking);
  }
  doc["done"] = true;
  doc["done_reason"] = ollama_done_reason(result);
  if (context != nullptr) doc["context"] = *context;
  const GenerationStats& s = result.stats;
  const auto ns = [](double ms) { return static_cast<int64_t>(std::llround(ms * 1e6)); };
  doc["total_duration"] = total_ns;
  doc["load_duration"] = 0;
  doc["prompt_eval_count"] = s.prompt_tokens;
  doc["prompt_eval_duration"] = ns(s.prefill_ms);
  doc["eval_count"] = s.generated_tokens;
  doc["eval_duration"] = ns(s.decode_ms);
  return doc;
}

json ollama_load_json(const OllamaMeta& meta, bool unload) {
  json doc = head_json(meta);
  if (meta.chat) {
    doc["message"] = message_json("");
  } else {
    doc["response"] = "";
  }
  doc["done"] = true;
  doc["done_reason"] = unload ? "unload" : "load";
  return doc;
}

json ollama_logprobs_json(const Tokenizer& tok, const CompletionRequest& r,
                          std::span<const TokenLogprob> entries) {
  ResponseMeta meta;  // the chat format's entries are Ollama's
  meta.endpoint = Endpoint::ChatCompletions;
  meta.logprobs = LogprobFormat{&tok, r.ignore_eos, false, r.logprobs};
  return logprobs_json(meta, entries, 0)["content"];
}

std::string ollama_line(const json& doc) { return to_wire(doc) + "\n"; }

}  // namespace specdec::server
