#include "engine/slot_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "common/stream_hash.h"

namespace specdec {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'E', 'C', 'S', 'L', 'O', 'T'};
constexpr uint32_t kVersion = 2;  // 2: the LoRA scales after the tokens

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Writes through a hash of everything written.
class Writer {
 public:
  Writer(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  void bytes(const void* p, size_t n) {
    if (n == 0) return;
    if (std::fwrite(p, 1, n, f_) != n) fail("cannot write ", path_, ": ", std::strerror(errno));
    hash_.update(p, n);
    written_ += n;
  }
  template <typename T>
  void value(T v) {
    bytes(&v, sizeof(v));
  }
  void digest() {
    const uint64_t d = hash_.digest();
    bytes(&d, sizeof(d));
  }
  uint64_t written() const { return written_; }

 private:
  std::FILE* f_;
  const std::string& path_;
  StreamHash hash_;
  uint64_t written_ = 0;
};

class Reader {
 public:
  Reader(std::FILE* f, const std::string& path, uint64_t size) : f_(f), path_(path), size_(size) {}
  void bytes(void* p, size_t n) {
    if (n == 0) return;
    if (n > size_ - read_ || std::fread(p, 1, n, f_) != n) fail(path_, " is truncated");
    hash_.update(p, n);
    read_ += n;
  }
  template <typename T>
  T value() {
    T v{};
    bytes(&v, sizeof(v));
    return v;
  }
  // Reads n bytes nobody keeps (they still count for the checksum).
  void skip(uint64_t n) {
    if (n > size_ - read_) fail(path_, " is truncated");
    std::vector<uint8_t> buf(std::min<uint64_t>(n, 1 << 20));
    while (n > 0) {
      const size_t piece = static_cast<size_t>(std::min<uint64_t>(n, buf.size()));
      bytes(buf.data(), piece);
      n -= piece;
    }
  }
  void check_digest() {
    const uint64_t want = hash_.digest();
    if (value<uint64_t>() != want) fail(path_, " is corrupt (its checksum does not match)");
    if (read_ != size_) fail(path_, " has ", size_ - read_, " bytes past its end");
  }
  uint64_t read() const { return read_; }

 private:
  std::FILE* f_;
  const std::string& path_;
  uint64_t size_;
  StreamHash hash_;
  uint64_t read_ = 0;
};

void write_section(Writer& w, const SlotCachePart& part, int32_t rows) {
  const KvCache& c = *part.cache;
  w.value<uint64_t>(part.fingerprint);
  w.value<uint32_t>(static_cast<uint32_t>(c.n_layer()));
  w.value<uint32_t>(static_cast<uint32_t>(c.n_head_kv()));
  w.value<uint32_t>(static_cast<uint32_t>(c.head_dim()));
  w.value<uint8_t>(static_cast<uint8_t>(c.types().k));
  w.value<uint8_t>(static_cast<uint8_t>(c.types().v));
  w.value<uint32_t>(static_cast<uint32_t>(rows));
  w.value<uint64_t>(c.row_bytes(rows));
  c.save_rows(rows, [&w](const void* p, size_t n) { w.bytes(p, n); });
}

struct SectionHead {
  uint64_t fingerprint;
  uint32_t n_layer, n_head_kv, head_dim;
  uint8_t k, v;
  uint32_t rows;
  uint64_t bytes;
};

SectionHead read_section_head(Reader& r) {
  SectionHead h{};
  h.fingerprint = r.value<uint64_t>();
  h.n_layer = r.value<uint32_t>();
  h.n_head_kv = r.value<uint32_t>();
  h.head_dim = r.value<uint32_t>();
  h.k = r.value<uint8_t>();
  h.v = r.value<uint8_t>();
  h.rows = r.value<uint32_t>();
  h.bytes = r.value<uint64_t>();
  return h;
}

const char* type_name(uint8_t t) {
  return t <= static_cast<uint8_t>(KvType::Q8_0) ? kv_type_name(static_cast<KvType>(t)) : "?";
}

// Why the section cannot go into the part's cache, as what follows the file's name ("" when it
// can).
std::string mismatch(const SectionHead& h, const SlotCachePart& part, const char* which) {
  const KvCache& c = *part.cache;
  if (h.fingerprint != part.fingerprint) {
    return str_cat("was written for another model (a different ", which,
                   " GGUF file, or other LoRA adapters or scales)");
  }
  if (h.n_layer != static_cast<uint32_t>(c.n_layer()) ||
      h.n_head_kv != static_cast<uint32_t>(c.n_head_kv()) ||
      h.head_dim != static_cast<uint32_t>(c.head_dim())) {
    return str_cat("holds a ", which, " cache of another shape");
  }
  if (h.k != static_cast<uint8_t>(c.types().k) || h.v != static_cast<uint8_t>(c.types().v)) {
    return str_cat("stores the ", which, "'s K as ", type_name(h.k), " and V as ", type_name(h.v),
                   " where this one stores ", kv_types_name(c.types()), " (-ctk/-ctv)");
  }
  if (h.rows > static_cast<uint32_t>(c.capacity())) {
    return str_cat("holds ", h.rows, " ", which, " entries where the context holds ", c.capacity());
  }
  if (h.bytes != c.row_bytes(static_cast<int32_t>(h.rows))) {
    return str_cat("holds ", which, " entries of a size that does not fit");
  }
  return "";
}

void read_rows(Reader& r, KvCache& c, uint32_t rows) {
  c.load_rows(static_cast<int32_t>(rows), [&r](void* p, size_t n) { r.bytes(p, n); });
}

}  // namespace

