// matmul = quantize each activation row once into the weight type's activation format, then
// for each weight row run one kernel call against a tile of activation rows, so that the
// weight row is read from memory once and reused from L1 for all of them. Threads split the
// weight rows into contiguous chunks; no output depends on how rows or tiles are grouped.
#include "tensor/matmul.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "tensor/dequant.h"
#include "tensor/thread_pool.h"
#include "tensor/vec_dot.h"

namespace specdec {
namespace {

// Activation rows per tile: keep the tile within about half of a typical L2 so that it stays
// resident while a thread walks its weight rows.
constexpr size_t kActTileBytes = 256 * 1024;

// Per-calling-thread scratch for quantized activations; grows, never shrinks.
std::vector<uint8_t>& act_scratch() {
  thread_local std::vector<uint8_t> buf;
  return buf;
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t k, float* out, ThreadPool& pool) {
  if (k <= 0 || w.rows <= 0) return;
  const int64_t bs = traits(w.type).block_size;
  if (w.cols <= 0 || w.cols % bs != 0) {
    fail("matmul: ", w.cols, " columns is not a multiple of the ", type_name(w.type),
         " block size ", bs);
  }
  const DotKernel& kern = dot_kernel(w.type, active_isa());

  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t act_stride = static_cast<size_t>(w.cols) * sizeof(float);
  if (kern.quantize != nullptr) {
    act_stride = row_bytes(kern.act_type, w.cols);
    std::vector<uint8_t>& buf = act_scratch();
    const size_t need = act_stride * static_cast<size_t>(k);
    if (buf.size() < need) buf.resize(need);
    uint8_t* dst = buf.data();
    const int64_t cols = w.cols;
    auto quantize_rows = [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        kern.quantize(x + t * cols, dst + static_cast<size_t>(t) * act_stride, cols);
      }
    };
    // Each row is quantized by itself, so splitting rows across threads changes nothing.
    if (k >= 4 && pool.size() > 1) {
      pool.parallel_for(k, quantize_rows);
    } else {
      quantize_rows(0, k);
    }
    act = dst;
  }

  const int64_t tile = std::clamp<int64_t>(static_cast<int64_t>(kActTileBytes / act_stride), 1, k);
  const WeightMatrix wm = w;
  auto rows_fn = [&](int64_t r0, int64_t r1) {
    for (int64_t t0 = 0; t0 < k; t0 += tile) {
      const int64_t nt = std::min(tile, k - t0);
      const uint8_t* xt = act + static_cast<size_t>(t0) * act_stride;
      for (int64_t r = r0; r < r1; ++r) {
        kern.dot(wm.cols, wm.data + static_cast<size_t>(r) * wm.row_stride, xt, act_stride, nt,
                 out + t0 * wm.rows + r, wm.rows);
      }
    }
  };
  pool.parallel_for(w.rows, rows_fn);
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* dst) {
  if (r < 0 || r >= w.rows) fail("dequantize_row: row ", r, " out of range [0, ", w.rows, ")");
  dequantize_row(w.type, w.data + static_cast<size_t>(r) * w.row_stride, dst, w.cols);
}

}  // namespace specdec
