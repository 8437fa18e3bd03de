// Model::forward: batch invariance (bitwise), thread-count invariance, cache rollback, and
// agreement with an independent double-precision reference, for both architectures and every
// supported weight type.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "tensor/matmul.h"
#include "tensor/quantize.h"

namespace specdec {
namespace {

using testing::bitwise_equal;
using testing::forward_all;
using testing::TinyModel;
using testing::TinyModelSpec;

// ---------------------------------------------------------------------------------------------
// Reference: the textbook transformer in double precision, written from the tensor names and
// the architecture's published conventions, not from the engine's code. Weights are the
// dequantized file tensors; nothing is shared with the engine but dequantize_row.
struct Reference {
  using Mat = std::vector<double>;  // row-major rows x cols

  Reference(const gguf::GgufFile& file, const ModelConfig& config, bool neox_rope)
      : f(file), c(config), neox(neox_rope) {}

  const gguf::GgufFile& f;
  ModelConfig c;
  bool neox;
  mutable std::map<std::string, Mat> dequantized;

  const Mat& tensor(const std::string& name) const {
    if (auto it = dequantized.find(name); it != dequantized.end()) return it->second;
    const gguf::TensorInfo& t = f.tensor(name);
    const int64_t cols = t.row_length(), rows = t.n_rows();
    WeightMatrix w{t.type, rows, cols, t.data, row_bytes(t.type, cols)};
    std::vector<float> row(static_cast<size_t>(cols));
    Mat out;
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(w, r, row.data());
      out.insert(out.end(), row.begin(), row.end());
    }
    return dequantized[name] = std::move(out);
  }
  static std::vector<double> matvec(const Mat& m, const std::vector<double>& x) {
    const size_t cols = x.size(), rows = m.size() / cols;
    std::vector<double> y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < cols; ++i) y[r] += m[r * cols + i] * x[i];
    }
    return y;
  }
  std::vector<double> rms_norm(const std::vector<double>& x, const Mat& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / x.size() + c.rms_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
  }
  // llama: GGUF Q/K rows are permuted so pairs are adjacent; qwen2, gemma3, qwen3: pairs are d/2
  // apart.
  void rope(std::vector<double>& v, int n_heads, int pos, double base) const {
    const int d = c.head_dim;
    for (int h = 0; h < n_heads; ++h) {
      for (int i = 0; i < d / 2; ++i) {
        const double theta = pos * std::pow(base, -2.0 * i / d);
        const size_t a = h * d + (neox ? i : 2 * i), b = h * d + (neox ? i + d / 2 : 2 * i + 1);
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
    }
  }

  // Per-head RMSNorm (gemma3's and qwen3's Q/K norms).
  void head_norm(std::vector<double>& v, const Mat& w) const {
    const size_t d = w.size();
    for (size_t h = 0; h < v.size() / d; ++h) {
      std::vector<double> head(v.begin() + h * d, v.begin() + (h + 1) * d);
      head = rms_norm(head, w);
      std::copy(head.begin(), head.end(), v.begin() + h * d);
    }
  }
  // GELU, tanh approximation, of x rounded to fp16, rounded to fp16: the function ggml's CPU
  // backend evaluates (from a table) and llama.cpp's gemma graph therefore defines.
  static double gelu_fp16(double x) {
    if (x <= -10) return 0;
    if (x >= 10) return x;
    const double h = fp16_to_fp32(fp32_to_fp16(static_cast<float>(x)));
    const double g = 0.5 * h * (1 + std::tanh(std::sqrt(2 / M_PI) * (h + 0.044715 * h * h * h)));
    return fp16_to_fp32(fp32_to_fp16(static_cast<float>(g)));
  }

  // Logits of every token of `tokens` at positions first_pos.., from an empty cache.
  // qwen3: Q/K RMSNorm per head before RoPE, no biases.
  // gemma3 (llama.cpp's graph): embeddings times sqrt(n_embd); Q/K RMSNorm per head before RoPE;
  // layer l attends over the last sliding_window tokens with RoPE base 10000 unless l % 6 == 5;
  // attention output and FFN output RMSNorm'd before their residual adds; GELU-gated FFN.
  std::vector<std::vector<double>> run(const std::vector<int32_t>& tokens, int first_pos) const {
    const int E = c.n_embd, d = c.head_dim;
    const bool gemma = c.arch == "gemma3";
    const Mat& embd = tensor("token_embd.weight");
    const Mat& out_w = f.find_tensor("output.weight") ? tensor("output.weight") : embd;
    std::vector<std::vector<std::vector<double>>> keys(c.n_layer), values(c.n_layer);
    std::vector<std::vector<double>> logits;
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::vector<double> x(embd.begin() + tokens[t] * E, embd.begin() + (tokens[t] + 1) * E);
      if (gemma) {
        for (double& e : x) e *= std::sqrt(static_cast<double>(E));
      }
      for (int l = 0; l < c.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const bool local = gemma && l % 6 != 5;
        std::vector<double> xn = rms_norm(x, tensor(p + "attn_norm.weight"));
        std::vector<double> q = matvec(tensor(p + "attn_q.weight"), xn);
        std::vector<double> k = matvec(tensor(p + "attn_k.weight"), xn);
        std::vector<double> v = matvec(tensor(p + "attn_v.weight"), xn);
        if (c.arch == "qwen2") {
          const Mat &bq = tensor(p + "attn_q.bias"), &bk = tensor(p + "attn_k.bias"),
                    &bv = tensor(p + "attn_v.bias");
          for (size_t i = 0; i < q.size(); ++i) q[i] += bq[i];
          for (size_t i = 0; i < k.size(); ++i) k[i] += bk[i], v[i] += bv[i];
        }
        if (gemma || c.arch == "qwen3") {
          head_norm(q, tensor(p + "attn_q_norm.weight"));
          head_norm(k, tensor(p + "attn_k_norm.weight"));
        }
        const int pos = first_pos + static_cast<int>(t);
        const double base = local ? 10000.0 : static_cast<double>(c.rope_theta);
        rope(q, c.n_head, pos, base);
        rope(k, c.n_head_kv, pos, base);
        keys[l].push_back(k);
        values[l].push_back(v);
        std::vector<double> att(static_cast<size_t>(c.n_head) * d, 0.0);
        for (int h = 0; h < c.n_head; ++h) {
          const int kvh = h * c.n_head_kv / c.n_head;  // consecutive query heads share a KV head
          // Keys j0..t: all of them, or the last sliding_window in a local layer.
          const size_t j0 =
              local && t + 1 > static_cast<size_t>(c.sliding_window) ? t + 1 - c.sliding_window : 0;
          std::vector<double> s(keys[l].size(), 0.0);
          double mx = -1e300, sum = 0;
          for (size_t j = j0; j < s.size(); ++j) {
            for (int i = 0; i < d; ++i) s[j] += q[h * d + i] * keys[l][j][kvh * d + i];
            s[j] /= std::sqrt(static_cast<double>(d));
            mx = std::max(mx, s[j]);
          }
          for (size_t j = j0; j < s.size(); ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (size_t j = j0; j < s.size(); ++j) {
            for (int i = 0; i < d; ++i) att[h * d + i] += s[j] / sum * values[l][j][kvh * d + i];
          }
        }
        std::vector<double> o = matvec(tensor(p + "attn_output.weight"), att);
        if (gemma) o = rms_norm(o, tensor(p + "post_attention_norm.weight"));
        for (int i = 0; i < E; ++i) x[i] += o[i];
        xn = rms_norm(x, tensor(p + "ffn_norm.weight"));
        std::vector<double> g = matvec(tensor(p + "ffn_gate.weight"), xn);
        const std::vector<double> u = matvec(tensor(p + "ffn_up.weight"), xn);
        for (size_t i = 0; i < g.size(); ++i) {
          g[i] = (gemma ? gelu_fp16(g[i]) : g[i] / (1 + std::exp(-g[i]))) * u[i];
        }
        std::vector<double> dn = matvec(tensor(p + "ffn_down.weight"), g);
        if (gemma) dn = rms_norm(dn, tensor(p + "post_ffw_norm.weight"));
        for (int i = 0; i < E; ++i) x[i] += dn[i];
      }
      logits.push_back(matvec(out_w, rms_norm(x, tensor("output_norm.weight"))));
    }
    return logits;
  }
};

