// Hostile and broken files: each must fail in open() with a specdec::Error whose one-line
// message starts with the path and names the problem; none may crash or over-allocate.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace specdec::gguf {
namespace {

using testing::expect_open_error;
using testing::find_bytes;
using testing::pattern;
using testing::put_u32;
using testing::put_u64;
using testing::small_writer;

constexpr uint64_t kHuge = uint64_t{1} << 63;

std::vector<uint8_t> small_bytes() { return small_writer().to_bytes(); }

// Field positions inside small_writer()'s tensor infos: after the name come n_dims (u32),
// the dims (u64 each), the type (u32) and the offset (u64).
struct InfoFields {
  size_t n_dims, dim0, type, offset;
};
InfoFields norm_fields(const std::vector<uint8_t>& b) {  // "norm.weight", 1 dim
  const size_t n = find_bytes(b, "norm.weight") + 11;
  return {n, n + 4, n + 12, n + 16};
}
InfoFields tok_fields(const std::vector<uint8_t>& b) {  // "tok.weight", 2 dims
  const size_t n = find_bytes(b, "tok.weight") + 10;
  return {n, n + 4, n + 20, n + 24};
}

TEST(GgufHostile, SmallFileIsValid) {
  testing::TempDir dir;
  small_writer().write(dir.file("ok.gguf"));
  auto f = GgufFile::open(dir.file("ok.gguf"));
  EXPECT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensor("norm.weight").offset, 160u);
}

TEST(GgufHostile, WrongMagic) {
  auto b = small_bytes();
  b[0] = 'X';
  expect_open_error(b, "not a GGUF file: bad magic 'XGUF'");
}

TEST(GgufHostile, Version1Unsupported) {
  auto b = small_bytes();
  put_u32(b, 4, 1);
  expect_open_error(b, "unsupported GGUF version 1");
}

TEST(GgufHostile, FutureVersionUnsupported) {
  auto b = small_bytes();
  put_u32(b, 4, 4);
  expect_open_error(b, "unsupported GGUF version 4");
}

TEST(GgufHostile, BigEndianVersion) {
  auto b = small_bytes();
  put_u32(b, 4, 0x03000000);
  expect_open_error(b, "only little-endian GGUF files are supported");
}

TEST(GgufHostile, EmptyFile) { expect_open_error({}, "empty file"); }

TEST(GgufHostile, HeaderOnlyMagic) {
  expect_open_error({'G', 'G', 'U', 'F'}, "truncated file: header needs 4 bytes at offset 4");
}

TEST(GgufHostile, MissingFile) {
  testing::TempDir dir;
  const std::string path = dir.file("nope.gguf");
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot open: No such file or directory");
  }
}

TEST(GgufHostile, DirectoryInsteadOfFile) {
  testing::TempDir dir;
  try {
    GgufFile::open(dir.path().string());
    ADD_FAILURE() << "opened a directory";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir.path().string() + ": not a regular file");
  }
}

// Every proper prefix that cuts into the header, metadata, tensor infos or tensor data must be
// refused; a cut inside the trailing alignment padding may still be a complete file.
TEST(GgufHostile, TruncatedAtEveryLength) {
  const auto full = small_bytes();
  const size_t data_end = testing::small_data_end(full);
  ASSERT_LE(data_end, full.size());
  testing::TempDir dir;
  const std::string path = dir.file("cut.gguf");
  for (size_t cut = 0; cut < full.size(); ++cut) {
    testing::write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + cut));
    try {
      auto f = GgufFile::open(path);
      EXPECT_GE(cut, data_end) << "a file cut to " << cut << " bytes opened";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    }
  }
}

TEST(GgufHostile, TruncatedMessageNamesWhatAndWhere) {
  auto b = small_bytes();
  const size_t at = find_bytes(b, "tok.weight") + 10 + 4;  // first dim of tensor info 0
  b.resize(at + 3);
  expect_open_error(b, "truncated file: tensor info 0 ('tok.weight') needs 8 bytes at offset " +
                           std::to_string(at) + ", file has " + std::to_string(at + 3));
}

TEST(GgufHostile, AbsurdKeyLength) {
  auto b = small_bytes();
  put_u64(b, 24, kHuge);  // length of the first key
  expect_open_error(b, "metadata key 0: string length 9223372036854775808 at offset 24 exceeds");
}

TEST(GgufHostile, AbsurdStringValueLength) {
  auto b = small_bytes();
  put_u64(b, find_bytes(b, "general.architecture") + 20 + 4, ~uint64_t{0});
  expect_open_error(b, "metadata 'general.architecture': string length 18446744073709551615");
}

TEST(GgufHostile, AbsurdStringInsideArray) {
  auto b = small_bytes();
  put_u64(b, find_bytes(b, "bc") - 8, kHuge);  // second token's length
  expect_open_error(b, "metadata 'tokenizer.ggml.tokens': string length");
}

