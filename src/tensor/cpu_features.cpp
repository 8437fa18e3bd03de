#include "tensor/cpu_features.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define SPECDEC_AMX_PROBE 1
#endif

#include "tensor/kernel_types.h"

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

#if defined(SPECDEC_AMX_PROBE)
namespace {

// CPUID leaf 7 EDX: AMX-TILE bit 24, AMX-INT8 bit 25; CPUID leaf 1 ECX bit 27: OSXSAVE.
bool cpuid_lists_amx_int8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || (c & (1u << 27)) == 0) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & (1u << 24)) != 0 && (d & (1u << 25)) != 0;
}

// XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves the tile state.
bool os_enables_tiles() {
  unsigned lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  constexpr unsigned kTiles = (1u << 17) | (1u << 18);
  return (lo & kTiles) == kTiles;
}

// Linux hands out the tile data state per process on request (arch/x86/include/uapi/asm/prctl.h).
bool kernel_grants_tiles() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// amx_tile_probe() in a child process, so that a tile instruction that faults (SIGILL) or
// computes wrongly takes down only the child. The child runs nothing but the probe and _exit.
bool probe_runs_in_child() {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(amx_tile_probe() ? 0 : 1);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace
#endif

bool cpu_has_amx_int8() {
#if defined(SPECDEC_AMX_PROBE)
  static const bool has = cpu_has_avx512_vnni() && cpuid_lists_amx_int8() && os_enables_tiles() &&
                          kernel_grants_tiles() && probe_runs_in_child();
  return has;
#else
  return false;
#endif
}

namespace {

std::atomic<int>& amx_override() {
  static std::atomic<int> v{-1};  // -1: the environment's choice
  return v;
}

bool amx_wanted_by_environment() {
  static const bool wanted = [] {
    const char* env = std::getenv("SPECDEC_AMX");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return wanted;
}

}  // namespace

bool amx_enabled() {
  const int v = amx_override().load(std::memory_order_relaxed);
  const bool want = v < 0 ? amx_wanted_by_environment() : v != 0;
  return want && cpu_has_amx_int8();
}

void set_amx_enabled(bool on) { amx_override().store(on ? 1 : 0, std::memory_order_relaxed); }

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
