// Run-time instruction-set selection. Kernels in *_avx2.cpp files are compiled with
// -mavx2 -mfma -mf16c and must only be called when cpu_has_avx2() is true; kernels in
// *_avx512.cpp files add AVX-512 F/BW/VL/VNNI and must only be called when
// cpu_has_avx512_vnni() is true.
#pragma once

#include <string_view>

namespace specdec {

// Ordered: each path includes the one before it (the AVX-512 VNNI path runs AVX2 code wherever
// it has no kernel of its own).
enum class Isa { kScalar, kAvx2, kAvx512Vnni };
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512Vnni};  // in that order

// AVX2 + FMA + F16C are all available on this CPU.
bool cpu_has_avx2();
// AVX2 as above plus AVX-512 F, BW, VL and VNNI (and the OS saves the zmm state).
bool cpu_has_avx512_vnni();

// Whether code for `isa` can run here.
bool cpu_supports(Isa isa);

// The best path this CPU runs at or below `cap` (kScalar at worst).
Isa best_supported(Isa cap);

// Whether a path runs the AVX2 float primitives (every path but the scalar one).
inline bool uses_avx2(Isa isa) { return isa != Isa::kScalar; }

// "scalar", "avx2", "avx512vnni".
std::string_view isa_name(Isa isa);

// The path matmul uses: the best one this CPU supports, capped by the environment (read once):
// SPECDEC_ISA=scalar|avx2|avx512vnni caps it at that path, and SPECDEC_FORCE_SCALAR set to a
// value other than "0" means scalar. An unknown SPECDEC_ISA value is ignored with a warning on
// stderr.
Isa default_isa();

// Process-wide override used by tests and benchmarks to compare paths. A path this CPU cannot
// run falls back to the best one it can. Not meant to be changed while matmuls are running.
Isa active_isa();
void set_active_isa(Isa isa);

}  // namespace specdec