TEST(GgufHostile, AbsurdArrayLength) {
  auto b = small_bytes();
  put_u64(b, find_bytes(b, "tokenizer.ggml.tokens") + 21 + 4 + 4, uint64_t{1} << 40);
  expect_open_error(b, "metadata 'tokenizer.ggml.tokens': array length 1099511627776");
}

TEST(GgufHostile, AbsurdNumericArrayLength) {
  auto b = small_bytes();
  put_u64(b, find_bytes(b, "tokenizer.ggml.token_type") + 25 + 4 + 4, kHuge);
  expect_open_error(b, "array length 9223372036854775808");
}

TEST(GgufHostile, AbsurdTensorCount) {
  auto b = small_bytes();
  put_u64(b, 8, uint64_t{1} << 40);
  expect_open_error(b, "tensor count 1099511627776 is impossible");
}

TEST(GgufHostile, AbsurdKeyCount) {
  auto b = small_bytes();
  put_u64(b, 16, ~uint64_t{0});
  expect_open_error(b, "metadata key count 18446744073709551615 is impossible");
}

TEST(GgufHostile, TensorCountLargerThanInfos) {
  auto b = small_bytes();
  put_u64(b, 8, 5);      // plausible for the file size, but the infos run into the data
  testing::TempDir dir;  // whatever the data bytes decode to, the result is an Error
  testing::write_bytes(dir.file("x.gguf"), b);
  EXPECT_THROW(GgufFile::open(dir.file("x.gguf")), Error);
}

TEST(GgufHostile, ZeroDim) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).dim0, 0);
  expect_open_error(b, "tensor 'norm.weight' dimension 0 is 0");
}

TEST(GgufHostile, NegativeDim) {
  auto b = small_bytes();
  put_u64(b, tok_fields(b).dim0 + 8, ~uint64_t{0});  // -1 as int64
  expect_open_error(b, "tensor 'tok.weight' dimension 1 is 18446744073709551615, which does not");
}

TEST(GgufHostile, ElementCountOverflow) {
  auto b = small_bytes();
  put_u64(b, tok_fields(b).dim0 + 8, uint64_t{1} << 62);  // 64 * 2^62 > INT64_MAX
  expect_open_error(b, "tensor 'tok.weight' element count overflows int64");
}

TEST(GgufHostile, ByteSizeOverflow) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).dim0, uint64_t{1} << 62);  // F32: 2^64 bytes
  expect_open_error(b, "tensor 'norm.weight' byte size overflows");
}

TEST(GgufHostile, HugeDimDataOutOfBounds) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).dim0, uint64_t{1} << 40);
  expect_open_error(b, "tensor 'norm.weight' data (4398046511104 bytes");
}

TEST(GgufHostile, ZeroDims) {
  auto b = small_bytes();
  put_u32(b, norm_fields(b).n_dims, 0);
  expect_open_error(b, "tensor 'norm.weight' has 0 dimensions; expected 1 to 4");
}

TEST(GgufHostile, FiveDims) {
  auto b = small_bytes();
  put_u32(b, norm_fields(b).n_dims, 5);
  expect_open_error(b, "tensor 'norm.weight' has 5 dimensions; expected 1 to 4");
}

TEST(GgufHostile, UnknownTypeId) {
  auto b = small_bytes();
  put_u32(b, norm_fields(b).type, 99);
  expect_open_error(b, "tensor 'norm.weight' has unknown type id 99");
}

TEST(GgufHostile, UnsupportedType) {
  GgufWriter w;
  w.add_tensor("blk.0.ffn_down.weight", {256, 2}, GgmlType::Q2_K, pattern(2 * 84));
  expect_open_error(w.to_bytes(),
                    "tensor 'blk.0.ffn_down.weight' has unsupported type Q2_K (type id 10)");
}

TEST(GgufHostile, RowLengthNotBlockMultiple) {
  auto b = small_bytes();
  put_u64(b, tok_fields(b).dim0, 48);
  expect_open_error(b,
                    "tensor 'tok.weight' row length 48 is not a multiple of the Q8_0 block "
                    "size 32");
}

TEST(GgufHostile, MisalignedOffset) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).offset, 164);
  expect_open_error(b, "tensor 'norm.weight' offset 164 is not a multiple of the alignment 32");
}

TEST(GgufHostile, DataOutOfBounds) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).offset, 1 << 20);
  expect_open_error(b, "tensor 'norm.weight' data (32 bytes at data offset 1048576");
}

TEST(GgufHostile, DataOffsetWrapsAround) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).offset, ~uint64_t{31});  // aligned, and start + offset wraps
  expect_open_error(b, "is outside the file");
}