// ---------------------------------------------------------------------------------------------

struct Case {
  std::string arch;
  GgmlType type;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << "/" << type_name(c.type); }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.arch + "_" + std::string(type_name(info.param.type));
}

TinyModelSpec spec_for(const Case& c) {
  TinyModelSpec spec;
  spec.arch = c.arch;
  spec.weight_type = c.type;
  spec.seed = 7;
  if (c.arch == "gemma3") spec.n_layer = 7;  // local layers 0-4 and 6, global layer 5
  if (traits(c.type).block_size == 256) {    // K-quants: rows must be whole super-blocks
    spec.n_embd = 256;
    spec.n_ff = 256;
  }
  return spec;
}

const std::vector<int32_t> kTokens = {72,  101, 108, 108, 111, 32,  119,
                                      111, 114, 108, 100, 33,  266, 299};

class ForwardTest : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardTest, BatchEqualsSingleStepsBitwise) {
  TinyModel m(spec_for(GetParam()));
  ThreadPool pool(2);
  KvCache batch_cache(m.model->config(), 64), step_cache(m.model->config(), 64);
  const std::vector<float> batch = forward_all(*m.model, batch_cache, kTokens, 0, pool);
  std::vector<float> steps;
  for (size_t i = 0; i < kTokens.size(); ++i) {
    const std::vector<float> one =
        forward_all(*m.model, step_cache, {kTokens[i]}, static_cast<int32_t>(i), pool);
    steps.insert(steps.end(), one.begin(), one.end());
  }
  EXPECT_EQ(batch_cache.length(), static_cast<int32_t>(kTokens.size()));
  EXPECT_TRUE(bitwise_equal(batch, steps));

