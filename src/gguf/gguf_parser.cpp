#include "gguf/gguf_parser.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

#include "common/error.h"
#include "gguf/byte_reader.h"

namespace specdec::gguf {
namespace {

// Lower bounds on the encoded size of one record. Counts read from the file are checked against
// remaining_bytes / minimum before anything is reserved, so a hostile count cannot allocate more
// than the file could possibly describe.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // key length, value type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;            // name len, n_dims, 1 dim, type, offset
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(ValueType::FLOAT64);

// Smallest encoding of one array element of type t.
uint64_t min_element_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::STRING:  // the uint64 length prefix
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::ARRAY:  // element type + count
      return 12;
  }
  return 1;
}

// Names and keys come from the file; escape anything unprintable and cap the length so error
// messages stay on one readable line.
std::string printable(std::string_view s) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      out += static_cast<char>(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMaxShown) out += "...";
  return out;
}

std::string hex32(uint32_t v) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 15];
  return out;
}

struct ParseResult {
  uint32_t version = 0;
  size_t alignment = 32;
  std::map<std::string, MetadataEntry> metadata;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;
};

class Parser {
 public:
  Parser(std::string_view path, const uint8_t* base, size_t size)
      : base_(base), size_(size), r_(path, base, size) {}

  ParseResult run() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_tensor_data();
    return std::move(out_);
  }

 private:
  void read_header() {
    r_.set_context("header");
    r_.need(4);
    const uint8_t m[4] = {r_.u8(), r_.u8(), r_.u8(), r_.u8()};
    if (m[0] != 'G' || m[1] != 'G' || m[2] != 'U' || m[3] != 'F') {
      r_.error("not a GGUF file: bad magic '",
               printable(std::string_view(reinterpret_cast<const char*>(m), 4)),
               "' (expected 'GGUF')");
    }
    const uint32_t version = r_.u32();
    if (version != 2 && version != 3) {
      // A big-endian file stores e.g. 3 as 0x03000000: small number in the high bytes.
      if (version > 0xffff && (version & 0xffff) == 0) {
        r_.error("version field ", hex32(version), " looks byte-swapped (version ",
                 __builtin_bswap32(version),
                 " written big-endian); only little-endian GGUF files are supported");
      }
      r_.error("unsupported GGUF version ", version, " (only versions 2 and 3 are supported)");
    }
    out_.version = version;
    tensor_count_ = r_.u64();
    kv_count_ = r_.u64();
    if (kv_count_ > r_.remaining() / kMinKvBytes) {
      r_.error("metadata key count ", kv_count_, " is impossible: the ", r_.remaining(),
               " bytes left in the file hold at most ", r_.remaining() / kMinKvBytes, " keys");
    }
    if (tensor_count_ > r_.remaining() / kMinTensorInfoBytes) {
      r_.error("tensor count ", tensor_count_, " is impossible: the ", r_.remaining(),
               " bytes left in the file hold at most ", r_.remaining() / kMinTensorInfoBytes,
               " tensor infos");
    }
  }

  void read_metadata() {
    for (uint64_t i = 0; i < kv_count_; ++i) {
      r_.set_context(str_cat("metadata key ", i));
      std::string key = r_.string();
      const std::string shown = printable(key);
      r_.set_context(str_cat("metadata '", shown, "'"));
      if (out_.metadata.count(key) != 0) r_.error("duplicate metadata key '", shown, "'");
      const uint32_t raw_type = r_.u32();
      MetadataEntry entry{static_cast<ValueType>(raw_type), read_value(raw_type)};
      out_.metadata.emplace(std::move(key), std::move(entry));
    }
  }

  Value read_value(uint32_t raw_type) {
    if (raw_type > kMaxValueType) r_.error(r_.context(), " has unknown value type ", raw_type);
    switch (static_cast<ValueType>(raw_type)) {
      case ValueType::UINT8:
        return uint64_t{r_.u8()};
      case ValueType::INT8:
        return int64_t{static_cast<int8_t>(r_.u8())};
      case ValueType::UINT16:
        return uint64_t{r_.u16()};
      case ValueType::INT16:
        return int64_t{static_cast<int16_t>(r_.u16())};
      case ValueType::UINT32:
        return uint64_t{r_.u32()};
      case ValueType::INT32:
        return int64_t{static_cast<int32_t>(r_.u32())};
      case ValueType::UINT64:
        return r_.u64();
      case ValueType::INT64:
        return static_cast<int64_t>(r_.u64());
      case ValueType::FLOAT32:
        return double{r_.f32()};
      case ValueType::FLOAT64:
        return r_.f64();
      case ValueType::BOOL:
        return read_bool();
      case ValueType::STRING:
        return r_.string();
      case ValueType::ARRAY:
        return read_array();
    }
    r_.error(r_.context(), " has unknown value type ", raw_type);  // unreachable
  }

  bool read_bool() {
    const size_t at = r_.offset();
    const uint8_t b = r_.u8();
    if (b > 1) r_.error(r_.context(), ": invalid bool value ", unsigned{b}, " at offset ", at);
    return b == 1;
  }

  ArrayValue read_array() {
    const uint32_t raw_elem = r_.u32();
    if (raw_elem > kMaxValueType) {
      r_.error(r_.context(), ": array has unknown element type ", raw_elem);
    }
    const auto elem = static_cast<ValueType>(raw_elem);
    if (elem == ValueType::ARRAY) r_.error(r_.context(), ": arrays of arrays are not supported");
    const size_t at = r_.offset();
    const uint64_t count = r_.u64();
    const uint64_t min_bytes = min_element_bytes(elem);
    if (count > r_.remaining() / min_bytes) {
      r_.error(r_.context(), ": array length ", count, " at offset ", at,
               " is impossible: ", value_type_name(elem), " elements need at least ", min_bytes,
               " bytes each and only ", r_.remaining(), " bytes are left in the file");
    }
    ArrayValue a;
    a.elem_type = elem;
    const auto n = static_cast<size_t>(count);
    if (elem == ValueType::STRING) {
      a.strings.reserve(n);
      for (size_t i = 0; i < n; ++i) a.strings.push_back(r_.string());
    } else if (elem == ValueType::FLOAT32 || elem == ValueType::FLOAT64) {
      a.floats.reserve(n);
      for (size_t i = 0; i < n; ++i) a.floats.push_back(std::get<double>(read_value(raw_elem)));
    } else {
      a.ints.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        const Value v = read_value(raw_elem);
        if (const auto* u = std::get_if<uint64_t>(&v)) {
          a.ints.push_back(static_cast<int64_t>(*u));  // keeps the bit pattern, see ArrayValue
        } else if (const auto* s = std::get_if<int64_t>(&v)) {
          a.ints.push_back(*s);
        } else {
          a.ints.push_back(std::get<bool>(v) ? 1 : 0);
        }
      }
    }
    return a;
  }

  void read_alignment() {
    const auto it = out_.metadata.find("general.alignment");
    if (it == out_.metadata.end()) return;
    const Value& v = it->second.value;
    uint64_t a = 0;
    if (const auto* u = std::get_if<uint64_t>(&v)) {
      a = *u;
    } else if (const auto* s = std::get_if<int64_t>(&v)) {
      if (*s < 0) r_.error("general.alignment must be a nonzero power of two, got ", *s);
      a = static_cast<uint64_t>(*s);
    } else {
      r_.error("general.alignment has type ", value_type_name(it->second.type),
               ", expected an unsigned integer");
    }
    if (!std::has_single_bit(a)) {
      r_.error("general.alignment must be a nonzero power of two, got ", a);
    }
    out_.alignment = static_cast<size_t>(a);
  }

  void read_tensor_infos() {
    out_.tensors.reserve(static_cast<size_t>(tensor_count_));
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      r_.set_context(str_cat("tensor info ", i));
      TensorInfo t;
      t.name = r_.string();
      const std::string shown = printable(t.name);
      r_.set_context(str_cat("tensor info ", i, " ('", shown, "')"));
      if (out_.tensor_index.count(t.name) != 0) r_.error("duplicate tensor name '", shown, "'");

      const uint32_t n_dims = r_.u32();
      if (n_dims == 0 || n_dims > kMaxDims) {
        r_.error("tensor '", shown, "' has ", n_dims, " dimensions; expected 1 to ", kMaxDims);
      }
      int64_t n_elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim = r_.u64();
        if (dim == 0) r_.error("tensor '", shown, "' dimension ", d, " is 0");
        if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          r_.error("tensor '", shown, "' dimension ", d, " is ", dim, ", which does not fit int64");
        }
        t.dims.push_back(static_cast<int64_t>(dim));
        if (__builtin_mul_overflow(n_elements, static_cast<int64_t>(dim), &n_elements)) {
          r_.error("tensor '", shown, "' element count overflows int64 (dimension ", d, " is ", dim,
                   ")");
        }
      }

      const uint32_t raw_type = r_.u32();
      const std::optional<TypeTraits> traits = type_traits(raw_type);
      if (!traits) r_.error("tensor '", shown, "' has unknown type id ", raw_type);
      if (!traits->supported) {
        r_.error("tensor '", shown, "' has unsupported type ", traits->name, " (type id ", raw_type,
                 ")");
      }
      t.type = static_cast<GgmlType>(raw_type);
      if (t.dims[0] % traits->block_size != 0) {
        r_.error("tensor '", shown, "' row length ", t.dims[0], " is not a multiple of the ",
                 traits->name, " block size ", traits->block_size);
      }
      // Blocks per row times block bytes, times rows; both products are checked.
      uint64_t row = 0;
      uint64_t n_bytes = 0;
      if (__builtin_mul_overflow(static_cast<uint64_t>(t.dims[0] / traits->block_size),
                                 static_cast<uint64_t>(traits->type_size), &row) ||
          __builtin_mul_overflow(row, static_cast<uint64_t>(n_elements / t.dims[0]), &n_bytes) ||
          n_bytes > std::numeric_limits<size_t>::max()) {
        r_.error("tensor '", shown, "' byte size overflows");
      }
      t.n_bytes = static_cast<size_t>(n_bytes);

      t.offset = r_.u64();
      if (t.offset % out_.alignment != 0) {
        r_.error("tensor '", shown, "' offset ", t.offset, " is not a multiple of the alignment ",
                 out_.alignment);
      }
      t.data = nullptr;
      out_.tensor_index.emplace(t.name, out_.tensors.size());
      out_.tensors.push_back(std::move(t));
    }
  }

  void place_tensor_data() {
    const uint64_t a = out_.alignment;
    const uint64_t end_of_infos = r_.offset();
    uint64_t data_start = 0;
    // Round up to the (power-of-two) alignment, refusing to wrap around.
    if (__builtin_add_overflow(end_of_infos, a - 1, &data_start)) {
      r_.error("data section offset overflows (alignment ", a, ")");
    }
    data_start &= ~(a - 1);
    if (out_.tensors.empty()) return;  // no data section needed; padding may be absent
    if (data_start > size_) {
      r_.error("data section starts at offset ", data_start, ", past the end of the file (", size_,
               " bytes)");
    }
    for (TensorInfo& t : out_.tensors) {
      uint64_t begin = 0;
      uint64_t end = 0;
      if (__builtin_add_overflow(data_start, t.offset, &begin) ||
          __builtin_add_overflow(begin, t.n_bytes, &end) || end > size_) {
        r_.error("tensor '", printable(t.name), "' data (", t.n_bytes, " bytes at data offset ",
                 t.offset, ", data section starts at ", data_start, ") is outside the file (",
                 size_, " bytes)");
      }
      t.data = base_ + begin;
    }
    // Sorted by offset, each tensor must end before the next one begins.
    std::vector<size_t> order(out_.tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return out_.tensors[x].offset < out_.tensors[y].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
      const TensorInfo& prev = out_.tensors[order[i - 1]];
      const TensorInfo& cur = out_.tensors[order[i]];
      if (prev.offset + prev.n_bytes > cur.offset) {
        r_.error("tensors '", printable(prev.name), "' (data offset ", prev.offset, ", ",
                 prev.n_bytes, " bytes) and '", printable(cur.name), "' (data offset ", cur.offset,
                 ") overlap");
      }
    }
  }

  const uint8_t* base_;
  size_t size_;
  ByteReader r_;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  ParseResult out_;
};

}  // namespace

void GgufParser::parse(GgufFile& file) {
  ParseResult r = Parser(file.path_, file.base_, file.size_).run();
  file.version_ = r.version;
  file.alignment_ = r.alignment;
  file.metadata_ = std::move(r.metadata);
  file.tensors_ = std::move(r.tensors);
  file.tensor_index_ = std::move(r.tensor_index);
}

}  // namespace specdec::gguf
