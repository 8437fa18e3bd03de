#include "server/reasoning.h"

#include <gtest/gtest.h>

#include <random>

namespace specdec::server {
namespace {

void expect_split(std::string_view reply, const std::string& reasoning, const std::string& content,
                  bool opened = false) {
  const ReasoningSplit s = split_reasoning(reply, opened);
  EXPECT_EQ(s.reasoning, reasoning) << reply;
  EXPECT_EQ(s.content, content) << reply;
}

TEST(Reasoning, ALeadingThinkBlockIsTheReasoning) {
  // Qwen3's form.
  expect_split("<think>\nLet me add.\n2+3=5\n</think>\n\nThe sum is 5.", "Let me add.\n2+3=5",
               "The sum is 5.");
  expect_split("<think>\n\n</think>\n\nHi.", "", "Hi.");  // thinking switched off
  expect_split("<think>x</think>y", "x", "y");
  // Unclosed: the reply ended while thinking.
  expect_split("<think>\nstill going", "still going", "");
  // Not a leading block: all content, tags and all.
  expect_split("Answer: <think>no</think>", "", "Answer: <think>no</think>");
  expect_split(" <think>x</think>", "", " <think>x</think>");
  expect_split("<thin", "", "<thin");
  expect_split("", "", "");
  // Only the first block is reasoning.
  expect_split("<think>a</think>b<think>c</think>", "a", "b<think>c</think>");
  // The prompt opened the block (templates that end the generation prompt with "<think>\n").
  expect_split("step 1\n</think>\n\nDone.", "step 1", "Done.", /*opened=*/true);
  expect_split("no close", "no close", "", /*opened=*/true);
}

TEST(Reasoning, PiecesAddUpToTheWholeSplitWhereverTheReplyIsCut) {
  const std::string replies[] = {
      "<think>\nLet me add.\n\n2+3=5\n</think>\n\nThe sum is 5.\n",
      "<think></think>plain",
      "<think>\nhalf a tag </thin and </think>x",
      "<thinking is not the tag",
      "no tags at all",
      "<think>\nunclosed\n\n",
  };
  std::mt19937 rng(7);
  for (const std::string& reply : replies) {
    const ReasoningSplit whole = split_reasoning(reply);
    for (int trial = 0; trial < 50; ++trial) {
      ReasoningStream stream;
      ReasoningSplit got;
      size_t at = 0;
      while (at < reply.size()) {
        const size_t n = std::min(reply.size() - at, static_cast<size_t>(rng() % 4));
        const ReasoningSplit p = stream.push(std::string_view(reply).substr(at, n));
        got.reasoning += p.reasoning;
        // Nothing goes out as content before the reasoning has ended.
        if (!p.content.empty()) {
          EXPECT_EQ(got.reasoning, whole.reasoning) << reply;
        }
        got.content += p.content;
        at += n;
      }
      const ReasoningSplit rest = stream.finish();
      got.reasoning += rest.reasoning;
      got.content += rest.content;
      ASSERT_EQ(got.reasoning, whole.reasoning) << reply;
      ASSERT_EQ(got.content, whole.content) << reply;
    }
  }
}

TEST(Reasoning, TextGoesOutAsSoonAsItCannotBeATag) {
  ReasoningStream s;
  EXPECT_EQ(s.push("<thi").reasoning, "");  // may still be the tag
  EXPECT_EQ(s.push("nk>\nfirst").reasoning, "first");
  EXPECT_EQ(s.push(" line\n").reasoning, " line");  // the newline may pad the closing tag
  EXPECT_EQ(s.push("more</th").reasoning, "\nmore");
  const ReasoningSplit p = s.push("ink>\n\nanswer");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "answer");
  ReasoningStream plain;
  EXPECT_EQ(plain.push("Hello").content, "Hello");  // not the tag: content at once
}

// The tags as single (user-defined) tokens, as Qwen3 has them, or spelled in pieces.
TEST(Reasoning, ReasoningTokensRunToTheOneThatClosesTheBlock) {
  VocabData vocab;
  vocab.pre = "gpt2";
  vocab.tokens = {"<|endoftext|>", "<think>", "</think>", "a", "b", "</", "think", ">"};
  vocab.token_types = {kTokenControl, kTokenUserDefined, kTokenUserDefined, kTokenNormal,
                       kTokenNormal,  kTokenNormal,      kTokenNormal,      kTokenNormal};
  vocab.merges = {"a b"};
  vocab.eos = 0;
  const Tokenizer tok = Tokenizer::from_vocab(vocab);
  const std::vector<int32_t> whole = {1, 3, 3, 2, 4, 4};  // <think>aa</think>bb
  EXPECT_EQ(count_reasoning_tokens(tok, whole, true), 4);
  EXPECT_EQ(count_reasoning_tokens(tok, whole, false), 0);
  const std::vector<int32_t> spelled = {1, 3, 5, 6, 7, 4};  // <think>a</ think >b
  EXPECT_EQ(count_reasoning_tokens(tok, spelled, true), 5);
  const std::vector<int32_t> open = {3, 3, 4};  // the block never closes: all reasoning
  EXPECT_EQ(count_reasoning_tokens(tok, open, true), 3);
}

// What each reasoning_format makes of one reply (ReasoningMode as reasoning_mode builds it).
TEST(Reasoning, EachFormatSplitsOrKeepsTheReply) {
  const std::string reply = "<think>\nadd them\n</think>\n\nThe answer is 5.";
  const ReasoningSplit split = ReasoningMode{true, false, false}.of(reply);
  EXPECT_EQ(split.reasoning, "add them");
  EXPECT_EQ(split.content, "The answer is 5.");
  const ReasoningSplit legacy = ReasoningMode{true, false, true}.of(reply);
  EXPECT_EQ(legacy.reasoning, "add them");
  EXPECT_EQ(legacy.content, reply);
  const ReasoningSplit none = ReasoningMode{false, false, false}.of(reply);
  EXPECT_EQ(none.reasoning, "");
  EXPECT_EQ(none.content, reply);
  // A prefill that opened the block: the reply starts inside it.
  const ReasoningSplit opened = ReasoningMode{true, true, true}.of("sum\n</think>\n\n5");
  EXPECT_EQ(opened.reasoning, "sum");
  EXPECT_EQ(opened.content, "sum\n</think>\n\n5");
  EXPECT_EQ(reasoning_format_named("deepseek-legacy"), ReasoningFormat::DeepseekLegacy);
  EXPECT_EQ(reasoning_format_named("deepseek_legacy"), std::nullopt);
}

}  // namespace
}  // namespace specdec::server
