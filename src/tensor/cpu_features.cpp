#include "tensor/cpu_features.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

namespace specdec {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
#if defined(__clang__)
    // clang before 16 rejects "f16c" in __builtin_cpu_supports (the fuzz build, docs/fuzzing.md,
    // uses clang 14), so read the same CPUID bit (leaf 1, ECX bit 29) directly.
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
#else
    const bool f16c = __builtin_cpu_supports("f16c");
#endif
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports reports the CPUID bits, and GCC's implementation also requires the
  // OS to save the opmask and zmm registers (XCR0) before it reports any AVX-512 feature.
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return cpu_has_avx2();
    case Isa::kAvx512Vnni:
      return cpu_has_avx512_vnni();
  }
  return false;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

Isa best_supported(Isa cap) {
  for (int i = static_cast<int>(cap); i > 0; --i) {
    if (cpu_supports(static_cast<Isa>(i))) return static_cast<Isa>(i);
  }
  return Isa::kScalar;
}

DecodePrefetch choose_decode_prefetch(const char* env, bool intel, bool* unknown) {
  if (env != nullptr && *env != '\0') {
    if (std::strcmp(env, "l1") == 0) return DecodePrefetch::kL1Near;
    if (std::strcmp(env, "l2") == 0) return DecodePrefetch::kL2Far;
    if (unknown != nullptr) *unknown = true;
  }
  return intel ? DecodePrefetch::kL2Far : DecodePrefetch::kL1Near;
}

bool cpu_is_intel() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  return intel;
#else
  return false;
#endif
}

DecodePrefetch decode_prefetch() {
  static const DecodePrefetch choice = [] {
    const char* env = std::getenv("SPECDEC_DECODE_PREFETCH");
    bool unknown = false;
    const DecodePrefetch c = choose_decode_prefetch(env, cpu_is_intel(), &unknown);
    if (unknown) {
      std::fprintf(stderr, "specdec: ignoring SPECDEC_DECODE_PREFETCH=%s (expected l1 or l2)\n",
                   env);
    }
    return c;
  }();
  return choice;
}

namespace {

std::atomic<int>& isa_override() {
  static std::atomic<int> v{-1};  // -1: use default_isa()
  return v;
}

}  // namespace

Isa default_isa() {
  static const Isa isa = [] {
    const char* force = std::getenv("SPECDEC_FORCE_SCALAR");
    if (force != nullptr && *force != '\0' && std::strcmp(force, "0") != 0) return Isa::kScalar;
    Isa cap = Isa::kAvx512Vnni;
    if (const char* want = std::getenv("SPECDEC_ISA"); want != nullptr && *want != '\0') {
      bool known = false;
      for (Isa i : kAllIsas) {
        if (isa_name(i) == want) {
          cap = i;
          known = true;
        }
      }
      if (!known) {
        std::fprintf(stderr,
                     "specdec: ignoring SPECDEC_ISA=%s (expected scalar, avx2 or avx512vnni)\n",
                     want);
      }
    }
    return best_supported(cap);
  }();
  return isa;
}

Isa active_isa() {
  const int v = isa_override().load(std::memory_order_relaxed);
  return v < 0 ? default_isa() : static_cast<Isa>(v);
}

void set_active_isa(Isa isa) {
  isa_override().store(static_cast<int>(best_supported(isa)), std::memory_order_relaxed);
}

}  // namespace specdec
