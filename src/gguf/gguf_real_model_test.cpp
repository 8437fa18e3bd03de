// Opens the real SmolLM2-135M Q4_1 model when it is in the cache (scripts/fetch-models.sh puts it
// there) and checks facts known from the published file; skipped otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/gguf_file.h"

namespace specdec::gguf {
namespace {

std::string model_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/specdec/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GgufRealModel, SmolLM2Q4_1) {
  const std::string path = model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found; run fetch-models";
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 30);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 576);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 3);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.rope.freq_base")), 100000.0f);
  EXPECT_FALSE(f->get_bool_or("tokenizer.ggml.add_bos_token", true));
  EXPECT_EQ(f->get_array("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f->get_array("tokenizer.ggml.token_type").elem_type, ValueType::INT32);
  EXPECT_EQ(f->get_array("tokenizer.ggml.merges").size(), 48900u);
  EXPECT_EQ(f->metadata().size(), 33u);
  ASSERT_EQ(f->tensors().size(), 272u);

  const TensorInfo& emb = f->tensor("token_embd.weight");
  EXPECT_EQ(emb.type, GgmlType::Q8_0);
  EXPECT_EQ(emb.dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(emb.n_bytes, 30081024u);
  EXPECT_EQ(static_cast<size_t>(emb.data - f->tensors().front().data), 0u);
  const TensorInfo& norm = f->tensor("output_norm.weight");
  EXPECT_EQ(norm.type, GgmlType::F32);
  EXPECT_EQ(norm.n_bytes, 2304u);
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, GgmlType::Q4_1);
  int q4_1 = 0;
  for (const TensorInfo& t : f->tensors()) q4_1 += t.type == GgmlType::Q4_1;
  EXPECT_EQ(q4_1, 210);
}

}  // namespace
}  // namespace specdec::gguf
