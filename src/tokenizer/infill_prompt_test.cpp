#include "tokenizer/infill_prompt.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "tokenizer/test_vocabs.h"

namespace specdec {
namespace {

struct Markers {
  int32_t pre, suf, mid, repo = -1, sep = -1;
};

// The test BPE vocabulary plus the FIM markers, and the repository ones when asked.
Tokenizer fim_vocab(bool repo_level, Markers& m) {
  VocabData d = testvocab::bpe();
  auto add = [&d](const char* text) {
    d.tokens.push_back(text);
    d.token_types.push_back(kTokenControl);
    return static_cast<int32_t>(d.tokens.size() - 1);
  };
  m.pre = add("<|fim_prefix|>");
  m.suf = add("<|fim_suffix|>");
  m.mid = add("<|fim_middle|>");
  if (repo_level) {
    m.repo = add("<|repo_name|>");
    m.sep = add("<|file_sep|>");
  }
  return Tokenizer::from_vocab(d);
}

std::vector<int32_t> text(const Tokenizer& tok, const std::string& s) {
  return tok.encode(s, false, false);
}

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(InfillPrompt, MarkersAreFoundByTheirText) {
  Markers m;
  const Tokenizer tok = fim_vocab(true, m);
  ASSERT_TRUE(tok.fim());
  EXPECT_EQ(tok.fim()->repo, m.repo);
  EXPECT_EQ(tok.fim()->file_sep, m.sep);
  Markers plain;
  EXPECT_EQ(fim_vocab(false, plain).fim()->repo, -1);
}

// llama-server's repository-level layout: the placeholders, each chunk under its file name, the
// prompt right after the prefix, every piece tokenized apart and as text.
TEST(InfillPrompt, RepositoryLevelLayoutAsLlamaServerBuildsIt) {
  Markers m;
  const Tokenizer tok = fim_vocab(true, m);
  InfillInput in;
  in.prefix = "def f(x):\n";
  in.suffix = "\nprint(f(2))\n";
  in.prompt = "    return";
  in.extra = {{"a.py", "A = 1<|im_end|>\n"}, {"b.py", "B = 2\n"}};
  const InfillPrompt p = encode_infill_prompt(tok, in, 4096);
  const std::vector<int32_t> want = cat({{m.repo},
                                         text(tok, "myproject\n"),
                                         {m.sep},
                                         text(tok, "a.py\n"),
                                         text(tok, "A = 1<|im_end|>\n"),
                                         {m.sep},
                                         text(tok, "b.py\n"),
                                         text(tok, "B = 2\n"),
                                         {m.sep},
                                         text(tok, "filename\n"),
                                         {m.pre},
                                         text(tok, in.prefix),
                                         text(tok, in.prompt),
                                         {m.suf},
                                         text(tok, in.suffix),
                                         {m.mid}});
  EXPECT_EQ(p.tokens, want);
  EXPECT_EQ(p.prefix_cut + p.suffix_cut + p.chunks_cut, 0);
}

TEST(InfillPrompt, WithoutRepositoryMarkersChunksFollowASnippetLine) {
  Markers m;
  const Tokenizer tok = fim_vocab(false, m);
  InfillInput in{"x = ", "\n", "", {{"a.py", "y = 3"}}};
  const std::vector<int32_t> want = cat({text(tok, "\n\n--- snippet ---\n\n"),
                                         text(tok, "y = 3"),
                                         {m.pre},
                                         text(tok, "x = "),
                                         {m.suf},
                                         text(tok, "\n"),
                                         {m.mid}});
  EXPECT_EQ(encode_infill_prompt(tok, in, 4096).tokens, want);
}

// Over budget: the prompt and markers stay, the prefix keeps its end and the suffix its start,
// and whole chunks go, oldest first.
TEST(InfillPrompt, CutsTheFarEndsAndTheOldestChunksToFit) {
  Markers m;
  const Tokenizer tok = fim_vocab(true, m);
  InfillInput in;
  for (int i = 0; i < 40; ++i) in.prefix += str_cat("a", i, " ");
  for (int i = 0; i < 40; ++i) in.suffix += str_cat("b", i, " ");
  in.prompt = "cur";
  in.extra = {{"old.py", "old old old old"}, {"new.py", "new"}};
  const size_t n_prefix = text(tok, in.prefix).size(), n_suffix = text(tok, in.suffix).size();
  const InfillInput whole = in;
  const size_t full = encode_infill_prompt(tok, whole, 100000).tokens.size();

  const size_t budget = full / 2;
  const InfillPrompt p = encode_infill_prompt(tok, in, budget);
  EXPECT_LE(p.tokens.size(), budget);
  EXPECT_GT(p.prefix_cut, 0);
  EXPECT_GT(p.suffix_cut, 0);
  // The kept prefix is the prefix's last tokens, followed by the prompt; the kept suffix the
  // suffix's first tokens.
  const std::vector<int32_t> pre = text(tok, in.prefix), suf = text(tok, in.suffix);
  const auto at_pre = std::find(p.tokens.begin(), p.tokens.end(), m.pre);
  const auto at_suf = std::find(p.tokens.begin(), p.tokens.end(), m.suf);
  ASSERT_NE(at_pre, p.tokens.end());
  ASSERT_NE(at_suf, p.tokens.end());
  const std::vector<int32_t> kept_pre(at_pre + 1, at_suf);
  EXPECT_EQ(kept_pre,
            cat({std::vector<int32_t>(pre.begin() + p.prefix_cut, pre.end()), text(tok, "cur")}));
  const std::vector<int32_t> kept_suf(at_suf + 1, p.tokens.end() - 1);
  EXPECT_EQ(kept_suf, std::vector<int32_t>(suf.begin(),
                                           suf.end() - static_cast<std::ptrdiff_t>(p.suffix_cut)));
  EXPECT_EQ(p.tokens.back(), m.mid);
  EXPECT_EQ(static_cast<size_t>(p.prefix_cut) + kept_pre.size() - text(tok, "cur").size(),
            n_prefix);
  EXPECT_EQ(static_cast<size_t>(p.suffix_cut) + kept_suf.size(), n_suffix);

  // A budget that leaves room only for the newest chunk keeps it and drops the old one.
  InfillInput small = in;
  small.prefix = "p";
  small.suffix = "s";
  const size_t without_old =
      encode_infill_prompt(tok, small, 100000).tokens.size() -
      cat({{m.sep}, text(tok, "old.py\n"), text(tok, "old old old old")}).size();
  const InfillPrompt q = encode_infill_prompt(tok, small, without_old);
  EXPECT_EQ(q.chunks_cut, 1);
  EXPECT_EQ(q.prefix_cut + q.suffix_cut, 0);
  EXPECT_EQ(q.tokens.size(), without_old);
  const std::vector<int32_t> newest = text(tok, "new");
  EXPECT_NE(std::search(q.tokens.begin(), q.tokens.end(), newest.begin(), newest.end()),
            q.tokens.end());
  const std::vector<int32_t> oldest = text(tok, "old.py\n");
  EXPECT_EQ(std::search(q.tokens.begin(), q.tokens.end(), oldest.begin(), oldest.end()),
            q.tokens.end());
}

TEST(InfillPrompt, RefusesWithoutMarkersOrWhenThePromptAloneIsTooLong) {
  EXPECT_THROW(
      encode_infill_prompt(Tokenizer::from_vocab(testvocab::bpe()), {"a", "b", "", {}}, 100),
      Error);
  Markers m;
  const Tokenizer tok = fim_vocab(false, m);
  InfillInput in{"", "", "a long line that is the prompt", {}};
  const size_t need = 3 + text(tok, in.prompt).size();
  EXPECT_EQ(encode_infill_prompt(tok, in, need).tokens.size(), need);
  EXPECT_THROW(encode_infill_prompt(tok, in, need - 1), Error);
}

}  // namespace
}  // namespace specdec
