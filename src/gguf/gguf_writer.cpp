#include "gguf/gguf_writer.h"

#include <bit>
#include <fstream>

#include "common/error.h"

namespace specdec::gguf {
namespace {

// Little-endian append helpers, written byte by byte so the output never depends on the host.
void put_le(std::vector<uint8_t>& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u32(std::vector<uint8_t>& out, uint32_t v) { put_le(out, v, 4); }
void put_u64(std::vector<uint8_t>& out, uint64_t v) { put_le(out, v, 8); }
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
void put_type(std::vector<uint8_t>& out, ValueType t) { put_u32(out, static_cast<uint32_t>(t)); }

std::vector<uint8_t> typed(ValueType t) {
  std::vector<uint8_t> out;
  put_type(out, t);
  return out;
}

std::vector<uint8_t> scalar(ValueType t, uint64_t bits, size_t n) {
  std::vector<uint8_t> out = typed(t);
  put_le(out, bits, n);
  return out;
}

// Encodes a numeric array whose elements are n bytes wide; `bits` maps an element to its
// little-endian bit pattern.
template <typename T, typename Bits>
std::vector<uint8_t> numeric_array(ValueType elem, const std::vector<T>& v, size_t n, Bits bits) {
  std::vector<uint8_t> out = typed(ValueType::ARRAY);
  put_type(out, elem);
  put_u64(out, v.size());
  for (const T& x : v) put_le(out, bits(x), n);
  return out;
}

template <typename T>
uint64_t int_bits(T x) {
  // Through the same-width unsigned type so negative values keep their two's complement bits.
  return static_cast<std::make_unsigned_t<T>>(x);
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::set_raw(const std::string& key, std::vector<uint8_t> value) {
  const auto it = kv_index_.find(key);
  if (it != kv_index_.end()) {
    kvs_[it->second].second = std::move(value);
    return;
  }
  kv_index_.emplace(key, kvs_.size());
  kvs_.emplace_back(key, std::move(value));
}

void GgufWriter::set_u8(const std::string& key, uint8_t v) {
  set_raw(key, scalar(ValueType::UINT8, v, 1));
}
void GgufWriter::set_i8(const std::string& key, int8_t v) {
  set_raw(key, scalar(ValueType::INT8, int_bits(v), 1));
}
void GgufWriter::set_u16(const std::string& key, uint16_t v) {
  set_raw(key, scalar(ValueType::UINT16, v, 2));
}
void GgufWriter::set_i16(const std::string& key, int16_t v) {
  set_raw(key, scalar(ValueType::INT16, int_bits(v), 2));
}
void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  set_raw(key, scalar(ValueType::UINT32, v, 4));
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  set_raw(key, scalar(ValueType::INT32, int_bits(v), 4));
}
void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  set_raw(key, scalar(ValueType::UINT64, v, 8));
}
void GgufWriter::set_i64(const std::string& key, int64_t v) {
  set_raw(key, scalar(ValueType::INT64, int_bits(v), 8));
}
void GgufWriter::set_f32(const std::string& key, float v) {
  set_raw(key, scalar(ValueType::FLOAT32, std::bit_cast<uint32_t>(v), 4));
}
void GgufWriter::set_f64(const std::string& key, double v) {
  set_raw(key, scalar(ValueType::FLOAT64, std::bit_cast<uint64_t>(v), 8));
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  set_raw(key, scalar(ValueType::BOOL, v ? 1 : 0, 1));
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> out = typed(ValueType::STRING);
  put_string(out, v);
  set_raw(key, std::move(out));
}

void GgufWriter::set_array_strings(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> out = typed(ValueType::ARRAY);
  put_type(out, ValueType::STRING);
  put_u64(out, v.size());
  for (const std::string& s : v) put_string(out, s);
  set_raw(key, std::move(out));
}
void GgufWriter::set_array_u8(const std::string& key, const std::vector<uint8_t>& v) {
  set_raw(key, numeric_array(ValueType::UINT8, v, 1, int_bits<uint8_t>));
}
void GgufWriter::set_array_i8(const std::string& key, const std::vector<int8_t>& v) {
  set_raw(key, numeric_array(ValueType::INT8, v, 1, int_bits<int8_t>));
}
void GgufWriter::set_array_u16(const std::string& key, const std::vector<uint16_t>& v) {
  set_raw(key, numeric_array(ValueType::UINT16, v, 2, int_bits<uint16_t>));
}
void GgufWriter::set_array_i16(const std::string& key, const std::vector<int16_t>& v) {
  set_raw(key, numeric_array(ValueType::INT16, v, 2, int_bits<int16_t>));
}
void GgufWriter::set_array_u32(const std::string& key, const std::vector<uint32_t>& v) {
  set_raw(key, numeric_array(ValueType::UINT32, v, 4, int_bits<uint32_t>));
}
void GgufWriter::set_array_i32(const std::string& key, const std::vector<int32_t>& v) {
  set_raw(key, numeric_array(ValueType::INT32, v, 4, int_bits<int32_t>));
}
void GgufWriter::set_array_u64(const std::string& key, const std::vector<uint64_t>& v) {
  set_raw(key, numeric_array(ValueType::UINT64, v, 8, int_bits<uint64_t>));
}
void GgufWriter::set_array_i64(const std::string& key, const std::vector<int64_t>& v) {
  set_raw(key, numeric_array(ValueType::INT64, v, 8, int_bits<int64_t>));
}
void GgufWriter::set_array_f32(const std::string& key, const std::vector<float>& v) {
  set_raw(key, numeric_array(ValueType::FLOAT32, v, 4,
                             [](float x) -> uint64_t { return std::bit_cast<uint32_t>(x); }));
}
void GgufWriter::set_array_f64(const std::string& key, const std::vector<double>& v) {
  set_raw(key, numeric_array(ValueType::FLOAT64, v, 8,
                             [](double x) { return std::bit_cast<uint64_t>(x); }));
}
void GgufWriter::set_array_bool(const std::string& key, const std::vector<bool>& v) {
  std::vector<uint8_t> out = typed(ValueType::ARRAY);
  put_type(out, ValueType::BOOL);
  put_u64(out, v.size());
  for (bool b : v) out.push_back(b ? 1 : 0);
  set_raw(key, std::move(out));
}
void GgufWriter::set_array_raw(const std::string& key, ValueType elem_type, uint64_t count,
                               const std::vector<uint8_t>& elements) {
  std::vector<uint8_t> out = typed(ValueType::ARRAY);
  put_type(out, elem_type);
  put_u64(out, count);
  out.insert(out.end(), elements.begin(), elements.end());
  set_raw(key, std::move(out));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                            std::vector<uint8_t> data) {
  for (const Tensor& t : tensors_) {
    if (t.name == name) fail("GgufWriter: duplicate tensor name '", name, "'");
  }
  if (dims.empty() || dims.size() > 4) {
    fail("GgufWriter: tensor '", name, "' has ", dims.size(), " dims; expected 1 to 4");
  }
  int64_t rows = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0) fail("GgufWriter: tensor '", name, "' dim ", i, " is ", dims[i]);
    if (i > 0 && __builtin_mul_overflow(rows, dims[i], &rows)) {
      fail("GgufWriter: tensor '", name, "' is too large");
    }
  }
  const TypeTraits& tr = traits(type);  // throws for an unknown type
  if (dims[0] % tr.block_size != 0) {
    fail("GgufWriter: tensor '", name, "' row length ", dims[0], " is not a multiple of the ",
         tr.name, " block size ", tr.block_size);
  }
  uint64_t expected = 0;
  uint64_t row = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(dims[0] / tr.block_size),
                             static_cast<uint64_t>(tr.type_size), &row) ||
      __builtin_mul_overflow(row, static_cast<uint64_t>(rows), &expected) ||
      expected != data.size()) {
    fail("GgufWriter: tensor '", name, "' has ", data.size(), " bytes of data; its shape and type ",
         tr.name, " need ", expected);
  }
  tensors_.push_back(Tensor{name, std::move(dims), type, std::move(data)});
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) {
    fail("GgufWriter: alignment ", alignment, " is not a nonzero power of two");
  }
  alignment_ = alignment;
  set_u32("general.alignment", alignment);
}

std::vector<uint8_t> GgufWriter::to_bytes(uint32_t version) const {
  if (version != 2 && version != 3) fail("GgufWriter: cannot write GGUF version ", version);
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  put_u32(out, version);
  put_u64(out, tensors_.size());
  put_u64(out, kvs_.size());
  for (const auto& [key, value] : kvs_) {
    put_string(out, key);
    out.insert(out.end(), value.begin(), value.end());
  }
  // Offsets are relative to the data section; each tensor starts on an alignment boundary.
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put_u32(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put_u64(out, static_cast<uint64_t>(d));
    put_u32(out, static_cast<uint32_t>(t.type));
    put_u64(out, offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  out.resize(align_up(out.size(), alignment_), 0);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

void GgufWriter::write(const std::string& path, uint32_t version) const {
  const std::vector<uint8_t> bytes = to_bytes(version);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, ": cannot open for writing");
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) fail(path, ": write failed");
}

}  // namespace specdec::gguf
