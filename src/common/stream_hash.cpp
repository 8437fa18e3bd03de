#include "common/stream_hash.h"

#include <cstring>

namespace specdec {

namespace {
constexpr uint64_t kPrime =
    0x100000001b3ULL;  // FNV's 64-bit prime (odd: multiplying is a bijection)
}

void StreamHash::mix(uint64_t word) {
  h_ = (h_ ^ word) * kPrime;
  h_ ^= h_ >> 29;  // spreads the high bits down, so the next word's xor meets all of them
}

void StreamHash::update(const void* data, size_t n) {
  if (n == 0) return;  // (data may then be null, which memcpy must not see)
  const auto* p = static_cast<const uint8_t*>(data);
  length_ += n;
  while (n > 0 && n_tail_ > 0) {
    tail_[n_tail_++] = *p++;
    --n;
    if (n_tail_ == sizeof(tail_)) {
      uint64_t w = 0;
      std::memcpy(&w, tail_, sizeof(w));
      mix(w);
      n_tail_ = 0;
    }
  }
  if (n_tail_ > 0) return;  // the piece did not complete the word
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w = 0;
    std::memcpy(&w, p, sizeof(w));
    mix(w);
  }
  std::memcpy(tail_, p, n);
  n_tail_ = n;
}

uint64_t StreamHash::digest() const {
  StreamHash end = *this;
  uint64_t w = 0;
  std::memcpy(&w, end.tail_, end.n_tail_);
  end.mix(w);
  end.mix(length_);
  return end.h_;
}

}  // namespace specdec