  // Uneven chunks (prefill 5, verify 1, then 8) give the same bits too.
  KvCache chunk_cache(m.model->config(), 64);
  std::vector<float> chunks;
  int32_t pos = 0;
  for (size_t n : {5u, 1u, 8u}) {
    const std::vector<int32_t> part(kTokens.begin() + pos, kTokens.begin() + pos + n);
    const std::vector<float> out = forward_all(*m.model, chunk_cache, part, pos, pool);
    chunks.insert(chunks.end(), out.begin(), out.end());
    pos += static_cast<int32_t>(n);
  }
  EXPECT_TRUE(bitwise_equal(batch, chunks));
}

TEST_P(ForwardTest, ThreadCountDoesNotChangeBits) {
  TinyModel m(spec_for(GetParam()));
  ThreadPool one(1), three(3);
  KvCache a(m.model->config(), 64), b(m.model->config(), 64);
  EXPECT_TRUE(bitwise_equal(forward_all(*m.model, a, kTokens, 0, one),
                            forward_all(*m.model, b, kTokens, 0, three)));
}

TEST_P(ForwardTest, TruncateThenExtendEqualsFresh) {
  TinyModel m(spec_for(GetParam()));
  ThreadPool pool(2);
  const std::vector<int32_t> prefix(kTokens.begin(), kTokens.begin() + 6);
  const std::vector<int32_t> rejected = {1, 2, 3, 4};
  const std::vector<int32_t> accepted = {280, 45, 46};

  KvCache rolled(m.model->config(), 32);
  forward_all(*m.model, rolled, prefix, 0, pool);
  forward_all(*m.model, rolled, rejected, 6, pool);
  rolled.truncate(6);
  const std::vector<float> after = forward_all(*m.model, rolled, accepted, 6, pool);

  KvCache fresh(m.model->config(), 32);
  std::vector<int32_t> all = prefix;
  all.insert(all.end(), accepted.begin(), accepted.end());
  const std::vector<float> full = forward_all(*m.model, fresh, all, 0, pool);
  const size_t V = static_cast<size_t>(m.model->config().n_vocab);
  EXPECT_TRUE(bitwise_equal(after, std::vector<float>(full.begin() + 6 * V, full.end())));
}

