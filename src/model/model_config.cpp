// ModelConfig::from_gguf: metadata keys -> validated hyperparameters.
#include <cmath>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "model/arch.h"
#include "model/model.h"

namespace specdec {
namespace {

// Upper bounds far above any real model; they catch corrupt or hostile files before a size
// product overflows or a huge allocation is attempted.
constexpr int64_t kMaxEmbd = 1 << 16;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxFf = 1 << 18;
constexpr int64_t kMaxVocab = 1 << 22;
constexpr int64_t kMaxCtx = 1 << 24;

class ConfigReader {
 public:
  ConfigReader(const gguf::GgufFile& file, const std::string& arch) : f_(file), arch_(arch) {}

  std::string key(const char* suffix) const { return arch_ + "." + suffix; }

  int32_t required_int(const char* suffix, int64_t lo, int64_t hi) const {
    const std::string k = key(suffix);
    if (!f_.has(k)) fail(f_.path(), ": missing metadata key '", k, "'");
    return checked(k, f_.get_int(k), lo, hi);
  }
  int32_t optional_int(const char* suffix, int64_t fallback, int64_t lo, int64_t hi) const {
    const std::string k = key(suffix);
    return checked(k, f_.get_int_or(k, fallback), lo, hi);
  }
  float positive_float(const char* suffix, double fallback, double hi) const {
    const std::string k = key(suffix);
    const double v = f_.get_float_or(k, fallback);
    if (!std::isfinite(v) || v <= 0 || v > hi) {
      fail(f_.path(), ": metadata ", k, " = ", v, " is out of range (0, ", hi, "]");
    }
    return static_cast<float>(v);
  }

