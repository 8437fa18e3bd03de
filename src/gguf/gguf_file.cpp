#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "gguf/gguf_parser.h"

namespace specdec::gguf {

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8:
      return "UINT8";
    case ValueType::INT8:
      return "INT8";
    case ValueType::UINT16:
      return "UINT16";
    case ValueType::INT16:
      return "INT16";
    case ValueType::UINT32:
      return "UINT32";
    case ValueType::INT32:
      return "INT32";
    case ValueType::FLOAT32:
      return "FLOAT32";
    case ValueType::BOOL:
      return "BOOL";
    case ValueType::STRING:
      return "STRING";
    case ValueType::ARRAY:
      return "ARRAY";
    case ValueType::UINT64:
      return "UINT64";
    case ValueType::INT64:
      return "INT64";
    case ValueType::FLOAT64:
      return "FLOAT64";
  }
  return "unknown";
}

size_t ArrayValue::size() const {
  switch (elem_type) {
    case ValueType::STRING:
      return strings.size();
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      return floats.size();
    default:
      return ints.size();
  }
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // open() verified this product fits int64
  return n;
}

int64_t TensorInfo::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

namespace {

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, Access access) {
  // Owned from the start, so ~GgufFile unmaps if parsing throws.
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  // O_NONBLOCK: opening a FIFO (or a device) for reading would otherwise block until a writer
  // appears, hanging the program; the S_ISREG check below then rejects it. For regular files
  // the flag changes nothing, and mmap ignores it.
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(path, ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path, ": not a regular file");
  if (st.st_size == 0) fail(path, ": empty file (0 bytes), not a GGUF file");
  if (static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max()) {
    fail(path, ": file too large to map (", st.st_size, " bytes)");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (access == Access::Map) {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
    if (map == MAP_FAILED) fail(path, ": cannot mmap ", size, " bytes: ", std::strerror(errno));
    file->base_ = static_cast<const uint8_t*>(map);
  } else {
    // Anonymous pages (munmap'd like the mapping), read-only once filled, so that a stray
    // write faults as it would on the file mapping.
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      fail(path, ": cannot allocate ", size, " bytes to read it into: ", std::strerror(errno));
    }
    file->base_ = static_cast<const uint8_t*>(mem);  // owned from here: ~GgufFile unmaps
    auto* out = static_cast<uint8_t*>(mem);
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pread(fd.fd, out + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        file->size_ = size;
        fail(path, ": read failed after ", done, " of ", size,
             " bytes: ", n < 0 ? std::strerror(errno) : "the file shrank");
      }
      done += static_cast<size_t>(n);
    }
    ::mprotect(mem, size, PROT_READ);
  }
  file->size_ = size;
  file->access_ = access;
  GgufParser::parse(*file);
  return file;
}

size_t GgufFile::release_pages(const uint8_t* begin, size_t n) const {
  const auto map_lo = reinterpret_cast<uintptr_t>(base_);
  const uintptr_t map_hi = map_lo + size_;
  const auto lo = std::max(reinterpret_cast<uintptr_t>(begin), map_lo);
  const uintptr_t hi = std::min(reinterpret_cast<uintptr_t>(begin) + n, map_hi);
  if (base_ == nullptr || lo >= hi) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (lo + page - 1) / page * page;  // the mapping starts on a page
  const uintptr_t last = hi / page * page;
  if (first >= last) return 0;
  void* const range = reinterpret_cast<void*>(first);
  if (access_ == Access::Read) {
    // Anonymous memory: the bytes are gone once the pages are, and a later read would see zeros.
    // The pages become inaccessible first, so that such a read faults at once instead of
    // computing with zeros (the callers release only what nobody reads again).
    if (::mprotect(range, last - first, PROT_NONE) != 0) return 0;
  }
  // MADV_DONTNEED on a private file mapping that was never written drops the process's page
  // table entries; nothing is lost, since there is no private copy to discard. On anonymous
  // memory it frees the pages.
  if (::madvise(range, last - first, MADV_DONTNEED) != 0) {
    if (access_ == Access::Read) ::mprotect(range, last - first, PROT_READ);  // kept after all
    return 0;
  }
  return last - first;
}

GgufFile::~GgufFile() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
}

bool GgufFile::has(std::string_view key) const { return find(key) != nullptr; }

const MetadataEntry* GgufFile::find(std::string_view key) const {
  const auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, ValueType type,
                             std::string_view expected) {
  fail(path, ": metadata '", key, "' has type ", value_type_name(type), ", expected ", expected);
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const MetadataEntry* e = find(key);
  if (e == nullptr) fail(path_, ": missing metadata key '", key, "'");
  const auto* s = std::get_if<std::string>(&e->value);
  if (s == nullptr) wrong_type(path_, key, e->type, "STRING");
  return *s;
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : std::move(fallback);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const MetadataEntry* e = find(key);
  if (e == nullptr) fail(path_, ": missing metadata key '", key, "'");
  if (const auto* s = std::get_if<int64_t>(&e->value)) return *s;
  if (const auto* u = std::get_if<uint64_t>(&e->value)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(path_, ": metadata '", key, "' value ", *u, " does not fit int64");
    }
    return static_cast<int64_t>(*u);
  }
  wrong_type(path_, key, e->type, "an integer");
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double GgufFile::get_float(std::string_view key) const {
  const MetadataEntry* e = find(key);
  if (e == nullptr) fail(path_, ": missing metadata key '", key, "'");
  if (const auto* d = std::get_if<double>(&e->value)) return *d;
  if (const auto* s = std::get_if<int64_t>(&e->value)) return static_cast<double>(*s);
  if (const auto* u = std::get_if<uint64_t>(&e->value)) return static_cast<double>(*u);
  wrong_type(path_, key, e->type, "a float or integer");
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  const MetadataEntry* e = find(key);
  if (e == nullptr) return fallback;
  const auto* b = std::get_if<bool>(&e->value);
  if (b == nullptr) wrong_type(path_, key, e->type, "BOOL");
  return *b;
}

const ArrayValue& GgufFile::get_array(std::string_view key) const {
  const ArrayValue* a = find_array(key);
  if (a == nullptr) fail(path_, ": missing metadata key '", key, "'");
  return *a;
}

const ArrayValue* GgufFile::find_array(std::string_view key) const {
  const MetadataEntry* e = find(key);
  if (e == nullptr) return nullptr;
  const auto* a = std::get_if<ArrayValue>(&e->value);
  if (a == nullptr) wrong_type(path_, key, e->type, "ARRAY");
  return a;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (t == nullptr) fail(path_, ": tensor '", name, "' not found");
  return *t;
}

}  // namespace specdec::gguf
