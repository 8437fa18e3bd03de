#include "model/weight_packing.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

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
  store.packed.reset();
  store.packed_size = 0;
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
    const bool fits = want && *want != m->type && m->cols % traits(*want).block_size == 0;
    // With matrix_type_only_where_smaller, a block matrix whose rows are already as narrow stays.
    const bool retype = fits && (head || !options.matrix_type_only_where_smaller ||
                                 row_bytes(*want, m->cols) < row_bytes(m->type, m->cols));
    const bool cut = head && !options.output_ids.empty();
    if (!retype && !cut) return std::nullopt;
    return Conversion{retype ? *want : m->type, cut ? &options.output_ids : nullptr};
  };

  const bool pack = !packing_disabled();
  std::vector<std::optional<Conversion>> conversions;
  std::vector<size_t> offsets;  // each matrix's place in the one allocation for all copies
  size_t total = 0;
  for (const WeightMatrix* m : mats) {
    conversions.push_back(conversion(m));
    offsets.push_back(total);
    const std::optional<Conversion>& cv = conversions.back();
    if (pack) total += packed_bytes(cv ? converted_shape(*m, *cv) : *m);
  }
  // Huge pages for the copies: the kernels stream them once per step, and with 4 KiB pages the
  // hardware prefetchers stop at every page and the TLB misses every 4 KiB. The advice must come
  // before the first touch, so it goes on the fresh, untouched allocation (new[] of this size
  // is a fresh anonymous mapping, and is not zero-filled: every byte is written by packing).
  // Qwen2.5-Coder 1.5B Q4_K_M decode step, 2 threads, 3 interleaved runs each: 75.2-76.4 ms
  // with 4 KiB pages, 56.2-57.6 ms with this (mapped file, SPECDEC_NO_PACK=1: 66.5-67.7 ms).
  store.packed.reset(total > 0 ? new uint8_t[total] : nullptr);
  store.packed_size = total;
  uint8_t* const dst = store.packed.get();
  if (total > 0) advise_huge_pages(dst, total);

  // Matrices are converted and packed on several threads, largest first. Most of a load's time
  // is the first touch of the copies' pages, which the kernel fills one page fault at a time
  // per thread (under a hypervisor each one can also fault on the host). Every byte a thread
  // writes is its own matrix's, so the copies are the same whatever the thread count. What
  // other matrices see of one (its binding, and the file pages on_packed releases, which
  // depend on what the others still read from the file) changes under one lock.
  std::vector<size_t> order(mats.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto bytes_of = [&](size_t i) {
    const size_t next = i + 1 < offsets.size() ? offsets[i + 1] : total;
    return next - offsets[i];
  };
  // (std::sort with the index as tie-break: GCC 12's std::stable_sort frees its buffer in a
  // way ASan reports as an allocation mismatch.)
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return bytes_of(a) != bytes_of(b) ? bytes_of(a) > bytes_of(b) : a < b;
  });
  std::mutex bind;
  auto pack_one = [&](size_t i) {
    WeightMatrix* m = mats[i];
    const std::optional<Conversion>& cv = conversions[i];
    std::vector<uint8_t> rows;
    WeightMatrix t = *m;
    if (cv) {
      rows = convert_rows(*m, *cv);
      t = converted_shape(*m, *cv);
      t.data = rows.data();
    }
    const size_t n = pack ? packed_bytes(t) : 0;
    if (n > 0) {
      pack_weights(t, dst + offsets[i]);
      t.packed = dst + offsets[i];
    }
    const bool rows_read = cv && !(n > 0 && t.rows % kPackRows == 0);
    if (cv && !rows_read) t.data = nullptr;  // every row is read from the packed copy
    const std::lock_guard<std::mutex> lock(bind);
    // Moving the vector (and store.converted growing) keeps its buffer, so t.data stays valid.
    if (rows_read) store.converted.push_back(std::move(rows));
    if (n > 0) {
      // Nothing reads the file's packed rows of m any more (nor any of them, once converted).
      m->packed = t.packed;
      if (on_packed) on_packed(*m);
    }
    *m = t;
  };
  const unsigned hw = std::thread::hardware_concurrency();
  const size_t wanted = options.load_threads > 0 ? static_cast<size_t>(options.load_threads)
                                                 : std::min<size_t>(hw == 0 ? 1 : hw, 8);
  const size_t n_threads = std::max<size_t>(1, std::min(wanted, mats.size()));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  auto worker = [&] {
    try {
      for (size_t k; (k = next.fetch_add(1)) < order.size();) pack_one(order[k]);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(bind);
      if (!error) error = std::current_exception();
      next = order.size();  // the others stop at their next matrix
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < n_threads; ++t) {
    try {
      helpers.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones running (and this one) do the rest
    }
  }
  worker();
  for (std::thread& h : helpers) h.join();
  if (error) std::rethrow_exception(error);
  return total;
}

}  // namespace specdec
