#include "server/native_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "sampling/logprobs.h"
#include "sampling/sampler_sequence.h"
#include "server/json_fields.h"

namespace specdec::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string get_string(const ordered_json& body, const char* name, const std::string& param) {
  const ordered_json* v = field(body, name);
  if (v == nullptr) return "";
  if (!v->is_string()) wrong_type(param, "a string", *v);
  return v->get<std::string>();
}

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
  throw invalid_request(str_cat("'", param, "': ", why), param, "unsupported_value");
}

int32_t token_id(const ordered_json& v, const std::string& param) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    throw invalid_request(str_cat("'", param, "' must hold token ids (integers >= 0) or strings"),
                          param, "invalid_value");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

// One prompt as pieces: a string, or an array of token ids and strings.
std::vector<NativePromptPiece> prompt_pieces(const ordered_json& v, const std::string& param) {
  std::vector<NativePromptPiece> out;
  if (v.is_string()) {
    out.push_back({true, v.get<std::string>(), {}});
    return out;
  }
  if (!v.is_array() || v.empty()) {
    wrong_type(param, "a string or a non-empty array of token ids and strings", v);
  }
  for (const ordered_json& e : v) {
    if (e.is_string()) {
      out.push_back({true, e.get<std::string>(), {}});
    } else if (e.is_number()) {
      if (out.empty() || out.back().is_text) out.push_back({false, "", {}});
      out.back().ids.push_back(token_id(e, param));
    } else {
      wrong_type(param, "an array of token ids and strings", v);
    }
  }
  return out;
}

// llama-server's prompt forms: a string; token ids, strings among them or not (one prompt); or
// an array of such prompts.
std::vector<std::vector<NativePromptPiece>> get_prompts(const ordered_json& j) {
  const ordered_json* v = field(j, "prompt");
  if (v == nullptr) throw invalid_request("'prompt' is required", "prompt", "missing_required");
  if (v->is_object()) {
    unsupported("prompt", "prompt objects (multimodal data) are not supported; send text");
  }
  if (!v->is_array()) return {prompt_pieces(*v, "prompt")};
  if (v->empty()) throw invalid_request("'prompt' is an empty array", "prompt", "invalid_value");
  if (std::any_of(v->begin(), v->end(), [](const ordered_json& e) { return e.is_number(); })) {
    return {prompt_pieces(*v, "prompt")};
  }
  if (v->size() > static_cast<size_t>(kMaxChoicesPerRequest)) {
    throw invalid_request(
        str_cat("at most ", kMaxChoicesPerRequest, " prompts per request, got ", v->size()),
        "prompt", "invalid_value");
  }
  std::vector<std::vector<NativePromptPiece>> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if ((*v)[i].is_object()) {
      unsupported(str_cat("prompt[", i, "]"), "prompt objects (multimodal data) are not supported");
    }
    out.push_back(prompt_pieces((*v)[i], str_cat("prompt[", i, "]")));
  }
  return out;
}

InfillInput get_infill(const ordered_json& j) {
  InfillInput in;
  in.prefix = get_string(j, "input_prefix", "input_prefix");
  in.suffix = get_string(j, "input_suffix", "input_suffix");
  in.prompt = get_string(j, "prompt", "prompt");
  const ordered_json* extra = field(j, "input_extra");
  if (extra == nullptr) return in;
  if (!extra->is_array()) wrong_type("input_extra", "an array of {filename, text} objects", *extra);
  constexpr size_t kMaxChunks = 1024;
  if (extra->size() > kMaxChunks) {
    throw invalid_request(str_cat("'input_extra' holds at most ", kMaxChunks, " chunks"),
                          "input_extra", "invalid_value");
  }
  for (size_t i = 0; i < extra->size(); ++i) {
    const ordered_json& c = (*extra)[i];
    const std::string param = str_cat("input_extra[", i, "]");
    if (!c.is_object()) wrong_type(param, "an object {filename, text}", c);
    const ordered_json* text = field(c, "text");
    if (text == nullptr || !text->is_string()) {
      throw invalid_request(str_cat("'", param, ".text' must be a string"), param + ".text",
                            "invalid_value");
    }
    std::string filename = "tmp";  // llama-server's name for an unnamed chunk
    if (field(c, "filename") != nullptr) filename = get_string(c, "filename", param + ".filename");
    in.extra.push_back({std::move(filename), text->get<std::string>()});
  }
  return in;
}

