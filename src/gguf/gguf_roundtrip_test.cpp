// Writer -> file -> reader round trips: every metadata type, several tensor types, v2 and v3,
// and the alignment rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace specdec::gguf {
namespace {

using testing::pattern;
using testing::TempDir;

std::unique_ptr<GgufFile> write_and_open(const GgufWriter& w, const TempDir& dir,
                                         uint32_t version = 3) {
  const std::string path = dir.file("model.gguf");
  w.write(path, version);
  return GgufFile::open(path);
}

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.set_u8("u8", 250);
  w.set_i8("i8", -100);
  w.set_u16("u16", 65000);
  w.set_i16("i16", -32000);
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("i64", std::numeric_limits<int64_t>::min());
  w.set_f32("f32", 1.5f);
  w.set_f64("f64", -2.25e100);
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("str", std::string("hi\0there", 8));
  w.set_string("empty", "");
  TempDir dir;
  auto f = write_and_open(w, dir);

  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 14u);
  EXPECT_EQ(f->find("u8")->type, ValueType::UINT8);
  EXPECT_EQ(f->get_int("u8"), 250);
  EXPECT_EQ(f->find("i8")->type, ValueType::INT8);
  EXPECT_EQ(f->get_int("i8"), -100);
  EXPECT_EQ(f->find("u16")->type, ValueType::UINT16);
  EXPECT_EQ(f->get_int("u16"), 65000);
  EXPECT_EQ(f->find("i16")->type, ValueType::INT16);
  EXPECT_EQ(f->get_int("i16"), -32000);
  EXPECT_EQ(f->find("u32")->type, ValueType::UINT32);
  EXPECT_EQ(f->get_int("u32"), 4000000000);
  EXPECT_EQ(f->find("i32")->type, ValueType::INT32);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(f->find("u64")->type, ValueType::UINT64);
  EXPECT_EQ(std::get<uint64_t>(f->find("u64")->value), std::numeric_limits<uint64_t>::max());
  EXPECT_THROW(f->get_int("u64"), Error);  // does not fit int64
  EXPECT_EQ(f->find("i64")->type, ValueType::INT64);
  EXPECT_EQ(f->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->find("f32")->type, ValueType::FLOAT32);
  EXPECT_EQ(f->get_float("f32"), 1.5);
  EXPECT_EQ(f->find("f64")->type, ValueType::FLOAT64);
  EXPECT_EQ(f->get_float("f64"), -2.25e100);
  EXPECT_EQ(f->find("yes")->type, ValueType::BOOL);
  EXPECT_TRUE(f->get_bool_or("yes", false));
  EXPECT_FALSE(f->get_bool_or("no", true));
  EXPECT_EQ(f->find("str")->type, ValueType::STRING);
  EXPECT_EQ(f->get_string("str"), std::string("hi\0there", 8));
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufRoundTrip, GettersFallbacksAndTypeErrors) {
  GgufWriter w;
  w.set_string("s", "x");
  w.set_i32("n", 7);
  w.set_array_i32("a", {1});
  TempDir dir;
  auto f = write_and_open(w, dir);
  EXPECT_TRUE(f->has("s"));
  EXPECT_FALSE(f->has("missing"));
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_EQ(f->get_string_or("missing", "fb"), "fb");
  EXPECT_EQ(f->get_int_or("missing", -3), -3);
  EXPECT_EQ(f->get_float_or("missing", 0.5), 0.5);
  EXPECT_TRUE(f->get_bool_or("missing", true));
  EXPECT_EQ(f->find_array("missing"), nullptr);
  EXPECT_EQ(f->get_float("n"), 7.0);  // integers widen to float
  EXPECT_EQ(f->get_int_or("n", 0), 7);

  // Wrong types throw naming the key.
  auto expect_key_error = [](auto fn, const std::string& key) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  };
  expect_key_error([&] { f->get_int("s"); }, "s");
  expect_key_error([&] { f->get_string("n"); }, "n");
  expect_key_error([&] { f->get_string_or("n", ""); }, "n");
  expect_key_error([&] { f->get_bool_or("n", false); }, "n");
  expect_key_error([&] { f->get_float("a"); }, "a");
  expect_key_error([&] { f->get_array("s"); }, "s");
  expect_key_error([&] { f->get_string("missing"); }, "missing");
  expect_key_error([&] { f->get_int("missing"); }, "missing");
  expect_key_error([&] { f->get_float("missing"); }, "missing");
  expect_key_error([&] { f->get_array("missing"); }, "missing");
  expect_key_error([&] { f->tensor("missing"); }, "missing");
}

