#include "model/lora.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model_test_util.h"
#include "support/tiny_lora.h"

namespace specdec {
namespace {

using testing::TinyLoraSpec;
using testing::TinyModelSpec;

std::vector<float> floats_of(const gguf::TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A model whose adapted matrices are W + s B A, merged in double: what the adapter must compute.
std::string write_merged(TinyModelSpec spec, const std::string& base_path,
                         const std::string& lora_path, float scale) {
  const auto base = gguf::GgufFile::open(base_path);
  const auto lora = gguf::GgufFile::open(lora_path);
  const double alpha = lora->get_float_or("adapter.lora.alpha", 0.0);
  std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>> merged;
  for (const gguf::TensorInfo& a : lora->tensors()) {
    if (!a.name.ends_with(".lora_a")) continue;
    const std::string name = a.name.substr(0, a.name.size() - 7);
    const gguf::TensorInfo& b = lora->tensor(name + ".lora_b");
    const gguf::TensorInfo& w = base->tensor(name);
    const int64_t n_in = a.dims[0], rank = a.dims[1], n_out = b.dims[1];
    const double s = alpha != 0 ? scale * alpha / static_cast<double>(rank) : scale;
    const std::vector<float> av = floats_of(a), bv = floats_of(b);
    std::vector<float> wv = floats_of(w);
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t i = 0; i < n_in; ++i) {
        double d = 0;
        for (int64_t j = 0; j < rank; ++j) d += double(bv[o * rank + j]) * av[j * n_in + i];
        wv[o * n_in + i] = static_cast<float>(wv[o * n_in + i] + s * d);
      }
    }
    spec.skip_tensors.push_back(name);
    merged.push_back({name, {w.dims, wv}});
  }
  spec.edit = [merged](gguf::GgufWriter& writer) {
    for (const auto& [name, t] : merged) {
      writer.add_tensor(name, t.first, GgmlType::F32, bytes_of(t.second));
    }
  };
  return testing::write_tiny_model(spec, testing::temp_path("merged.gguf"));
}

std::vector<float> logits_of(Model& m, const std::vector<int32_t>& tokens, ThreadPool& pool) {
  KvCache cache(m.config(), 64);
  return testing::forward_all(m, cache, tokens, 0, pool);
}

const std::vector<int32_t> kTokens = {5, 77, 130, 2, 250, 41, 9};

TEST(Lora, TheAdaptedModelIsTheMergedOne) {
  TinyModelSpec spec;
  const std::string base_path = testing::write_tiny_model(spec, testing::temp_path("base.gguf"));
  const std::string lora_path =
      testing::write_tiny_lora(spec, TinyLoraSpec{}, testing::temp_path("lora.gguf"));
  ThreadPool pool(2);
  for (float scale : {1.0f, 0.5f}) {
    const auto file = gguf::GgufFile::open(base_path);
    const auto model = Model::load(*file);
    const std::vector<float> plain = logits_of(*model, kTokens, pool);
    const std::vector<ActiveLora> adapters = {
        {load_lora_adapter(lora_path, model->config()), scale}};
    EXPECT_EQ(adapters[0].adapter->pairs(), 5);
    model->set_lora(adapters);
    const std::vector<float> adapted = logits_of(*model, kTokens, pool);

    const auto merged_file = gguf::GgufFile::open(write_merged(spec, base_path, lora_path, scale));
    const auto merged = Model::load(*merged_file);
    const std::vector<float> want = logits_of(*merged, kTokens, pool);
    ASSERT_EQ(adapted.size(), want.size());
    double moved = 0, err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      moved = std::max(moved, std::abs(double(want[i]) - plain[i]));
      err = std::max(err, std::abs(double(want[i]) - adapted[i]));
    }
    EXPECT_GT(moved, 0.05) << "the adapter must change the logits for the test to mean anything";
    EXPECT_LT(err, 1e-3) << "scale " << scale;
  }
}