// logit_bias in llama-server's forms: [[id or text, bias or false], ...] or an object from ids
// (or texts) to biases; false bans the token (a bias of -100, the API's floor). Token ids go to
// `ids` (an OpenAI-style object checked by parse_request), texts to `texts`.
void get_logit_bias(const ordered_json& j, ordered_json& ids,
                    std::vector<std::pair<std::string, float>>& texts) {
  const ordered_json* v = field(j, "logit_bias");
  if (v == nullptr) return;
  const auto bias_of = [](const ordered_json& b) -> ordered_json {
    if (b.is_boolean() && !b.get<bool>()) return -100.0;
    return b;  // parse_request checks numbers and their range
  };
  const auto add = [&](const ordered_json& key, const ordered_json& b) {
    if (key.is_number()) {
      ids[std::to_string(token_id(key, "logit_bias"))] = bias_of(b);
    } else if (key.is_string()) {
      const std::string k = key.get<std::string>();
      int32_t id = 0;
      const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), id);
      if (!k.empty() && ec == std::errc() && end == k.data() + k.size() && id >= 0) {
        ids[k] = bias_of(b);
        return;
      }
      const ordered_json bias = bias_of(b);
      if (!bias.is_number()) wrong_type("logit_bias", "numbers or false as biases", b);
      const double d = bias.get<double>();
      if (!(d >= -100.0 && d <= 100.0)) {
        throw invalid_request(str_cat("'logit_bias' values must be between -100 and 100, got ", d),
                              "logit_bias", "invalid_value");
      }
      texts.emplace_back(k, static_cast<float>(d));
    } else {
      wrong_type("logit_bias", "token ids or strings as keys", key);
    }
  };
  if (v->is_object()) {
    for (const auto& [k, b] : v->items()) add(ordered_json(k), b);
  } else if (v->is_array()) {
    for (const ordered_json& pair : *v) {
      if (!pair.is_array() || pair.size() != 2) {
        wrong_type("logit_bias", "an array of [token id or text, bias] pairs", pair);
      }
      add(pair[0], pair[1]);
    }
  } else {
    wrong_type("logit_bias", "an array of [token, bias] pairs or an object", *v);
  }
}

}  // namespace

