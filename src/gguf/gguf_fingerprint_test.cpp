#include "gguf/gguf_fingerprint.h"

#include <gtest/gtest.h>

#include <vector>

#include "gguf/gguf_test_util.h"

namespace specdec::gguf {
namespace {

// A file with one 4096-float tensor whose byte `poke` (if any) is changed, and a metadata value.
uint64_t fingerprint_of(testing::TempDir& dir, int poke, const std::string& name = "m") {
  std::vector<uint8_t> bytes(4096 * 4);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
  if (poke >= 0) bytes[static_cast<size_t>(poke)] ^= 0x10;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", name);
  w.add_tensor("blob", {4096}, GgmlType::F32, bytes);
  w.write(dir.file("f.gguf"));
  return content_fingerprint(*GgufFile::open(dir.file("f.gguf")));
}

TEST(GgufFingerprint, FollowsTheHeaderAndTheSampledTensorBytes) {
  testing::TempDir dir;
  const uint64_t base = fingerprint_of(dir, -1);
  EXPECT_EQ(fingerprint_of(dir, -1), base);         // the same content, written again
  EXPECT_NE(fingerprint_of(dir, -1, "n"), base);    // metadata
  EXPECT_NE(fingerprint_of(dir, 0), base);          // the tensor's first bytes
  EXPECT_NE(fingerprint_of(dir, 8192 - 20), base);  // its middle
  EXPECT_NE(fingerprint_of(dir, 16383), base);      // its last byte
  // Outside the samples a change goes unseen (the documented limit).
  EXPECT_EQ(fingerprint_of(dir, 1000), base);
}

}  // namespace
}  // namespace specdec::gguf
