#include "engine/embedding.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "engine/model_lm.h"
#include "model/model.h"

namespace specdec {

std::optional<Pooling> parse_pooling(std::string_view name) {
  if (name == "none") return Pooling::None;
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last") return Pooling::Last;
  return std::nullopt;
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None:
      return "none";
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "?";
}

Pooling default_pooling(const ModelConfig& config) {
  switch (config.pooling_type) {
    case 0:
      return Pooling::None;
    case 1:
      return Pooling::Mean;
    case 2:
      return Pooling::Cls;
    case 3:
      return Pooling::Last;
    case 4:
      fail("the model's pooling is rank (a reranker's head), which specdec does not run");
    default:
      return Pooling::Last;
  }
}

void check_normalization(int32_t normalize) {
  if (normalize < -1) fail("embedding normalization must be -1 or more, got ", normalize);
}

void normalize_embedding(std::span<float> v, int32_t normalize) {
  check_normalization(normalize);
  if (normalize == -1) return;
  double norm = 0;
  if (normalize == 0) {
    for (float x : v) norm = std::max(norm, static_cast<double>(std::fabs(x)));
    norm /= 32760.0;
  } else if (normalize == 2) {
    for (float x : v) norm += static_cast<double>(x) * x;
    norm = std::sqrt(norm);
  } else {
    for (float x : v) norm += std::pow(std::fabs(static_cast<double>(x)), normalize);
    norm = std::pow(norm, 1.0 / normalize);
  }
  if (!std::isfinite(norm)) fail("the embedding's norm is not finite");
  if (norm <= 0) return;
  const double inv = 1.0 / norm;
  for (float& x : v) x = static_cast<float>(x * inv);
}

std::vector<std::vector<float>> pool_rows(std::span<const float> rows, int32_t width,
                                          const EmbeddingParams& params) {
  if (width < 1 || rows.empty() || rows.size() % static_cast<size_t>(width) != 0) {
    fail("pool_rows: ", rows.size(), " floats are not whole rows of ", width);
  }
  const size_t w = static_cast<size_t>(width), n = rows.size() / w;
  std::vector<std::vector<float>> out;
  if (params.pooling == Pooling::None) {
    for (size_t r = 0; r < n; ++r)
      out.emplace_back(rows.begin() + r * w, rows.begin() + (r + 1) * w);
    return out;
  }
  std::vector<float> v(w);
  if (params.pooling == Pooling::Mean) {
    std::vector<double> sum(w, 0.0);
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < w; ++i) sum[i] += rows[r * w + i];
    }
    for (size_t i = 0; i < w; ++i) v[i] = static_cast<float>(sum[i] / static_cast<double>(n));
  } else {
    const size_t r = params.pooling == Pooling::Cls ? 0 : n - 1;
    std::copy_n(rows.begin() + r * w, w, v.begin());
  }
  normalize_embedding(v, params.normalize);
  out.push_back(std::move(v));
  return out;
}

std::vector<std::vector<float>> embed_tokens(ModelLM& lm, std::span<const int32_t> tokens,
                                             const EmbeddingParams& params,
                                             const std::function<bool()>& go_on) {
  const auto n = static_cast<int32_t>(tokens.size());
  if (n == 0) fail("the input to embed is empty");
  const int32_t cached = lm.length();
  const bool last = params.pooling == Pooling::Last;
  if (cached >= n || (!last && cached > 0)) {
    fail("embed_tokens: the cache holds ", cached, " of ", n, " tokens (",
         last ? "at most all but the last" : "none", " may be cached)");
  }
  std::vector<float> hidden;
  if (!lm.forward_hidden(tokens.subspan(static_cast<size_t>(cached)), !last, hidden, go_on)) {
    return {};
  }
  return pool_rows(hidden, lm.hidden_width(), params);
}

}  // namespace specdec