TEST_P(ForwardTest, MatchesDoublePrecisionReference) {
  TinyModel m(spec_for(GetParam()));
  ThreadPool pool(2);
  const int first_pos = 3;  // non-zero start: RoPE must use the given positions
  KvCache cache(m.model->config(), 64);
  const std::vector<float> got = forward_all(*m.model, cache, kTokens, first_pos, pool);
  const Reference ref{*m.file, m.model->config(), GetParam().arch != "llama"};
  const auto want = ref.run(kTokens, first_pos);

  // Errors relative to the logits' scale (max |logit|; RMS error over RMS logit).
  // F32 weights: the engine differs from the reference only by float rounding (measured
  // <1e-6). Other types also quantize the activations (to Q8_0/Q8_1/Q8_K, or round them to
  // F16/BF16) before the dot products, as llama.cpp does: measured max error ~5e-4 (F16),
  // ~5e-3 (BF16), 1-2.5% (Q types), RMS error 1-2% (Q types). A RoPE pairing, GQA
  // head-mapping or bias mistake shows up as errors of order 1e-2..1 in the F32 case.
  const GgmlType type = GetParam().type;
  const bool gemma = GetParam().arch == "gemma3";
  // gemma3's GELU takes its input rounded to fp16 (ggml's table): a float rounding difference
  // that moves a gate value across an fp16 rounding boundary changes that element by one fp16
  // step (2^-11 relative), so with F32 weights the error depends on the dot kernels' summation
  // order. Measured max / RMS relative error: 8-lane AVX2 sums under 1e-5 / 1e-6, 16-lane
  // AVX-512 sums 4.4e-5 / 1.9e-5, the scalar kernels 7.2e-5 / 2.7e-5. Still far below the
  // 1e-2..1 of a real mistake.
  const double f32_max_tol = gemma ? 3e-4 : 1e-5, f32_rms_tol = gemma ? 1e-4 : 1e-6;
  const double max_tol = type == GgmlType::F32 ? f32_max_tol : type == GgmlType::F16 ? 3e-3 : 5e-2;
  // gemma3 runs 7 layers (the others 2), so activation-quantization error accumulates further:
  // measured RMS error 3.5-3.8% for the K-quants.
  const double rms_q = gemma ? 5e-2 : 3e-2;
  const double rms_tol = type == GgmlType::F32 ? f32_rms_tol : type == GgmlType::F16 ? 3e-3 : rms_q;
  const size_t V = want[0].size();
  double max_err = 0, max_ref = 0, sq_err = 0, sq_ref = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    for (size_t v = 0; v < V; ++v) {
      const double e = got[t * V + v] - want[t][v];
      max_err = std::max(max_err, std::abs(e));
      max_ref = std::max(max_ref, std::abs(want[t][v]));
      sq_err += e * e;
      sq_ref += want[t][v] * want[t][v];
    }
  }
  const double rms_rel = std::sqrt(sq_err / sq_ref);
  RecordProperty("max_rel_err", std::to_string(max_err / max_ref));
  RecordProperty("rms_rel_err", std::to_string(rms_rel));
  EXPECT_LE(max_err, max_tol * max_ref) << "max |error| " << max_err << ", max |logit| " << max_ref;
  EXPECT_LE(rms_rel, rms_tol);
}

