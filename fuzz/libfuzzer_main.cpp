// The libFuzzer entry point of one fuzz_<name> binary: SPECDEC_FUZZ_ENTRY names the
// fuzz_one_<name> function it forwards to (fuzz/CMakeLists.txt sets it per target).
#include <cstddef>
#include <cstdint>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return specdec::fuzz::SPECDEC_FUZZ_ENTRY(data, size);
}
