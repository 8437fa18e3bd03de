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
  // (k * logit_width() floats, row-major) into logits, resizing it as needed.
  virtual void forward(std::span<const int32_t> tokens, std::vector<float>& logits) = 0;
  // The vocabulary ids that the logit columns stand for, when the model scores only a subset of
  // its vocabulary or in another order (a draft's frequency-ranked head, FR-Spec); empty when
  // it scores all n_vocab() ids (column i is id i). A draft's q is then zero outside the
  // subset, which speculative sampling allows: it is exact for any draft distribution. (Ties
  // in q are then broken in column order, not id order: that too only changes the draft.)
  virtual std::span<const int32_t> logit_ids() const { return {}; }
  int32_t logit_width() const {
    const auto ids = logit_ids();
    return ids.empty() ? n_vocab() : static_cast<int32_t>(ids.size());
  }
  // Like forward(), but only the last row's logits are wanted (last_logits may be null: none).
  // Prefill and a draft's catch-up need no more, and a real model then skips the output head
  // (49k x 576 on SmolLM2) for every other row. The default just drops the rows.
  virtual void forward_last(std::span<const int32_t> tokens, std::vector<float>* last_logits) {
    std::vector<float> all;
    forward(tokens, all);
    if (last_logits != nullptr && !tokens.empty()) {
      const auto v = static_cast<size_t>(logit_width());
      last_logits->assign(all.end() - static_cast<std::ptrdiff_t>(v), all.end());
    }
  }
};

}  // namespace specdec
