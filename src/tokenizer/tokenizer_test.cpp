#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/test_vocabs.h"

namespace specdec {
namespace {

using Ids = std::vector<int32_t>;

int32_t id_of(const Tokenizer& t, std::string_view text) {
  auto id = t.find_token(text);
  EXPECT_TRUE(id.has_value()) << "no token '" << text << "'";
  return id.value_or(-1);
}

// ---- pre-tokenizer ---------------------------------------------------------------------------

std::vector<std::string> split(const std::string& pre, std::string_view text) {
  return PreTokenizer(pre).split(text);
}

TEST(PreTokenizer, Gpt2SplitsWordsNumbersPunctuationAndSpaces) {
  EXPECT_EQ(
      split("gpt2", "Hello world, it's 2024!  ok"),
      (std::vector<std::string>{"Hello", " world", ",", " it", "'s", " 2024", "!", " ", " ok"}));
  // A whitespace run before a word leaves its last space to the word; at the end it stays whole.
  EXPECT_EQ(split("gpt2", "a   b  "), (std::vector<std::string>{"a", "  ", " b", "  "}));
}

TEST(PreTokenizer, SmollmSplitsEveryDigit) {
  EXPECT_EQ(split("smollm", "x 123"), (std::vector<std::string>{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndKeepsNewlines) {
  EXPECT_EQ(split("llama3", "1234567 DON'T\n\nx"),
            (std::vector<std::string>{"123", "456", "7", " DON", "'T", "\n\n", "x"}));
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "ab12"), (std::vector<std::string>{"ab", "1", "2"}));
}

TEST(PreTokenizer, DefaultSplitsPunctuationRunsFirst) {
  EXPECT_EQ(split("default", "a+=b 12345"),
            (std::vector<std::string>{"a", "+=", "b", " ", "123", "45"}));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(split("gpt2", "a\xFF"), (std::vector<std::string>{"a", "\xEF\xBF\xBD"}));
}

TEST(PreTokenizer, UnknownNameThrows) { EXPECT_THROW(PreTokenizer("nope"), Error); }

// ---- BPE ---------------------------------------------------------------------------------------

TEST(BpeTokenizer, MergesByRank) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::bpe());
  EXPECT_EQ(t.encode("hello world", false, false), (Ids{id_of(t, "hello"), id_of(t, "Ġworld")}));
  // "b c" has a better rank than "a b": a|bc, not ab|c.
  EXPECT_EQ(t.encode("abc", false, false), (Ids{testvocab::kBpeByteBase + 'a', id_of(t, "bc")}));
  EXPECT_EQ(t.encode("123", false, false), (Ids{id_of(t, "123")}));
}

TEST(BpeTokenizer, UnmergeableBytesFallBackToByteTokens) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::bpe());
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(t.encode(euro, false, false),
            (Ids{testvocab::kBpeByteBase + 0xE2, testvocab::kBpeByteBase + 0x82,
                 testvocab::kBpeByteBase + 0xAC}));
}

TEST(BpeTokenizer, SpecialTokensParsedOnlyWhenAsked) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::bpe());
  const Ids parsed = t.encode("<|im_start|>hello<|im_end|>", false, true);
  EXPECT_EQ(parsed, (Ids{1, id_of(t, "hello"), 2}));
  const Ids literal = t.encode("<|im_start|>hello<|im_end|>", false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 1), 0);
  EXPECT_EQ(t.decode(literal), "<|im_start|>hello<|im_end|>");
  // User-defined tokens are matched even without parse_special.
  EXPECT_EQ(t.encode("<tool>", false, false), (Ids{3}));
}

TEST(BpeTokenizer, ControlTokensDecodeToNothing) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::bpe());
  EXPECT_EQ(t.token_bytes(1), "");
  EXPECT_EQ(t.token_bytes(3), "<tool>");
  EXPECT_EQ(t.token_bytes(id_of(t, "Ġworld")), " world");
}

TEST(BpeTokenizer, AddSpecialFollowsAddBos) {
  VocabData d = testvocab::bpe();
  EXPECT_EQ(Tokenizer::from_vocab(d).encode("a", true, false).size(), 1u);
  d.add_bos = true;
  EXPECT_EQ(Tokenizer::from_vocab(d).encode("a", true, false),
            (Ids{0, testvocab::kBpeByteBase + 'a'}));
}

TEST(BpeTokenizer, EogSetIncludesKnownTexts) {
  VocabData d = testvocab::bpe();
  d.eos = 0;
  const Tokenizer t = Tokenizer::from_vocab(d);
  EXPECT_TRUE(t.is_eog(0));  // eos and <|endoftext|>
  EXPECT_TRUE(t.is_eog(2));  // <|im_end|>
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_EQ(t.eot(), 2);  // guessed from <|im_end|>
}

class BpeRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeRoundTrip, DecodeOfEncodeIsIdentity) {
  for (const char* pre : {"gpt2", "default", "smollm", "llama3", "qwen2"}) {
    const Tokenizer t = Tokenizer::from_vocab(testvocab::bpe(pre));
    const std::string text = GetParam();
    EXPECT_EQ(t.decode(t.encode(text, false, false)), text) << "pre=" << pre;
  }
}

const char* const kRoundTripTexts[] = {
    "plain ASCII text.",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦",
    "中文测试：你好，世界！ 日本語",
    "مرحبا بالعالم",
    "cafe\u0301 combining a\u0308",
    "  leading and trailing  ",
    "multiple     spaces",
    "new\nlines\n\n\r\n",
    "digits 1234567 3.14",
    "tabs\t\tand\u00a0nbsp",
    "",
};

