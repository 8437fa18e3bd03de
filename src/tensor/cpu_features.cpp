#include "tensor/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace specdec {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }();
  return has;
#else
  return false;
#endif
}

Isa default_isa() {
  static const Isa isa = [] {
    const char* force = std::getenv("SPECDEC_FORCE_SCALAR");
    if (force != nullptr && *force != '\0' && std::strcmp(force, "0") != 0) return Isa::kScalar;
    return cpu_has_avx2() ? Isa::kAvx2 : Isa::kScalar;
  }();
  return isa;
}

namespace {
std::atomic<int>& isa_override() {
  static std::atomic<int> v{-1};  // -1: use default_isa()
  return v;
}
}  // namespace

Isa active_isa() {
  const int v = isa_override().load(std::memory_order_relaxed);
  return v < 0 ? default_isa() : static_cast<Isa>(v);
}

void set_active_isa(Isa isa) {
  if (isa == Isa::kAvx2 && !cpu_has_avx2()) isa = Isa::kScalar;
  isa_override().store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace specdec