 private:
  int32_t checked(const std::string& k, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi) {
      fail(f_.path(), ": metadata ", k, " = ", v, " is out of range [", lo, ", ", hi, "]");
    }
    return static_cast<int32_t>(v);
  }
  const gguf::GgufFile& f_;
  const std::string& arch_;
};

// <arch>.vocab_size is optional in practice; the embedding matrix (or the tokenizer) knows.
int64_t vocab_size(const gguf::GgufFile& f, const std::string& arch) {
  if (f.has(arch + ".vocab_size")) return f.get_int(arch + ".vocab_size");
  if (const auto* t = f.find_tensor("token_embd.weight"); t && t->dims.size() >= 2) {
    return t->dims[1];
  }
  if (const auto* a = f.find_array("tokenizer.ggml.tokens")) return static_cast<int64_t>(a->size());
  fail(f.path(), ": cannot tell the vocabulary size (no ", arch,
       ".vocab_size, token_embd.weight or tokenizer.ggml.tokens)");
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_string_or("general.architecture", "");
  if (c.arch.empty()) fail(f.path(), ": missing metadata key 'general.architecture'");
  const ArchTraits* traits = find_arch(c.arch);
  if (!traits) {
    fail("unsupported architecture '", c.arch, "' (supported: ", supported_arch_names(), ")");
  }
  c.rope_style = traits->rope_style;
  c.qkv_bias = traits->qkv_bias;
  c.scale_embd = traits->scale_embd;
  c.qk_norm = traits->qk_norm;
  c.post_norms = traits->post_norms;
  c.scale_q = traits->scale_q;
  c.ffn_act = traits->ffn_act;

  const ConfigReader r(f, c.arch);
  c.n_layer = r.required_int("block_count", 1, kMaxLayers);
  c.n_embd = r.required_int("embedding_length", 1, kMaxEmbd);
  c.n_ff = r.required_int("feed_forward_length", 1, kMaxFf);
  c.n_head = r.required_int("attention.head_count", 1, kMaxHeads);
  c.n_head_kv = r.optional_int("attention.head_count_kv", c.n_head, 1, c.n_head);
  if (c.n_head % c.n_head_kv != 0) {
    fail(f.path(), ": ", r.key("attention.head_count_kv"), " = ", c.n_head_kv, " does not divide ",
         r.key("attention.head_count"), " = ", c.n_head);
  }
  // head_dim is n_embd / n_head unless attention.key_length says otherwise.
  if (f.has(r.key("attention.key_length"))) {
    c.head_dim = r.required_int("attention.key_length", 2, kMaxHeadDim);
  } else {
    if (c.n_embd % c.n_head != 0) {
      fail(f.path(), ": ", r.key("embedding_length"), " = ", c.n_embd, " is not divisible by ",
           r.key("attention.head_count"), " = ", c.n_head);
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  const int32_t value_length = r.optional_int("attention.value_length", c.head_dim, 1, kMaxHeadDim);
  if (value_length != c.head_dim) {
    fail(f.path(), ": ", r.key("attention.value_length"), " = ", value_length,
         " differs from the key length ", c.head_dim, " (not supported)");
  }
  if (c.head_dim % 2 != 0) fail(f.path(), ": head dimension ", c.head_dim, " is odd");
  if (static_cast<int64_t>(c.n_head) * c.head_dim > kMaxEmbd * 4) {
    fail(f.path(), ": ", c.n_head, " heads of ", c.head_dim, " dimensions is too large");
  }
  c.n_ctx_train = r.required_int("context_length", 1, kMaxCtx);

  const int64_t vocab = vocab_size(f, c.arch);
  if (vocab < 1 || vocab > kMaxVocab) {
    fail(f.path(), ": vocabulary size ", vocab, " is out of range [1, ", kMaxVocab, "]");
  }
  c.n_vocab = static_cast<int32_t>(vocab);

  if (f.has(r.key("pooling_type"))) c.pooling_type = r.required_int("pooling_type", 0, 4);
  c.rms_eps = r.positive_float("attention.layer_norm_rms_epsilon", 1e-5, 1.0);
  c.rope_theta = r.positive_float("rope.freq_base", 10000.0, 1e12);
  c.rope_dim = r.optional_int("rope.dimension_count", c.head_dim, 2, c.head_dim);
  if (c.rope_dim % 2 != 0) {
    fail(f.path(), ": ", r.key("rope.dimension_count"), " = ", c.rope_dim, " is odd");
  }

  // RoPE scaling: only linear interpolation is implemented; others would silently change
  // the model's output, so they are refused.
  const std::string scaling = f.get_string_or(r.key("rope.scaling.type"), "none");
  if (scaling == "linear") {
    c.rope_freq_scale = 1.0f / r.positive_float("rope.scaling.factor", 1.0, 1e6);
  } else if (scaling != "none") {
    fail(f.path(), ": unsupported ", r.key("rope.scaling.type"), " '", scaling,
         "' (supported: none, linear)");
  } else if (f.has(r.key("rope.scale_linear"))) {  // older converters
    c.rope_freq_scale = 1.0f / r.positive_float("rope.scale_linear", 1.0, 1e6);
  }

  // Attention scale: 1/sqrt(head_dim), except that llama.cpp gives Gemma 3 27B (62 layers; no
  // GGUF key says so) gemma_pytorch's query_pre_attn_scalar of n_embd / n_head instead.
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (c.arch == "gemma3" && c.n_layer == 62) {
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  }

  if (traits->swa_period > 0) {
    // Without a sliding window llama.cpp builds gemma3 differently (final-logit soft-capping,
    // which the converted files do not configure), so there is no reference to match: refuse.
    if (!f.has(r.key("attention.sliding_window"))) {
      fail(f.path(), ": missing metadata key '", r.key("attention.sliding_window"), "' (", c.arch,
           " without a sliding window is not supported)");
    }
    c.sliding_window = r.required_int("attention.sliding_window", 1, kMaxCtx);
    c.swa_period = traits->swa_period;
    // llama.cpp fixes the local layers' RoPE base at 10000 (and their frequency scale at 1).
    c.rope_theta_swa = 10000.0f;
  }

  c.tied_output = f.find_tensor("output.weight") == nullptr;
  return c;
}

}  // namespace specdec
