#include "gguf/gguf_fingerprint.h"

#include <algorithm>

#include "common/stream_hash.h"

namespace specdec::gguf {

uint64_t content_fingerprint(const GgufFile& file) {
  const std::span<const uint8_t> all = file.mapping();
  StreamHash h;
  const uint64_t size = all.size();
  h.update(&size, sizeof(size));
  const uint8_t* data_start = all.data() + all.size();
  for (const TensorInfo& t : file.tensors()) data_start = std::min(data_start, t.data);
  h.update(all.data(), static_cast<size_t>(data_start - all.data()));
  constexpr size_t kSample = 64;
  for (const TensorInfo& t : file.tensors()) {
    const size_t n = std::min(kSample, t.n_bytes);
    h.update(t.data, n);
    h.update(t.data + (t.n_bytes - n) / 2, n);
    h.update(t.data + (t.n_bytes - n), n);
  }
  return h.digest();
}

}  // namespace specdec::gguf