TEST_P(ForwardTest, SelectedRowsMatchAllRows) {
  TinyModel m(spec_for(GetParam()));
  ThreadPool pool(2);
  KvCache a(m.model->config(), 64), b(m.model->config(), 64);
  const std::vector<float> all = forward_all(*m.model, a, kTokens, 0, pool);
  const size_t V = static_cast<size_t>(m.model->config().n_vocab);
  std::vector<int32_t> positions(kTokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  const std::vector<int32_t> rows = {2, 7, 13};
  std::vector<float> some(rows.size() * V);
  m.model->forward(kTokens, positions, b, rows, some.data(), pool);
  for (size_t j = 0; j < rows.size(); ++j) {
    EXPECT_EQ(0, std::memcmp(&some[j * V], &all[rows[j] * V], V * sizeof(float))) << rows[j];
  }
  // A pass that asks for no logits stops its last layer after the K/V (forward.cpp) and leaves
  // the cache a pass over every row leaves: the next step's logits agree.
  KvCache none(m.model->config(), 64);
  m.model->forward(kTokens, positions, none, {}, nullptr, pool);
  const auto next = static_cast<int32_t>(kTokens.size());
  EXPECT_EQ(forward_all(*m.model, none, {9}, next, pool),
            forward_all(*m.model, a, {9}, next, pool));
}

// A vocabulary subset computes exactly the subset's columns of the full logits, for one logit
// row (written in place) and several (interleaved from scratch), with gaps between ranges.
TEST_P(ForwardTest, VocabSubsetLogitsAreTheFullLogitsColumns) {
  TinyModel m(spec_for(GetParam()));
  ThreadPool pool(2);
  KvCache a(m.model->config(), 64), b(m.model->config(), 64), c(m.model->config(), 64);
  const std::vector<float> all = forward_all(*m.model, a, kTokens, 0, pool);
  const int32_t V = m.model->config().n_vocab;
  const std::vector<int32_t> wanted = {0, 5, 17, 40, 41, V - 1};
  const VocabSubset subset = VocabSubset::from_ids(wanted, V);
  ASSERT_GT(subset.ranges().size(), 1u);
  ASSERT_LT(subset.width(), V);
  const auto W = static_cast<size_t>(subset.width());
  std::vector<int32_t> positions(kTokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  const std::vector<int32_t> rows = {2, 7, 13};
  std::vector<float> some(rows.size() * W, -1.0f);
  m.model->forward(kTokens, positions, b, rows, some.data(), pool, &subset);
  for (size_t j = 0; j < rows.size(); ++j) {
    for (size_t col = 0; col < W; ++col) {
      const float want = all[static_cast<size_t>(rows[j]) * static_cast<size_t>(V) +
                             static_cast<size_t>(subset.ids()[col])];
      ASSERT_EQ(0, std::memcmp(&some[j * W + col], &want, sizeof(float)))
          << "row " << rows[j] << " id " << subset.ids()[col];
    }
  }
  std::vector<float> last(W, -1.0f);
  const std::vector<int32_t> last_row = {static_cast<int32_t>(kTokens.size()) - 1};
  m.model->forward(kTokens, positions, c, last_row, last.data(), pool, &subset);
  for (size_t col = 0; col < W; ++col) {
    const float want =
        all[(kTokens.size() - 1) * static_cast<size_t>(V) + static_cast<size_t>(subset.ids()[col])];
    ASSERT_EQ(0, std::memcmp(&last[col], &want, sizeof(float))) << subset.ids()[col];
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* arch : {"llama", "qwen2", "gemma3", "qwen3"}) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                       GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,
                       GgmlType::Q5_K, GgmlType::Q6_K}) {
      cases.push_back({arch, t});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ForwardTest, ::testing::ValuesIn(all_cases()), case_name);

// ---------------------------------------------------------------------------------------------

TEST(Forward, CacheOverflowThrowsAndLeavesCacheUnchanged) {
  TinyModel m(TinyModelSpec{});
  ThreadPool pool(1);
  KvCache cache(m.model->config(), 4);
  forward_all(*m.model, cache, {1, 2, 3}, 0, pool);
  EXPECT_THROW(forward_all(*m.model, cache, {4, 5}, 3, pool), Error);
  EXPECT_EQ(cache.length(), 3);
  EXPECT_NO_THROW(forward_all(*m.model, cache, {4}, 3, pool));
  EXPECT_THROW(forward_all(*m.model, cache, {5}, 4, pool), Error);
}

TEST(Forward, RejectsBadArguments) {
  TinyModel m(TinyModelSpec{});
  ThreadPool pool(1);
  KvCache cache(m.model->config(), 8);
  std::vector<float> logits(2 * 300);
  const std::vector<int32_t> tok = {1, 2}, pos = {0, 1};
  EXPECT_THROW(forward_all(*m.model, cache, {300}, 0, pool), Error);
  EXPECT_THROW(forward_all(*m.model, cache, {-1}, 0, pool), Error);
  EXPECT_THROW(m.model->forward(tok, std::vector<int32_t>{0}, cache, {}, nullptr, pool), Error);
  EXPECT_THROW(m.model->forward(tok, pos, cache, std::vector<int32_t>{1, 0}, logits.data(), pool),
               Error);
  EXPECT_THROW(m.model->forward(tok, pos, cache, std::vector<int32_t>{2}, logits.data(), pool),
               Error);
  EXPECT_THROW(m.model->forward(tok, std::vector<int32_t>{0, -1}, cache, {}, nullptr, pool), Error);
  TinyModelSpec other;
  other.n_layer = 3;
  TinyModel m3(other, "other.gguf");
  KvCache wrong(m3.model->config(), 8);
  EXPECT_THROW(forward_all(*m.model, wrong, {1}, 0, pool), Error);
  EXPECT_EQ(cache.length(), 0);
  m.model->forward({}, {}, cache, {}, nullptr, pool);  // k = 0 is a no-op
  EXPECT_EQ(cache.length(), 0);
}

TEST(Forward, TiedOutputUsesEmbedding) {
  // Same seed, so the tied model has the same weights minus output.weight; its logits must be
  // the reference's with token_embd as the output matrix, and differ from the untied model's.
  TinyModelSpec untied_spec, tied_spec;
  tied_spec.tied = true;
  TinyModel untied(untied_spec, "untied.gguf"), tied(tied_spec, "tied.gguf");
  EXPECT_FALSE(untied.model->config().tied_output);
  EXPECT_TRUE(tied.model->config().tied_output);
  ThreadPool pool(1);
  KvCache a(untied.model->config(), 16), b(tied.model->config(), 16);
  const std::vector<int32_t> toks = {10, 20, 30};
  const std::vector<float> lu = forward_all(*untied.model, a, toks, 0, pool);
  const std::vector<float> lt = forward_all(*tied.model, b, toks, 0, pool);
  EXPECT_FALSE(bitwise_equal(lu, lt));
  const auto want = Reference{*tied.file, tied.model->config(), false}.run(toks, 0);
  for (size_t t = 0; t < toks.size(); ++t) {
    for (size_t v = 0; v < 300; ++v) EXPECT_NEAR(lt[t * 300 + v], want[t][v], 1e-4);
  }
}

TEST(Forward, RopeFreqFactorsScaleFrequencies) {
  // Llama 3.1+ files carry per-pair frequency divisors in rope_freqs.weight. Divisors of 1
  // change nothing; divisors of 2 equal linear scaling by 2 (both halve every frequency,
  // exactly, in double), and differ from no scaling.
  auto with_factors = [](float factor) {
    TinyModelSpec spec;
    spec.edit = [factor](gguf::GgufWriter& w) {
      std::vector<float> f(8, factor);  // head_dim 16 -> 8 pairs
      std::vector<uint8_t> bytes(f.size() * sizeof(float));
      std::memcpy(bytes.data(), f.data(), bytes.size());
      w.add_tensor("rope_freqs.weight", {8}, GgmlType::F32, bytes);
    };
    return spec;
  };
  TinyModelSpec linear;
  linear.edit = [](gguf::GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 2.0f);
  };
  TinyModel plain(TinyModelSpec{}, "plain.gguf"), ones(with_factors(1.0f), "ones.gguf"),
      twos(with_factors(2.0f), "twos.gguf"), lin(linear, "linear.gguf");
  ThreadPool pool(1);
  auto run = [&](TinyModel& m) {
    KvCache cache(m.model->config(), 16);
    return forward_all(*m.model, cache, {3, 1, 4, 1, 5}, 0, pool);
  };
  const std::vector<float> base = run(plain);
  EXPECT_TRUE(bitwise_equal(base, run(ones)));
  EXPECT_TRUE(bitwise_equal(run(twos), run(lin)));
  EXPECT_FALSE(bitwise_equal(base, run(twos)));

  TinyModelSpec bad;
  bad.edit = [](gguf::GgufWriter& w) {
    w.add_tensor("rope_freqs.weight", {4}, GgmlType::F32, std::vector<uint8_t>(16, 0));
  };
  EXPECT_THROW(TinyModel(bad, "bad.gguf"), Error);
}

