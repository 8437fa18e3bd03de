#include "fuzz_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "fuzz_targets.h"
#include "tokenizer/unicode.h"

namespace specdec::fuzz {

MemFile::MemFile(const char* name) {
  fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  path = "/proc/self/fd/" + std::to_string(fd);
}

ModelConfig slot_fuzz_config(bool draft) {
  ModelConfig c;
  c.n_layer = draft ? 1 : 2;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 32;
  c.n_vocab = kSlotFuzzVocab;
  return c;
}

void MemFile::write(const uint8_t* data, size_t size) const {
  FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
}

void check_failed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, cond);
  std::abort();
}

void note_refused(const char* what, const std::exception& e) {
  static const bool verbose = [] {
    const char* v = std::getenv("SPECDEC_FUZZ_VERBOSE");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  if (verbose) std::fprintf(stderr, "refused by %s: %s\n", what, e.what());
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      n = 2;
      cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      n = 3;
      cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      n = 4;
      cp = b0 & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

namespace {

VocabData make_bpe(const char* pre) {
  VocabData d;
  d.kind = VocabKind::Bpe;
  d.pre = pre;
  d.tokens = {"<|endoftext|>", "<|im_start|>",        "<|im_end|>",        "<|begin_of_text|>",
              "<|eot_id|>",    "<|start_header_id|>", "<|end_header_id|>", "<tool>"};
  d.token_types = {kTokenControl, kTokenControl, kTokenControl, kTokenControl,
                   kTokenControl, kTokenControl, kTokenControl, kTokenUserDefined};
  for (int b = 0; b < 256; ++b) {
    d.tokens.push_back(unicode::byte_to_utf8(static_cast<uint8_t>(b)));
    d.token_types.push_back(kTokenNormal);
  }
  // Spell "hello", " world", "ĠĠ", "123", "abc" and a two-byte character (é is C3 A9, GPT-2
  // bytes Ã ©) so that merges of several ranks and non-ASCII symbols take part.
  d.merges = {"h e",     "l l", "he ll", "hell o", "Ġ w", "o r",  "l d", "Ġw or",
              "Ġwor ld", "b c", "a b",   "Ġ Ġ",    "1 2", "12 3", "Ã ©", "Ġ Ã©"};
  for (const auto& m : d.merges) {
    const size_t sp = m.find(' ');
    d.tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
    d.token_types.push_back(kTokenNormal);
  }
  d.bos = 3;
  d.eos = 0;
  d.eot = 4;
  d.add_bos = std::string_view(pre) == "llama3";
  return d;
}

VocabData make_spm(bool space_prefix) {
  VocabData d;
  d.kind = VocabKind::Spm;
  d.tokens = {"<unk>", "<s>", "</s>"};
  d.token_types = {kTokenUnknown, kTokenControl, kTokenControl};
  d.scores = {0, 0, 0};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    d.tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    d.token_types.push_back(kTokenByte);
    d.scores.push_back(0);
  }
  const std::pair<const char*, float> pieces[] = {
      {"\xE2\x96\x81", -1},
      {"h", -2},
      {"e", -2},
      {"l", -2},
      {"o", -2},
      {"w", -2},
      {"r", -2},
      {"d", -2},
      {"\xE2\x96\x81h", -5},
      {"he", -3},
      {"ll", -3},
      {"llo", -4},
      {"hello", -4.5},
      {"or", -3},
      {"ld", -3},
      {"\xE2\x96\x81w", -6},
      {"\xE2\x96\x81wor", -5},
      {"\xE2\x96\x81world", -4},
      {"\xC3\xA9", -2},
      {"\xE2\x96\x81\xE2\x96\x81", -7},
      {"<start_of_turn>", 0},
      {"<end_of_turn>", 0},
  };
  for (const auto& [text, score] : pieces) {
    d.tokens.push_back(text);
    d.token_types.push_back(std::string_view(text).starts_with("<") ? kTokenControl : kTokenNormal);
    d.scores.push_back(score);
  }
  d.bos = 1;
  d.eos = 2;
  d.unk = 0;
  d.add_bos = true;
  d.add_space_prefix = space_prefix;
  d.add_eos = !space_prefix;
  return d;
}

}  // namespace

VocabData vocab_data(int which) {
  static constexpr const char* kPre[] = {"default", "gpt2", "smollm", "llama3", "qwen2"};
  if (which < 5) return make_bpe(kPre[which]);
  return make_spm(which == 5);
}

const Tokenizer& vocab_tokenizer(int which) {
  static const std::array<Tokenizer, kNumVocabs> kTokenizers = [] {
    auto make = [](int i) { return Tokenizer::from_vocab(vocab_data(i)); };
    return std::array<Tokenizer, kNumVocabs>{make(0), make(1), make(2), make(3),
                                             make(4), make(5), make(6)};
  }();
  return kTokenizers[static_cast<size_t>(which) % kNumVocabs];
}

}  // namespace specdec::fuzz

namespace specdec::fuzz {

std::string replace_invalid_utf8(std::string_view s) {
  // Table 3-7 of the Unicode standard: the allowed range of each byte of a well-formed
  // sequence, by its lead byte.
  struct Form {
    uint8_t lead_lo, lead_hi, len, second_lo, second_hi;
  };
  constexpr Form kForms[] = {
      {0xC2, 0xDF, 2, 0x80, 0xBF}, {0xE0, 0xE0, 3, 0xA0, 0xBF}, {0xE1, 0xEC, 3, 0x80, 0xBF},
      {0xED, 0xED, 3, 0x80, 0x9F}, {0xEE, 0xEF, 3, 0x80, 0xBF}, {0xF0, 0xF0, 4, 0x90, 0xBF},
      {0xF1, 0xF3, 4, 0x80, 0xBF}, {0xF4, 0xF4, 4, 0x80, 0x8F},
  };
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      out += s[i++];
      continue;
    }
    const Form* form = nullptr;
    for (const Form& f : kForms) {
      if (b0 >= f.lead_lo && b0 <= f.lead_hi) form = &f;
    }
    if (form == nullptr) {  // a byte that never starts a sequence
      out += kReplacement;
      ++i;
      continue;
    }
    // The longest prefix of a well-formed sequence: complete, or a maximal subpart.
    size_t good = 1;
    while (good < form->len && i + good < s.size()) {
      const auto b = static_cast<uint8_t>(s[i + good]);
      const uint8_t lo = good == 1 ? form->second_lo : 0x80;
      const uint8_t hi = good == 1 ? form->second_hi : 0xBF;
      if (b < lo || b > hi) break;
      ++good;
    }
    if (good == form->len) {
      out.append(s.substr(i, good));
    } else {
      out += kReplacement;
    }
    i += good;
  }
  return out;
}

}  // namespace specdec::fuzz
