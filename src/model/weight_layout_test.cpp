// ModelLoadOptions (model/weight_packing.h): matrices requantized at load, the output head in
// another row order or cut to some ids. Each is checked against a model whose file already
// holds the converted weights, or against the plain model's logit columns, bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model_test_util.h"
#include "tensor/dequant.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

using testing::TinyModelSpec;

// Logits of every row of one pass over tokens from an empty cache (width: the head's rows).
std::vector<float> logits_of(Model& m, const std::vector<int32_t>& tokens, ThreadPool& pool) {
  KvCache cache(m.config(), 64);
  std::vector<int32_t> positions(tokens.size()), rows(tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> out(tokens.size() * static_cast<size_t>(m.head_rows()));
  m.forward(tokens, positions, cache, rows, out.data(), pool);
  return out;
}

bool is_block_matrix(const std::string& name) {
  return name.rfind("blk.", 0) == 0 && name.find("norm") == std::string::npos &&
         name.find("bias") == std::string::npos;
}

// The bytes of tensor t converted as load-time requantization converts them: each row decoded,
// then quantized as `type`.
std::vector<uint8_t> converted(const gguf::TensorInfo& t, GgmlType type) {
  const int64_t cols = t.row_length(), rows = t.n_rows();
  const size_t src_stride = row_bytes(t.type, cols), dst_stride = row_bytes(type, cols);
  std::vector<uint8_t> out(dst_stride * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t.type, t.data + static_cast<size_t>(r) * src_stride, row.data(), cols);
    quantize_row(type, row.data(), out.data() + static_cast<size_t>(r) * dst_stride, cols);
  }
  return out;
}

// The same tiny model written again with the tensors `pick` selects stored as `type`.
std::string write_converted(const TinyModelSpec& spec, const gguf::GgufFile& original,
                            bool (*pick)(const std::string&), GgmlType type,
                            const std::string& name) {
  TinyModelSpec s = spec;
  for (const gguf::TensorInfo& t : original.tensors()) {
    if (pick(t.name)) s.skip_tensors.push_back(t.name);
  }
  s.edit = [&original, pick, type](gguf::GgufWriter& w) {
    for (const gguf::TensorInfo& t : original.tensors()) {
      if (pick(t.name)) w.add_tensor(t.name, t.dims, type, converted(t, type));
    }
  };
  return testing::write_tiny_model(s, testing::temp_path(name));
}

TinyModelSpec q8_spec() {
  TinyModelSpec s;
  s.arch = "qwen2";
  s.weight_type = GgmlType::Q8_0;
  s.n_vocab = 300;  // not a multiple of 8: the head has rows past its last packed group
  s.seed = 7;
  return s;
}

const std::vector<int32_t> kTokens = {5, 70, 299, 12, 150};

// got holds kTokens.size() rows of ids.size() logits, full rows of v: column r of got must be
// column ids[r] of full, bit for bit.
void expect_columns_of(const std::vector<float>& got, const std::vector<float>& full,
                       const std::vector<int32_t>& ids, size_t v) {
  const size_t w = ids.size();
  ASSERT_EQ(got.size(), kTokens.size() * w);
  ASSERT_EQ(full.size(), kTokens.size() * v);
  for (size_t t = 0; t < kTokens.size(); ++t) {
    for (size_t r = 0; r < w; ++r) {
      const float a = got[t * w + r];
      const float b = full[t * v + static_cast<size_t>(ids[r])];
      ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "token " << t << " row " << r;
    }
  }
}

TEST(WeightLayout, RequantizedBlocksEqualAFileThatHoldsThem) {
  ThreadPool pool(2);
  const TinyModelSpec spec = q8_spec();
  testing::TinyModel plain(spec, "wl_plain.gguf");
  auto file = gguf::GgufFile::open(
      write_converted(spec, *plain.file, is_block_matrix, GgmlType::Q4_0, "wl_q4.gguf"));
  auto stored = Model::load(*file);
  ModelLoadOptions o;
  o.matrix_type = GgmlType::Q4_0;
  auto converted_at_load = Model::load(*plain.file, o);
  const std::vector<float> want = logits_of(*stored, kTokens, pool);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*converted_at_load, kTokens, pool), want));
  EXPECT_FALSE(testing::bitwise_equal(logits_of(*plain.model, kTokens, pool), want));
  // Q4_0 copies are smaller than Q8_0 ones.
  EXPECT_LT(converted_at_load->packed_weight_bytes(), plain.model->packed_weight_bytes());
}