NativeRequest parse_native_request(NativeEndpoint endpoint, std::string_view body,
                                   const RequestDefaults& defaults) {
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    throw invalid_request(
        str_cat("the request body nests JSON deeper than ", kMaxJsonDepth, " levels"), "",
        "invalid_json");
  }
  const ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw invalid_request("the request body is not valid JSON", "", "invalid_json");
  }
  if (!j.is_object()) wrong_type("body", "a JSON object", j);

  NativeRequest r;
  r.endpoint = endpoint;
  if (endpoint == NativeEndpoint::Completion) {
    r.prompts = get_prompts(j);
  } else {
    r.infill = get_infill(j);
  }
  constexpr int64_t kMaxTokens = 1 << 24;
  // n_predict, else the OpenAI name, which llama-server also reads (both checked), else the
  // server's default limit, else none.
  const std::optional<int64_t> n_predict = get_int(j, "n_predict", -1, kMaxTokens);
  const std::optional<int64_t> max_tokens = get_int(j, "max_tokens", -1, kMaxTokens);
  const json* server_limit = defaults.find("max_tokens");
  r.n_predict = static_cast<int32_t>(n_predict      ? *n_predict
                                     : max_tokens   ? *max_tokens
                                     : server_limit ? server_limit->get<int64_t>()
                                                    : -1);
  r.n_probs = static_cast<int32_t>(get_int(j, "n_probs", 0, kMaxTopLogprobs).value_or(0));
  r.n_indent = static_cast<int32_t>(get_int(j, "n_indent", 0, 1 << 16).value_or(0));
  r.t_max_predict_ms =
      static_cast<double>(get_int(j, "t_max_predict_ms", 0, 1LL << 40).value_or(0));
  r.return_tokens = get_bool(j, "return_tokens", false);
  if (const ordered_json* f = field(j, "response_fields")) {
    if (!f->is_array()) wrong_type("response_fields", "an array of strings", *f);
    for (const ordered_json& s : *f) {
      if (!s.is_string()) wrong_type("response_fields", "an array of strings", *f);
      r.response_fields.push_back(s.get<std::string>());
    }
  }
  // Checked, though nothing here depends on them.
  for (const char* name : {"cache_prompt", "timings_per_token", "return_progress"}) {
    get_bool(j, name, false);
  }

  // What specdec does not have is refused when switched on, never silently skipped.
  r.post_sampling_probs = get_bool(j, "post_sampling_probs", false);

  // The fields shared with /v1/completions go through its parser, with llama-server's
  // defaults.
  ordered_json o = ordered_json::object();
  o["prompt"] = "-";  // the prompts are taken above
  for (const char* name : {"model",
                           "stop",
                           "ignore_eos",
                           "grammar",
                           "json_schema",
                           "response_format",
                           "stream",
                           "presence_penalty",
                           "frequency_penalty",
                           "repeat_penalty",
                           "min_p",
                           "top_p",
                           "typical_p",
                           "top_n_sigma",
                           "xtc_probability",
                           "xtc_threshold",
                           "dynatemp_range",
                           "dynatemp_exponent",
                           "mirostat",
                           "mirostat_tau",
                           "mirostat_eta",
                           "dry_multiplier",
                           "dry_base",
                           "dry_allowed_length",
                           "dry_penalty_last_n",
                           "dry_sequence_breakers",
                           "stop_token_ids",
                           "min_tokens",
                           "id_slot",
                           "lora"}) {
    if (const ordered_json* v = field(j, name)) o[name] = *v;
  }
  copy_fields(j, o, kSpeculativeFields);
  // llama-server's samplers list, its default when none is given: the temperature last.
  o["samplers"] = defaults.value_or("samplers", default_sampler_sequence());
  if (const ordered_json* s = field(j, "samplers")) o["samplers"] = *s;
  o["temperature"] = defaults.value_or("temperature", 0.8);
  if (const ordered_json* t = field(j, "temperature")) {
    // llama-server samples greedily at any temperature <= 0.
    o["temperature"] = t->is_number() && t->get<double>() <= 0 ? ordered_json(0.0) : *t;
  }
  // llama-server's penalties count the last repeat_last_n tokens of the prompt and the text
  // (default 64; -1: all of them; 0: off).
  o["repeat_last_n"] = defaults.value_or("repeat_last_n", 64);
  if (const ordered_json* n = field(j, "repeat_last_n")) o["repeat_last_n"] = *n;
  o["top_k"] = defaults.value_or("top_k", 40);
  if (const ordered_json* k = field(j, "top_k")) {
    o["top_k"] = k->is_number() && k->get<double>() <= 0 ? ordered_json(0) : *k;  // <= 0: off
  }
  if (!o.contains("top_p")) o["top_p"] = defaults.value_or("top_p", 0.95);
  if (!o.contains("min_p")) o["min_p"] = defaults.value_or("min_p", 0.05);
  if (const ordered_json* s = field(j, "seed")) {
    // -1 (and its unsigned 32-bit spelling, llama.cpp's LLAMA_DEFAULT_SEED): a random seed.
    const bool random =
        s->is_number() && (s->get<double>() == -1.0 || s->get<double>() == 4294967295.0);
    if (!random) o["seed"] = *s;
  }
  if (r.n_predict > 0) o["max_tokens"] = r.n_predict;
  if (r.n_probs > 0) o["logprobs"] = r.n_probs;
  if (auto n = get_int(j, "n_cmpl", 1, kMaxChoices)) o["n"] = *n;
  ordered_json ids = ordered_json::object();
  get_logit_bias(j, ids, r.text_bias);
  if (!ids.empty()) o["logit_bias"] = std::move(ids);
  // n_predict is settled above, and a seed the request sent (-1: random) is the request's.
  const RequestDefaults rest = field(j, "seed") != nullptr
                                   ? defaults.without({"max_tokens", "seed"})
                                   : defaults.without({"max_tokens"});
  r.base = parse_request(Endpoint::Completions, o.dump(), rest);
  r.base.prompts.clear();
  if (r.n_predict >= 0 && r.base.min_tokens > r.n_predict) {
    throw invalid_request(
        str_cat("min_tokens (", r.base.min_tokens, ") exceeds n_predict (", r.n_predict, ")"),
        "min_tokens", "invalid_value");
  }

  return r;
}

