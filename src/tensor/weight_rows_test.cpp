#include "tensor/weight_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "support/random_floats.h"
#include "tensor/cpu_features.h"
#include "tensor/packed_weights.h"
#include "tensor/quantize.h"
#include "tensor/thread_pool.h"

namespace specdec {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes, packed;
  WeightMatrix w;
};

Matrix make_matrix(GgmlType t, int64_t rows, int64_t cols, bool pack) {
  Matrix m;
  const std::vector<float> f = testing::random_floats(static_cast<size_t>(rows * cols), 7);
  m.bytes = quantize_matrix(t, f.data(), rows, cols);
  m.w = WeightMatrix{t, rows, cols, m.bytes.data(), row_bytes(t, cols)};
  if (pack && packed_bytes(m.w) > 0) {
    m.packed.resize(packed_bytes(m.w));
    pack_weights(m.w, m.packed.data());
    m.w.packed = m.packed.data();
  }
  return m;
}

// The product of a view is bitwise the matching rows of the whole matrix's product, for plain
// and packed layouts, on every kernel path, for one and several activation rows; a view that
// pointed at the wrong packed group (or the wrong plain rows) would fail this.
TEST(WeightRows, ViewProductsAreTheWholeMatrixRows) {
  ThreadPool pool(2);
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0,
                            GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F32};
  const int64_t rows = 43, cols = 256;  // 5 full groups of 8 and a 3-row tail
  const std::pair<int64_t, int64_t> ranges[] = {{0, 8}, {8, 24}, {16, 43}, {40, 43}, {0, 43}};
  for (Isa isa : kAllIsas) {
    if (!cpu_supports(isa)) continue;
    const Isa saved = active_isa();
    set_active_isa(isa);
    for (GgmlType t : types) {
      for (bool pack : {false, true}) {
        const Matrix m = make_matrix(t, rows, cols, pack);
        for (int64_t k : {1, 3}) {
          const std::vector<float> x =
              testing::random_floats(static_cast<size_t>(k * cols), 11 + static_cast<uint32_t>(k));
          std::vector<float> whole(static_cast<size_t>(k * rows));
          matmul(m.w, x.data(), k, whole.data(), pool);
          for (auto [b, e] : ranges) {
            const WeightMatrix v = weight_rows(m.w, b, e);
            ASSERT_EQ(v.rows, e - b);
            std::vector<float> part(static_cast<size_t>(k * v.rows), -1.0f);
            matmul(v, x.data(), k, part.data(), pool);
            for (int64_t t0 = 0; t0 < k; ++t0) {
              ASSERT_EQ(std::memcmp(part.data() + t0 * v.rows, whole.data() + t0 * rows + b,
                                    sizeof(float) * static_cast<size_t>(v.rows)),
                        0)
                  << type_name(t) << " packed " << pack << " rows [" << b << ", " << e << ") k "
                  << k << " isa " << static_cast<int>(isa);
            }
          }
        }
      }
    }
    set_active_isa(saved);
  }
}

TEST(WeightRows, RejectsRangesThatWouldSplitAPackedGroup) {
  const Matrix m = make_matrix(GgmlType::Q8_0, 43, 64, true);
  EXPECT_THROW(weight_rows(m.w, 4, 16), Error);   // start inside a group
  EXPECT_THROW(weight_rows(m.w, 8, 20), Error);   // end inside a group, not the last row
  EXPECT_THROW(weight_rows(m.w, 8, 8), Error);    // empty
  EXPECT_THROW(weight_rows(m.w, 40, 48), Error);  // past the end
  EXPECT_THROW(weight_rows(m.w, -8, 8), Error);
  EXPECT_NO_THROW(weight_rows(m.w, 40, 43));
}

}  // namespace
}  // namespace specdec