TEST(GgufRoundTrip, EveryArrayType) {
  GgufWriter w;
  w.set_array_u8("u8", {0, 255});
  w.set_array_i8("i8", {-128, 127});
  w.set_array_u16("u16", {0, 65535});
  w.set_array_i16("i16", {-32768, 32767});
  w.set_array_u32("u32", {0, 4294967295u});
  w.set_array_i32("i32", {-5, 6, 7});
  w.set_array_u64("u64", {1, std::numeric_limits<uint64_t>::max()});
  w.set_array_i64("i64", {std::numeric_limits<int64_t>::min(), 9});
  w.set_array_f32("f32", {0.25f, -1.0f});
  w.set_array_f64("f64", {1e300, -0.0});
  w.set_array_bool("bool", {true, false, true});
  w.set_array_strings("str", {"", "a", "hello world"});
  w.set_array_i32("empty", {});
  TempDir dir;
  auto f = write_and_open(w, dir);

  auto ints = [&](const char* k) { return f->get_array(k).ints; };
  EXPECT_EQ(f->get_array("u8").elem_type, ValueType::UINT8);
  EXPECT_EQ(ints("u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f->get_array("i8").elem_type, ValueType::INT8);
  EXPECT_EQ(ints("i8"), (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(ints("u16"), (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(ints("i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(ints("u32"), (std::vector<int64_t>{0, 4294967295}));
  EXPECT_EQ(f->get_array("i32").elem_type, ValueType::INT32);
  EXPECT_EQ(ints("i32"), (std::vector<int64_t>{-5, 6, 7}));
  EXPECT_EQ(f->get_array("u64").elem_type, ValueType::UINT64);
  EXPECT_EQ(static_cast<uint64_t>(ints("u64")[1]), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ints("i64"), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 9}));
  EXPECT_EQ(f->get_array("f32").elem_type, ValueType::FLOAT32);
  EXPECT_EQ(f->get_array("f32").floats, (std::vector<double>{0.25, -1.0}));
  EXPECT_EQ(f->get_array("f64").floats[0], 1e300);
  EXPECT_TRUE(std::signbit(f->get_array("f64").floats[1]));
  EXPECT_EQ(f->get_array("bool").elem_type, ValueType::BOOL);
  EXPECT_EQ(ints("bool"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f->get_array("str").elem_type, ValueType::STRING);
  EXPECT_EQ(f->get_array("str").strings, (std::vector<std::string>{"", "a", "hello world"}));
  EXPECT_EQ(f->get_array("str").size(), 3u);
  EXPECT_EQ(f->get_array("f32").size(), 2u);
  EXPECT_EQ(f->get_array("bool").size(), 3u);
  EXPECT_EQ(f->get_array("empty").size(), 0u);
  for (const auto& [key, entry] : f->metadata()) EXPECT_EQ(entry.type, ValueType::ARRAY) << key;
}

TEST(GgufRoundTrip, KeysInInsertionOrderAndReplacedInPlace) {
  GgufWriter w;
  w.set_u32("zeta", 1);
  w.set_u32("alpha", 2);
  w.set_u32("zeta", 3);  // replaces, keeps position
  const std::vector<uint8_t> bytes = w.to_bytes();
  EXPECT_LT(testing::find_bytes(bytes, "zeta"), testing::find_bytes(bytes, "alpha"));
  TempDir dir;
  auto f = write_and_open(w, dir);
  EXPECT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->get_int("zeta"), 3);
}

// One tensor per supported type, with distinctive bytes, read back in place from the mapping.
TEST(GgufRoundTrip, TensorsOfSeveralTypes) {
  struct Case {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
  };
  const std::vector<Case> cases = {
      {"f32", {3}, GgmlType::F32},          {"f16", {5, 2}, GgmlType::F16},
      {"bf16", {4, 1, 2}, GgmlType::BF16},  {"q4_0", {64, 3}, GgmlType::Q4_0},
      {"q4_1", {32, 2, 2}, GgmlType::Q4_1}, {"q5_0", {32}, GgmlType::Q5_0},
      {"q5_1", {32, 1}, GgmlType::Q5_1},    {"q8_0", {96, 2, 1, 2}, GgmlType::Q8_0},
      {"q4_k", {256, 2}, GgmlType::Q4_K},   {"q5_k", {512}, GgmlType::Q5_K},
      {"q6_k", {256, 3}, GgmlType::Q6_K},
  };
  GgufWriter w;
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    int64_t rows = 1;
    for (size_t d = 1; d < c.dims.size(); ++d) rows *= c.dims[d];
    data.push_back(pattern(row_bytes(c.type, c.dims[0]) * static_cast<size_t>(rows),
                           static_cast<uint8_t>(i * 13)));
    w.add_tensor(c.name, c.dims, c.type, data.back());
  }
  for (uint32_t version : {2u, 3u}) {
    TempDir dir;
    auto f = write_and_open(w, dir, version);
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->alignment(), 32u);
    ASSERT_EQ(f->tensors().size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const TensorInfo& t = f->tensors()[i];
      EXPECT_EQ(&f->tensor(c.name), &t);
      EXPECT_EQ(f->find_tensor(c.name), &t);
      EXPECT_EQ(t.name, c.name);
      EXPECT_EQ(t.dims, c.dims);
      EXPECT_EQ(t.type, c.type);
      EXPECT_EQ(t.offset % 32, 0u);
      EXPECT_EQ(t.row_length(), c.dims[0]);
      int64_t n = 1;
      for (int64_t d : c.dims) n *= d;
      EXPECT_EQ(t.n_elements(), n);
      EXPECT_EQ(t.n_rows(), n / c.dims[0]);
      ASSERT_EQ(t.n_bytes, data[i].size()) << c.name;
      EXPECT_EQ(std::memcmp(t.data, data[i].data(), t.n_bytes), 0) << c.name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << "mapping is page aligned";
    }
    EXPECT_EQ(f->find_tensor("absent"), nullptr);
  }
}

TEST(GgufRoundTrip, CustomAlignment) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    GgufWriter w;
    w.set_alignment(alignment);
    w.add_tensor("a", {3}, GgmlType::F32, pattern(12));
    w.add_tensor("b", {5}, GgmlType::F16, pattern(10, 3));
    TempDir dir;
    auto f = write_and_open(w, dir);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->get_int("general.alignment"), alignment);
    EXPECT_EQ(f->find("general.alignment")->type, ValueType::UINT32);
    const TensorInfo& b = f->tensor("b");
    EXPECT_EQ(b.offset % alignment, 0u);
    EXPECT_EQ(b.offset, alignment == 1 ? 12u : (12 + alignment - 1) / alignment * alignment);
    EXPECT_EQ(std::memcmp(b.data, pattern(10, 3).data(), 10), 0);
  }
}

TEST(GgufRoundTrip, DefaultAlignmentIs32) {
  GgufWriter w;
  w.add_tensor("a", {1}, GgmlType::F32, pattern(4));
  w.add_tensor("b", {1}, GgmlType::F32, pattern(4));
  TempDir dir;
  auto f = write_and_open(w, dir);
  EXPECT_FALSE(f->has("general.alignment"));
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->tensor("b").offset, 32u);
}

