// Token masks on a vocabulary the size of Qwen2.5's (151,936 tokens), synthetic but shaped like
// a byte-level BPE one: the 256 byte tokens, words with and without a leading space,
// punctuation runs, numbers, CJK and accented text. A JSON grammar's states: inside a string
// (nearly everything allowed), and structural ones (a ':' or a value expected).
//   bench_grammar
// MaskUncached walks the trie with a fresh masker each time (no memoized transitions yet);
// MaskWarm with a masker that has walked other states of the grammar before (as in a request);
// MaskCached is a cache hit.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"

namespace specdec {
namespace {

constexpr const char* kJson = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-7]{0,15})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const std::shared_ptr<const GrammarVocab>& vocab() {
  static const std::shared_ptr<const GrammarVocab> v = [] {
    std::mt19937 rng(1);
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    const std::string letters = "eeeettaaoinshrdlcumwfgypbvkjxqz";
    const std::string punct = "{}[]\":,.;()<>/\\=+-*_'!?#\n\t ";
    while (tokens.size() < 151936 - 3) {
      std::string t;
      const unsigned kind = rng() % 100;
      if (kind < 60) {
        if (rng() % 2) t += ' ';
        for (unsigned n = 2 + rng() % 9; n > 0; --n) t += letters[rng() % letters.size()];
        if (rng() % 4 == 0) t[t[0] == ' ' ? 1 : 0] = static_cast<char>(t[t[0] == ' ' ? 1 : 0] - 32);
      } else if (kind < 70) {
        for (unsigned n = 1 + rng() % 4; n > 0; --n) t += punct[rng() % punct.size()];
      } else if (kind < 80) {
        for (unsigned n = 1 + rng() % 3; n > 0; --n) t += static_cast<char>('0' + rng() % 10);
      } else if (kind < 95) {
        for (unsigned n = 1 + rng() % 3; n > 0; --n) t += utf8(0x4E00 + rng() % 0x5200);
      } else {
        if (rng() % 2) t += ' ';
        for (unsigned n = 1 + rng() % 4; n > 0; --n) t += utf8(0xC0 + rng() % 0x140);
        if (rng() % 3 == 0) t.pop_back();  // a token that ends inside a character
      }
      tokens.push_back(t);
    }
    tokens.emplace_back("");  // control tokens
    tokens.emplace_back("");
    tokens.emplace_back("<|endoftext|>");
    return std::make_shared<const GrammarVocab>(
        std::move(tokens), std::vector<int32_t>{static_cast<int32_t>(151936 - 1)});
  }();
  return v;
}

const char* const kTexts[] = {R"({"name": "hel)", R"({"name")", R"({"name": )", R"({"n": 12)", ""};
const char* const kLabels[] = {"in_string", "after_key", "before_value", "in_number", "start"};

GrammarState state_for(int which) {
  static const auto g = Grammar::parse(kJson);
  GrammarState s(g);
  s.accept(kTexts[which]);
  return s;
}

void BM_VocabBuild(benchmark::State& st) {
  const auto& v = vocab();
  std::vector<std::string> tokens;
  for (int32_t t = 0; t < v->n_vocab(); ++t) tokens.push_back(v->bytes(t));
  for (auto _ : st) {
    GrammarVocab built(tokens, {v->n_vocab() - 1});
    benchmark::DoNotOptimize(built.n_vocab());
  }
}
BENCHMARK(BM_VocabBuild)->Unit(benchmark::kMillisecond);

void BM_MaskUncached(benchmark::State& st) {
  const GrammarState s = state_for(static_cast<int>(st.range(0)));
  st.SetLabel(kLabels[st.range(0)]);
  for (auto _ : st) {
    GrammarMasker m(vocab());
    benchmark::DoNotOptimize(m.allowed(s).data());
  }
}
BENCHMARK(BM_MaskUncached)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

void BM_MaskWarm(benchmark::State& st) {
  const GrammarState s = state_for(static_cast<int>(st.range(0)));
  st.SetLabel(kLabels[st.range(0)]);
  GrammarMasker m(vocab(), 1);
  for (int k = 0; k < 5; ++k) m.allowed(state_for(k));
  const GrammarState other = state_for(st.range(0) == 4 ? 1 : 4);  // a cheap walk
  for (auto _ : st) {
    m.allowed(other);  // evicts s (max_cached 1): the walk below is uncached
    benchmark::DoNotOptimize(m.allowed(s).data());
  }
}
BENCHMARK(BM_MaskWarm)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

void BM_MaskCached(benchmark::State& st) {
  const GrammarState s = state_for(0);
  GrammarMasker m(vocab());
  m.allowed(s);
  for (auto _ : st) benchmark::DoNotOptimize(m.allowed(s).data());
}
BENCHMARK(BM_MaskCached)->Unit(benchmark::kMicrosecond);

void BM_AdvanceToken(benchmark::State& st) {
  const GrammarState s = state_for(0);
  GrammarMasker m(vocab());
  const int32_t token = 256;  // the first multi-byte token
  for (auto _ : st) {
    GrammarState next = s;
    benchmark::DoNotOptimize(m.advance(next, token));
  }
}
BENCHMARK(BM_AdvanceToken)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace specdec
