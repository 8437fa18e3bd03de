// ModelConfig::from_gguf and Model::load: parsing and every rejection path.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

using testing::TinyModelSpec;

std::unique_ptr<gguf::GgufFile> open_tiny(const TinyModelSpec& spec) {
  return gguf::GgufFile::open(testing::write_tiny_model(spec, testing::temp_path("cfg.gguf")));
}

// Expects loading the model to throw specdec::Error whose message contains `needle`.
// (Some problems, like unknown tensor types, are already caught by GgufFile::open.)
void expect_load_error(const TinyModelSpec& spec, const std::string& needle) {
  try {
    auto f = open_tiny(spec);
    Model::load(*f);
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<uint8_t> f32_zeros(size_t n) { return std::vector<uint8_t>(n * sizeof(float), 0); }

TEST(ModelConfig, ParsesLlama) {
  TinyModelSpec spec;
  spec.n_ctx = 512;
  spec.rope_theta = 5e5f;
  auto f = open_tiny(spec);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_vocab, 300);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.q_dim(), 64);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.n_ff, 128);
  EXPECT_EQ(c.n_ctx_train, 512);
  EXPECT_FLOAT_EQ(c.rope_theta, 5e5f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::Normal);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tied_output);
}

TEST(ModelConfig, ParsesQwen2AndTied) {
  TinyModelSpec spec;
  spec.arch = "qwen2";
  spec.tied = true;
  auto f = open_tiny(spec);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.rope_style, RopeStyle::Neox);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tied_output);
}

TEST(ModelConfig, ParsesGemma3) {
  TinyModelSpec spec;
  spec.arch = "gemma3";
  spec.n_layer = 7;
  spec.sliding_window = 512;
  auto f = open_tiny(spec);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.rope_style, RopeStyle::Neox);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.scale_embd);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.scale_q);
  EXPECT_EQ(c.ffn_act, FfnActivation::GeluTanh);
  EXPECT_FLOAT_EQ(c.attn_scale, 0.25f);  // 1 / sqrt(head_dim 16)
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_FLOAT_EQ(c.rope_theta_swa, 10000.0f);
  // llama.cpp's fixed gemma3 pattern: every sixth layer (5, 11, ...) is global.
  for (int32_t l = 0; l < 7; ++l) EXPECT_EQ(c.is_local_layer(l), l != 5) << l;
  // llama and qwen2 have no local layers
  TinyModelSpec llama;
  EXPECT_FALSE(ModelConfig::from_gguf(*open_tiny(llama)).is_local_layer(0));
}

TEST(ModelConfig, ParsesQwen3) {
  TinyModelSpec spec;
  spec.arch = "qwen3";
  spec.tied = true;
  auto f = open_tiny(spec);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.arch, "qwen3");
  EXPECT_EQ(c.rope_style, RopeStyle::Neox);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.scale_embd || c.post_norms || c.scale_q);
  EXPECT_EQ(c.ffn_act, FfnActivation::Silu);
  EXPECT_TRUE(c.tied_output);
  EXPECT_FALSE(c.is_local_layer(0));
  spec.skip_tensors = {"blk.1.attn_q_norm.weight"};
  expect_load_error(spec, "blk.1.attn_q_norm.weight");
}

TEST(ModelConfig, Gemma3WithoutSlidingWindowIsRefused) {
  TinyModelSpec spec;
  spec.arch = "gemma3";
  spec.skip_keys = {"gemma3.attention.sliding_window"};
  expect_load_error(spec, "gemma3.attention.sliding_window");
  spec.skip_keys.clear();
  spec.skip_tensors = {"blk.1.attn_k_norm.weight"};
  expect_load_error(spec, "blk.1.attn_k_norm.weight");
}

TEST(ModelConfig, DefaultsAndFallbacks) {
  TinyModelSpec spec;
  spec.n_head_kv = 4;
  spec.skip_keys = {"llama.attention.head_count_kv", "llama.rope.freq_base",
                    "llama.rope.dimension_count", "llama.vocab_size"};
  auto f = open_tiny(spec);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.n_head_kv, c.n_head);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_dim, c.head_dim);
  EXPECT_EQ(c.n_vocab, 300);  // from token_embd.weight
}