TEST(Forward, LongPrefillWithParallelAttentionIsInvariant) {
  // 180 tokens at once is enough work for attention to be split over threads; decoding them
  // one by one runs attention on the calling thread. Both, and both thread counts, must agree.
  // (gemma3: a 100-token window, so the local layers' windows slide during the prefill.)
  for (const char* arch : {"llama", "qwen2", "gemma3", "qwen3"}) {
    TinyModelSpec spec;
    spec.arch = arch;
    spec.n_layer = spec.arch == "gemma3" ? 6 : 2;
    spec.sliding_window = 100;
    TinyModel m(spec, std::string(arch) + ".gguf");
    std::vector<int32_t> tokens(180);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37) % 300);
    ThreadPool one(1), three(3);
    KvCache a(m.model->config(), 200), b(m.model->config(), 200), c(m.model->config(), 200);
    const std::vector<float> batch3 = forward_all(*m.model, a, tokens, 0, three);
    EXPECT_TRUE(bitwise_equal(batch3, forward_all(*m.model, b, tokens, 0, one))) << arch;
    std::vector<float> steps;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto out = forward_all(*m.model, c, {tokens[i]}, static_cast<int32_t>(i), one);
      steps.insert(steps.end(), out.begin(), out.end());
    }
    EXPECT_TRUE(bitwise_equal(batch3, steps)) << arch;
  }
}

