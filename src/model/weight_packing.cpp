#include "model/weight_packing.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/error.h"
#include "model/model_impl.h"
#include "tensor/dequant.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_weights.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

bool packing_disabled() {
  const char* v = std::getenv("SPECDEC_NO_PACK");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// MADV_HUGEPAGE on the whole 2 MiB pages inside [p, p + n); only advice, so failure is ignored.
void advise_huge_pages(uint8_t* p, size_t n) {
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

void check_packable(std::optional<GgmlType> type) {
  if (type && !packable(*type)) {
    fail("cannot requantize weights to ", type_name(*type), ": the packed kernels do not read it");
  }
}

// What a matrix becomes: its rows (all, or `rows`) in `type`.
struct Conversion {
  GgmlType type;
  const std::vector<int32_t>* rows = nullptr;  // null: every row
};

// The matrix m once converted (its data still to be filled in).
WeightMatrix converted_shape(const WeightMatrix& m, const Conversion& cv) {
  WeightMatrix t = m;
  t.type = cv.type;
  t.rows = cv.rows != nullptr ? static_cast<int64_t>(cv.rows->size()) : m.rows;
  t.row_stride = row_bytes(cv.type, m.cols);
  t.data = nullptr;
  t.packed = nullptr;
  return t;
}

// m's selected rows in the conversion's type: copied when the type stays, else decoded and
// quantized again (so the error is that of quantizing the decoded weights once more).
std::vector<uint8_t> convert_rows(const WeightMatrix& m, const Conversion& cv) {
  const WeightMatrix t = converted_shape(m, cv);
  std::vector<uint8_t> out(t.row_stride * static_cast<size_t>(t.rows));
  std::vector<float> row(static_cast<size_t>(m.cols));
  for (int64_t i = 0; i < t.rows; ++i) {
    const int64_t r = cv.rows != nullptr ? (*cv.rows)[static_cast<size_t>(i)] : i;
    uint8_t* dst = out.data() + static_cast<size_t>(i) * t.row_stride;
    if (cv.type == m.type) {
      std::memcpy(dst, m.data + static_cast<size_t>(r) * m.row_stride, m.row_stride);
    } else {
      dequantize_row(m, r, row.data());
      quantize_row(cv.type, row.data(), dst, m.cols);
    }
  }
  return out;
}

}  // namespace

size_t pack_model_weights(ModelWeights& w, PackedStore& store, const ModelLoadOptions& options,
                          const std::function<void(const WeightMatrix&)>& on_packed) {
  store.packed.clear();
  store.converted.clear();
  check_packable(options.matrix_type);
  check_packable(options.output_type);
  std::vector<WeightMatrix*> mats;
  for (LayerWeights& L : w.layers) {
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down}) {
      mats.push_back(m);
    }
  }
  mats.push_back(&w.output);  // token_embd is only read row by row, from the file

  // How each matrix is converted, if at all.
  auto conversion = [&](const WeightMatrix* m) -> std::optional<Conversion> {
    const bool head = m == &w.output;
    const std::optional<GgmlType> want = head ? options.output_type : options.matrix_type;
    const bool retype = want && *want != m->type && m->cols % traits(*want).block_size == 0;
    const bool cut = head && !options.output_ids.empty();
    if (!retype && !cut) return std::nullopt;
    return Conversion{retype ? *want : m->type, cut ? &options.output_ids : nullptr};
  };

  const bool pack = !packing_disabled();
  // One allocation for all copies, so the pointers stay valid.
  size_t total = 0;
  for (const WeightMatrix* m : mats) {
    const std::optional<Conversion> cv = conversion(m);
    if (pack) total += packed_bytes(cv ? converted_shape(*m, *cv) : *m);
  }
  // Huge pages for the copies: the kernels stream them once per step, and with 4 KiB pages the
  // hardware prefetchers stop at every page and the TLB misses every 4 KiB. The advice must come
  // before the first touch (resize zero-fills), so it goes on the reserved range. Qwen2.5-Coder
  // 1.5B Q4_K_M decode step, 2 threads, 3 interleaved runs each: 75.2-76.4 ms with 4 KiB pages,
  // 56.2-57.6 ms with this (mapped file, SPECDEC_NO_PACK=1: 66.5-67.7 ms).
  std::vector<uint8_t>& dst = store.packed;
  dst.reserve(total);
  advise_huge_pages(dst.data(), total);
  dst.resize(total);
  size_t offset = 0;
  for (WeightMatrix* m : mats) {
    const std::optional<Conversion> cv = conversion(m);
    std::vector<uint8_t> rows;
    WeightMatrix t = *m;
    if (cv) {
      rows = convert_rows(*m, *cv);
      t = converted_shape(*m, *cv);
      t.data = rows.data();
    }
    const size_t n = pack ? packed_bytes(t) : 0;
    if (n > 0) {
      pack_weights(t, dst.data() + offset);
      t.packed = dst.data() + offset;
      offset += n;
      // Nothing reads the file's packed rows of m any more (nor any of them, once converted).
      m->packed = t.packed;
      if (on_packed) on_packed(*m);
    }
    if (!cv) {
      *m = t;
      continue;
    }
    if (n > 0 && t.rows % kPackRows == 0) {
      t.data = nullptr;  // every row is read from the packed copy
    } else {
      store.converted.push_back(std::move(rows));
      t.data = store.converted.back().data();
    }
    *m = t;
  }
  return total;
}

}  // namespace specdec
