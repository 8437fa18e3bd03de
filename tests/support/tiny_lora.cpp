#include "support/tiny_lora.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "support/random_floats.h"

namespace specdec::testing {
namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// (n_in, n_out) of a block matrix of a tiny model, by its tensor name.
std::pair<int64_t, int64_t> shape_of(const TinyModelSpec& m, const std::string& name) {
  const int64_t head_dim = m.n_embd / m.n_head;
  const int64_t q = m.n_head * head_dim, kv = m.n_head_kv * head_dim;
  const auto is = [&name](const char* target) {
    return name.find(std::string(".") + target + ".weight") != std::string::npos;
  };
  if (is("attn_q")) return {m.n_embd, q};
  if (is("attn_k") || is("attn_v")) return {m.n_embd, kv};
  if (is("attn_output")) return {q, m.n_embd};
  if (is("ffn_gate") || is("ffn_up")) return {m.n_embd, m.n_ff};
  if (is("ffn_down")) return {m.n_ff, m.n_embd};
  fail("write_tiny_lora: no block matrix named ", name);
}

}  // namespace

std::string write_tiny_lora(const TinyModelSpec& model, const TinyLoraSpec& lora,
                            const std::string& path) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", model.arch);
  w.set_string("general.type", lora.type);
  w.set_string("adapter.type", "lora");
  if (lora.alpha != 0.0f) w.set_f32("adapter.lora.alpha", lora.alpha);
  uint32_t seed = static_cast<uint32_t>(lora.seed);
  for (const std::string& name : lora.matrices) {
    const auto [n_in, n_out] = shape_of(model, name);
    std::vector<float> a = random_floats(static_cast<size_t>(lora.rank * n_in), seed++);
    std::vector<float> b = random_floats(static_cast<size_t>(n_out * lora.rank), seed++);
    for (float& x : a) x *= 0.5f / std::sqrt(static_cast<float>(n_in));
    for (float& x : b) x *= 0.5f / std::sqrt(static_cast<float>(lora.rank));
    w.add_tensor(name + ".lora_a", {n_in, lora.rank}, GgmlType::F32, f32_bytes(a));
    w.add_tensor(name + ".lora_b", {lora.rank, n_out}, GgmlType::F32, f32_bytes(b));
  }
  if (lora.edit) lora.edit(w);
  w.write(path);
  return path;
}

}  // namespace specdec::testing
