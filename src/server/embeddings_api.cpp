#include "server/embeddings_api.h"

#include <cstring>

#include "engine/embedding.h"
#include "server/json_fields.h"

namespace specdec::server {

using nlohmann::json;

namespace {

// Ollama's: a string or an array of strings; "" or [] embeds nothing.
std::vector<PromptInput> get_ollama_inputs(const json& v, const std::string& param) {
  if (v.is_string()) {
    if (v.get<std::string>().empty()) return {};
    return {PromptInput{v.get<std::string>(), std::nullopt}};
  }
  if (!v.is_array()) wrong_type(param, "a string or an array of strings", v);
  if (v.size() > kMaxEmbeddingInputs) {
    throw invalid_request(
        str_cat("at most ", kMaxEmbeddingInputs, " inputs per request, got ", v.size()), param,
        "invalid_value");
  }
  std::vector<PromptInput> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) wrong_type(str_cat(param, "[", i, "]"), "a string", v[i]);
    out.push_back({v[i].get<std::string>(), std::nullopt});
  }
  return out;
}

}  // namespace

EmbeddingRequest parse_embedding_request(EmbeddingApi api, std::string_view body) {
  const json j = parse_body(body);
  EmbeddingRequest r;
  r.api = api;
  r.model = get_model(j);
  if (is_ollama(api)) {
    // Ollama requires the model's name.
    if (r.model.empty()) bad_field("model", "is required", "missing_required");
    const char* name = api == EmbeddingApi::Ollama ? "input" : "prompt";
    if (const json* v = field(j, name)) {
      // The older endpoint embeds one text.
      if (api == EmbeddingApi::OllamaLegacy && !v->is_string()) wrong_type(name, "a string", *v);
      r.inputs = get_ollama_inputs(*v, name);
    }
    r.normalize = api == EmbeddingApi::Ollama ? 2 : -1;
    r.truncate = get_bool(j, "truncate", true);
  } else {
    // llama-server takes "content" as well; OpenAI's clients send "input".
    const char* name = field(j, "input") != nullptr ? "input" : "content";
    const json* v = field(j, name);
    if (v == nullptr) {
      throw invalid_request("'input' is required", "input", "missing_required");
    }
    r.inputs = get_prompt_forms(*v, name, kMaxEmbeddingInputs, "inputs");
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      if (!r.inputs[i].tokens && r.inputs[i].text.empty()) {
        throw invalid_request(r.inputs.size() == 1
                                  ? str_cat("'", name, "' is an empty string")
                                  : str_cat("'", name, "[", i, "]' is an empty string"),
                              name, "invalid_value");
      }
    }
    if (const json* f = field(j, "encoding_format")) {
      if (!f->is_string()) wrong_type("encoding_format", "a string", *f);
      const std::string format = f->get<std::string>();
      if (format != "float" && format != "base64") {
        bad_field("encoding_format",
                  str_cat("must be \"float\" or \"base64\", got \"", format, "\""));
      }
      r.base64 = format == "base64";
    }
    r.normalize = static_cast<int32_t>(get_int(j, "embd_normalize", -1, 64).value_or(2));
  }
  if (api != EmbeddingApi::Native && api != EmbeddingApi::OllamaLegacy) {
    if (auto d = get_int(j, "dimensions", 1, 1 << 20)) r.dimensions = static_cast<int32_t>(*d);
  }
  return r;
}

void shorten_embedding(std::vector<float>& v, int32_t dimensions, int32_t normalize) {
  if (dimensions < 1) fail("embedding dimensions must be at least 1, got ", dimensions);
  if (static_cast<size_t>(dimensions) < v.size()) v.resize(static_cast<size_t>(dimensions));
  normalize_embedding(v, normalize);
}

std::string embedding_base64(const std::vector<float>& v) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = 0;
    std::memcpy(&u, &v[i], sizeof u);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t b = 0; b < 3; ++b) {
      chunk = (chunk << 8) | (b < n ? static_cast<uint8_t>(bytes[i + b]) : 0u);
    }
    for (size_t c = 0; c < 4; ++c) {
      out += c <= n ? kAlphabet[(chunk >> (18 - 6 * c)) & 0x3f] : '=';
    }
  }
  return out;
}

json embeddings_json(const EmbeddingRequest& r, const std::string& model,
                     const std::vector<std::vector<std::vector<float>>>& vectors,
                     int64_t prompt_tokens, double total_ms) {
  switch (r.api) {
    case EmbeddingApi::OpenAI: {
      json data = json::array();
      for (size_t i = 0; i < vectors.size(); ++i) {
        const std::vector<float>& v = vectors[i].front();
        data.push_back({{"object", "embedding"},
                        {"index", i},
                        {"embedding", r.base64 ? json(embedding_base64(v)) : json(v)}});
      }
      return {{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
    }
    case EmbeddingApi::Native: {
      json out = json::array();
      for (size_t i = 0; i < vectors.size(); ++i) {
        out.push_back({{"index", i}, {"embedding", vectors[i]}});
      }
      return out;
    }
    case EmbeddingApi::Ollama: {
      json list = json::array();
      for (const auto& v : vectors) list.push_back(v.front());
      const auto ns = static_cast<int64_t>(total_ms * 1e6);
      return {{"model", model},
              {"embeddings", std::move(list)},
              {"total_duration", ns},
              {"load_duration", 0},
              {"prompt_eval_count", prompt_tokens}};
    }
    case EmbeddingApi::OllamaLegacy:
      return {{"embedding", vectors.empty() ? json::array() : json(vectors.front().front())}};
  }
  return json();
}

}  // namespace specdec::server
