// Tokenizer::from_gguf on small GGUF files written in the test (no download needed).
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/test_vocabs.h"
#include "tokenizer/tokenizer.h"

namespace specdec {
namespace {

namespace fs = std::filesystem;

class TokenizerGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() /
            ("specdec_tok_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf");
  }
  void TearDown() override { fs::remove(path_); }

  std::unique_ptr<gguf::GgufFile> write(const gguf::GgufWriter& w) {
    w.write(path_.string());
    return gguf::GgufFile::open(path_.string());
  }

  static gguf::GgufWriter spm_writer() {
    const VocabData d = testvocab::spm();
    gguf::GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_array_strings("tokenizer.ggml.tokens", d.tokens);
    w.set_array_f32("tokenizer.ggml.scores", d.scores);
    w.set_array_i32("tokenizer.ggml.token_type", d.token_types);
    return w;
  }

  fs::path path_;
};

TEST_F(TokenizerGguf, SpmDefaultsFollowLlamaCpp) {
  const auto f = write(spm_writer());
  const Tokenizer t = Tokenizer::from_gguf(*f);
  EXPECT_EQ(t.kind(), VocabKind::Spm);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos());
  EXPECT_TRUE(t.add_space_prefix());
  EXPECT_EQ(t.encode("hello", true, false),
            (std::vector<int32_t>{1, *t.find_token("\xE2\x96\x81hello")}));
  EXPECT_TRUE(t.is_eog(2));
}

TEST_F(TokenizerGguf, KeysOverrideDefaults) {
  gguf::GgufWriter w = spm_writer();
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  const auto f = write(w);
  const Tokenizer t = Tokenizer::from_gguf(*f);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.eos(), 1);
  EXPECT_EQ(t.encode("hello", true, false), (std::vector<int32_t>{*t.find_token("hello")}));
}

TEST_F(TokenizerGguf, BpeWithMergesAndChatTemplate) {
  const VocabData d = testvocab::bpe("llama3");
  gguf::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "llama3");
  w.set_array_strings("tokenizer.ggml.tokens", d.tokens);
  w.set_array_i32("tokenizer.ggml.token_type", d.token_types);
  w.set_array_strings("tokenizer.ggml.merges", d.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 0);
  w.set_string("tokenizer.chat_template", "{{ '<|im_start|>' }}");
  const auto f = write(w);
  const Tokenizer t = Tokenizer::from_gguf(*f);
  EXPECT_EQ(t.kind(), VocabKind::Bpe);
  EXPECT_EQ(t.pre(), "llama3");
  EXPECT_TRUE(t.add_bos());  // llama3 pre-tokenizer implies BOS, like llama.cpp
  EXPECT_EQ(t.encode("hello world", false, false),
            (std::vector<int32_t>{*t.find_token("hello"), *t.find_token("\xC4\xA0world")}));
  EXPECT_EQ(ChatTemplate::from_gguf(*f).format(), ChatFormat::ChatML);
}

TEST_F(TokenizerGguf, MissingOrBadVocabThrows) {
  {
    gguf::GgufWriter w;
    w.set_string("general.architecture", "llama");
    const auto f = write(w);
    EXPECT_THROW(Tokenizer::from_gguf(*f), Error);
    EXPECT_EQ(ChatTemplate::from_gguf(*f).format(), ChatFormat::ChatML);  // absent -> ChatML
  }
  {
    gguf::GgufWriter w = spm_writer();
    w.set_string("tokenizer.ggml.model", "bert");
    EXPECT_THROW(Tokenizer::from_gguf(*write(w)), Error);
  }
  {
    gguf::GgufWriter w = spm_writer();
    w.set_array_f32("tokenizer.ggml.scores", {1.0f});
    EXPECT_THROW(Tokenizer::from_gguf(*write(w)), Error);
  }
  {
    gguf::GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_array_strings("tokenizer.ggml.tokens", {"a", "b"});
    EXPECT_THROW(Tokenizer::from_gguf(*write(w)), Error);  // no merges
  }
}

}  // namespace
}  // namespace specdec
