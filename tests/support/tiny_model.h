// Tiny random-weight GGUF models for tests: a complete llama/qwen2/gemma3 tensor set plus a
// byte-level BPE vocabulary and a ChatML template, so every layer of the engine can run on one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "tensor/ggml_type.h"

namespace specdec::testing {

struct TinyModelSpec {
  // "llama", "qwen2" (adds Q/K/V biases), "gemma3" (adds Q/K norms, post-norms and
  // attention.sliding_window; give it >= 6 layers to have a global one) or "qwen3" (Q/K norms)
  std::string arch = "llama";
  int n_vocab = 300;  // >= 256 byte tokens + merges + 3 specials
  int n_embd = 64;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int n_ff = 128;
  int n_ctx = 256;
  GgmlType weight_type = GgmlType::F32;  // matrices (token_embd/output included); norms F32
  bool tied = false;                     // no output.weight: logits use token_embd
  uint64_t seed = 1;
  float rope_theta = 10000;
  int sliding_window = 4;  // gemma3 only
  // The first three padding tokens become <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> (a
  // code model's fill-in-the-middle markers, found by their text as in Qwen2.5-Coder's file).
  bool fim_tokens = false;
  // tokenizer.chat_template; empty: a plain ChatML template.
  std::string chat_template;

  // Hooks for tests of malformed files: keys and tensors named here are left out, and edit (if
  // set) runs on the writer just before it writes (setting a key again replaces its value;
  // a skipped tensor can be re-added with a different shape or type).
  std::vector<std::string> skip_keys;
  std::vector<std::string> skip_tensors;
  std::function<void(gguf::GgufWriter&)> edit;
};

// Writes a random-weight GGUF with a complete byte-level BPE vocabulary (tokenizer.ggml.model
// "gpt2", pre "default": the 256 GPT-2 byte tokens first, in byte order, then a few merges,
// then specials <|endoftext|> (eos/bos), <|im_start|>, <|im_end|> (eot), padded with
// <|extra_N|> control tokens up to n_vocab; a ChatML tokenizer.chat_template) so the whole
// engine can run on it. Weights ~N(0, 0.5/sqrt(n_embd)) from the seed; norms near 1.
// Returns path. Throws specdec::Error when the spec cannot hold the vocabulary.
std::string write_tiny_model(const TinyModelSpec& spec, const std::string& path);

// A path for `name` under a fresh per-process temp directory (created on first use); distinct
// calls with the same name get distinct paths.
std::string temp_path(const std::string& name);

}  // namespace specdec::testing
