#include "engine/layer_draft.h"

#include <charconv>
#include <string_view>

#include "common/error.h"
#include "gguf/gguf_writer.h"

namespace specdec {
namespace {

using gguf::ArrayValue;
using gguf::GgufWriter;
using gguf::MetadataEntry;
using gguf::ValueType;

template <typename T>
std::vector<T> narrow(const std::vector<int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Re-emits one metadata entry with the type it had in the source file.
void copy_entry(GgufWriter& w, const std::string& key, const MetadataEntry& e) {
  switch (e.type) {
    case ValueType::UINT8:
      w.set_u8(key, static_cast<uint8_t>(std::get<uint64_t>(e.value)));
      break;
    case ValueType::INT8:
      w.set_i8(key, static_cast<int8_t>(std::get<int64_t>(e.value)));
      break;
    case ValueType::UINT16:
      w.set_u16(key, static_cast<uint16_t>(std::get<uint64_t>(e.value)));
      break;
    case ValueType::INT16:
      w.set_i16(key, static_cast<int16_t>(std::get<int64_t>(e.value)));
      break;
    case ValueType::UINT32:
      w.set_u32(key, static_cast<uint32_t>(std::get<uint64_t>(e.value)));
      break;
    case ValueType::INT32:
      w.set_i32(key, static_cast<int32_t>(std::get<int64_t>(e.value)));
      break;
    case ValueType::UINT64:
      w.set_u64(key, std::get<uint64_t>(e.value));
      break;
    case ValueType::INT64:
      w.set_i64(key, std::get<int64_t>(e.value));
      break;
    case ValueType::FLOAT32:
      w.set_f32(key, static_cast<float>(std::get<double>(e.value)));
      break;
    case ValueType::FLOAT64:
      w.set_f64(key, std::get<double>(e.value));
      break;
    case ValueType::BOOL:
      w.set_bool(key, std::get<bool>(e.value));
      break;
    case ValueType::STRING:
      w.set_string(key, std::get<std::string>(e.value));
      break;
    case ValueType::ARRAY: {
      const ArrayValue& a = std::get<ArrayValue>(e.value);
      switch (a.elem_type) {
        case ValueType::STRING:
          w.set_array_strings(key, a.strings);
          break;
        case ValueType::UINT8:
          w.set_array_u8(key, narrow<uint8_t>(a.ints));
          break;
        case ValueType::INT8:
          w.set_array_i8(key, narrow<int8_t>(a.ints));
          break;
        case ValueType::UINT16:
          w.set_array_u16(key, narrow<uint16_t>(a.ints));
          break;
        case ValueType::INT16:
          w.set_array_i16(key, narrow<int16_t>(a.ints));
          break;
        case ValueType::UINT32:
          w.set_array_u32(key, narrow<uint32_t>(a.ints));
          break;
        case ValueType::INT32:
          w.set_array_i32(key, narrow<int32_t>(a.ints));
          break;
        case ValueType::UINT64:
          w.set_array_u64(key, narrow<uint64_t>(a.ints));
          break;
        case ValueType::INT64:
          w.set_array_i64(key, a.ints);
          break;
        case ValueType::BOOL: {
          std::vector<bool> b(a.ints.begin(), a.ints.end());
          w.set_array_bool(key, b);
          break;
        }
        case ValueType::FLOAT32:
          w.set_array_f32(key, std::vector<float>(a.floats.begin(), a.floats.end()));
          break;
        case ValueType::FLOAT64:
          w.set_array_f64(key, a.floats);
          break;
        case ValueType::ARRAY:
          fail("cannot copy nested array '", key, "'");
      }
      break;
    }
  }
}

// The block index of a tensor named "blk.<i>.<...>", or -1 for any other tensor.
int64_t block_index(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int64_t i = -1;
  auto [ptr, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), i);
  if (ec != std::errc() || ptr == name.data() + name.size() || *ptr != '.') return -1;
  return i;
}

}  // namespace

void write_layer_draft(const gguf::GgufFile& target, int32_t n_layers,
                       const std::string& out_path) {
  const std::string arch = target.get_string("general.architecture");
  const std::string count_key = arch + ".block_count";
  const int64_t total = target.get_int(count_key);
  if (n_layers < 1 || n_layers >= total) {
    fail("draft layer count must be in [1, ", total - 1, "] for this ", total, "-layer model, got ",
         n_layers);
  }
  GgufWriter w;
  for (const auto& [key, entry] : target.metadata()) {
    if (key == "general.alignment") continue;  // set_alignment below keeps layout and key in step
    copy_entry(w, key, entry);
  }
  w.set_alignment(static_cast<uint32_t>(target.alignment()));
  w.set_u32(count_key, static_cast<uint32_t>(n_layers));
  w.set_string("general.name", target.get_string_or("general.name", arch) + " (first " +
                                   std::to_string(n_layers) + " of " + std::to_string(total) +
                                   " layers, self-speculative draft)");
  for (const auto& t : target.tensors()) {
    if (block_index(t.name) >= n_layers) continue;
    w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  w.write(out_path);
}

}  // namespace specdec
