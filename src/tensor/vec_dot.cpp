// Which activation format and which kernels each weight type uses. The pairing follows
// llama.cpp (our logits are checked against it): Q4_0/Q5_0/Q8_0 x Q8_0, Q4_1/Q5_1 x Q8_1,
// K-quants x Q8_K, F16 x F16, BF16 x BF16, F32 x F32.
#include "tensor/vec_dot.h"

#include <array>

#include "common/error.h"
#include "tensor/act_quant.h"

namespace specdec {
namespace {

struct Tables {
  // Indexed by the raw GgmlType id; missing entries have dot == nullptr.
  std::array<DotKernel, 31> by_type[2];
};

Tables build_tables() {
  Tables t{};
  for (int path = 0; path < 2; ++path) {
    const bool avx2 = path == 1;
    const DotKernelTable& k = avx2 ? dot_kernels_avx2() : dot_kernels_scalar();
    const ActQuantFn q8_0 = avx2 ? quantize_act_q8_0_avx2 : quantize_act_q8_0_scalar;
    const ActQuantFn q8_1 = avx2 ? quantize_act_q8_1_avx2 : quantize_act_q8_1_scalar;
    const ActQuantFn q8_k = avx2 ? quantize_act_q8_k_avx2 : quantize_act_q8_k_scalar;
    const ActQuantFn f16 = avx2 ? quantize_act_f16_avx2 : quantize_act_f16_scalar;
    auto& by = t.by_type[path];
    auto set = [&](GgmlType w, GgmlType a, ActQuantFn q, DotFn d) {
      by[static_cast<size_t>(w)] = DotKernel{a, q, d};
    };
    set(GgmlType::F32, GgmlType::F32, nullptr, k.f32);
    set(GgmlType::F16, GgmlType::F16, f16, k.f16);
    set(GgmlType::BF16, GgmlType::BF16, quantize_act_bf16_scalar, k.bf16);
    set(GgmlType::Q4_0, GgmlType::Q8_0, q8_0, k.q4_0);
    set(GgmlType::Q5_0, GgmlType::Q8_0, q8_0, k.q5_0);
    set(GgmlType::Q8_0, GgmlType::Q8_0, q8_0, k.q8_0);
    set(GgmlType::Q4_1, GgmlType::Q8_1, q8_1, k.q4_1);
    set(GgmlType::Q5_1, GgmlType::Q8_1, q8_1, k.q5_1);
    if (avx2) {
      const DotRowsKernelTable& r = dot_rows_kernels_avx2();
      by[static_cast<size_t>(GgmlType::Q4_0)].dot_rows = r.q4_0;
      by[static_cast<size_t>(GgmlType::Q4_1)].dot_rows = r.q4_1;
      by[static_cast<size_t>(GgmlType::Q5_0)].dot_rows = r.q5_0;
      by[static_cast<size_t>(GgmlType::Q5_1)].dot_rows = r.q5_1;
      by[static_cast<size_t>(GgmlType::Q8_0)].dot_rows = r.q8_0;
    }
    const PackedKernelTable& pk = avx2 ? packed_kernels_avx2() : packed_kernels_scalar();
    by[static_cast<size_t>(GgmlType::Q4_0)].packed = pk.q4_0;
    by[static_cast<size_t>(GgmlType::Q4_1)].packed = pk.q4_1;
    by[static_cast<size_t>(GgmlType::Q5_0)].packed = pk.q5_0;
    by[static_cast<size_t>(GgmlType::Q8_0)].packed = pk.q8_0;
    set(GgmlType::Q4_K, GgmlType::Q8_K, q8_k, k.q4_k);
    set(GgmlType::Q5_K, GgmlType::Q8_K, q8_k, k.q5_k);
    set(GgmlType::Q6_K, GgmlType::Q8_K, q8_k, k.q6_k);
  }
  return t;
}

}  // namespace

const DotKernel& dot_kernel(GgmlType weight, Isa isa) {
  static const Tables tables = build_tables();
  const int path = (isa == Isa::kAvx2 && cpu_has_avx2()) ? 1 : 0;
  const auto id = static_cast<size_t>(weight);
  if (id >= tables.by_type[path].size() || tables.by_type[path][id].dot == nullptr) {
    fail("matmul: unsupported weight type ", type_name(weight));
  }
  return tables.by_type[path][id];
}

}  // namespace specdec
