// Embedding requests in the shapes clients send them: OpenAI's POST /v1/embeddings,
// llama-server's POST /embedding (and /embeddings), Ollama's POST /api/embed and its older
// /api/embeddings; and the responses each expects. The vectors come from the engine
// (engine/embedding.h: the target's final-normed hidden states, pooled and normalized).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/request_parsing.h"

namespace specdec::server {

enum class EmbeddingApi { OpenAI, Native, Ollama, OllamaLegacy };
inline bool is_ollama(EmbeddingApi api) {
  return api == EmbeddingApi::Ollama || api == EmbeddingApi::OllamaLegacy;
}

// OpenAI's limit on inputs per request.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingRequest {
  EmbeddingApi api = EmbeddingApi::OpenAI;
  std::string model;                // "" when not given
  std::vector<PromptInput> inputs;  // text, or token ids as given (OpenAI, llama-server)
  bool base64 = false;              // OpenAI's encoding_format "base64": little-endian f32 bytes
  // llama-server's embd_normalize (EmbeddingParams::normalize); Ollama's /api/embed normalizes
  // to unit length, its older /api/embeddings does not.
  int32_t normalize = 2;
  // Ollama's truncate (default true): an input longer than the context is cut to it instead of
  // refused.
  bool truncate = false;
  // OpenAI's and Ollama's dimensions: keep the first N components, normalized again.
  std::optional<int32_t> dimensions;
};

// A 400 (ApiError) for anything malformed: no input where one is required, an input of another
// type, an empty text (OpenAI's and llama-server's endpoints; Ollama's take no input as a
// request that loads the model and embeds nothing), more than kMaxEmbeddingInputs inputs, an
// unknown encoding_format, dimensions below 1, no model named (Ollama's endpoints).
EmbeddingRequest parse_embedding_request(EmbeddingApi api, std::string_view body);

// Keeps the first `dimensions` components of v and normalizes it again (`normalize` as
// EmbeddingParams::normalize; -1: not at all).
void shorten_embedding(std::vector<float>& v, int32_t dimensions, int32_t normalize);

// OpenAI's base64 form: the floats' little-endian bytes, base64-encoded.
std::string embedding_base64(const std::vector<float>& v);

// The response body for r: per input, its vectors (one pooled, or one per token with pooling
// none, which only llama-server's endpoint returns). prompt_tokens: the inputs' tokens in all;
// total_ms: how long the request took (Ollama reports it).
nlohmann::json embeddings_json(const EmbeddingRequest& r, const std::string& model,
                               const std::vector<std::vector<std::vector<float>>>& vectors,
                               int64_t prompt_tokens, double total_ms);

}  // namespace specdec::server