json options_settings_json(const GenerationOptions& o, int32_t n_ctx) {
  const PenaltyParams& p = o.penalties;
  // llama-server's slot params: every adapter with the scale this request runs it at.
  json lora = json::array();
  if (o.lora_scales) {
    for (size_t i = 0; i < o.lora_scales->size(); ++i)
      lora.push_back({{"id", i}, {"scale", (*o.lora_scales)[i]}});
  }
  return json{{"n_ctx", n_ctx},
              {"temperature", o.sampling.temperature},
              {"top_k", o.sampling.top_k},
              {"top_p", o.sampling.top_p},
              {"min_p", o.sampling.min_p},
              {"typical_p", o.sampling.typical_p},
              {"top_n_sigma", o.sampling.top_n_sigma},
              {"xtc_probability", o.sampling.xtc_probability},
              {"xtc_threshold", o.sampling.xtc_threshold},
              {"dynatemp_range", o.sampling.dynatemp_range},
              {"dynatemp_exponent", o.sampling.dynatemp_exponent},
              {"temperature_last", o.sampling.temperature_last},
              {"mirostat", o.sampling.mirostat},
              {"mirostat_tau", o.sampling.mirostat_tau},
              {"mirostat_eta", o.sampling.mirostat_eta},
              {"dry_multiplier", p.dry.multiplier},
              {"dry_base", p.dry.base},
              {"dry_allowed_length", p.dry.allowed_length},
              {"dry_penalty_last_n", p.dry.penalty_last_n},
              {"dry_sequence_breakers", p.dry.sequence_breakers},
              {"repeat_penalty", p.repetition_penalty},
              {"presence_penalty", p.presence_penalty},
              {"frequency_penalty", p.frequency_penalty},
              {"seed", o.sampling.seed},
              {"stop", o.stop},
              {"ignore_eos", o.ignore_eos},
              {"grammar", o.grammar != nullptr},
              {"speculative", o.speculative},
              {"speculative.n_max", o.draft_max},
              {"speculative.n_min", o.draft_length.min_drafts},
              {"speculative.p_min", o.draft_length.p_min},
              {"lora", std::move(lora)}};
}

nlohmann::json native_settings_json(const NativeRequest& r, const GenerationOptions& o,
                                    int32_t n_ctx) {
  json doc = options_settings_json(o, n_ctx);
  doc["n_predict"] = r.n_predict;
  doc["n_probs"] = r.n_probs;
  doc["post_sampling_probs"] = r.post_sampling_probs;
  doc["n_indent"] = r.n_indent;
  doc["t_max_predict_ms"] = r.t_max_predict_ms;
  doc["samplers"] = r.base.samplers;
  doc["stream"] = r.base.stream;
  return doc;
}