TEST(GgufHostile, DataEndsJustPastFile) {
  auto b = small_bytes();
  b.resize(testing::small_data_end(b) - 1);
  expect_open_error(b, "tensor 'norm.weight' data (32 bytes at data offset 160");
}

TEST(GgufHostile, OverlappingTensors) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).offset, 128);  // tok.weight occupies [0, 136)
  expect_open_error(b,
                    "tensors 'tok.weight' (data offset 0, 136 bytes) and 'norm.weight' "
                    "(data offset 128) overlap");
}

TEST(GgufHostile, SameOffsetOverlaps) {
  auto b = small_bytes();
  put_u64(b, norm_fields(b).offset, 0);
  expect_open_error(b, "overlap");
}

TEST(GgufHostile, DuplicateTensorNames) {
  GgufWriter w;
  w.add_tensor("t.a", {1}, GgmlType::F32, pattern(4));
  w.add_tensor("t.b", {1}, GgmlType::F32, pattern(4));
  auto b = w.to_bytes();
  b[find_bytes(b, "t.b") + 2] = 'a';
  expect_open_error(b, "duplicate tensor name 't.a'");
}

TEST(GgufHostile, DuplicateKeys) {
  GgufWriter w;
  w.set_u32("k.a", 1);
  w.set_string("k.b", "x");
  auto b = w.to_bytes();
  b[find_bytes(b, "k.b") + 2] = 'a';
  expect_open_error(b, "duplicate metadata key 'k.a'");
}

TEST(GgufHostile, AlignmentNotPowerOfTwo) {
  auto w = small_writer();
  w.set_u32("general.alignment", 48);
  expect_open_error(w.to_bytes(), "general.alignment must be a nonzero power of two, got 48");
}

TEST(GgufHostile, AlignmentZero) {
  auto w = small_writer();
  w.set_u32("general.alignment", 0);
  expect_open_error(w.to_bytes(), "general.alignment must be a nonzero power of two, got 0");
}

TEST(GgufHostile, AlignmentNegative) {
  auto w = small_writer();
  w.set_i32("general.alignment", -32);
  expect_open_error(w.to_bytes(), "general.alignment must be a nonzero power of two, got -32");
}

TEST(GgufHostile, AlignmentWrongType) {
  auto w = small_writer();
  w.set_string("general.alignment", "32");
  expect_open_error(w.to_bytes(), "general.alignment has type STRING, expected an unsigned");
}

TEST(GgufHostile, AlignmentPastEndOfFile) {
  GgufWriter w;
  w.set_u32("general.alignment", 1u << 31);  // key only; the layout still uses 32
  w.add_tensor("t", {1}, GgmlType::F32, pattern(4));
  expect_open_error(w.to_bytes(), "data section starts at offset 2147483648, past the end");
}

TEST(GgufHostile, UnknownValueType) {
  auto b = small_bytes();
  put_u32(b, find_bytes(b, "llama.block_count") + 17, 13);
  expect_open_error(b, "metadata 'llama.block_count' has unknown value type 13");
}

TEST(GgufHostile, UnknownArrayElementType) {
  auto b = small_bytes();
  put_u32(b, find_bytes(b, "tokenizer.ggml.token_type") + 25 + 4, 77);
  expect_open_error(b, "array has unknown element type 77");
}

TEST(GgufHostile, ArrayOfArraysRejected) {
  GgufWriter w;
  std::vector<uint8_t> inner = {5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0};  // [INT32: 7]
  w.set_array_raw("nested", ValueType::ARRAY, 1, inner);
  expect_open_error(w.to_bytes(), "metadata 'nested': arrays of arrays are not supported");
}

TEST(GgufHostile, ArrayCountLiesAboutElements) {
  GgufWriter w;
  w.set_array_raw("short", ValueType::INT32, 3, {1, 0, 0, 0, 2, 0, 0, 0});
  expect_open_error(w.to_bytes(), "array length 3");
}

TEST(GgufHostile, InvalidBool) {
  auto b = small_bytes();
  b[find_bytes(b, "tokenizer.ggml.add_bos_token") + 28 + 4] = 2;
  expect_open_error(b, "metadata 'tokenizer.ggml.add_bos_token': invalid bool value 2");
}

TEST(GgufHostile, UnprintableNameIsEscaped) {
  GgufWriter w;
  w.add_tensor("bad\nname", {1}, GgmlType::F32, pattern(4));
  auto b = w.to_bytes();
  put_u32(b, find_bytes(b, "name") + 4 + 4 + 8, 99);
  expect_open_error(b, "tensor 'bad\\x0aname' has unknown type id 99");
}

// A FIFO must be refused at once, not block the open() until some writer shows up.
TEST(GgufHostile, FifoIsRefusedWithoutBlocking) {
  testing::TempDir dir;
  const std::string path = dir.file("pipe.gguf");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "opened a FIFO";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not a regular file");
  }
}

}  // namespace
}  // namespace specdec::gguf