// matrix_type_only_where_smaller (the CLI's --draft-type auto): only the block matrices stored
// wider than the target type are requantized; a narrower one keeps its file type.
TEST(WeightLayout, RequantizingOnlyWhereSmallerKeepsTheNarrowerMatrices) {
  ThreadPool pool(2);
  const TinyModelSpec spec = q8_spec();
  testing::TinyModel plain(spec, "wl_plain_ws.gguf");
  // The file: Q8_0 blocks, but every ffn_down in Q4_0 (4.5 bits per weight).
  auto is_down = [](const std::string& n) { return n.find("ffn_down") != std::string::npos; };
  auto mixed = gguf::GgufFile::open(
      write_converted(spec, *plain.file, is_down, GgmlType::Q4_0, "wl_mixed.gguf"));
  // What the rule should give: the Q8_0 ones (8.5 bits) in Q5_0 (5.5), ffn_down as it is.
  // (write_converted would write ffn_down afresh from the spec, in Q8_0.)
  TinyModelSpec want_spec = spec;
  for (const gguf::TensorInfo& t : mixed->tensors()) {
    if (is_block_matrix(t.name)) want_spec.skip_tensors.push_back(t.name);
  }
  want_spec.edit = [&mixed, &is_down](gguf::GgufWriter& w) {
    for (const gguf::TensorInfo& t : mixed->tensors()) {
      if (!is_block_matrix(t.name)) continue;
      if (is_down(t.name)) {
        const size_t bytes = row_bytes(t.type, t.row_length()) * static_cast<size_t>(t.n_rows());
        w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + bytes));
      } else {
        w.add_tensor(t.name, t.dims, GgmlType::Q5_0, converted(t, GgmlType::Q5_0));
      }
    }
  };
  auto want_file = gguf::GgufFile::open(
      testing::write_tiny_model(want_spec, testing::temp_path("wl_mixed_q5.gguf")));
  auto want = Model::load(*want_file);
  ModelLoadOptions o;
  o.matrix_type = GgmlType::Q5_0;
  o.matrix_type_only_where_smaller = true;
  auto only_smaller = Model::load(*mixed, o);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*only_smaller, kTokens, pool),
                                     logits_of(*want, kTokens, pool)));
  // Without the rule ffn_down goes to Q5_0 too: wider copies.
  o.matrix_type_only_where_smaller = false;
  auto all = Model::load(*mixed, o);
  EXPECT_LT(only_smaller->packed_weight_bytes(), all->packed_weight_bytes());
  EXPECT_EQ(only_smaller->packed_weight_bytes(), want->packed_weight_bytes());
}

TEST(WeightLayout, RequantizedHeadEqualsAFileThatHoldsIt) {
  ThreadPool pool(1);
  const TinyModelSpec spec = q8_spec();
  testing::TinyModel plain(spec, "wl_plain_h.gguf");
  auto is_head = [](const std::string& n) { return n == "output.weight"; };
  auto file = gguf::GgufFile::open(
      write_converted(spec, *plain.file, is_head, GgmlType::Q5_0, "wl_q5_head.gguf"));
  auto stored = Model::load(*file);
  ModelLoadOptions o;
  o.output_type = GgmlType::Q5_0;
  auto converted_at_load = Model::load(*plain.file, o);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*converted_at_load, kTokens, pool),
                                     logits_of(*stored, kTokens, pool)));
}

TEST(WeightLayout, ConversionWithoutPackingGivesTheSameModelAsItsFile) {
  ThreadPool pool(2);
  const TinyModelSpec spec = q8_spec();
  testing::TinyModel plain(spec, "wl_plain_np.gguf");
  auto file = gguf::GgufFile::open(
      write_converted(spec, *plain.file, is_block_matrix, GgmlType::Q4_1, "wl_q41.gguf"));
  ::setenv("SPECDEC_NO_PACK", "1", 1);
  auto stored = Model::load(*file);
  ModelLoadOptions o;
  o.matrix_type = GgmlType::Q4_1;
  auto converted_at_load = Model::load(*plain.file, o);
  ::unsetenv("SPECDEC_NO_PACK");
  EXPECT_EQ(converted_at_load->packed_weight_bytes(), 0u);
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*converted_at_load, kTokens, pool),
                                     logits_of(*stored, kTokens, pool)));
}