const char* native_stop_type(const GenerationResult& result) {
  switch (result.finish) {
    case FinishReason::EndOfGeneration:
      return "eos";
    case FinishReason::Stop:
      return result.stop_text.empty() ? "limit" : "word";
    default:
      return "limit";
  }
}

nlohmann::json native_probs_json(const Tokenizer& tok, std::span<const TokenLogprob> entries,
                                 bool post_sampling) {
  // llama-server names the numbers by what they are: log-probabilities of the model's own
  // distribution, or probabilities after the sampling chain.
  const auto entry = [&tok, post_sampling](int32_t id, float logprob) {
    const std::string piece = tok.token_bytes(id);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(c);
    json e{{"id", id}, {"token", piece}, {"bytes", std::move(bytes)}};
    if (post_sampling) {
      e["prob"] = std::exp(logprob);
    } else {
      e["logprob"] = logprob;
    }
    return e;
  };
  json out = json::array();
  for (const TokenLogprob& e : entries) {
    json item = entry(e.token, e.logprob);
    json top = json::array();
    for (const auto& [id, lp] : e.top) top.push_back(entry(id, lp));
    item[post_sampling ? "top_probs" : "top_logprobs"] = std::move(top);
    out.push_back(std::move(item));
  }
  return out;
}

namespace {

// The prompt as llama-server echoes it: text, with special tokens by their names.
std::string prompt_text(const Tokenizer& tok, const std::vector<int32_t>& prompt) {
  std::string out;
  for (int32_t id : prompt) {
    const std::string piece = tok.token_bytes(id);
    out += piece.empty() && tok.token_type(id) == kTokenControl ? tok.token_text(id) : piece;
  }
  return out;
}

json timings_json(const GenerationStats& s, size_t prompt_tokens) {
  const int64_t prompt_n = static_cast<int64_t>(prompt_tokens) - s.cached_tokens;
  const auto per_token = [](double ms, int64_t n) {
    return n > 0 ? ms / static_cast<double>(n) : 0.0;
  };
  const auto per_second = [](double ms, int64_t n) {
    return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0;
  };
  json t{{"cache_n", s.cached_tokens},
         {"prompt_n", prompt_n},
         {"prompt_ms", s.prefill_ms},
         {"prompt_per_token_ms", per_token(s.prefill_ms, prompt_n)},
         {"prompt_per_second", per_second(s.prefill_ms, prompt_n)},
         {"predicted_n", s.generated_tokens},
         {"predicted_ms", s.decode_ms},
         {"predicted_per_token_ms", per_token(s.decode_ms, s.generated_tokens)},
         {"predicted_per_second", per_second(s.decode_ms, s.generated_tokens)}};
  if (s.speculative) {
    t["draft_n"] = s.spec.drafted;
    t["draft_n_accepted"] = s.spec.accepted;
  }
  return t;
}

}  // namespace

nlohmann::json native_result_json(const NativeMeta& meta, const GenerationResult& result,
                                  const std::vector<int32_t>& prompt, size_t index,
                                  bool return_tokens, int32_t n_probs, bool streamed,
                                  int32_t slot) {
  json doc{{"index", index},
           {"content", streamed ? std::string() : result.text},
           {"tokens", return_tokens ? json(result.tokens) : json::array()},
           {"id_slot", slot},
           {"stop", true},
           {"model", meta.model},
           {"tokens_predicted", result.stats.generated_tokens},
           {"tokens_evaluated", prompt.size()},
           {"generation_settings", meta.generation_settings},
           {"prompt", prompt_text(*meta.tokenizer, prompt)},
           {"has_new_line", result.text.find('\n') != std::string::npos},
           {"truncated", result.finish == FinishReason::ContextFull},
           {"stop_type", native_stop_type(result)},
           {"stopping_word", result.stop_text},
           {"tokens_cached", result.stats.cached_tokens},
           {"timings", timings_json(result.stats, prompt.size())}};
  if (n_probs > 0 && !streamed) {
    std::span<const TokenLogprob> entries = result.logprobs;
    // The end-of-generation token is not part of the text.
    if (result.finish == FinishReason::EndOfGeneration && !entries.empty()) {
      entries = entries.first(entries.size() - 1);
    }
    doc["completion_probabilities"] =
        native_probs_json(*meta.tokenizer, entries, meta.post_sampling_probs);
  }
  return doc;
}

