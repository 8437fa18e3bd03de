// Shared helpers for the GGUF tests: a scratch directory, raw byte patching, and a small valid
// file to mutate.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace specdec::gguf::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("specdec_gguf_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

// Offset of the first occurrence of `needle` in `bytes`; fails the test if absent.
inline size_t find_bytes(const std::vector<uint8_t>& bytes, const std::string& needle) {
  const auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << "'" << needle << "' not found";
  return static_cast<size_t>(it - bytes.begin());
}

inline void put_u32(std::vector<uint8_t>& bytes, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) bytes.at(at + i) = static_cast<uint8_t>(v >> (8 * i));
}
inline void put_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) bytes.at(at + i) = static_cast<uint8_t>(v >> (8 * i));
}

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// A small file with a few keys of different types and two tensors ("tok.weight" Q8_0 [64 x 2],
// "norm.weight" F32 [8]).
inline GgufWriter small_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_array_strings("tokenizer.ggml.tokens", {"a", "bc", "def"});
  w.set_array_i32("tokenizer.ggml.token_type", {1, 2, 3});
  w.add_tensor("tok.weight", {64, 2}, GgmlType::Q8_0, pattern(2 * 2 * 34));
  w.add_tensor("norm.weight", {8}, GgmlType::F32, pattern(8 * 4, 9));
  return w;
}

// Byte offset just past the end of the last tensor's data in small_writer()'s output (what
// follows is only alignment padding).
inline size_t small_data_end(const std::vector<uint8_t>& bytes) {
  const size_t name = find_bytes(bytes, "norm.weight");
  // name, n_dims, 1 dim, type, offset
  const size_t infos_end = name + 11 + 4 + 8 + 4 + 8;
  const size_t data_start = (infos_end + 31) / 32 * 32;
  const size_t norm_offset = (2 * 2 * 34 + 31) / 32 * 32;
  return data_start + norm_offset + 8 * 4;
}

// Writes `bytes`, opens it, and checks that open throws specdec::Error whose message starts
// with the path and contains `expected`.
inline void expect_open_error(const std::vector<uint8_t>& bytes, const std::string& expected) {
  TempDir dir;
  const std::string path = dir.file("bad.gguf");
  write_bytes(path, bytes);
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "open succeeded; expected an error containing '" << expected << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message not one line: " << msg;
  }
}

}  // namespace specdec::gguf::testing
