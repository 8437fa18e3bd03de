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

// AMX-INT8 tile multiplies can run here: AVX-512 VNNI as above, CPUID lists AMX-TILE and
// AMX-INT8, the OS enables their register state (XCR0 bits 17 and 18), the Linux kernel grants
// this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM) and a tile multiply run in a
// child process gives the right answer. The last two matter: on one VM here the CPU listed AMX
// while a tile instruction raised SIGILL. Checked once.
bool cpu_has_amx_int8();

// Whether matmul uses the AMX tile kernels (packed_dot_k_amx.cpp) for passes over many rows:
// cpu_has_amx_int8(), unless SPECDEC_AMX=0 (read once) or set_amx_enabled(false) turned them
// off. They give the same bits as the VNNI kernels, so only speed depends on this.
bool amx_enabled();
// Process-wide override for tests and benchmarks; true has no effect where the CPU cannot.
void set_amx_enabled(bool on);

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

// How the one-activation-row (decode) K-quant kernels ask for the weight stream ahead of use:
// 4 KiB ahead into L1, or 8 KiB ahead into L2 only. Which is faster depends on the core: on the
// 2-core AMD EPYC Zen 4 VM the L1 form was tuned (packed_dot_k_x86.h), while on a 2-core Intel
// Xeon (Emerald Rapids) VM the L2 form made a Qwen2.5-Coder 1.5B decode step 6-14 % cheaper
// (docs/benchmarks.md; why was not traced). Only speed depends on it, never a bit of the
// output.
enum class DecodePrefetch { kL1Near, kL2Far };

// The choice for a CPU: `env` (SPECDEC_DECODE_PREFETCH) "l1" or "l2" wins; otherwise L2 on
// Intel, L1 elsewhere. Any other non-empty `env` is reported in `*unknown` (set to true) and
// ignored.
DecodePrefetch choose_decode_prefetch(const char* env, bool intel, bool* unknown = nullptr);

// Whether CPUID names the vendor GenuineIntel.
bool cpu_is_intel();

// choose_decode_prefetch for this CPU and environment, read once (an unknown value is ignored
// with a warning on stderr).
DecodePrefetch decode_prefetch();

// Process-wide override used by tests and benchmarks to compare paths. A path this CPU cannot
// run falls back to the best one it can. Not meant to be changed while matmuls are running.
Isa active_isa();
void set_active_isa(Isa isa);

}  // namespace specdec
