#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/error.h"

namespace specdec {
namespace {

bool matches(std::string_view gbnf, std::string_view text) {
  GrammarState s(Grammar::parse(gbnf));
  return s.accept(text) && s.complete();
}

bool prefix(std::string_view gbnf, std::string_view text) {
  GrammarState s(Grammar::parse(gbnf));
  return s.accept(text);
}

std::string error_of(std::string_view gbnf, std::string_view root = "root") {
  try {
    Grammar::parse(gbnf, root);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// A JSON grammar in llama.cpp's style (its grammars/json.gbnf, with any value at the root).
constexpr const char* kJson = R"(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [0-9]{0,15})? ws
# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(Grammar, LiteralsClassesAndAnyCharacter) {
  EXPECT_TRUE(matches(R"(root ::= "abc")", "abc"));
  EXPECT_FALSE(matches(R"(root ::= "abc")", "ab"));
  EXPECT_TRUE(prefix(R"(root ::= "abc")", "ab"));
  EXPECT_FALSE(prefix(R"(root ::= "abc")", "ax"));
  EXPECT_TRUE(matches(R"(root ::= [a-c] [xyz])", "by"));
  EXPECT_FALSE(matches(R"(root ::= [a-c] [xyz])", "dy"));
  EXPECT_TRUE(matches(R"(root ::= [^a-c])", "d"));
  EXPECT_FALSE(matches(R"(root ::= [^a-c])", "b"));
  EXPECT_TRUE(matches(R"(root ::= [^a-c])", "\xF0\x9F\x98\x80"));  // negation covers all planes
  EXPECT_FALSE(matches(R"(root ::= [^a-c])", "de"));               // one character only
  EXPECT_TRUE(matches(R"(root ::= . . .)", "a\xC3\xA9z"));         // 3 code points, one of 2 bytes
  EXPECT_TRUE(matches(R"(root ::= .)", "\n"));
  EXPECT_FALSE(matches(R"(root ::= .)", ""));
  EXPECT_TRUE(
      matches(R"(root ::= "\x41\u00e9\U0001F600\n\t\"\\")", "A\xC3\xA9\xF0\x9F\x98\x80\n\t\"\\"));
  EXPECT_TRUE(matches(R"(root ::= "\r")", "\r"));
  EXPECT_TRUE(matches(R"(root ::= [\]\-] "é")", "-\xC3\xA9"));
  EXPECT_TRUE(matches(R"(root ::= [\]\-] "é")", "]\xC3\xA9"));
  EXPECT_TRUE(matches(R"(root ::= [é-ë])", "\xC3\xAA"));
  EXPECT_FALSE(matches(R"(root ::= [é-ë])", "\xC3\xAC"));
  EXPECT_TRUE(matches(R"(root ::= [a-])", "-"));
  EXPECT_TRUE(matches(R"(root ::= [-a])", "-"));
  EXPECT_TRUE(matches(R"(root ::= [\x00-\x1F])", std::string(1, '\0')));
  EXPECT_FALSE(matches(R"(root ::= [^"\\\x00-\x1F])", "\x1F"));
  EXPECT_FALSE(matches(R"(root ::= [^"\\\x00-\x1F])", "\\"));
  EXPECT_TRUE(matches(R"(root ::= [^"\\\x00-\x1F])", "'"));
  EXPECT_TRUE(matches(R"(root ::= [a-zA-Z_0-9]+)", "Az_09"));
  EXPECT_TRUE(matches(R"(root ::= "" "a" "")", "a"));       // empty literals match nothing
  EXPECT_FALSE(prefix(R"(root ::= [])", "a"));              // an empty class never matches
  EXPECT_TRUE(matches(R"(root ::= [^])", "\xE2\x82\xAC"));  // ... and its negation always does
}

TEST(Grammar, RepetitionsAndBounds) {
  const char* g = R"(root ::= "a"{2,4} "b"* "c"+ "d"? ("e" | "f"){3} [0-9]{,2} "g"{2,})";
  EXPECT_TRUE(matches(g, "aacefegg"));
  EXPECT_TRUE(matches(g, "aaaabbbcccdfff12ggg"));
  EXPECT_FALSE(matches(g, "acefegg"));                  // one a
  EXPECT_FALSE(matches(g, "aaaaacefegg"));              // five a
  EXPECT_FALSE(matches(g, "aaefegg"));                  // no c
  EXPECT_FALSE(matches(g, "aacefeegg"));                // four of e/f
  EXPECT_FALSE(matches(g, "aacefe123gg"));              // three digits
  EXPECT_FALSE(matches(g, "aacefeg"));                  // one g
  EXPECT_TRUE(matches(R"(root ::= "ab"*)", "ababab"));  // a literal repeats whole
  EXPECT_FALSE(matches(R"(root ::= "ab"*)", "aba"));
  EXPECT_TRUE(matches(R"(root ::= "ab"{2})", "abab"));
  EXPECT_TRUE(matches(R"(root ::= "x"{0})", ""));
  EXPECT_FALSE(prefix(R"(root ::= "x"{0,0})", "x"));
  EXPECT_TRUE(matches(R"(root ::= "x"{ 1 , 2 })", "xx"));  // spaces inside the braces
  EXPECT_TRUE(matches(R"(root ::= "x"? "y")", "y"));
  EXPECT_TRUE(matches(R"(root ::= ("x"{2}){2})", "xxxx"));  // repetitions compose
  EXPECT_FALSE(matches(R"(root ::= ("x"{2}){2})", "xxx"));
  // The bounds hold exactly at the cap.
  const std::string many(10000, 'a');
  EXPECT_TRUE(matches(R"(root ::= "a"{10000})", many));
  EXPECT_FALSE(matches(R"(root ::= "a"{10000})", many.substr(1)));
  EXPECT_FALSE(prefix(R"(root ::= "a"{0,10000})", many + "a"));
  EXPECT_TRUE(matches(R"(root ::= "a"{0,10000})", many));
}

TEST(Grammar, AlternationAndNestedGroups) {
  const char* g = R"(root ::= ("a" ("b" | "c")+ | "d")* "!" | "?")";
  for (const char* ok : {"!", "?", "ab!", "abcbc!", "dabd!", "dd!"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"a!", "b!", "?!", "!?", "abx!"}) EXPECT_FALSE(matches(g, bad)) << bad;
  // Alternatives that overlap are all followed.
  EXPECT_TRUE(matches(R"(root ::= "ab" "c" | "a" "bd" | "abe")", "abd"));
  EXPECT_TRUE(matches(R"(root ::= ( ( ( "x" ) ) ))", "x"));
}

TEST(Grammar, RulesGroupsCommentsAndLines) {
  const char* g = R"(
# a comment line
root ::= greeting " " (name | "world") # trailing comment
greeting ::= "hello" |
             "hi"
name ::= (
  [A-Z]   # capital
  [a-z]+
)
)";
  EXPECT_TRUE(matches(g, "hello world"));
  EXPECT_TRUE(matches(g, "hi Bob"));
  EXPECT_FALSE(matches(g, "hey Bob"));
  EXPECT_FALSE(matches(g, "hi bob"));
  // A rule may be used before it is defined; the start symbol can be chosen.
  EXPECT_TRUE(matches("root ::= a\na ::= \"x\"", "x"));
  GrammarState s(Grammar::parse("top ::= \"t\"\nroot ::= \"r\"", "top"));
  EXPECT_TRUE(s.accept("t") && s.complete());
  // Windows line ends; a rule body that starts on the next line; alternatives on lines that
  // start with '|'.
  EXPECT_TRUE(matches("root ::= \"a\" b\r\nb ::= \"b\"\r\n", "ab"));
  EXPECT_TRUE(matches("root ::=\n  \"a\"\n", "a"));
  const char* lines = "root ::= \"a\"\n     | \"b\"  # more\n\n     | \"c\"\nx ::= \"x\"\n";
  EXPECT_TRUE(matches(lines, "b"));
  EXPECT_TRUE(matches(lines, "c"));
  EXPECT_FALSE(matches(lines, "x"));
  // Rule names: letters, digits and '-'.
  EXPECT_TRUE(matches("root ::= my-Rule2\nmy-Rule2 ::= \"q\"", "q"));
}

TEST(Grammar, JsonAcceptsJsonAndRejectsTheRest) {
  for (const char* ok : {R"({"a": 1, "b": [true, false, null], "c": {"d": "e\n\u00e9\"x"}})",
                         R"([])", R"(-0.5e+3)", R"("str")", "{\n  \"k\": 12}", R"({})",
                         R"([[[[]]], {"": ""}])", "\"caf\xC3\xA9 \xF0\x9F\x98\x80\""}) {
    EXPECT_TRUE(matches(kJson, ok)) << ok;
  }
  for (const char* bad :
       {R"({"a": 1,})", R"({'a': 1})", R"([1 2])", R"(012)", R"({"a" 1})", R"("\x")", "\"a\nb\"",
        R"(tru)", R"({"a": 1}})", R"({"a": .5})", R"([1,])", R"("\u12G4")", "", "\"\x7F\""}) {
    EXPECT_FALSE(matches(kJson, bad)) << bad;
  }
  EXPECT_TRUE(prefix(kJson, R"({"a": [1, "x)"));
  EXPECT_FALSE(prefix(kJson, R"({"a": [1, "x"]])"));
}

