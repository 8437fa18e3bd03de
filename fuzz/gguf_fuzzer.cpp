// GGUF fuzz target. Input: the bytes of a file. GgufFile has no in-memory entry point (it maps
// a path), so the bytes go into a memfd (one per process, rewritten for every input) opened as
// /proc/self/fd/N; the parser sees an ordinary regular file.
// Checks: open() either throws specdec::Error or gives a file whose every tensor lies inside
// the mapping, aligned, without overlapping another, with exactly the bytes its type and shape
// need (each byte is read, so ASan would flag one outside); the typed metadata getters agree
// with the stored values and throw only specdec::Error; ModelConfig::from_gguf, Model::load
// (which validates every tensor's presence, shape and type, then packs the matrices),
// Tokenizer::from_gguf and ChatTemplate::from_gguf either throw specdec::Error or give objects
// that work on a short conversation. Any other exception escapes and is reported as a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tensor/ggml_type.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace specdec::fuzz {
namespace {

void check_tensors(const gguf::GgufFile& f) {
  const std::span<const uint8_t> map = f.mapping();
  FUZZ_CHECK(map.size() == f.file_size());
  const uintptr_t lo = reinterpret_cast<uintptr_t>(map.data());
  const uintptr_t hi = lo + map.size();
  std::vector<const gguf::TensorInfo*> by_data;
  volatile uint8_t sink = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const auto at = reinterpret_cast<uintptr_t>(t.data);
    FUZZ_CHECK(t.n_bytes > 0 && at >= lo && at <= hi && t.n_bytes <= hi - at);
    FUZZ_CHECK((at - lo) % f.alignment() == 0);
    FUZZ_CHECK(!t.dims.empty() && t.dims.size() <= 4);
    for (int64_t d : t.dims) FUZZ_CHECK(d > 0);
    FUZZ_CHECK(t.n_elements() == t.row_length() * t.n_rows());
    if (traits(t.type).supported) {
      FUZZ_CHECK(t.n_bytes == row_bytes(t.type, t.row_length()) * static_cast<size_t>(t.n_rows()));
    }
    FUZZ_CHECK(f.find_tensor(t.name) == &t && &f.tensor(t.name) == &t);
    uint8_t x = 0;
    for (size_t i = 0; i < t.n_bytes; ++i) x ^= t.data[i];
    sink = sink ^ x;
    by_data.push_back(&t);
  }
  std::sort(by_data.begin(), by_data.end(),
            [](const auto* a, const auto* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_data.size(); ++i) {
    FUZZ_CHECK(by_data[i - 1]->data + by_data[i - 1]->n_bytes <= by_data[i]->data);
  }
}

// Each getter on each key: the one that matches the stored type returns the stored value; the
// others return it converted or throw specdec::Error naming the key.
void check_metadata(const gguf::GgufFile& f) {
  FUZZ_CHECK(f.version() == 2 || f.version() == 3);
  FUZZ_CHECK(f.alignment() > 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  for (const auto& [key, entry] : f.metadata()) {
    FUZZ_CHECK(f.has(key) && f.find(key) == &entry);
    if (const auto* s = std::get_if<std::string>(&entry.value)) {
      FUZZ_CHECK(f.get_string(key) == *s && f.get_string_or(key, "x") == *s);
    }
    if (const auto* a = std::get_if<gguf::ArrayValue>(&entry.value)) {
      FUZZ_CHECK(&f.get_array(key) == a && f.find_array(key) == a);
    }
    try {
      f.get_int_or(key, 0);
    } catch (const Error&) {
    }
    try {
      f.get_float_or(key, 0);
    } catch (const Error&) {
    }
    try {
      f.get_bool_or(key, false);
    } catch (const Error&) {
    }
    try {
      f.get_string_or(key, "");
    } catch (const Error&) {
    }
  }
}

void check_model(const gguf::GgufFile& f) {
  try {
    const ModelConfig c = ModelConfig::from_gguf(f);
    FUZZ_CHECK(c.n_vocab > 0 && c.n_embd > 0 && c.n_layer > 0 && c.n_head > 0);
    FUZZ_CHECK(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0 && c.head_dim > 0);
    FUZZ_CHECK(c.rope_dim > 0 && c.rope_dim <= c.head_dim && c.rope_dim % 2 == 0);
    const std::unique_ptr<Model> m = Model::load(f);
    FUZZ_CHECK(m->config().n_vocab == c.n_vocab && m->config().n_layer == c.n_layer);
    FUZZ_CHECK(m->weight_bytes() <= f.file_size());
  } catch (const Error& e) {
    note_refused("Model::load", e);
  }
}

void check_tokenizer(const gguf::GgufFile& f) {
  const std::vector<ChatMessage> msgs = {{"system", "Be brief."},
                                         {"user", "Hello world, caf\xC3\xA9 12345!"}};
  std::string prompt = "Hello world <|im_end|> <s> \xE2\x96\x81 caf\xC3\xA9";
  try {
    const ChatTemplate t = ChatTemplate::from_gguf(f);
    prompt = t.apply(msgs, true);
  } catch (const Error& e) {
    note_refused("ChatTemplate::from_gguf", e);
  }
  try {
    const Tokenizer tok = Tokenizer::from_gguf(f);
    const std::vector<int32_t> ids = encode_prompt(tok, prompt);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.n_vocab());
    StreamingDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += dec.push(id);
    streamed += dec.finish();
    FUZZ_CHECK(is_valid_utf8(streamed));
    for (int32_t id = 0; id < tok.n_vocab() && id < 512; ++id) tok.token_bytes(id);
  } catch (const Error& e) {
    note_refused("Tokenizer::from_gguf", e);
  }
}

}  // namespace

int fuzz_one_gguf(const uint8_t* data, size_t size) {
  static const MemFile mem("specdec_fuzz_gguf");
  mem.write(data, size);
  std::unique_ptr<gguf::GgufFile> f;
  try {
    f = gguf::GgufFile::open(mem.path);
  } catch (const Error& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with(mem.path));  // names the file
    note_refused("GgufFile::open", e);
    return 0;
  }
  FUZZ_CHECK(f->file_size() == size);
  check_tensors(*f);
  check_metadata(*f);
  check_model(*f);
  check_tokenizer(*f);
  return 0;
}

}  // namespace specdec::fuzz
