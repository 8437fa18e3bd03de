// Definitions for test_vocabs.h (named *_test.cpp so it builds into test_tokenizer only).
#include "tokenizer/test_vocabs.h"

#include "tokenizer/unicode.h"

namespace specdec::testvocab {

VocabData bpe(const std::string& pre) {
  VocabData d;
  d.kind = VocabKind::Bpe;
  d.pre = pre;
  d.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"};
  d.token_types = {kTokenControl, kTokenControl, kTokenControl, kTokenUserDefined};
  for (int b = 0; b < 256; ++b) {
    d.tokens.push_back(unicode::byte_to_utf8(static_cast<uint8_t>(b)));
    d.token_types.push_back(kTokenNormal);
  }
  // "b c" outranks "a b" so "abc" -> a|bc; the rest spell "hello", " world", "ĠĠ".
  d.merges = {"h e",   "l l",     "he ll", "hell o", "Ġ w", "o r", "l d",
              "Ġw or", "Ġwor ld", "b c",   "a b",    "Ġ Ġ", "1 2", "12 3"};
  for (const auto& m : d.merges) {
    const size_t sp = m.find(' ');
    d.tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
    d.token_types.push_back(kTokenNormal);
  }
  d.bos = d.eos = 0;
  return d;
}

VocabData spm() {
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
  // Higher score merges first.
  const std::pair<const char*, float> pieces[] = {
      {"\xE2\x96\x81", -1},  // ▁  (259)
      {"h", -2},
      {"e", -2},
      {"l", -2},
      {"o", -2},
      {"w", -2},
      {"r", -2},
      {"d", -2},
      {"\xE2\x96\x81h", -5},  // ▁h
      {"he", -3},
      {"ll", -3},
      {"llo", -4},
      {"hello", -4.5},
      {"\xE2\x96\x81hello", -4.6},  // ▁hello
      {"\xE2\x96\x81w", -6},
      {"or", -3},
      {"ld", -3},
      {"\xE2\x96\x81wor", -5},
      {"\xE2\x96\x81world", -4},
      {"\xE2\x96\x81\xE2\x96\x81", -7},  // ▁▁
      {"\xC3\xA9", -2},                  // é (the only non-ASCII piece)
  };
  for (const auto& [text, score] : pieces) {
    d.tokens.push_back(text);
    d.token_types.push_back(kTokenNormal);
    d.scores.push_back(score);
  }
  d.bos = 1;
  d.eos = 2;
  d.unk = 0;
  d.add_bos = true;
  d.add_space_prefix = true;
  return d;
}

}  // namespace specdec::testvocab