TEST(Lora, RowsAreBatchInvariantAndScaleZeroIsTheBaseModel) {
  TinyModelSpec spec;
  const std::string base_path = testing::write_tiny_model(spec, testing::temp_path("base.gguf"));
  const std::string lora_path =
      testing::write_tiny_lora(spec, TinyLoraSpec{}, testing::temp_path("lora.gguf"));
  const auto file = gguf::GgufFile::open(base_path);
  const auto model = Model::load(*file);
  ThreadPool pool1(1), pool2(2);
  const std::vector<float> plain = logits_of(*model, kTokens, pool2);
  const auto adapter = load_lora_adapter(lora_path, model->config());
  const std::vector<ActiveLora> adapters = {{adapter, 1.0f}};
  model->set_lora(adapters);
  EXPECT_NE(model->lora_fingerprint(), 0u);
  const std::vector<float> together = logits_of(*model, kTokens, pool2);
  // One token at a time, on one thread: the same bits.
  KvCache cache(model->config(), 64);
  std::vector<float> alone;
  for (size_t i = 0; i < kTokens.size(); ++i) {
    const std::vector<float> row =
        testing::forward_all(*model, cache, {kTokens[i]}, static_cast<int32_t>(i), pool1);
    alone.insert(alone.end(), row.begin(), row.end());
  }
  EXPECT_TRUE(testing::bitwise_equal(together, alone));
  EXPECT_FALSE(testing::bitwise_equal(together, plain));
  // Scale 0 and no adapters: the base model, bit for bit; another scale: another fingerprint.
  const uint64_t at_one = model->lora_fingerprint();
  const std::vector<ActiveLora> off = {{adapter, 0.0f}};
  model->set_lora(off);
  EXPECT_NE(model->lora_fingerprint(), at_one);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*model, kTokens, pool2), plain));
  model->set_lora({});
  EXPECT_EQ(model->lora_fingerprint(), 0u);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*model, kTokens, pool2), plain));
}

// Requests at different LoRA scales share a pass (llama-server's per-request `lora`): each
// sequence's rows are, bit for bit, what the model gives them alone at those scales, the rows
// moved to the front for the last layer keep their own scales, and all-zero scales are the
// base model.
TEST(Lora, SequencesAtTheirOwnScalesShareAPass) {
  TinyModelSpec spec;
  const std::string base_path = testing::write_tiny_model(spec, testing::temp_path("base.gguf"));
  TinyLoraSpec second;
  second.seed = 11;
  second.matrices = {"blk.0.attn_k.weight", "blk.1.ffn_gate.weight", "blk.1.ffn_down.weight"};
  const auto file = gguf::GgufFile::open(base_path);
  const auto model = Model::load(*file);
  const auto a = load_lora_adapter(
      testing::write_tiny_lora(spec, TinyLoraSpec{}, testing::temp_path("a.gguf")),
      model->config());
  const auto b = load_lora_adapter(
      testing::write_tiny_lora(spec, second, testing::temp_path("b.gguf")), model->config());
  ThreadPool pool1(1), pool2(2);
  const std::vector<float> plain = logits_of(*model, kTokens, pool1);

  // Each sequence: its scales (empty: set_lora's), its tokens, whether only its last row wants
  // logits, and the logits it must get: what the model gives it alone at those scales.
  struct Sequence {
    std::vector<float> scales;
    std::vector<int32_t> tokens;
    bool last_only;
    std::vector<float> want;
  };
  std::vector<Sequence> seqs = {{{}, {5, 77, 130}, false, {}},
                                {{0.0f, 0.0f}, {5, 77, 130, 2}, true, {}},
                                {{0.5f, 0.0f}, {9, 41}, false, {}},
                                {{0.0f, -2.0f}, {250, 2, 77, 5, 130}, true, {}},
                                {{1.0f, 1.0f}, {41}, false, {}}};
  const auto n_vocab = static_cast<size_t>(model->config().n_vocab);
  for (Sequence& q : seqs) {
    const std::vector<float> scales = q.scales.empty() ? std::vector<float>{1.0f, 0.5f} : q.scales;
    const std::vector<ActiveLora> alone = {{a, scales[0]}, {b, scales[1]}};
    model->set_lora(alone);
    q.want = logits_of(*model, q.tokens, pool1);
    if (q.last_only) q.want.erase(q.want.begin(), q.want.end() - static_cast<ptrdiff_t>(n_vocab));
  }
  // The all-zero sequence is the base model; the others are not.
  EXPECT_TRUE(testing::bitwise_equal(
      seqs[1].want, std::vector<float>(plain.begin() + 3 * n_vocab, plain.begin() + 4 * n_vocab)));
  EXPECT_FALSE(testing::bitwise_equal(seqs[4].want, seqs[2].want));

  const std::vector<ActiveLora> running = {{a, 1.0f}, {b, 0.5f}};
  model->set_lora(running);
  std::vector<KvCache> caches;
  for (size_t i = 0; i < seqs.size(); ++i) caches.emplace_back(model->config(), 64);
  std::vector<std::vector<int32_t>> positions(seqs.size()), rows(seqs.size());
  std::vector<std::vector<float>> got(seqs.size());
  std::vector<Model::SequenceRows> pass;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& q = seqs[i];
    const auto n = static_cast<int32_t>(q.tokens.size());
    positions[i].resize(static_cast<size_t>(n));
    std::iota(positions[i].begin(), positions[i].end(), 0);
    if (q.last_only) {
      rows[i] = {n - 1};
    } else {
      rows[i].resize(static_cast<size_t>(n));
      std::iota(rows[i].begin(), rows[i].end(), 0);
    }
    got[i].resize(rows[i].size() * n_vocab);
    pass.push_back(
        {q.tokens, positions[i], &caches[i], rows[i], got[i].data(), nullptr, nullptr, q.scales});
  }
  // Two sequences want only their last rows: the last layer runs over the logit rows alone,
  // moved to the front of the pass.
  model->forward_batch(pass, pool2);
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_TRUE(testing::bitwise_equal(got[i], seqs[i].want)) << "sequence " << i;
  }

  // Scales that do not fit are refused before any cache changes.
  for (const std::vector<float>& bad :
       {std::vector<float>{1.0f}, std::vector<float>{1.0f, std::nanf("")},
        std::vector<float>{1.0f, 0.0f, 0.0f}}) {
    KvCache cache(model->config(), 64);
    std::vector<float> logits(n_vocab);
    const std::vector<int32_t> token = {5}, pos = {0}, row = {0};
    const Model::SequenceRows one{token, pos, &cache, row, logits.data(), nullptr, nullptr, bad};
    EXPECT_THROW(model->forward_batch(std::span(&one, 1), pool1), Error);
    EXPECT_EQ(cache.length(), 0);
  }
  // Other scales, another fingerprint; equal scales, the same one.
  const std::vector<float> half = {0.5f, 0.0f};
  EXPECT_NE(lora_fingerprint(running, half), model->lora_fingerprint());
  EXPECT_EQ(lora_fingerprint(running, std::vector<float>{1.0f, 0.5f}), model->lora_fingerprint());
  EXPECT_EQ(lora_fingerprint({}, {}), 0u);
}

