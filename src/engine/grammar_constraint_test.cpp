// Structured output end to end on the tiny random-weight models: the grammar constraint against
// the grammar itself, and generation whose every text the grammar accepts, with the same greedy
// text with and without speculation.
#include "engine/grammar_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include "common/error.h"
#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "support/tiny_model.h"

namespace specdec {
namespace {

// A bounded JSON shape, so that a random model reaches the end: after "}" only the end token
// is allowed.
constexpr const char* kPairGrammar = R"(
root  ::= "{" key ": " value "}"
key   ::= "\"" [a-e] [a-e]? "\""
value ::= [0-9] [0-9]? | "true" | "null"
)";

bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.accept(text) && s.complete();
}

class GrammarEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModelSpec spec;
    target_ = new LoadedModel(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("gt.gguf"))));
    spec.seed = 2;
    draft_ = new LoadedModel(
        LoadedModel::load(testing::write_tiny_model(spec, testing::temp_path("gd.gguf"))));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete draft_;
  }
  static const Tokenizer& tok() { return *target_->tokenizer; }
  static LoadedModel* target_;
  static LoadedModel* draft_;
};
LoadedModel* GrammarEngineTest::target_ = nullptr;
LoadedModel* GrammarEngineTest::draft_ = nullptr;

// The whole mask forbids exactly the tokens whose bytes the grammar refuses (and the end token
// until the text is complete); the argmax walk picks the whole mask's argmax, ties included.
TEST_F(GrammarEngineTest, MasksFollowTheGrammarAndTheArgmaxWalkAgreesWithThem) {
  const auto grammar = Grammar::parse(json_object_gbnf());
  const auto vocab = make_grammar_vocab(tok());
  const int32_t v = tok().n_vocab();
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::vector<int32_t> ids = tok().encode(R"({"ab": [1, "x"]})", false, false);
  for (size_t cut = 0; cut <= ids.size(); ++cut) {
    GrammarConstraint walk(grammar, vocab), whole(grammar, vocab);
    GrammarState state(grammar);
    for (size_t i = 0; i < cut; ++i) {
      walk.add(ids[i]);
      whole.add(ids[i]);
      ASSERT_TRUE(state.accept(tok().token_bytes(ids[i])));
    }
    EXPECT_EQ(whole.complete(), cut == ids.size());
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<float> logits(static_cast<size_t>(v));
      for (float& l : logits) l = std::round(normal(gen));  // ties, for the tie rule
      std::vector<float> a = logits, b = logits;
      ASSERT_TRUE(walk.apply(a, {}, {}, /*only_argmax=*/true));
      ASSERT_TRUE(whole.apply(b, {}, {}, /*only_argmax=*/false));
      EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(),
                std::max_element(b.begin(), b.end()) - b.begin())
          << "after " << cut << " tokens";
      for (int32_t t = 0; t < v; ++t) {
        GrammarState next = state;
        const std::string bytes = tok().token_bytes(t);
        const bool allowed = tok().is_eog(t) ? state.complete()
                             : bytes.empty() || tok().token_type(t) == kTokenControl
                                 ? false
                                 : next.accept(bytes);
        ASSERT_EQ(std::isfinite(b[static_cast<size_t>(t)]), allowed)
            << "token " << t << " after " << cut << " tokens";
      }
    }
  }
}

// A row after drafts is masked as if they were committed; the decoder's rows come in order and
// reuse the states, which must not leak between rounds.
TEST_F(GrammarEngineTest, RowsAfterDraftsAreMaskedAsIfTheDraftsWereCommitted) {
  const auto grammar = Grammar::parse(kPairGrammar);
  const auto vocab = make_grammar_vocab(tok());
  const std::vector<int32_t> ids = tok().encode(R"({"ab": 12})", false, false);
  GrammarConstraint rounds(grammar, vocab);
  const std::vector<float> flat(static_cast<size_t>(tok().n_vocab()), 0.0f);
  for (size_t committed = 0; committed < ids.size(); ++committed) {
    for (size_t j = committed; j <= ids.size(); ++j) {
      const std::span<const int32_t> extra(ids.data() + committed, j - committed);
      GrammarConstraint fresh(grammar, vocab);
      for (size_t i = 0; i < j; ++i) fresh.add(ids[i]);
      std::vector<float> a = flat, b = flat;
      rounds.apply(a, extra, {}, false);
      fresh.apply(b, {}, {}, false);
      ASSERT_EQ(a, b) << committed << " committed, row " << j;
    }
    EXPECT_EQ(rounds.allowed_prefix(std::span<const int32_t>(ids).subspan(committed)),
              static_cast<int32_t>(ids.size() - committed));
    rounds.add(ids[committed]);
  }
  // A forbidden token: the prefix stops before it, a row after it allows nothing, and
  // committing it is an internal error.
  GrammarConstraint c(grammar, vocab);
  const int32_t x = tok().encode("x", false, false).front();
  const std::vector<int32_t> bad{ids[0], x};
  EXPECT_EQ(c.allowed_prefix(bad), 1);
  std::vector<float> row = flat;
  EXPECT_FALSE(c.apply(row, bad, {}, false));
  EXPECT_THROW(c.add(x), Error);
}

