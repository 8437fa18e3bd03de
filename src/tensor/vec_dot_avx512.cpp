// AVX-512 VNNI dot kernels for the integer weight formats. Compiled with AVX2/FMA/F16C plus
// AVX-512 F/BW/VL/VNNI; only reached through dot_kernels_avx512vnni() after
// cpu_has_avx512_vnni(). The kernels are dot_kernels_x86.h's, on 256-bit vectors, with VNNI as
// the integer dot step: one vpdpbusd for the 8-bit products (AVX2 needs maddubs + madd) and one
// vpdpwssd for the K-quants' scaled sums (AVX2: madd + add). The integer sums are the same, the
// float operations are the same, so the results are the same bits as the AVX2 path. The float
// formats gain nothing from VNNI and keep their AVX2 kernels.
#include <immintrin.h>

#include "tensor/dot_kernels_x86.h"
#include "tensor/kernel_types.h"

namespace specdec {
namespace {

struct VnniOps {
  static __m256i dot_u8s8(__m256i a, __m256i b) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b);
  }
  static __m256i add_scaled_dot(__m256i acc, __m256i s, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, s, _mm256_maddubs_epi16(a, b));
  }
};

DotKernelTable make_table() {
  DotKernelTable t = dot_kernels_avx2();  // float formats
  t.q4_0 = multi<Legacy<UnpackQ4_0, VnniOps>>;
  t.q4_1 = multi<Legacy<UnpackQ4_1, VnniOps>>;
  t.q5_0 = multi<Legacy<UnpackQ5_0, VnniOps>>;
  t.q5_1 = multi<Legacy<UnpackQ5_1, VnniOps>>;
  t.q8_0 = multi<Legacy<UnpackQ8_0, VnniOps>>;
  t.q4_k = multi<KQuant45<false, VnniOps>>;
  t.q5_k = multi<KQuant45<true, VnniOps>>;
  t.q6_k = multi<KQuant6<VnniOps>>;
  return t;
}

}  // namespace

const DotKernelTable& dot_kernels_avx512vnni() {
  static const DotKernelTable kTable = make_table();
  return kTable;
}

const DotRowsKernelTable& dot_rows_kernels_avx512vnni() {
  static constexpr DotRowsKernelTable kTable = {
      multi_rows<Legacy<UnpackQ4_0, VnniOps>>, multi_rows<Legacy<UnpackQ4_1, VnniOps>>,
      multi_rows<Legacy<UnpackQ5_0, VnniOps>>, multi_rows<Legacy<UnpackQ5_1, VnniOps>>,
      multi_rows<Legacy<UnpackQ8_0, VnniOps>>,
  };
  return kTable;
}

}  // namespace specdec
