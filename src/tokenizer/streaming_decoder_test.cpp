#include <gtest/gtest.h>

#include "tokenizer/test_vocabs.h"
#include "tokenizer/tokenizer.h"

namespace specdec {
namespace {

constexpr int32_t byte_tok(uint8_t b) { return testvocab::kSpmByteBase + b; }

TEST(StreamingDecoder, HoldsBackSplitCharacterUntilComplete) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  StreamingDecoder dec(t);
  EXPECT_EQ(dec.push(byte_tok('a')), "a");
  EXPECT_EQ(dec.push(byte_tok(0xF0)), "");  // 😀 = F0 9F 98 80
  EXPECT_EQ(dec.push(byte_tok(0x9F)), "");
  EXPECT_EQ(dec.push(byte_tok(0x98)), "");
  EXPECT_EQ(dec.pending(), 3u);
  EXPECT_EQ(dec.push(byte_tok(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.pending(), 0u);
  EXPECT_EQ(dec.finish(), "");
}

TEST(StreamingDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  StreamingDecoder dec(t);
  EXPECT_EQ(dec.push(byte_tok(0xFF)), "\xEF\xBF\xBD");
  // A truncated sequence followed by ASCII: one U+FFFD for the truncated part.
  EXPECT_EQ(dec.push(byte_tok(0xE2)), "");
  EXPECT_EQ(dec.push(byte_tok(0x82)), "");
  EXPECT_EQ(dec.push(byte_tok('x')), "\xEF\xBF\xBDx");
  // Surrogates and overlongs are invalid.
  EXPECT_EQ(dec.push(byte_tok(0xED)), "");
  EXPECT_EQ(dec.push(byte_tok(0xA0)), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(dec.push(byte_tok(0xC0)), "\xEF\xBF\xBD");
}

TEST(StreamingDecoder, FinishFlushesIncompleteTail) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  StreamingDecoder dec(t);
  EXPECT_EQ(dec.push(byte_tok(0xE4)), "");
  EXPECT_EQ(dec.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.finish(), "");
}

TEST(StreamingDecoder, WholeTokensPassStraightThrough) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  StreamingDecoder dec(t);
  std::string out;
  for (int32_t id : t.encode("hello world \xC3\xA9\xE2\x82\xAC", true, false)) out += dec.push(id);
  out += dec.finish();
  EXPECT_EQ(out, " hello world \xC3\xA9\xE2\x82\xAC");
}

}  // namespace
}  // namespace specdec
