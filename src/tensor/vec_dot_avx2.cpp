// AVX2 kernels (placeholder: scalar until the SIMD kernels land).
#include "tensor/kernel_types.h"

namespace specdec {
const DotKernelTable& dot_kernels_avx2() { return dot_kernels_scalar(); }
}  // namespace specdec