TEST(Grammar, CompleteAndCanContinue) {
  GrammarState s(Grammar::parse(R"(root ::= "a" "b"?)"));
  EXPECT_FALSE(s.complete());
  EXPECT_TRUE(s.can_continue());
  ASSERT_TRUE(s.accept("a"));
  EXPECT_TRUE(s.complete());
  EXPECT_TRUE(s.can_continue());
  ASSERT_TRUE(s.accept("b"));
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(s.can_continue());
  EXPECT_FALSE(s.accept("b"));
  EXPECT_TRUE(s.dead());
  EXPECT_FALSE(s.accept(""));  // dead stays dead
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.can_continue());
  EXPECT_EQ(s.n_stacks(), 0u);
  // The empty text is a sentence of a grammar that allows it.
  GrammarState e(Grammar::parse(R"(root ::= "x"*)"));
  EXPECT_TRUE(e.complete());
  EXPECT_TRUE(e.accept(""));
  // Copies are independent.
  GrammarState a(Grammar::parse(R"(root ::= "ab")"));
  GrammarState b = a;
  ASSERT_TRUE(a.accept("a"));
  EXPECT_FALSE(b.accept("b"));
  EXPECT_TRUE(a.accept("b"));
  EXPECT_TRUE(a.complete());
}

TEST(Grammar, Utf8SplitAcrossCallsAndInvalidUtf8) {
  const auto g = Grammar::parse(R"(root ::= "é€😀")");
  GrammarState s(g);
  const std::string text = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  for (char c : text) {
    EXPECT_FALSE(s.complete());
    ASSERT_TRUE(s.accept(std::string(1, c)));
  }
  EXPECT_TRUE(s.complete());
  // Split in other places, and all at once, end in the same state.
  GrammarState w(g), x(g);
  ASSERT_TRUE(w.accept(text));
  ASSERT_TRUE(x.accept(text.substr(0, 4)) && x.accept(text.substr(4, 3)) &&
              x.accept(text.substr(7)));
  EXPECT_EQ(w.key(), s.key());
  EXPECT_EQ(x.key(), s.key());
  // Not complete in the middle of a character, even where the grammar could end.
  GrammarState any(Grammar::parse(R"(root ::= .*)"));
  ASSERT_TRUE(any.accept("\xC3"));
  EXPECT_FALSE(any.complete());
  EXPECT_TRUE(any.can_continue());
  for (const char* bad : {"\xC0\x80", "\xC3\x28", "\xED\xA0\x80", "\xF5\x80", "\xE0\x80\x80",
                          "\xF4\x90\x80\x80", "\x80", "\xC1\xBF", "\xF0\x80\x80\x80", "\xFF"}) {
    GrammarState t(Grammar::parse(R"(root ::= .*)"));
    EXPECT_FALSE(t.accept(bad)) << "bytes " << static_cast<int>(static_cast<unsigned char>(bad[0]));
    EXPECT_TRUE(t.dead());
  }
  // The largest code point and the ones around the surrogates are fine.
  EXPECT_TRUE(matches(R"(root ::= .*)", "\xF4\x8F\xBF\xBF\xED\x9F\xBF\xEE\x80\x80"));
  // A lead byte no allowed character can start is refused at once.
  GrammarState ascii(Grammar::parse(R"(root ::= [a-z]*)"));
  EXPECT_FALSE(ascii.accept("\xE4"));
  for (const char* lead : {"\xC2", "\xE0", "\xF0"}) {  // smallest leads: no ASCII either
    GrammarState t(Grammar::parse(R"(root ::= [a-z]*)"));
    EXPECT_FALSE(t.accept(lead));
  }
  // ... and so is a second byte that narrows the character out of every class.
  GrammarState cjk(Grammar::parse(R"(root ::= [一-鿿])"));  // U+4E00..U+9FFF: E4 B8 80 ..
  EXPECT_TRUE(GrammarState(cjk).accept("\xE4"));
  EXPECT_FALSE(GrammarState(cjk).accept("\xE4\x80"));  // U+4000..U+403F
  EXPECT_TRUE(GrammarState(cjk).accept("\xE4\xB8"));
  EXPECT_TRUE(cjk.accept("\xE4\xB8\x80") && cjk.complete());
}

