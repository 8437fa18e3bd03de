// Text embeddings from a causal model's hidden states, as llama.cpp's embedding mode gives them
// (llama-server --embeddings, Ollama's /api/embed): the final-normed hidden state of each input
// token (Model::SequenceRows::hidden_out), pooled into one vector and normalized.
//
// Pooling follows the file's {arch}.pooling_type when it has one. A chat model's file has none
// (llama.cpp then returns per-token vectors and refuses OpenAI's /v1/embeddings); here it pools
// the last token, the one row that has seen the whole input under causal attention, as
// decoder-based embedding models (E5-Mistral, GTE-Qwen2, Qwen3-Embedding) are trained to be read.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace specdec {

class ModelLM;
struct ModelConfig;

enum class Pooling { None, Mean, Cls, Last };

// "none", "mean", "cls", "last" (llama.cpp's --pooling names; "rank" is a reranker's head,
// which these models do not have); nullopt otherwise.
std::optional<Pooling> parse_pooling(std::string_view name);
const char* pooling_name(Pooling p);
// The file's pooling (ModelConfig::pooling_type), Last when it names none; throws
// specdec::Error for rank (4), which needs a classification head.
Pooling default_pooling(const ModelConfig& config);

struct EmbeddingParams {
  Pooling pooling = Pooling::Last;
  // llama.cpp's embd_normalize: -1 none, 0 scaled so that the largest |x| is 32760 (int16), 1
  // taxicab, 2 Euclidean (the default), p > 2 the p-norm. Pooling None is never normalized, as
  // in llama-server.
  int32_t normalize = 2;
};

// Throws specdec::Error unless normalize is one EmbeddingParams::normalize allows (>= -1).
void check_normalization(int32_t normalize);

// Divides v by its norm (EmbeddingParams::normalize); a zero vector stays zero. Throws
// specdec::Error for normalize < -1 (check_normalization).
void normalize_embedding(std::span<float> v, int32_t normalize);

// Pools rows (n_rows x width, row-major hidden states) into one vector (Mean: their average,
// Cls: row 0, Last: the last row), or returns each row (None), then normalizes the pooled one.
std::vector<std::vector<float>> pool_rows(std::span<const float> rows, int32_t width,
                                          const EmbeddingParams& params);

// Reads tokens[lm.length()..) into lm (whose cache must hold tokens' first lm.length(), fewer
// than all of them) and returns the input's embedding(s). Pooling Last needs only the last
// row's state, so a cached prefix is reused; the others need every row's, so lm must start
// empty (throws otherwise). go_on may stop a long read between its chunks (ModelLM::
// forward_hidden): nothing is returned then.
std::vector<std::vector<float>> embed_tokens(ModelLM& lm, std::span<const int32_t> tokens,
                                             const EmbeddingParams& params,
                                             const std::function<bool()>& go_on = {});

}  // namespace specdec
