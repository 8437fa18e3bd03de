#include "common/stream_hash.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace specdec {
namespace {

uint64_t hash_in_pieces(const std::vector<uint8_t>& bytes, size_t piece) {
  StreamHash h;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    h.update(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return h.digest();
}

TEST(StreamHash, TheSameForEveryWayOfCuttingTheStream) {
  std::vector<uint8_t> bytes(1000);
  std::iota(bytes.begin(), bytes.end(), uint8_t{7});
  const uint64_t whole = hash_in_pieces(bytes, bytes.size());
  for (size_t piece : {1, 3, 7, 8, 9, 64, 999}) EXPECT_EQ(hash_in_pieces(bytes, piece), whole);
}

TEST(StreamHash, EveryFlippedBitAndEveryLengthChangesIt) {
  std::vector<uint8_t> bytes(40, 0);
  const uint64_t base = hash_in_pieces(bytes, 5);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      bytes[i] ^= static_cast<uint8_t>(1 << bit);
      EXPECT_NE(hash_in_pieces(bytes, 5), base) << "byte " << i << " bit " << bit;
      bytes[i] ^= static_cast<uint8_t>(1 << bit);
    }
  }
  // Zeros of different lengths (a truncated file of zeros) differ too.
  EXPECT_NE(hash_in_pieces(std::vector<uint8_t>(39, 0), 5), base);
  EXPECT_NE(hash_in_pieces(std::vector<uint8_t>(41, 0), 5), base);
  EXPECT_NE(StreamHash().digest(), base);
}

}  // namespace
}  // namespace specdec
