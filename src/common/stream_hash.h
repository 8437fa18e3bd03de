// A 64-bit hash of a byte stream that does not depend on how the stream was cut into pieces:
// what a slot file (engine/slot_file.h) appends to check, on the way back in, that nothing in
// it changed since it was written. Not cryptographic: it finds corruption (a truncated copy, a
// flipped bit: every 8-byte word goes through a bijection, so changing any one word always
// changes the hash), not tampering.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

class StreamHash {
 public:
  void update(const void* data, size_t n);
  // The hash of everything given so far (the stream's length included); update() may go on.
  uint64_t digest() const;

 private:
  void mix(uint64_t word);
  uint64_t h_ = 0xcbf29ce484222325ULL;  // FNV-1a's offset basis
  uint64_t length_ = 0;
  uint8_t tail_[8] = {};  // bytes of a word not yet whole
  size_t n_tail_ = 0;
};

}  // namespace specdec