TEST(ModelConfig, LinearRopeScalingAndKeyLength) {
  TinyModelSpec spec;
  spec.edit = [](gguf::GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
    w.set_u32("llama.attention.key_length", 16);
    w.set_u32("llama.rope.dimension_count", 8);
  };
  auto f = open_tiny(spec);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_NO_THROW(Model::load(*f));
}

TEST(ModelConfig, RejectsUnknownArchitecture) {
  TinyModelSpec spec;
  spec.edit = [](gguf::GgufWriter& w) { w.set_string("general.architecture", "xyz"); };
  expect_load_error(spec,
                    "unsupported architecture 'xyz' (supported: llama, qwen2, gemma3, qwen3)");
}

TEST(ModelConfig, RejectsMissingArchitecture) {
  TinyModelSpec spec;
  spec.skip_keys = {"general.architecture"};
  expect_load_error(spec, "general.architecture");
}

TEST(ModelConfig, RejectsMissingRequiredKey) {
  for (const char* key :
       {"llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
        "llama.attention.head_count", "llama.context_length"}) {
    TinyModelSpec spec;
    spec.skip_keys = {key};
    expect_load_error(spec, std::string("missing metadata key '") + key + "'");
  }
}

TEST(ModelConfig, RejectsAbsurdSizes) {
  struct Case {
    const char* key;
    uint32_t value;
    const char* needle;
  };
  const Case cases[] = {
      {"llama.block_count", 0, "llama.block_count = 0 is out of range"},
      {"llama.embedding_length", 0, "llama.embedding_length = 0"},
      {"llama.embedding_length", 1u << 30, "llama.embedding_length = 1073741824"},
      {"llama.attention.head_count", 6, "not divisible by llama.attention.head_count = 6"},
      {"llama.attention.head_count_kv", 3, "head_count_kv = 3 does not divide"},
      {"llama.attention.head_count_kv", 8, "head_count_kv = 8 is out of range"},
      {"llama.attention.head_count_kv", 0, "head_count_kv = 0 is out of range"},
      {"llama.feed_forward_length", 0, "feed_forward_length = 0"},
      {"llama.vocab_size", 0, "vocabulary size 0"},
      {"llama.rope.dimension_count", 7, "rope.dimension_count = 7 is odd"},
      {"llama.rope.dimension_count", 32, "rope.dimension_count = 32 is out of range"},
      {"llama.context_length", 0, "context_length = 0"},
  };
  for (const Case& c : cases) {
    TinyModelSpec spec;
    spec.edit = [&](gguf::GgufWriter& w) { w.set_u32(c.key, c.value); };
    expect_load_error(spec, c.needle);
  }
  TinyModelSpec eps;
  eps.edit = [](gguf::GgufWriter& w) { w.set_f32("llama.attention.layer_norm_rms_epsilon", -1); };
  expect_load_error(eps, "layer_norm_rms_epsilon");
  TinyModelSpec scaling;
  scaling.edit = [](gguf::GgufWriter& w) { w.set_string("llama.rope.scaling.type", "yarn"); };
  expect_load_error(scaling, "unsupported llama.rope.scaling.type 'yarn'");
}

TEST(ModelLoad, RejectsMissingTensors) {
  for (const char* name :
       {"token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight", "blk.1.attn_q.weight",
        "blk.1.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
        "blk.1.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.1.ffn_up.weight",
        "blk.1.ffn_down.weight"}) {
    TinyModelSpec spec;
    spec.skip_tensors = {name};
    spec.skip_keys = {"llama.vocab_size"};
    if (std::string(name) == "token_embd.weight") {
      // Without the embedding the vocabulary size comes from the tokenizer; then the tensor
      // itself is reported missing.
      expect_load_error(spec, "missing tensor 'token_embd.weight'");
    } else {
      expect_load_error(spec, std::string("missing tensor '") + name + "'");
    }
  }
  TinyModelSpec qwen;
  qwen.arch = "qwen2";
  qwen.skip_tensors = {"blk.1.attn_k.bias"};
  expect_load_error(qwen, "missing tensor 'blk.1.attn_k.bias'");
}