GenerationOptions options(float temperature, uint64_t seed, bool speculative) {
  GenerationOptions go;
  go.max_tokens = 40;
  go.sampling.temperature = temperature;
  go.sampling.top_p = 1.0f;
  go.sampling.top_k = 0;
  go.sampling.min_p = 0.0f;
  go.sampling.seed = seed;
  go.speculative = speculative;
  go.draft_max = 4;
  go.draft_length.adaptive = false;  // the random draft is never confident
  return go;
}

TEST_F(GrammarEngineTest, GreedyTextFollowsTheGrammarAndSpeculationKeepsIt) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  const auto grammar = Grammar::parse(kPairGrammar);
  int64_t drafted = 0, accepted = 0;
  for (const char* prompt : {"a", "The answer is", "{{{", "\"", "12 34"}) {
    const std::vector<int32_t> ids = engine.tokenize_prompt(prompt);
    GenerationOptions go = options(0.0f, 1, false);
    go.grammar = grammar;
    const GenerationResult plain = engine.generate(ids, go, {});
    EXPECT_TRUE(matches(grammar, plain.text)) << prompt << ": " << plain.text;
    EXPECT_EQ(plain.finish, FinishReason::EndOfGeneration) << plain.text;
    go.speculative = true;
    const GenerationResult spec = engine.generate(ids, go, {});
    EXPECT_EQ(spec.tokens, plain.tokens) << prompt;
    drafted += spec.stats.spec.drafted;
    accepted += spec.stats.spec.accepted;
    // Without the grammar the random model writes something else entirely.
    go.grammar = nullptr;
    EXPECT_FALSE(matches(grammar, engine.generate(ids, go, {}).text)) << prompt;
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
}

// ignore_eos does not pad a finished sentence with end tokens: the end token the grammar allows
// only there ends the text, with or without speculation.
TEST_F(GrammarEngineTest, TheGrammarsEndEndsTheTextEvenWithIgnoreEos) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  const auto grammar = Grammar::parse(kPairGrammar);
  const std::vector<int32_t> ids = engine.tokenize_prompt("The answer is");
  for (bool speculative : {false, true}) {
    GenerationOptions go = options(0.0f, 1, speculative);
    go.grammar = grammar;
    go.ignore_eos = true;
    const GenerationResult r = engine.generate(ids, go, {});
    EXPECT_TRUE(matches(grammar, r.text)) << r.text;
    EXPECT_EQ(r.finish, FinishReason::EndOfGeneration) << r.text;
    EXPECT_LT(r.tokens.size(), 20u) << r.text;  // max_tokens is 40
    ASSERT_FALSE(r.tokens.empty());
    EXPECT_TRUE(engine.tokenizer().is_eog(r.tokens.back()));
    // Without the grammar, ignore_eos still runs to max_tokens.
    go.grammar = nullptr;
    EXPECT_EQ(engine.generate(ids, go, {}).tokens.size(), 40u);
  }
}

