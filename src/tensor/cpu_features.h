// Run-time instruction-set selection. Kernels in *_avx2.cpp files are compiled with
// -mavx2 -mfma -mf16c and must only be called when cpu_has_avx2() is true.
#pragma once

namespace specdec {

enum class Isa { kScalar, kAvx2 };

// AVX2 + FMA + F16C are all available on this CPU.
bool cpu_has_avx2();

// The path matmul uses: kAvx2 when the CPU has it, unless SPECDEC_FORCE_SCALAR is set to a
// value other than "0" in the environment (read once).
Isa default_isa();

// Process-wide override used by tests and benchmarks to compare paths. Setting kAvx2 on a CPU
// without it falls back to kScalar. Not meant to be changed while matmuls are running.
Isa active_isa();
void set_active_isa(Isa isa);

}  // namespace specdec
