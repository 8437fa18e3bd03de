// Builds GGUF v2/v3 files in memory, for tests and fixture tools. Keys are written in the order
// they were first set (setting a key again replaces its value in place); tensors are laid out in
// the order added, each at an aligned offset with zero padding. The output is always
// little-endian, and a file it writes round-trips through GgufFile::open.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tensor/ggml_type.h"

namespace specdec::gguf {

class GgufWriter {
 public:
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);

  void set_array_strings(const std::string& key, const std::vector<std::string>& v);
  void set_array_u8(const std::string& key, const std::vector<uint8_t>& v);
  void set_array_i8(const std::string& key, const std::vector<int8_t>& v);
  void set_array_u16(const std::string& key, const std::vector<uint16_t>& v);
  void set_array_i16(const std::string& key, const std::vector<int16_t>& v);
  void set_array_u32(const std::string& key, const std::vector<uint32_t>& v);
  void set_array_i32(const std::string& key, const std::vector<int32_t>& v);
  void set_array_u64(const std::string& key, const std::vector<uint64_t>& v);
  void set_array_i64(const std::string& key, const std::vector<int64_t>& v);
  void set_array_f32(const std::string& key, const std::vector<float>& v);
  void set_array_f64(const std::string& key, const std::vector<double>& v);
  void set_array_bool(const std::string& key, const std::vector<bool>& v);
  // Escape hatch for tests: an array header (elem_type, count) followed by `elements`, the
  // already-encoded element bytes, written verbatim. Nothing is checked, so this can describe
  // arrays of arrays or lie about the count.
  void set_array_raw(const std::string& key, ValueType elem_type, uint64_t count,
                     const std::vector<uint8_t>& elements);

  // data.size() must equal row_bytes(type, dims[0]) * product(dims[1..]); throws otherwise.
  // Also throws for 0 or more than 4 dims, a dim <= 0, a row length that is not a multiple of
  // the type's block size, or a duplicate name. Unsupported types are allowed (for tests).
  void add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                  std::vector<uint8_t> data);

  // Sets the data alignment used for the layout and writes general.alignment (UINT32) too.
  // Throws unless alignment is a nonzero power of two. Setting general.alignment with set_u32
  // writes the key only and leaves the layout alignment alone (useful for hostile tests).
  void set_alignment(uint32_t alignment);

  // version must be 2 or 3 (the layouts are identical for little-endian files).
  std::vector<uint8_t> to_bytes(uint32_t version = 3) const;
  void write(const std::string& path, uint32_t version = 3) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    std::vector<uint8_t> data;
  };
  // value: the encoded value type (uint32) followed by the encoded value.
  void set_raw(const std::string& key, std::vector<uint8_t> value);

  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;
  std::map<std::string, size_t> kv_index_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace specdec::gguf
