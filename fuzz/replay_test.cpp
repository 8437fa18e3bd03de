// Replays every seed (fuzz/corpus/<target>/) and every saved crash input
// (fuzz/regressions/<target>/) through the same fuzz_one_<target> function the libFuzzer
// binaries run, so the normal build compiles the fuzz entry points and keeps each fixed crash
// fixed. An input that breaks an invariant aborts the test binary (FUZZ_CHECK), and under the
// ASan+UBSan pass of scripts/test.sh a memory error fails it too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "fuzz_targets.h"

namespace specdec::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs(const std::string& kind, std::string_view target) {
  const fs::path dir = fs::path(SPECDEC_FUZZ_DIR) / kind / std::string(target);
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    // README.md and .gitkeep describe a folder; every other regular file is an input.
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name != "README.md" && !name.starts_with(".")) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t replay(const std::string& kind, const FuzzTarget& t) {
  const std::vector<fs::path> files = inputs(kind, t.name);
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    std::ifstream in(p, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    EXPECT_EQ(t.run(bytes.data(), bytes.size()), 0);
  }
  return files.size();
}

}  // namespace

// gtest prints a parameter with this (found by argument-dependent lookup).
void PrintTo(const FuzzTarget& t, std::ostream* os) { *os << t.name; }

namespace {

class FuzzReplay : public ::testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzReplay, SeedCorpus) {
  // Every target ships seeds: an empty corpus would mean the folder moved.
  EXPECT_GT(replay("corpus", GetParam()), 0u);
}

TEST_P(FuzzReplay, Regressions) { replay("regressions", GetParam()); }

TEST_P(FuzzReplay, EmptyAndTinyInputs) {
  const uint8_t bytes[] = {0, 1, 0xff, '{', '}', 0};
  for (size_t n = 0; n <= sizeof bytes; ++n) EXPECT_EQ(GetParam().run(bytes, n), 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(kFuzzTargets),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace specdec::fuzz