INSTANTIATE_TEST_SUITE_P(Texts, BpeRoundTrip, ::testing::ValuesIn(kRoundTripTexts));

// ---- SPM ---------------------------------------------------------------------------------------

TEST(SpmTokenizer, MergesByScoreWithSpacePrefix) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  EXPECT_EQ(t.encode("hello world", true, false),
            (Ids{1, id_of(t, "\xE2\x96\x81hello"), id_of(t, "\xE2\x96\x81world")}));
  EXPECT_EQ(t.encode("hello", false, false), (Ids{id_of(t, "\xE2\x96\x81hello")}));
}

TEST(SpmTokenizer, ByteFallbackForUnknownCharacters) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  // "€" is not a piece: its three bytes become <0xE2><0x82><0xAC>; é is a piece.
  EXPECT_EQ(
      t.encode("\xE2\x82\xAC\xC3\xA9", false, false),
      (Ids{id_of(t, "\xE2\x96\x81"), testvocab::kSpmByteBase + 0xE2, testvocab::kSpmByteBase + 0x82,
           testvocab::kSpmByteBase + 0xAC, id_of(t, "\xC3\xA9")}));
  EXPECT_EQ(t.token_bytes(testvocab::kSpmByteBase + 0xE2), "\xE2");
}

TEST(SpmTokenizer, SpecialTokensResetSpacePrefix) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  // After a special token the next raw fragment gets the space prefix again (llama.cpp).
  EXPECT_EQ(t.encode("hello</s>hello", false, true),
            (Ids{id_of(t, "\xE2\x96\x81hello"), 2, id_of(t, "\xE2\x96\x81hello")}));
  const Ids literal = t.encode("</s>", false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 2), 0);
}

TEST(SpmTokenizer, NoSpacePrefixWhenDisabled) {
  VocabData d = testvocab::spm();
  d.add_space_prefix = false;
  const Tokenizer t = Tokenizer::from_vocab(d);
  EXPECT_EQ(t.encode("hello world", false, false),
            (Ids{id_of(t, "hello"), id_of(t, "\xE2\x96\x81world")}));
}

TEST(SpmTokenizer, DecodeUnescapesSpaces) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  EXPECT_EQ(t.decode(t.encode("hello world", true, false)), " hello world");
  EXPECT_EQ(t.token_bytes(1), "");       // control
  EXPECT_EQ(t.token_bytes(0), "<unk>");  // unknown keeps its text
}

class SpmRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(SpmRoundTrip, DecodeOfEncodeIsIdentityUpToThePrefixSpace) {
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  const std::string text = GetParam();
  const std::string expected = text.empty() ? "" : " " + text;
  EXPECT_EQ(t.decode(t.encode(text, true, false)), expected);
}

INSTANTIATE_TEST_SUITE_P(Texts, SpmRoundTrip, ::testing::ValuesIn(kRoundTripTexts));

// ---- validation --------------------------------------------------------------------------------

TEST(TokenizerValidation, RejectsInconsistentVocab) {
  VocabData d = testvocab::spm();
  d.scores.pop_back();
  EXPECT_THROW(Tokenizer::from_vocab(d), Error);
  d = testvocab::spm();
  d.bos = 100000;
  EXPECT_THROW(Tokenizer::from_vocab(d), Error);
  d = testvocab::bpe();
  d.merges.clear();
  EXPECT_THROW(Tokenizer::from_vocab(d), Error);
  EXPECT_THROW(Tokenizer::from_vocab(VocabData{}), Error);
  const Tokenizer t = Tokenizer::from_vocab(testvocab::spm());
  EXPECT_THROW(t.token_text(-1), Error);
  EXPECT_THROW(t.token_text(t.n_vocab()), Error);
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// Fill-in-the-middle markers: named by the file, or found by their text (Qwen2.5-Coder's GGUF
// names none); all three or nothing.
TEST(Tokenizer, FimMarkersAreFoundByTextOrTakenFromTheFile) {
  VocabData d = testvocab::bpe();
  EXPECT_FALSE(Tokenizer::from_vocab(d).fim().has_value());
  const auto base = static_cast<int32_t>(d.tokens.size());
  for (const char* t : {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}) {
    d.tokens.push_back(t);
    d.token_types.push_back(kTokenNormal);  // made control, as llama.cpp does
  }
  const Tokenizer tok = Tokenizer::from_vocab(d);
  ASSERT_TRUE(tok.fim().has_value());
  EXPECT_EQ(tok.fim()->prefix, base);
  EXPECT_EQ(tok.fim()->suffix, base + 1);
  EXPECT_EQ(tok.fim()->middle, base + 2);
  EXPECT_EQ(tok.token_bytes(base), "");  // control: not text
  // Ids the file states win; two of three are not enough.
  d.fim_pre = base + 1;
  EXPECT_EQ(Tokenizer::from_vocab(d).fim()->prefix, base + 1);
  VocabData two = testvocab::bpe();
  two.tokens.push_back("<fim_prefix>");
  two.tokens.push_back("<fim_middle>");
  two.token_types.assign(two.tokens.size(), kTokenNormal);
  EXPECT_FALSE(Tokenizer::from_vocab(two).fim().has_value());
}

}  // namespace
}  // namespace specdec