TEST(ModelLoad, RejectsWrongShapes) {
  TinyModelSpec spec;
  spec.skip_tensors = {"blk.1.attn_k.weight"};
  spec.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("blk.1.attn_k.weight", {64, 64}, GgmlType::F32, f32_zeros(64 * 64));
  };
  expect_load_error(spec, "tensor 'blk.1.attn_k.weight' has shape [64, 64], expected [64, 32]");

  TinyModelSpec norm;
  norm.skip_tensors = {"blk.0.ffn_norm.weight"};
  norm.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("blk.0.ffn_norm.weight", {32}, GgmlType::F32, f32_zeros(32));
  };
  expect_load_error(norm, "tensor 'blk.0.ffn_norm.weight' has shape [32], expected [64]");

  TinyModelSpec vocab;  // output rows disagree with the vocabulary
  vocab.skip_tensors = {"output.weight"};
  vocab.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("output.weight", {64, 299}, GgmlType::F32, f32_zeros(64 * 299));
  };
  expect_load_error(vocab, "tensor 'output.weight' has shape [64, 299], expected [64, 300]");

  TinyModelSpec rank;
  rank.skip_tensors = {"blk.0.attn_q.weight"};
  rank.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("blk.0.attn_q.weight", {64, 64, 2}, GgmlType::F32, f32_zeros(64 * 64 * 2));
  };
  expect_load_error(rank, "tensor 'blk.0.attn_q.weight' has shape [64, 64, 2]");
}

TEST(ModelLoad, RejectsUnsupportedType) {
  TinyModelSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 256;
  spec.skip_tensors = {"blk.0.ffn_up.weight"};
  spec.edit = [](gguf::GgufWriter& w) {
    // Q2_K is a known GGUF type that this engine does not implement.
    w.add_tensor("blk.0.ffn_up.weight", {256, 256}, GgmlType::Q2_K,
                 std::vector<uint8_t>(256 * 84, 0));
  };
  expect_load_error(spec, "tensor 'blk.0.ffn_up.weight' has unsupported type Q2_K");
}

TEST(ModelLoad, AcceptsHalfPrecisionNorms) {
  TinyModelSpec spec;
  spec.skip_tensors = {"output_norm.weight"};
  spec.edit = [](gguf::GgufWriter& w) {
    std::vector<float> ones(64, 1.0f);
    w.add_tensor("output_norm.weight", {64}, GgmlType::F16,
                 quantize_matrix(GgmlType::F16, ones.data(), 1, 64));
  };
  auto f = open_tiny(spec);
  EXPECT_NO_THROW(Model::load(*f));
}

TEST(ModelLoad, WeightBytesCountsTiedOnce) {
  TinyModelSpec untied, tied;
  tied.tied = true;
  testing::TinyModel a(untied), b(tied);
  EXPECT_GT(a.model->weight_bytes(), 0u);
  EXPECT_EQ(a.model->weight_bytes() - b.model->weight_bytes(), 300u * 64 * sizeof(float));
}

// A decode step streams every matrix but the embedding table (one row of it is looked up); a tied
// head is that table and is streamed whole; a cut head only its rows.
TEST(ModelLoad, DecodeWeightBytesLeaveOutTheEmbeddingTableAndUnscoredHeadRows) {
  TinyModelSpec untied, tied;
  tied.tied = true;
  testing::TinyModel a(untied), b(tied);
  const size_t table = 300u * 64 * sizeof(float);  // the tiny models' f32 vocabulary x embedding
  EXPECT_EQ(a.model->decode_weight_bytes(), a.model->weight_bytes() - table);
  EXPECT_EQ(b.model->decode_weight_bytes(), b.model->weight_bytes());
  ModelLoadOptions cut;
  cut.output_ids = {5, 1, 2, 9};
  auto f = open_tiny(untied);
  const std::unique_ptr<Model> c = Model::load(*f, cut);
  EXPECT_EQ(c->weight_bytes(), a.model->weight_bytes());
  EXPECT_EQ(c->decode_weight_bytes(),
            a.model->weight_bytes() - 2 * table + 4u * 64 * sizeof(float));
}

}  // namespace
}  // namespace specdec
