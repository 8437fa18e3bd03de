// Tensor element types, numbered as in ggml/GGUF, with their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace specdec {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

struct TypeTraits {
  std::string_view name;  // "Q4_K", as llama.cpp prints it
  int64_t block_size;     // elements per block
  size_t type_size;       // bytes per block
  bool supported;         // we can dequantize it and use it as a weight
};

// Traits for a raw GGUF type id, or nullopt for an id we do not know at all.
std::optional<TypeTraits> type_traits(uint32_t raw_type);
const TypeTraits& traits(GgmlType type);
std::string_view type_name(GgmlType type);
// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers).
size_t row_bytes(GgmlType type, int64_t n);

}  // namespace specdec
