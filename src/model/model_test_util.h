// Helpers shared by the model tests: tiny model files, running forward over every row, and
// bitwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "support/tiny_model.h"
#include "tensor/thread_pool.h"

namespace specdec::testing {

// An open tiny model; the file stays mapped as long as this lives.
struct TinyModel {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Model> model;

  explicit TinyModel(const TinyModelSpec& spec, const std::string& name = "tiny.gguf") {
    file = gguf::GgufFile::open(write_tiny_model(spec, temp_path(name)));
    model = Model::load(*file);
  }
};

// Runs tokens at positions first_pos.. on top of cache, returning the logits of every row.
inline std::vector<float> forward_all(Model& m, KvCache& cache, const std::vector<int32_t>& tokens,
                                      int32_t first_pos, ThreadPool& pool) {
  std::vector<int32_t> positions(tokens.size()), rows(tokens.size());
  std::iota(positions.begin(), positions.end(), first_pos);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(m.config().n_vocab));
  m.forward(tokens, positions, cache, rows, logits.data(), pool);
  return logits;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace specdec::testing