nlohmann::json native_chunk_json(std::string_view text, size_t index, const nlohmann::json& probs,
                                 int32_t slot) {
  json doc{{"index", index},
           {"content", std::string(text)},
           {"tokens", json::array()},
           {"stop", false},
           {"id_slot", slot}};
  if (!probs.is_null()) doc["completion_probabilities"] = probs;
  return doc;
}

nlohmann::json select_response_fields(const nlohmann::json& doc,
                                      const std::vector<std::string>& fields) {
  if (fields.empty()) return doc;
  json out = json::object();
  for (const std::string& path : fields) {
    const json* at = &doc;
    size_t start = 0;
    std::string last;
    bool found = true;
    while (found) {
      const size_t slash = path.find('/', start);
      last = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (!at->is_object() || !at->contains(last)) {
        found = false;
        break;
      }
      at = &(*at)[last];
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (found) out[last] = *at;
  }
  return out;
}

namespace {

// A slot as llama-server describes one; id_task -1 when it runs nothing.
json slot_json(const ServerProps& p, int32_t id, int64_t task, bool processing, json params) {
  return json{{"id", id},
              {"id_task", task},
              {"n_ctx", p.model->context},
              {"speculative", p.speculative},
              {"is_processing", processing},
              {"params", std::move(params)}};
}

}  // namespace

json props_json(const ServerProps& p) {
  const ModelFacts& m = *p.model;
  return json{{"default_generation_settings", slot_json(p, 0, -1, false, p.settings)},
              {"total_slots", p.n_slots},
              {"model_alias", p.alias},
              {"model_path", m.file},
              {"chat_template", m.chat_template},
              // Tools go through the template's own convention (Hermes-style <tool_call> blocks),
              // which carries several calls in one reply.
              {"chat_template_caps",
               {{"supports_tools", m.tools},
                {"supports_tool_calls", m.tools},
                {"supports_parallel_tool_calls", m.tools},
                {"supports_thinking", m.thinking}}},
              {"modalities", {{"vision", false}, {"audio", false}}},
              {"bos_token", p.bos_token},
              {"eos_token", p.eos_token},
              {"build_info", "specdec"},
              {"endpoint_slots", true},
              {"endpoint_props", false},
              {"endpoint_metrics", true},
              {"is_sleeping", false}};
}

json slots_json(const ServerProps& p, std::span<const GenerationQueue::SlotState> states) {
  json out = json::array();
  for (size_t i = 0; i < states.size(); ++i) {
    const GenerationQueue::SlotState& s = states[i];
    // A busy slot's params are its request's; an idle one's the defaults.
    json params = p.settings;
    if (s.processing) {
      params = options_settings_json(s.options, p.model->context);
      params["n_predict"] = s.options.max_tokens;
    }
    json slot =
        slot_json(p, static_cast<int32_t>(i), s.processing ? static_cast<int64_t>(s.task) : -1,
                  s.processing, std::move(params));
    if (s.processing) {
      slot["n_prompt_tokens"] = s.prompt_tokens;
      // As llama-server writes it: an array of one entry. n_remain -1: no token budget.
      const int32_t budget = s.options.max_tokens;
      slot["next_token"] =
          json::array({{{"has_next_token", true},
                        {"n_remain", budget < 0 ? -1 : std::max(0, budget - s.decoded)},
                        {"n_decoded", s.decoded}}});
    }
    out.push_back(std::move(slot));
  }
  return out;
}

}  // namespace specdec::server
