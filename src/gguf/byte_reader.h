// Bounds-checked little-endian cursor over the mapped GGUF bytes. Every read checks the bytes it
// needs against what is left, so a hostile length or count turns into a specdec::Error naming
// the file, the structure being read and the offset, never into an out-of-bounds read.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace specdec::gguf {

class ByteReader {
 public:
  ByteReader(std::string_view path, const uint8_t* data, size_t size)
      : path_(path), data_(data), size_(size) {}

  size_t offset() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }

  // What is being read ("header", "tensor info 12"); it appears in every error message.
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

  // Throws "<path>: <args...>" so every message starts with the file path.
  template <typename... Args>
  [[noreturn]] void error(Args&&... args) const {
    fail(path_, ": ", std::forward<Args>(args)...);
  }

  void need(uint64_t n) const {
    if (n > remaining()) {
      error("truncated file: ", context_, " needs ", n, " bytes at offset ", pos_, ", file has ",
            size_);
    }
  }

  uint8_t u8() { return static_cast<uint8_t>(read_le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(read_le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(read_le(4)); }
  uint64_t u64() { return read_le(8); }
  float f32() { return std::bit_cast<float>(u32()); }
  double f64() { return std::bit_cast<double>(u64()); }

  // A GGUF string: uint64 byte length, then that many bytes (no terminator). The length is
  // checked against the bytes left before anything is allocated.
  std::string string() {
    need(8);
    const size_t at = pos_;
    const uint64_t len = u64();
    if (len > remaining()) {
      error(context_, ": string length ", len, " at offset ", at, " exceeds the ", remaining(),
            " bytes left in the file (", size_, " bytes)");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  // Assembles bytes explicitly so the result is right whatever the host byte order.
  uint64_t read_le(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }

  std::string_view path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string context_ = "header";
};

}  // namespace specdec::gguf
