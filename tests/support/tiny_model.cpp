#include "support/tiny_model.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "tensor/quantize.h"

namespace specdec::testing {
namespace {

// GPT-2's byte -> printable code point map: printable Latin-1 bytes stand for themselves, the
// rest are shifted to U+0100 onwards in byte order.
std::string byte_token(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
  uint32_t cp = static_cast<uint32_t>(b);
  if (!printable) {
    int n = 0;
    for (int c = 0; c < b; ++c) {
      if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174))) ++n;
    }
    cp = 256 + static_cast<uint32_t>(n);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A few merges (as "left right") in priority order; each result becomes a token. "Ġ" is the
// byte token of ' '.
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"e", "r"},
    {"a", "n"}, {"Ġ", "a"}, {"o", "n"},   {"r", "e"}, {"Ġ", "s"},
};

const char* kChatTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Deterministic normal samples from a seed (Box-Muller on a fixed engine, so files are the
// same on every standard library).
class Normal {
 public:
  explicit Normal(uint64_t seed) : rng_(seed) {}
  float operator()(float stddev) {
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = static_cast<double>(rng_() >> 11) / 9007199254740992.0;
    return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }

 private:
  std::mt19937_64 rng_;
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

std::string write_tiny_model(const TinyModelSpec& spec, const std::string& path) {
  const bool qwen = spec.arch == "qwen2";
  const bool gemma = spec.arch == "gemma3";
  const bool qk_norm = gemma || spec.arch == "qwen3";  // per-head Q/K RMSNorm
  const int head_dim = spec.n_embd / spec.n_head;
  const int kv_dim = spec.n_head_kv * head_dim;

  // Vocabulary: bytes, merges, specials, padding.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token(b));
    types.push_back(1);  // normal
  }
  std::vector<std::string> merges;
  for (const auto& [a, b] : kMerges) {
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
    types.push_back(1);
  }
  const auto eos = static_cast<uint32_t>(tokens.size());
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.push_back(s);
    types.push_back(3);  // control
  }
  if (spec.n_vocab < static_cast<int>(tokens.size())) {
    fail("tiny model: n_vocab ", spec.n_vocab, " is smaller than the ", tokens.size(),
         " built-in tokens");
  }
  const char* fim[] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"};
  for (int i = 0; static_cast<int>(tokens.size()) < spec.n_vocab; ++i) {
    tokens.push_back(spec.fim_tokens && i < 3 ? std::string(fim[i])
                                              : "<|extra_" + std::to_string(i) + "|>");
    types.push_back(3);
  }

  gguf::GgufWriter writer;
  // Forwards to the writer unless the spec asks to leave the key out.
  struct Keys {
    gguf::GgufWriter& w;
    const std::vector<std::string>& skip;
    bool keep(const std::string& k) const {
      return std::find(skip.begin(), skip.end(), k) == skip.end();
    }
    void set_string(const std::string& k, const std::string& v) {
      if (keep(k)) w.set_string(k, v);
    }
    void set_u32(const std::string& k, uint32_t v) {
      if (keep(k)) w.set_u32(k, v);
    }
    void set_f32(const std::string& k, float v) {
      if (keep(k)) w.set_f32(k, v);
    }
    void set_bool(const std::string& k, bool v) {
      if (keep(k)) w.set_bool(k, v);
    }
    void set_array_strings(const std::string& k, const std::vector<std::string>& v) {
      if (keep(k)) w.set_array_strings(k, v);
    }
    void set_array_i32(const std::string& k, const std::vector<int32_t>& v) {
      if (keep(k)) w.set_array_i32(k, v);
    }
  } w{writer, spec.skip_keys};
  auto keep_tensor = [&](const std::string& name) {
    return std::find(spec.skip_tensors.begin(), spec.skip_tensors.end(), name) ==
           spec.skip_tensors.end();
  };
  const std::string a = spec.arch;
  w.set_string("general.architecture", a);
  w.set_string("general.name", "tiny-" + a);
  w.set_u32(a + ".block_count", static_cast<uint32_t>(spec.n_layer));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(spec.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(spec.n_embd));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(spec.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(spec.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(spec.n_head_kv));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + ".rope.freq_base", spec.rope_theta);
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(spec.n_vocab));
  if (gemma) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_array_strings("tokenizer.ggml.tokens", tokens);
  w.set_array_i32("tokenizer.ggml.token_type", types);
  w.set_array_strings("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", eos);
  w.set_u32("tokenizer.ggml.eos_token_id", eos);
  w.set_u32("tokenizer.ggml.eot_token_id", eos + 2);
  w.set_u32("tokenizer.ggml.padding_token_id", eos);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template",
               spec.chat_template.empty() ? std::string(kChatTemplate) : spec.chat_template);

  Normal normal(spec.seed);
  const float sd = 0.5f / std::sqrt(static_cast<float>(spec.n_embd));
  // rows x cols matrix in the spec's weight type; GGUF dims are [cols, rows].
  // Samples are drawn even for skipped tensors, so skipping one leaves the others unchanged.
  auto matrix = [&](const std::string& name, int rows, int cols) {
    std::vector<float> v(static_cast<size_t>(rows) * cols);
    for (float& x : v) x = normal(sd);
    if (!keep_tensor(name)) return;
    std::vector<uint8_t> data = spec.weight_type == GgmlType::F32
                                    ? f32_bytes(v)
                                    : quantize_matrix(spec.weight_type, v.data(), rows, cols);
    writer.add_tensor(name, {cols, rows}, spec.weight_type, std::move(data));
  };
  auto vector = [&](const std::string& name, int n, float mean, float stddev) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + normal(stddev);
    if (keep_tensor(name)) writer.add_tensor(name, {n}, GgmlType::F32, f32_bytes(v));
  };

  matrix("token_embd.weight", spec.n_vocab, spec.n_embd);
  for (int l = 0; l < spec.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vector(p + "attn_norm.weight", spec.n_embd, 1.0f, 0.1f);
    matrix(p + "attn_q.weight", spec.n_embd, spec.n_embd);
    matrix(p + "attn_k.weight", kv_dim, spec.n_embd);
    matrix(p + "attn_v.weight", kv_dim, spec.n_embd);
    if (qwen) {
      vector(p + "attn_q.bias", spec.n_embd, 0.0f, 0.2f);
      vector(p + "attn_k.bias", kv_dim, 0.0f, 0.2f);
      vector(p + "attn_v.bias", kv_dim, 0.0f, 0.2f);
    }
    matrix(p + "attn_output.weight", spec.n_embd, spec.n_embd);
    if (qk_norm) {  // norm weights near 1 (GGUF stores gemma's as 1 + w)
      vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.1f);
      vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.1f);
    }
    if (gemma) vector(p + "post_attention_norm.weight", spec.n_embd, 1.0f, 0.1f);
    vector(p + "ffn_norm.weight", spec.n_embd, 1.0f, 0.1f);
    matrix(p + "ffn_gate.weight", spec.n_ff, spec.n_embd);
    matrix(p + "ffn_up.weight", spec.n_ff, spec.n_embd);
    matrix(p + "ffn_down.weight", spec.n_embd, spec.n_ff);
    if (gemma) vector(p + "post_ffw_norm.weight", spec.n_embd, 1.0f, 0.1f);
  }
  vector("output_norm.weight", spec.n_embd, 1.0f, 0.1f);
  if (!spec.tied) matrix("output.weight", spec.n_vocab, spec.n_embd);
  if (spec.edit) spec.edit(writer);
  writer.write(path);
  return path;
}

std::string temp_path(const std::string& name) {
  // Removed (with everything in it) when the process exits.
  struct TempDir {
    std::filesystem::path path;
    TempDir() {
      path =
          std::filesystem::temp_directory_path() / ("specdec-test-" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~TempDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const TempDir temp_dir;
  const std::filesystem::path& dir = temp_dir.path;
  static std::atomic<int> counter{0};
  return (dir / (std::to_string(counter++) + "-" + name)).string();
}

}  // namespace specdec::testing
