#include "model/source_pages.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_impl.h"
#include "tensor/packed_blocks.h"

namespace specdec {
namespace {

bool release_disabled() {
  const char* v = std::getenv("SPECDEC_NO_RELEASE");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

struct ByteRange {
  uintptr_t lo = 0, hi = 0;  // [lo, hi)
};

ByteRange rows_of(const WeightMatrix& m, int64_t first_row, int64_t end_row) {
  const auto base = reinterpret_cast<uintptr_t>(m.data);
  return {base + static_cast<uintptr_t>(first_row) * m.row_stride,
          base + static_cast<uintptr_t>(end_row) * m.row_stride};
}

// The rows matmul computes from the packed copy: its full groups (matmul.cpp's packed_end).
int64_t packed_rows(const WeightMatrix& m) {
  return m.packed != nullptr ? m.rows / kPackRows * kPackRows : 0;
}

std::vector<const WeightMatrix*> matrices(const ModelWeights& w) {
  std::vector<const WeightMatrix*> mats;
  for (const LayerWeights& L : w.layers) {
    for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down})
      mats.push_back(m);
  }
  mats.push_back(&w.output);
  return mats;
}

}  // namespace

size_t release_packed_source(const ModelWeights& w, const WeightMatrix& m,
                             const gguf::GgufFile& file) {
  if (release_disabled() || packed_rows(m) == 0) return 0;
  // Bytes still read from the mapping, widened to whole pages: the release range is cut so as
  // to leave every page they touch.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::vector<ByteRange> keep;
  auto keep_range = [&](ByteRange r) {
    if (r.lo < r.hi) keep.push_back({r.lo / page * page, (r.hi + page - 1) / page * page});
  };
  keep_range(rows_of(w.token_embd, 0, w.token_embd.rows));
  for (const WeightMatrix* other : matrices(w)) {
    keep_range(rows_of(*other, packed_rows(*other), other->rows));
  }

  // Split the packed rows around the kept ranges that overlap them (in practice: none, or all
  // of them when the output is tied to the embedding).
  std::vector<ByteRange> parts{rows_of(m, 0, packed_rows(m))};
  for (const ByteRange& k : keep) {
    std::vector<ByteRange> next;
    for (const ByteRange& p : parts) {
      if (k.hi <= p.lo || k.lo >= p.hi) {
        next.push_back(p);
        continue;
      }
      if (p.lo < k.lo) next.push_back({p.lo, k.lo});
      if (k.hi < p.hi) next.push_back({k.hi, p.hi});
    }
    parts = std::move(next);
  }
  size_t released = 0;
  for (const ByteRange& p : parts) {
    released += file.release_pages(reinterpret_cast<const uint8_t*>(p.lo), p.hi - p.lo);
  }
  return released;
}

}  // namespace specdec