TEST(GgufRoundTrip, NoTensorsNoPaddingNeeded) {
  // A metadata-only file whose header is not padded out to the alignment still opens.
  GgufWriter w;
  w.set_u8("x", 1);
  std::vector<uint8_t> bytes = w.to_bytes();
  bytes.resize(4 + 4 + 8 + 8 + 8 + 1 + 4 + 1);
  TempDir dir;
  testing::write_bytes(dir.file("m.gguf"), bytes);
  auto f = GgufFile::open(dir.file("m.gguf"));
  EXPECT_EQ(f->get_int("x"), 1);
  EXPECT_EQ(f->file_size(), bytes.size());
  EXPECT_EQ(f->path(), dir.file("m.gguf"));
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("a", {}, GgmlType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("a", {1, 1, 1, 1, 1}, GgmlType::F32, pattern(4)), Error);
  EXPECT_THROW(w.add_tensor("a", {0}, GgmlType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("a", {-1}, GgmlType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("a", {16}, GgmlType::Q4_0, pattern(9)), Error);  // not a block
  EXPECT_THROW(w.add_tensor("a", {4}, GgmlType::F32, pattern(15)), Error);   // wrong size
  w.add_tensor("a", {4}, GgmlType::F32, pattern(16));
  EXPECT_THROW(w.add_tensor("a", {4}, GgmlType::F32, pattern(16)), Error);  // duplicate
  EXPECT_THROW(w.set_alignment(0), Error);
  EXPECT_THROW(w.set_alignment(48), Error);
  EXPECT_THROW(w.to_bytes(1), Error);
  EXPECT_THROW(w.to_bytes(4), Error);
  TempDir dir;
  EXPECT_THROW(w.write(dir.file("no/such/dir/x.gguf")), Error);
}

}  // namespace
}  // namespace specdec::gguf