SlotFileWritten write_slot_file(const std::string& path, std::span<const int32_t> tokens,
                                const SlotCachePart& target, const SlotCachePart& draft,
                                int32_t n_draft, int32_t draft_base,
                                std::span<const float> lora_scales) {
  const auto n = static_cast<int32_t>(tokens.size());
  if (target.cache == nullptr || n > target.cache->length()) {
    fail("slot save: the target cache does not hold the ", n, " tokens");
  }
  if (draft.cache != nullptr && (draft_base < 0 || n_draft < 0 ||
                                 n_draft > std::min(n - draft_base, draft.cache->length()))) {
    fail("slot save: the draft cache does not hold ", n_draft, " of the tokens");
  }
  // A name of its own per write: two slots may save to the same file at once (the last rename
  // wins, each file whole).
  static std::atomic<uint64_t> writes{0};
  const std::string tmp =
      str_cat(path, ".tmp.", static_cast<long>(getpid()), ".", writes.fetch_add(1));
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) fail("cannot create ", tmp, ": ", std::strerror(errno));
  SlotFileWritten out;
  try {
    Writer w(f.get(), tmp);
    w.bytes(kMagic, sizeof(kMagic));
    w.value<uint32_t>(kVersion);
    w.value<uint32_t>(static_cast<uint32_t>(n));
    w.bytes(tokens.data(), tokens.size_bytes());
    w.value<uint32_t>(static_cast<uint32_t>(lora_scales.size()));
    w.bytes(lora_scales.data(), lora_scales.size_bytes());
    write_section(w, target, n);
    w.value<uint8_t>(draft.cache != nullptr ? 1 : 0);
    if (draft.cache != nullptr) {
      w.value<uint32_t>(static_cast<uint32_t>(draft_base));
      write_section(w, draft, n_draft);
    }
    w.digest();
    out.bytes = w.written();
    if (std::fflush(f.get()) != 0) fail("cannot write ", tmp, ": ", std::strerror(errno));
    std::FILE* raw = f.release();
    if (std::fclose(raw) != 0) fail("cannot write ", tmp, ": ", std::strerror(errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno));
    }
  } catch (...) {
    f.reset();
    std::remove(tmp.c_str());
    throw;
  }
  return out;
}

SlotFileRead read_slot_file(const std::string& path, const SlotCachePart& target, int32_t n_vocab,
                            const SlotCachePart& draft, const std::function<void()>& before_rows,
                            const SlotFingerprintAt& target_fingerprint) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail("cannot open slot file ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (fstat(fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) {
    fail(path, " is not a regular file");
  }
  Reader r(f.get(), path, static_cast<uint64_t>(st.st_size));
  char magic[sizeof(kMagic)] = {};
  if (static_cast<uint64_t>(st.st_size) < sizeof(kMagic)) fail(path, " is not a specdec slot file");
  r.bytes(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) fail(path, " is not a specdec slot file");
  const auto version = r.value<uint32_t>();
  if (version != 1 && version != kVersion) {
    fail(path, " is a version ", version, " slot file; this build reads versions 1 and ", kVersion);
  }
  SlotFileRead out;
  const auto n = r.value<uint32_t>();
  if (n > static_cast<uint32_t>(target.cache->capacity())) {
    fail(path, " holds ", n, " tokens but the context holds ", target.cache->capacity(),
         " (raise -c)");
  }
  out.tokens.resize(n);
  r.bytes(out.tokens.data(), out.tokens.size() * sizeof(int32_t));
  for (int32_t id : out.tokens) {
    if (id < 0 || id >= n_vocab) fail(path, " holds token id ", id, ", outside this vocabulary");
  }
  if (version >= 2) {
    const auto n_lora = r.value<uint32_t>();
    if (n_lora > kMaxSlotFileLoraScales) fail(path, " is corrupt (", n_lora, " LoRA scales)");
    out.lora_scales.emplace(n_lora);
    r.bytes(out.lora_scales->data(), n_lora * sizeof(float));
  }
  SlotCachePart expected = target;
  if (target_fingerprint) {
    expected.fingerprint = target_fingerprint(out.lora_scales ? &*out.lora_scales : nullptr);
  }
  const SectionHead th = read_section_head(r);
  if (const std::string why = mismatch(th, expected, "target"); !why.empty()) {
    fail(path, " ", why, ": it cannot be restored here");
  }
  if (th.rows != n) fail(path, " is corrupt (", th.rows, " target entries for ", n, " tokens)");
  if (before_rows) before_rows();
  read_rows(r, *target.cache, th.rows);
  const auto has_draft = r.value<uint8_t>();
  if (has_draft > 1) fail(path, " is corrupt (draft flag ", static_cast<int>(has_draft), ")");
  if (has_draft == 1) {
    const auto base = r.value<uint32_t>();
    const SectionHead dh = read_section_head(r);
    if (base > n || dh.rows > n - base) {
      fail(path, " is corrupt (", dh.rows, " draft entries from token ", base, " of ", n, ")");
    }
    if (draft.cache != nullptr && mismatch(dh, draft, "draft").empty()) {
      read_rows(r, *draft.cache, dh.rows);
      out.draft_rows = static_cast<int32_t>(dh.rows);
      out.draft_base = out.draft_rows > 0 ? static_cast<int32_t>(base) : 0;
    } else {
      r.skip(dh.bytes);
    }
  }
  if (draft.cache != nullptr && out.draft_rows == 0) draft.cache->truncate(0);
  r.check_digest();
  out.bytes = r.read();
  return out;
}

}  // namespace specdec