// A head in another row order: column r is the plain model's column logit_ids()[r], same bits.
// The vocabulary here is whole groups of 8 rows: rows past the last group are computed by the
// plain kernel, whose bits may differ from the packed one's, so an id moved into or out of
// that tail may change in its last bits (harmless for a draft; Qwen's 151,936 has no tail).
TEST(WeightLayout, HeadInAnotherOrderGivesThoseColumns) {
  ThreadPool pool(2);
  TinyModelSpec spec = q8_spec();
  spec.n_vocab = 304;
  testing::TinyModel plain(spec, "wl_plain_o.gguf");
  const int32_t v = plain.model->config().n_vocab;
  ModelLoadOptions o;
  o.output_ids.resize(static_cast<size_t>(v));
  for (int32_t r = 0; r < v; ++r)
    o.output_ids[static_cast<size_t>(r)] = (r * 7 + 3) % v;  // 7, 304 coprime
  auto reordered = Model::load(*plain.file, o);
  ASSERT_EQ(reordered->logit_ids().size(), static_cast<size_t>(v));
  expect_columns_of(logits_of(*reordered, kTokens, pool), logits_of(*plain.model, kTokens, pool),
                    o.output_ids, static_cast<size_t>(v));
}

// A head cut to some ids: only those columns, the same as a plain model's.
TEST(WeightLayout, CutHeadGivesOnlyItsIdsColumns) {
  ThreadPool pool(1);
  TinyModelSpec spec = q8_spec();
  spec.n_vocab = 304;
  testing::TinyModel plain(spec, "wl_plain_c.gguf");
  const int32_t v = plain.model->config().n_vocab;
  ModelLoadOptions o;
  for (int32_t id = v - 1; id >= 0; id -= 2) o.output_ids.push_back(id);  // 152: whole groups
  auto cut = Model::load(*plain.file, o);
  ASSERT_EQ(cut->logit_ids().size(), o.output_ids.size());
  expect_columns_of(logits_of(*cut, kTokens, pool), logits_of(*plain.model, kTokens, pool),
                    o.output_ids, static_cast<size_t>(v));
}

// Packing runs on several threads at load, largest matrix first: the copies (converted,
// requantized and cut ones too) must not depend on how many, nor on which thread took which.
TEST(WeightLayout, LoadThreadsDoNotChangeTheModel) {
  ThreadPool pool(2);
  TinyModelSpec spec = q8_spec();
  spec.n_vocab = 304;
  testing::TinyModel plain(spec, "wl_plain_t.gguf");
  ModelLoadOptions o;
  o.matrix_type = GgmlType::Q4_0;
  o.output_type = GgmlType::Q5_0;
  for (int32_t id = 0; id < 300; id += 3) o.output_ids.push_back(id);  // 100: a tail of 4 rows
  o.load_threads = 1;
  auto one = Model::load(*plain.file, o);
  const std::vector<float> want = logits_of(*one, kTokens, pool);
  for (int32_t threads : {2, 3, 8, 64}) {
    o.load_threads = threads;
    auto many = Model::load(*plain.file, o);
    EXPECT_EQ(many->packed_weight_bytes(), one->packed_weight_bytes()) << threads << " threads";
    EXPECT_TRUE(testing::bitwise_equal(logits_of(*many, kTokens, pool), want))
        << threads << " threads";
  }
  o.load_threads = 0;  // one per core
  EXPECT_TRUE(testing::bitwise_equal(logits_of(*Model::load(*plain.file, o), kTokens, pool), want));
}

// Every id in id order is the plain head: no logit_ids.
TEST(WeightLayout, IdentityOrderIsThePlainHead) {
  const TinyModelSpec spec = q8_spec();
  testing::TinyModel plain(spec, "wl_plain_i.gguf");
  ModelLoadOptions o;
  o.output_ids.resize(static_cast<size_t>(plain.model->config().n_vocab));
  std::iota(o.output_ids.begin(), o.output_ids.end(), 0);
  EXPECT_TRUE(Model::load(*plain.file, o)->logit_ids().empty());
}

TEST(WeightLayout, BadOptionsAreRefused) {
  const TinyModelSpec spec = q8_spec();
  testing::TinyModel plain(spec, "wl_plain_b.gguf");
  ModelLoadOptions dup;
  dup.output_ids = {1, 2, 1};
  EXPECT_THROW(Model::load(*plain.file, dup), Error);
  ModelLoadOptions out_of_range;
  out_of_range.output_ids = {0, 300};
  EXPECT_THROW(Model::load(*plain.file, out_of_range), Error);
  ModelLoadOptions negative;
  negative.output_ids = {-1};
  EXPECT_THROW(Model::load(*plain.file, negative), Error);
  ModelLoadOptions unpackable;
  unpackable.matrix_type = GgmlType::F16;
  EXPECT_THROW(Model::load(*plain.file, unpackable), Error);
  ModelLoadOptions activation_type;
  activation_type.output_type = GgmlType::Q8_K;
  EXPECT_THROW(Model::load(*plain.file, activation_type), Error);
}

}  // namespace
}  // namespace specdec
