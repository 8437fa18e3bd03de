// matmul = quantize each activation row once into the weight type's activation format, then
// for each weight row run one kernel call against a tile of activation rows, so that the
// weight row is read from memory once and reused from L1 for all of them. Threads claim
// contiguous chunks of weight rows; no output depends on how rows or tiles are grouped.
#include "tensor/matmul.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "tensor/dequant.h"
#include "tensor/packed_blocks.h"
#include "tensor/packed_weights.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_dot.h"

namespace specdec {
namespace {

// Activation rows per tile: keep the tile within about half of a typical L2 so that it stays
// resident while a thread walks its weight rows.
constexpr size_t kActTileBytes = 256 * 1024;
// Below this many activation elements, quantizing on the caller is cheaper than a hand-off.
constexpr int64_t kParallelQuantizeElems = 1 << 15;
// Threads claim units of kPackRows weight rows (a packed group, or the same number of plain
// rows), at least this many units per claim: a claim is an atomic compare-exchange on a shared
// line, so a chunk should carry a few microseconds of work even for the narrowest matrices.
constexpr int64_t kMinUnitsPerChunk = 2;

// Per-calling-thread scratch for quantized activations (and their widened copy for the packed
// kernels); grows, never shrinks.
std::vector<uint8_t>& act_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}
std::vector<uint8_t>& widened_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}
std::vector<uint8_t>& tiled_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}

void check_shape(const WeightMatrix& w) {
  const int64_t bs = traits(w.type).block_size;
  if (w.cols <= 0 || w.cols % bs != 0) {
    fail("matmul: ", w.cols, " columns is not a multiple of the ", type_name(w.type),
         " block size ", bs);
  }
}

struct Activations {
  const uint8_t* data;
  size_t stride;  // bytes per row
  // The same rows as PackedActBlocks, for packed matrices (nullptr when none takes part).
  const uint8_t* widened = nullptr;
  size_t widened_stride = 0;
  // Their codes as AMX tiles (tile_activation_rows), where the tile kernels take part.
  const uint8_t* tiled = nullptr;
};

// The k activation rows in the kernel's format: quantized into thread-local scratch, or the
// floats themselves for F32 weights; with `widen`, also in the packed kernels' format. Rows are
// quantized independently, so splitting them over threads changes nothing.
Activations prepare_activations(const DotKernel& kern, int64_t cols, const float* x, int64_t k,
                                bool widen, bool tile, ThreadPool& pool) {
  if (kern.quantize == nullptr) {
    return {reinterpret_cast<const uint8_t*>(x), static_cast<size_t>(cols) * sizeof(float)};
  }
  const size_t stride = row_bytes(kern.act_type, cols);
  std::vector<uint8_t>& buf = act_scratch();
  const size_t need = stride * static_cast<size_t>(k);
  if (buf.size() < need) buf.resize(need);
  uint8_t* dst = buf.data();
  const size_t wstride = widened_row_bytes(kern.act_type, cols);
  uint8_t* wdst = nullptr;
  if (widen) {
    std::vector<uint8_t>& wbuf = widened_scratch();
    if (wbuf.size() < wstride * static_cast<size_t>(k))
      wbuf.resize(wstride * static_cast<size_t>(k));
    wdst = wbuf.data();
  }
  auto quantize_rows = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      uint8_t* row = dst + static_cast<size_t>(t) * stride;
      kern.quantize(x + t * cols, row, cols);
      if (wdst != nullptr) {
        widen_activation_row(kern.act_type, row, wdst + static_cast<size_t>(t) * wstride, cols);
      }
    }
  };
  if (k * cols >= kParallelQuantizeElems && pool.size() > 1) {
    pool.parallel_for(k, quantize_rows);
  } else {
    quantize_rows(0, k);
  }
  const uint8_t* tiled = nullptr;
  if (tile && wdst != nullptr) {
    std::vector<uint8_t>& tbuf = tiled_scratch();
    if (tbuf.size() < tiled_activation_bytes(k, cols)) tbuf.resize(tiled_activation_bytes(k, cols));
    tile_activation_rows(wdst, wstride, k, cols, tbuf.data());
    tiled = tbuf.data();
  }
  return {dst, stride, wdst, wstride, tiled};
}

