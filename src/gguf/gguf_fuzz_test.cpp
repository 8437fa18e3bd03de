// Seeded mutation fuzzing of a small valid file: every mutant either opens (and then every
// tensor's data range is readable) or throws specdec::Error. Under ASan/UBSan this also checks
// that no mutant makes the parser read out of bounds or overflow.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"

namespace specdec::gguf {
namespace {

// Values that tend to hit edge cases when planted over a length, count, dim or offset field.
constexpr uint64_t kInteresting[] = {0,
                                     1,
                                     2,
                                     5,
                                     31,
                                     32,
                                     255,
                                     0x7fffffff,
                                     0x80000000,
                                     0xffffffff,
                                     uint64_t{1} << 32,
                                     uint64_t{1} << 40,
                                     uint64_t{1} << 62,
                                     (uint64_t{1} << 63) - 1,
                                     uint64_t{1} << 63,
                                     ~uint64_t{0} - 31,
                                     ~uint64_t{0}};

void mutate(std::vector<uint8_t>& b, std::mt19937_64& rng) {
  auto pos = [&](size_t width) {
    return std::uniform_int_distribution<size_t>(0, b.size() - width)(rng);
  };
  switch (rng() % 4) {
    case 0:  // flip one bit
      b[pos(1)] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1: {  // overwrite a few random bytes
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) b[pos(1)] = static_cast<uint8_t>(rng());
      break;
    }
    case 2: {  // plant an interesting 64-bit value
      const uint64_t v = kInteresting[rng() % std::size(kInteresting)];
      testing::put_u64(b, pos(8), v);
      break;
    }
    default: {  // plant an interesting 32-bit value
      const uint64_t v = kInteresting[rng() % std::size(kInteresting)];
      testing::put_u32(b, pos(4), static_cast<uint32_t>(v));
      break;
    }
  }
}

TEST(GgufFuzz, RandomMutationsOpenOrThrowError) {
  const std::vector<uint8_t> original = testing::small_writer().to_bytes();
  testing::TempDir dir;
  const std::string path = dir.file("fuzz.gguf");
  std::mt19937_64 rng(20240601);
  unsigned sum = 0;  // keeps the reads of tensor data from being optimized away
  int opened = 0;
  int rejected = 0;
  constexpr int kIterations = 4000;
  for (int i = 0; i < kIterations; ++i) {
    std::vector<uint8_t> b = original;
    const int n_mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < n_mutations; ++m) mutate(b, rng);
    if (rng() % 8 == 0) b.resize(rng() % (b.size() + 1));  // sometimes truncate too
    testing::write_bytes(path, b);
    try {
      auto f = GgufFile::open(path);
      // Touch every byte the reader vouched for; ASan flags any that lie outside the mapping.
      for (const TensorInfo& t : f->tensors()) {
        ASSERT_GT(t.n_bytes, 0u);
        for (size_t k = 0; k < t.n_bytes; ++k) sum += t.data[k];
        EXPECT_GT(t.n_elements(), 0);
      }
      ++opened;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      ++rejected;
    }
  }
  EXPECT_EQ(opened + rejected, kIterations);
  ::testing::Test::RecordProperty("data_checksum", static_cast<int>(sum & 0xffff));
  std::printf("fuzz: %d opened, %d rejected\n", opened, rejected);
  // Both outcomes should be common; otherwise the mutations are not exercising the parser.
  EXPECT_GT(opened, kIterations / 20);
  EXPECT_GT(rejected, kIterations / 4);
}

}  // namespace
}  // namespace specdec::gguf