TEST_F(GrammarEngineTest, SampledTextsFollowTheGrammarAndSeedsRepeat) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  const auto grammar = Grammar::parse(json_object_gbnf());
  const std::vector<int32_t> ids = engine.tokenize_prompt("Reply in JSON:");
  int ended = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    for (bool speculative : {false, true}) {
      GenerationOptions go = options(1.0f, seed, speculative);
      go.grammar = grammar;
      go.max_tokens = 60;
      const GenerationResult r = engine.generate(ids, go, {});
      GrammarState s(grammar);
      ASSERT_TRUE(s.accept(r.text)) << r.text;  // a prefix of JSON at least
      if (r.finish == FinishReason::EndOfGeneration) {
        EXPECT_TRUE(s.complete()) << r.text;
        ++ended;
      }
      EXPECT_EQ(engine.generate(ids, go, {}).text, r.text) << "seed " << seed;
    }
  }
  EXPECT_GT(ended, 0);
}

// A GBNF literal of `text` (printable ASCII, quotes and backslashes escaped).
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A lazy grammar masks nothing before its trigger, and after it exactly what the eager grammar
// masks after the same text from the trigger on; rows after drafts agree with committed text.
TEST_F(GrammarEngineTest, ALazyGrammarMasksNothingBeforeItsTriggerAndAllAfter) {
  const auto grammar = Grammar::parse(R"(root ::= "<call>" [0-9] [0-9]? ".")");
  const auto vocab = make_grammar_vocab(tok());
  const std::vector<int32_t> ids = tok().encode("ab <ca<call>12.", false, false);
  const std::string text = "ab <ca<call>12.";
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> random(static_cast<size_t>(tok().n_vocab()));
  for (float& l : random) l = normal(gen);
  GrammarConstraint rounds(grammar, vocab, "<call>");
  std::string so_far;
  for (size_t committed = 0; committed <= ids.size(); ++committed) {
    const bool triggered = so_far.find("<call>") != std::string::npos;
    EXPECT_EQ(rounds.active(), triggered) << so_far;
    // The same masks from a fresh lazy constraint with the text committed, and (once triggered)
    // from the eager grammar given the text from the trigger on.
    GrammarConstraint fresh(grammar, vocab, "<call>");
    for (size_t i = 0; i < committed; ++i) fresh.add(ids[i]);
    std::vector<float> a = random, b = random;
    ASSERT_TRUE(fresh.apply(a, {}, {}, false));
    if (!triggered) {
      EXPECT_EQ(a, random) << "masked before the trigger: " << so_far;
    } else {
      GrammarConstraint eager(grammar, vocab);
      for (int32_t id : tok().encode(so_far.substr(so_far.find("<call>")), false, false)) {
        eager.add(id);
      }
      ASSERT_TRUE(eager.apply(b, {}, {}, false));
      EXPECT_EQ(a, b) << so_far;
    }
    for (size_t j = committed; j <= ids.size(); ++j) {
      const std::span<const int32_t> extra(ids.data() + committed, j - committed);
      GrammarConstraint upto(grammar, vocab, "<call>");
      for (size_t i = 0; i < j; ++i) upto.add(ids[i]);
      std::vector<float> r1 = random, r2 = random;
      rounds.apply(r1, extra, {}, false);
      upto.apply(r2, {}, {}, false);
      ASSERT_EQ(r1, r2) << committed << " committed, row " << j;
    }
    if (committed == ids.size()) break;
    so_far += tok().token_bytes(ids[committed]);
    rounds.add(ids[committed]);
  }
  EXPECT_EQ(so_far, text);
  EXPECT_TRUE(rounds.complete());
  // After the trigger a token the grammar refuses stops a draft, as with an eager grammar.
  GrammarConstraint c(grammar, vocab, "<call>");
  const std::vector<int32_t> bad = tok().encode("<call>x", false, false);
  EXPECT_EQ(c.allowed_prefix(bad), static_cast<int32_t>(bad.size()) - 1);
  EXPECT_TRUE(c.complete());  // nothing triggered yet: any text is whole
}