// Rows [r0, r1) of w against all k activation rows, in tiles of `tile` activation rows. r0 is
// a multiple of kPackRows, so packed groups are never split.
void rows_times_tiles(const DotKernel& kern, const WeightMatrix& w, Activations act, int64_t k,
                      int64_t tile, int64_t r0, int64_t r1, float* out) {
  if (w.packed != nullptr && kern.packed != nullptr) {
    const int64_t packed_end = std::min(r1, w.rows / kPackRows * kPackRows);
    const size_t group_bytes = kPackRows * w.row_stride;
    while (r0 < packed_end) {
      const uint8_t* wg = w.packed + static_cast<size_t>(r0 / kPackRows) * group_bytes;
      // On AMX tiles (the same bits again), 32 weight rows against all k activation rows per
      // call. (Blocking the activation rows so that a block stays in L2 while a thread's weight
      // rows run against it did not help the 8,960-column FFN down projection: 1.2x the VNNI
      // kernels either way at 256 rows, against 1.6-1.8x on 1,536 columns.)
      if (act.tiled != nullptr && r0 + kTileWeightRows <= packed_end) {
        kern.packed_tiles(w.cols, wg, act.widened, act.widened_stride, act.tiled, k, out + r0,
                          w.rows);
        r0 += kTileWeightRows;
        continue;
      }
      // Two groups at once where the kernel has that form, both are in this range, and there
      // are enough activation rows: the 16-row kernels are faster where the multiply-adds
      // bound the pass, but with few rows the pass is bound by memory, and there the 8-row
      // kernels stream better (per type, from packed16_min_rows on: vec_dot.cpp).
      const bool pair = kern.packed16 != nullptr && k >= kern.packed16_min_rows &&
                        r0 + 2 * kPackRows <= packed_end;
      const PackedDotFn fn = pair ? kern.packed16 : kern.packed;
      for (int64_t t0 = 0; t0 < k; t0 += tile) {
        fn(w.cols, wg, act.widened + static_cast<size_t>(t0) * act.widened_stride,
           act.widened_stride, std::min(tile, k - t0), out + t0 * w.rows + r0, w.rows);
      }
      r0 += pair ? 2 * kPackRows : kPackRows;
    }
    if (r0 >= r1) return;
  }
  if (k == 1 && kern.dot_rows != nullptr) {  // matrix-vector: one call for the whole range
    kern.dot_rows(w.cols, w.data + static_cast<size_t>(r0) * w.row_stride, w.row_stride, r1 - r0,
                  act.data, out + r0, 1);
    return;
  }
  for (int64_t t0 = 0; t0 < k; t0 += tile) {
    const int64_t nt = std::min(tile, k - t0);
    const uint8_t* xt = act.data + static_cast<size_t>(t0) * act.stride;
    for (int64_t r = r0; r < r1; ++r) {
      kern.dot(w.cols, w.data + static_cast<size_t>(r) * w.row_stride, xt, act.stride, nt,
               out + t0 * w.rows + r, w.rows);
    }
  }
}

int64_t units(const WeightMatrix& w) {
  return (std::max<int64_t>(0, w.rows) + kPackRows - 1) / kPackRows;
}

int64_t tile_rows(Activations act, int64_t k) {
  return std::clamp<int64_t>(static_cast<int64_t>(kActTileBytes / act.stride), 1, k);
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t k, float* out, ThreadPool& pool) {
  const MatmulTarget t{&w, out};
  matmul_group(std::span<const MatmulTarget>(&t, 1), x, k, pool);
}

void matmul_group(std::span<const MatmulTarget> targets, const float* x, int64_t k,
                  ThreadPool& pool) {
  if (k <= 0 || targets.empty()) return;
  const WeightMatrix& w0 = *targets[0].w;
  int64_t total_units = 0;
  bool any_packed = false;
  for (const MatmulTarget& t : targets) {
    check_shape(*t.w);
    if (t.w->type != w0.type || t.w->cols != w0.cols) {
      fail("matmul_group: all matrices must share type and column count (", type_name(w0.type),
           " x ", w0.cols, " vs ", type_name(t.w->type), " x ", t.w->cols, ")");
    }
    total_units += units(*t.w);
    any_packed = any_packed || t.w->packed != nullptr;
  }
  if (total_units == 0) return;
  const DotKernel& kern = dot_kernel(w0.type, active_isa());
  const bool widen = any_packed && kern.packed != nullptr;
  // The AMX tile kernels take all k rows in one call (their per-call work, folding the weights,
  // is shared by all of them).
  const bool tiles =
      widen && kern.packed_tiles != nullptr && k >= kern.packed_tiles_min_rows && amx_enabled();
  const Activations act = prepare_activations(kern, w0.cols, x, k, widen, tiles, pool);
  const int64_t tile = tile_rows(act, k);

  // Global unit u runs over the targets' units back to back; a chunk may straddle targets.
  auto units_fn = [&](int64_t u0, int64_t u1) {
    int64_t base = 0;
    for (const MatmulTarget& t : targets) {
      const int64_t n = units(*t.w);
      const int64_t a = std::max<int64_t>(u0 - base, 0), b = std::min(u1 - base, n);
      if (a < b) {
        rows_times_tiles(kern, *t.w, act, k, tile, a * kPackRows,
                         std::min(b * kPackRows, t.w->rows), t.out);
      }
      base += n;
      if (base >= u1) break;
    }
  };
  // A tile call takes 32 weight rows, so a chunk of the tile kernels' passes holds at least 4
  // units (chunks start at multiples of their length, so they stay aligned to 32 rows).
  const int64_t min_units = tiles ? kTileWeightRows / kPackRows : kMinUnitsPerChunk;
  pool.parallel_for(total_units, units_fn, std::max(min_units, kMinUnitsPerChunk));
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* dst) {
  if (r < 0 || r >= w.rows) fail("dequantize_row: row ", r, " out of range [0, ", w.rows, ")");
  dequantize_row(w.type, w.data + static_cast<size_t>(r) * w.row_stride, dst, w.cols);
}

}  // namespace specdec