TEST(Grammar, KeysIdentifyEqualFutures) {
  const auto g = Grammar::parse(kJson);
  GrammarState a(g), b(g), c(g);
  ASSERT_TRUE(a.accept(R"({"k": "ab)"));
  ASSERT_TRUE(b.accept(R"({"k": "abcdef)"));
  ASSERT_TRUE(c.accept(R"({"k": "ab")"));
  EXPECT_EQ(a.key(), b.key());  // inside the same string
  EXPECT_NE(a.key(), c.key());  // after it
  GrammarState d(g);
  ASSERT_TRUE(d.accept(R"({"k": ")"));
  EXPECT_EQ(a.key(), d.key());  // right after the opening quote too
  GrammarState e(g);
  ASSERT_TRUE(e.accept(R"({"k": [{"j": "ab)"));
  EXPECT_NE(a.key(), e.key());  // a string nested elsewhere has another future
  GrammarState p(g), q(g);
  ASSERT_TRUE(p.accept("\"\xC3"));
  ASSERT_TRUE(q.accept("\""));
  EXPECT_NE(p.key(), q.key());  // an unfinished character is part of the state
  ASSERT_TRUE(p.accept("\xA9"));
  EXPECT_EQ(p.key(), q.key());
  // Two ways to the same place are one stack.
  const auto g2 = Grammar::parse("root ::= x | x | \"ac\"\nx ::= \"ab\"");
  GrammarState m(g2);
  EXPECT_EQ(m.n_stacks(), 2u);
  ASSERT_TRUE(m.accept("a"));
  EXPECT_EQ(m.n_stacks(), 2u);
}

TEST(Grammar, ErrorsNameWhereAndWhat) {
  EXPECT_TRUE(has(error_of(""), "empty"));
  EXPECT_TRUE(has(error_of("# only a comment\n  \n"), "empty"));
  EXPECT_TRUE(has(error_of(R"(root ::= "a)"), "line 1:10: unterminated string literal"));
  EXPECT_TRUE(has(error_of("root ::= [a-"), "unterminated character class"));
  const std::string undefined = error_of("root ::= \"a\" x\n");
  EXPECT_TRUE(has(undefined, "'x'") && has(undefined, "never defined") && has(undefined, "1:14"))
      << undefined;
  EXPECT_TRUE(has(error_of("a ::= \"x\""), "no rule named 'root'"));
  EXPECT_TRUE(has(error_of("a ::= \"x\"", "start"), "no rule named 'start'"));
  const std::string twice = error_of("root ::= \"a\"\nb ::= \"c\"\nroot ::= \"b\"");
  EXPECT_TRUE(has(twice, "'root' is defined twice") && has(twice, "3:1") && has(twice, "1:1"))
      << twice;
  EXPECT_TRUE(has(error_of("root ::= \"a\"\n  x y ::= z"), "line 2:5: expected '::='"));
  EXPECT_TRUE(has(error_of("root = \"a\""), "'::='"));
  EXPECT_TRUE(has(error_of("::= \"a\""), "expected a rule name"));
  EXPECT_TRUE(has(error_of("root ::= \"a\"{10001}"), "10000"));
  EXPECT_TRUE(has(error_of("root ::= \"a\"{2,99999999999999999999}"), "10000"));
  EXPECT_TRUE(has(error_of("root ::= \"a\"{3,2}"), "below"));
  EXPECT_TRUE(has(error_of("root ::= \"a\"{x}"), "expected a number"));
  EXPECT_TRUE(has(error_of("root ::= \"a\"{2"), "'}'"));
  EXPECT_TRUE(has(error_of("root ::= * \"a\""), "nothing to repeat"));
  EXPECT_TRUE(has(error_of("root ::= \"a\" | + \"a\""), "nothing to repeat"));
  EXPECT_TRUE(has(error_of(R"(root ::= "\q")"), "unknown escape"));
  EXPECT_TRUE(has(error_of(R"(root ::= "\x4")"), "2 hex digits"));
  EXPECT_TRUE(has(error_of(R"(root ::= "\U00110000")"), "U+10FFFF"));
  EXPECT_TRUE(has(error_of("root ::= ( \"a\""), "')'"));
  EXPECT_TRUE(has(error_of("root ::= \"a\" )"), "line 1:14"));
  EXPECT_TRUE(has(error_of("root ::= [z-a]"), "backwards"));
  EXPECT_TRUE(has(error_of("root ::= \"\xC3\x28\""), "invalid UTF-8"));
  EXPECT_TRUE(has(error_of("root ::= \"\xE2\x82"), "UTF-8"));
  EXPECT_TRUE(has(error_of("root ::= \"a\" $"), "'$'"));
  EXPECT_TRUE(has(error_of("root ::= \"a\" \x01"), "0x01"));
  EXPECT_TRUE(has(error_of(std::string("root ::= \"a\"\0", 13)), "0x00"));
  EXPECT_TRUE(has(error_of(std::string((1 << 20) + 1, ' ')), "1 MiB"));
  EXPECT_EQ(error_of("root ::= \"a\"" + std::string((1 << 20) - 12, ' ')), "");  // at the limit
  // Parentheses nest up to 256 deep.
  EXPECT_EQ(error_of("root ::= " + std::string(256, '(') + "\"a\"" + std::string(256, ')')), "");
  EXPECT_TRUE(has(error_of("root ::= " + std::string(257, '(') + "\"a\"" + std::string(257, ')')),
                  "nested more than 256"));
  // A bomb: one repetition parses, many do not. Groups and literals are one rule each, so
  // nesting costs nothing.
  EXPECT_EQ(error_of("root ::= (((\"a\"){100}){100}){100}"), "");
  EXPECT_EQ(error_of("root ::= \"" + std::string(500, 'a') + "\"{10000}"), "");
  std::string bomb = "root ::=";
  for (int i = 0; i < 300; ++i) bomb += " \"a\"{10000}";
  EXPECT_TRUE(has(error_of(bomb), "too large"));
}

TEST(Grammar, LeftRecursionIsRefused) {
  const std::string direct = error_of(R"(root ::= root "a" | "b")");
  EXPECT_TRUE(has(direct, "'root' is left-recursive") && has(direct, "root -> root")) << direct;
  const std::string indirect = error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"");
  EXPECT_TRUE(has(indirect, "left-recursive") && has(indirect, "a -> b -> a")) << indirect;
  // Through a prefix that can match nothing.
  const std::string nullable = error_of("root ::= a\na ::= b a \"x\" | \"z\"\nb ::= \"y\"?");
  EXPECT_TRUE(has(nullable, "'a' is left-recursive")) << nullable;
  EXPECT_TRUE(
      has(error_of("root ::= b c root | \"z\"\nb ::= \"\"\nc ::= b | b b"), "left-recursive"));
  EXPECT_TRUE(has(error_of(R"(root ::= ("a"? root)*)"), "left-recursive"));
  // A repetition of something that may be empty loops the same way.
  const std::string star = error_of(R"(root ::= ("a"?)* "b")");
  EXPECT_TRUE(has(star, "left-recursive") && has(star, "(x?)*")) << star;
  // Even in a rule that root does not use.
  EXPECT_TRUE(has(error_of("root ::= \"a\"\nu ::= u \"a\""), "'u' is left-recursive"));
  // Right recursion and recursion after a character are fine.
  EXPECT_TRUE(matches(R"g(root ::= "(" root ")" | "")g", "((()))"));
  EXPECT_TRUE(matches(R"(root ::= "a" root | "b")", "aaab"));
  EXPECT_TRUE(matches("root ::= b root | \"z\"\nb ::= \"y\" \"x\"?", "yxyz"));
}

TEST(Grammar, DeepButFiniteGrammarsWork) {
  // A chain of 20,000 rules, each passing on to the next: no recursion in the compiler or the
  // matcher depends on it.
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i) chain += str_cat("r", i, " ::= r", i + 1, "\n");
  chain += "r20000 ::= \"end\"\n";
  EXPECT_TRUE(matches(chain, "end"));
  // Nesting in the text deepens the stacks.
  const std::string deep = std::string(500, '[') + std::string(500, ']');
  EXPECT_TRUE(matches(kJson, deep));
  EXPECT_FALSE(matches(kJson, deep + "]"));
}

TEST(Grammar, TooAmbiguousGrammarsFailInsteadOfBlowingUp) {
  // Optional runs that can each match nothing converge (polynomial work): 40 of them are fine.
  std::string opt = "root ::= ";
  for (int i = 0; i < 40; ++i) opt += "x? ";
  opt += "\"b\"\nx ::= (\"a\" | \"a\" \"a\")*";
  EXPECT_TRUE(matches(opt, "aaaaaaaaaab"));
  // Every "a" doubles the distinct ways to go on (a "c" or a "d" to close it later).
  const auto g = Grammar::parse(R"(root ::= x "b"
x ::= "a" x "c" | "a" x "d" | "")");
  GrammarState s(g);
  bool threw = false;
  std::string key_before;
  try {
    for (int i = 0; i < 40; ++i) {
      key_before = s.key();
      ASSERT_TRUE(s.accept("a"));
      EXPECT_LE(s.n_stacks(), GrammarState::kMaxStacks);
    }
  } catch (const Error& e) {
    threw = has(e.what(), "ambiguous");
  }
  EXPECT_TRUE(threw);
  EXPECT_EQ(s.key(), key_before);  // the state is left as it was
  EXPECT_FALSE(s.dead());
  EXPECT_GT(s.n_stacks(), 1000u);
  // A grammar can be too ambiguous from the start: the first state throws.
  const auto chain = Grammar::parse(R"(root ::= ("a"?){0,5000} "b")");
  EXPECT_THROW(GrammarState{chain}, Error);
}

// Random edits of real grammars must compile or throw specdec::Error, and the states of those
// that compile must take random text without crashing.
TEST(Grammar, MangledGrammarsNeverCrash) {
  std::mt19937 gen(11);
  const std::string alphabet = "\"[]()|*+?{},.-:=\\#^ \nabxu0123456789\xC3\xA9";
  int compiled = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string g = kJson;
    for (int k = 1 + static_cast<int>(gen() % 4); k > 0; --k) {
      const size_t at = gen() % g.size();
      switch (gen() % 3) {
        case 0:
          g.erase(at, 1 + gen() % 3);
          break;
        case 1:
          g.insert(at, 1, alphabet[gen() % alphabet.size()]);
          break;
        default:
          g[at] = alphabet[gen() % alphabet.size()];
      }
    }
    try {
      GrammarState s(Grammar::parse(g));
      ++compiled;
      std::string text;
      for (int k = 0; k < 30; ++k) text += alphabet[gen() % alphabet.size()];
      s.accept(R"({"a": [1, "b"], )");
      s.accept(text);
    } catch (const Error&) {
    }
  }
  EXPECT_GT(compiled, 100);
}

}  // namespace
}  // namespace specdec