// The message of the Error loading `lora` for `spec`'s model throws ("" if none).
std::string refusal(const TinyModelSpec& spec, const TinyLoraSpec& lora,
                    const TinyModelSpec& model_spec) {
  const std::string path = testing::write_tiny_lora(spec, lora, testing::temp_path("bad.gguf"));
  const auto file =
      gguf::GgufFile::open(testing::write_tiny_model(model_spec, testing::temp_path("m.gguf")));
  const auto model = Model::load(*file);
  try {
    load_lora_adapter(path, model->config());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Lora, AdaptersThatDoNotFitAreRefusedNamingWhy) {
  TinyModelSpec spec;
  const auto has = [](const std::string& message, const char* part) {
    return message.find(part) != std::string::npos;
  };
  TinyLoraSpec not_adapter;
  not_adapter.type = "model";
  EXPECT_TRUE(has(refusal(spec, not_adapter, spec), "not a LoRA adapter"));
  TinyModelSpec qwen = spec;
  qwen.arch = "qwen2";
  EXPECT_TRUE(has(refusal(qwen, TinyLoraSpec{}, spec), "architecture 'qwen2'"));
  TinyModelSpec wider = spec;
  wider.n_ff = 256;  // the ffn pairs no longer fit the model's 128
  EXPECT_TRUE(has(refusal(wider, TinyLoraSpec{}, spec), "has shapes A ["));
  TinyModelSpec deeper = spec;
  deeper.n_layer = 4;
  TinyLoraSpec layer3;
  layer3.matrices = {"blk.3.attn_q.weight"};
  EXPECT_TRUE(has(refusal(deeper, layer3, spec), "is for layer 3"));
  TinyLoraSpec half;
  half.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("blk.0.ffn_gate.weight.lora_a", {64, 4}, GgmlType::F32,
                 std::vector<uint8_t>(64 * 4 * 4, 0));
  };
  EXPECT_TRUE(has(refusal(spec, half, spec), "has no blk.0.ffn_gate.weight.lora_b"));
  TinyLoraSpec embedding;
  embedding.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("token_embd.weight.lora_a", {300, 4}, GgmlType::F32,
                 std::vector<uint8_t>(300 * 4 * 4, 0));
  };
  EXPECT_TRUE(has(refusal(spec, embedding, spec), "token_embd.weight.lora_a adapts a matrix"));
  TinyLoraSpec stray;
  stray.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("blk.0.attn_q.weight", {64, 64}, GgmlType::F32,
                 std::vector<uint8_t>(64 * 64 * 4, 0));
  };
  EXPECT_TRUE(has(refusal(spec, stray, spec), "is not half of a LoRA pair"));
  TinyLoraSpec empty;
  empty.matrices.clear();
  EXPECT_TRUE(has(refusal(spec, empty, spec), "holds no tensor pairs"));
  EXPECT_EQ(refusal(spec, TinyLoraSpec{}, spec), "");
}

}  // namespace
}  // namespace specdec
