// The narrow view of a language model that the speculative loop drives. The engine adapts the
// real Model + KvCache to it; the tests use small deterministic fakes, which keeps the decoding
// logic testable without weights.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specdec {

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual int32_t n_vocab() const = 0;
  virtual int32_t length() const = 0;    // tokens in this model's KV cache
  virtual int32_t capacity() const = 0;  // context size
  virtual void truncate(int32_t n) = 0;  // roll the KV cache back to n entries (n <= length())
  // Appends tokens at positions length()..length()+k-1 and writes logits for every new row
  // (k * n_vocab floats, row-major) into logits, resizing it as needed.
  virtual void forward(std::span<const int32_t> tokens, std::vector<float>& logits) = 0;
  // Like forward(), but only the last row's logits are wanted (last_logits may be null: none).
  // Prefill and a draft's catch-up need no more, and a real model then skips the output head
  // (49k x 576 on SmolLM2) for every other row. The default just drops the rows.
  virtual void forward_last(std::span<const int32_t> tokens, std::vector<float>* last_logits) {
    std::vector<float> all;
    forward(tokens, all);
    if (last_logits != nullptr && !tokens.empty()) {
      const auto v = static_cast<size_t>(n_vocab());
      last_logits->assign(all.end() - static_cast<std::ptrdiff_t>(v), all.end());
    }
  }
};

}  // namespace specdec
