// Tokenizer::from_gguf lives in its own file so that users of from_vocab alone do not need the
// GGUF reader linked in.
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace specdec {

namespace {

int32_t get_id(const gguf::GgufFile& f, const char* key, int32_t fallback) {
  const int64_t v = f.get_int_or(key, fallback);
  if (v < -1 || v > INT32_MAX) fail(f.path(), ": ", key, " = ", v, " is not a token id");
  return static_cast<int32_t>(v);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& f) {
  VocabData d;
  const std::string model = f.get_string_or("tokenizer.ggml.model", "");
  if (model == "gpt2") {
    d.kind = VocabKind::Bpe;
  } else if (model == "llama") {
    d.kind = VocabKind::Spm;
  } else if (model.empty()) {
    fail(f.path(), ": no tokenizer.ggml.model (the file has no vocabulary)");
  } else {
    fail(f.path(), ": unsupported tokenizer.ggml.model '", model, "' (supported: gpt2, llama)");
  }
  d.pre = f.get_string_or("tokenizer.ggml.pre", "default");

  const gguf::ArrayValue& tokens = f.get_array("tokenizer.ggml.tokens");
  if (tokens.elem_type != gguf::ValueType::STRING)
    fail(f.path(), ": tokenizer.ggml.tokens is not a string array");
  d.tokens = tokens.strings;
  if (const auto* scores = f.find_array("tokenizer.ggml.scores")) {
    if (!scores->floats.empty()) {
      d.scores.assign(scores->floats.begin(), scores->floats.end());
    } else {
      d.scores.assign(scores->ints.begin(), scores->ints.end());
    }
  }
  if (const auto* types = f.find_array("tokenizer.ggml.token_type")) {
    if (types->ints.size() != types->size())
      fail(f.path(), ": tokenizer.ggml.token_type is not an integer array");
    d.token_types.assign(types->ints.begin(), types->ints.end());
  }
  if (d.kind == VocabKind::Bpe) {
    const auto* merges = f.find_array("tokenizer.ggml.merges");
    if (merges == nullptr || merges->strings.empty())
      fail(f.path(), ": BPE vocab without tokenizer.ggml.merges");
    d.merges = merges->strings;
  }

  // Defaults as in llama.cpp, then overridden by whatever the file states.
  const bool spm = d.kind == VocabKind::Spm;
  d.bos = get_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  d.eos = get_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  d.unk = get_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  d.pad = get_id(f, "tokenizer.ggml.padding_token_id", -1);
  d.eot = get_id(f, "tokenizer.ggml.eot_token_id", -1);
  d.fim_pre = get_id(f, "tokenizer.ggml.fim_pre_token_id", -1);
  d.fim_suf = get_id(f, "tokenizer.ggml.fim_suf_token_id", -1);
  d.fim_mid = get_id(f, "tokenizer.ggml.fim_mid_token_id", -1);
  d.fim_rep = get_id(f, "tokenizer.ggml.fim_rep_token_id", -1);
  d.fim_sep = get_id(f, "tokenizer.ggml.fim_sep_token_id", -1);
  const bool llama3 = d.pre == "llama3" || d.pre == "llama-bpe" || d.pre == "llama-v3";
  d.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", spm || llama3);
  d.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  d.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
  try {
    return from_vocab(std::move(d));
  } catch (const Error& e) {
    fail(f.path(), ": ", e.what());
  }
}

}  // namespace specdec
