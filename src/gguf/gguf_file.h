// Read-only view of a GGUF v2/v3 file, memory-mapped. Everything (header, metadata, tensor
// infos, tensor data ranges) is validated against the file size in open(); after that, every
// accessor is a bounds-safe lookup. Any problem throws specdec::Error with a one-line message
// that names the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensor/ggml_type.h"

namespace specdec::gguf {

// GGUF metadata value types, numbered as in the spec.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// "UINT32", "STRING", ...; "unknown" for ids outside the spec. Used in error messages.
std::string_view value_type_name(ValueType type);

// An array value: element type plus the decoded elements (strings are copied out; numeric
// arrays are widened into one of the vectors below, matching elem_type's family). UINT64
// elements above INT64_MAX keep their bit pattern (cast back to uint64_t to recover them).
// Arrays of arrays are rejected at open time.
struct ArrayValue {
  ValueType elem_type = ValueType::UINT8;
  std::vector<std::string> strings;  // elem_type == STRING
  std::vector<int64_t> ints;         // any integer or BOOL element type
  std::vector<double> floats;        // FLOAT32 / FLOAT64
  size_t size() const;
};

using Value = std::variant<uint64_t, int64_t, double, bool, std::string, ArrayValue>;

struct MetadataEntry {
  ValueType type;  // the type as written in the file
  Value value;     // unsigned types -> uint64_t, signed -> int64_t, floats -> double
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the contiguous (row) dimension
  GgmlType type;
  uint64_t offset;      // relative to the data section
  const uint8_t* data;  // points into the mapping, already bounds-checked
  size_t n_bytes;
  int64_t n_elements() const;
  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  int64_t n_rows() const;  // product of dims[1..]
};

class GgufFile {
 public:
  // How open() brings the file in. Map: a read-only private file mapping, paged in as read
  // (the default). Read: read whole into anonymous memory at open (llama.cpp's --no-mmap: no
  // page faults on the file later, and nothing to fault back from a slow or network disk);
  // release_pages then frees the pages for good.
  enum class Access { Map, Read };
  // Maps (or reads) and validates the file; throws specdec::Error on any problem.
  static std::unique_ptr<GgufFile> open(const std::string& path, Access access = Access::Map);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  Access access() const { return access_; }
  // The whole file as mapped (read-only, private): every TensorInfo::data lies inside.
  std::span<const uint8_t> mapping() const { return {base_, size_}; }

  // Lets the process drop its pages of [begin, begin + n), clipped to the mapping: only the
  // whole pages inside that range (its page-aligned interior), so a page that also holds bytes
  // outside it (a neighbouring tensor) stays. Meant for data nobody reads any more, such as
  // matrices whose packed copies replaced them. Map: the mapping is a clean, read-only file
  // mapping, so a later read is still correct: the page faults back in from the file (or the
  // page cache, which keeps it until the kernel needs the memory). Read: the pages are freed and
  // made inaccessible, so that a later read faults (SIGSEGV) rather than sees zeros. Returns the
  // bytes released (0 if the range holds no whole page or the kernel refuses).
  size_t release_pages(const uint8_t* begin, size_t n) const;

  const std::map<std::string, MetadataEntry>& metadata() const { return metadata_; }
  bool has(std::string_view key) const;
  const MetadataEntry* find(std::string_view key) const;

  // Typed getters. The *_or forms return the fallback when the key is absent; all throw
  // specdec::Error naming the key when it is present with an incompatible type.
  std::string get_string(std::string_view key) const;  // throws if absent
  std::string get_string_or(std::string_view key, std::string fallback) const;
  int64_t get_int(std::string_view key) const;  // any integer type; throws if absent
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;  // float or integer types; throws if absent
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  const ArrayValue& get_array(std::string_view key) const;   // throws if absent
  const ArrayValue* find_array(std::string_view key) const;  // nullptr if absent

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  const TensorInfo& tensor(std::string_view name) const;       // throws naming the tensor

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  Access access_ = Access::Map;
  std::map<std::string, MetadataEntry> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class GgufParser;
};

}  // namespace specdec::gguf