TEST(Forward, PositionsAreHonoured) {
  // The same tokens at shifted positions give different logits after the first token (whose
  // attention is over itself only, where RoPE cancels out).
  TinyModel m(TinyModelSpec{});
  ThreadPool pool(1);
  KvCache a(m.model->config(), 16), b(m.model->config(), 16);
  const std::vector<float> la = forward_all(*m.model, a, {5, 6, 7}, 0, pool);
  const std::vector<float> lb = forward_all(*m.model, b, {5, 6, 7}, 40, pool);
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), 300 * sizeof(float)));
  EXPECT_NE(0, std::memcmp(la.data() + 300, lb.data() + 300, 300 * sizeof(float)));
}

TEST(Forward, SlidingWindowHidesOnlyOlderPositions) {
  // gemma3 with 6 layers (five local): with a window of 4, tokens 0..3 see everything they would
  // see with an unlimited window (same bits); from token 4 on the local layers lose the oldest
  // keys and the logits change. The same weights, since only the metadata differs.
  TinyModelSpec narrow;
  narrow.arch = "gemma3";
  narrow.n_layer = 6;
  narrow.sliding_window = 4;
  TinyModelSpec wide = narrow;
  wide.sliding_window = 1000;
  TinyModel a(narrow, "narrow.gguf"), b(wide, "wide.gguf");
  EXPECT_EQ(a.model->config().sliding_window, 4);
  EXPECT_TRUE(a.model->config().is_local_layer(4));
  EXPECT_FALSE(a.model->config().is_local_layer(5));
  ThreadPool pool(1);
  KvCache ca(a.model->config(), 16), cb(b.model->config(), 16);
  const std::vector<float> la = forward_all(*a.model, ca, kTokens, 0, pool);
  const std::vector<float> lb = forward_all(*b.model, cb, kTokens, 0, pool);
  const size_t V = static_cast<size_t>(a.model->config().n_vocab);
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), 4 * V * sizeof(float)));
  for (size_t t = 4; t < kTokens.size(); ++t) {
    EXPECT_NE(0, std::memcmp(&la[t * V], &lb[t * V], V * sizeof(float))) << t;
  }
}

}  // namespace
}  // namespace specdec