// A token that completes the trigger and carries bytes the grammar refuses frees the text for
// good; one whose extra bytes the grammar takes starts it there.
TEST_F(GrammarEngineTest, ATriggerInsideATokenChecksTheBytesAfterIt) {
  const auto vocab = make_grammar_vocab(tok());
  int32_t pair = -1;  // a token of two printable bytes
  for (int32_t id = 0; id < tok().n_vocab() && pair < 0; ++id) {
    const std::string b = vocab->bytes(id);
    if (b.size() == 2 && std::isalpha(static_cast<unsigned char>(b[0])) &&
        std::isalpha(static_cast<unsigned char>(b[1]))) {
      pair = id;
    }
  }
  ASSERT_GE(pair, 0) << "the tiny vocabulary has no two-letter token";
  const std::string b = vocab->bytes(pair);
  const std::string trigger(1, b[0]);
  std::vector<float> random(static_cast<size_t>(tok().n_vocab()), 1.0f);
  // The grammar takes the second byte: active, and masking.
  GrammarConstraint takes(Grammar::parse("root ::= " + literal(b) + " [0-9]"), vocab, trigger);
  takes.add(pair);
  EXPECT_TRUE(takes.active());
  std::vector<float> r = random;
  ASSERT_TRUE(takes.apply(r, {}, {}, false));
  EXPECT_NE(r, random);
  // It does not: free from then on, even where the trigger comes again.
  GrammarConstraint refuses(Grammar::parse("root ::= " + literal(trigger + "~") + " [0-9]"), vocab,
                            trigger);
  refuses.add(pair);
  EXPECT_FALSE(refuses.active());
  for (int32_t id : tok().encode(trigger + "~1 " + trigger + "~", false, false)) refuses.add(id);
  r = random;
  ASSERT_TRUE(refuses.apply(r, {}, {}, false));
  EXPECT_EQ(r, random);
}

// Generation: the text is the free text up to the trigger's first appearance, and follows the
// grammar from there to its end; speculation gives the same tokens at T 0 and the same text for
// a seed at T 1.
TEST_F(GrammarEngineTest, ALazyGrammarTakesOverWhereTheFreeTextWritesTheTrigger) {
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine engine(*target_, draft_, eo);
  int checked = 0;
  for (const char* prompt : {"a", "The answer is", "{{{", "12 34"}) {
    const std::vector<int32_t> ids = engine.tokenize_prompt(prompt);
    GenerationOptions go = options(0.0f, 1, false);
    const GenerationResult free_text = engine.generate(ids, go, {});
    // The trigger: a printable one-byte token the free text writes after a few tokens, not
    // before (token k).
    const Tokenizer& t = engine.tokenizer();
    std::string before, trigger;
    size_t k = 0;
    for (; k < free_text.tokens.size(); ++k) {
      const std::string piece = t.token_bytes(free_text.tokens[k]);
      if (k >= 2 && piece.size() == 1 && std::isgraph(static_cast<unsigned char>(piece[0])) &&
          before.find(piece) == std::string::npos) {
        trigger = piece;
        break;
      }
      before += piece;
    }
    if (trigger.empty()) continue;
    const auto grammar = Grammar::parse("root ::= " + literal(trigger) + " [0-9] [0-9] \".\"");
    go.grammar = grammar;
    go.grammar_trigger = trigger;
    const GenerationResult plain = engine.generate(ids, go, {});
    ASSERT_GT(plain.tokens.size(), k);
    EXPECT_TRUE(
        std::equal(plain.tokens.begin(), plain.tokens.begin() + k + 1, free_text.tokens.begin()))
        << "free: " << free_text.text << "\nlazy: " << plain.text;
    std::string rest;  // the text from the trigger on, end token aside
    for (size_t i = k; i < plain.tokens.size(); ++i) {
      if (!t.is_eog(plain.tokens[i])) rest += t.token_bytes(plain.tokens[i]);
    }
    EXPECT_TRUE(matches(grammar, rest)) << rest;
    EXPECT_EQ(plain.finish, FinishReason::EndOfGeneration) << plain.text;
    go.speculative = true;
    EXPECT_EQ(engine.generate(ids, go, {}).tokens, plain.tokens) << prompt;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      GenerationOptions sampled = options(1.0f, seed, true);
      sampled.grammar = grammar;
      sampled.grammar_trigger = trigger;
      const GenerationResult r = engine.generate(ids, sampled, {});
      if (const size_t at = r.text.find(trigger); at != std::string::npos) {
        GrammarState s(grammar);
        EXPECT_TRUE(s.accept(r.text.substr(at))) << r.text;
        if (r.finish == FinishReason::EndOfGeneration) {
          EXPECT_TRUE(s.complete()) << r.text;
        }
      }
      EXPECT_EQ(engine.generate(ids, sampled, {}).text, r.text) << "seed " << seed;
    }
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

}  // namespace
}  // namespace specdec
