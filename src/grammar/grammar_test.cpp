#include "grammar/grammar.h"

#include <gtest/gtest.h>

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

std::string error_of(std::string_view gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A JSON grammar in llama.cpp's style (its grammars/json.gbnf, with any value at the root).
constexpr const char* kJson = R"(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]*)) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= | " " | "\n" [ \t]{0,20}   # bounded, as in llama.cpp
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
  EXPECT_TRUE(matches(R"(root ::= . . .)", "a\xC3\xA9z"));  // 3 code points, one of 2 bytes
  EXPECT_TRUE(
      matches(R"(root ::= "\x41\u00e9\U0001F600\n\t\"\\")", "A\xC3\xA9\xF0\x9F\x98\x80\n\t\"\\"));
  EXPECT_TRUE(matches(R"(root ::= [\]\-] "é")", "-\xC3\xA9"));
  EXPECT_TRUE(matches(R"(root ::= [é-ë])", "\xC3\xAA"));
  EXPECT_TRUE(matches(R"(root ::= [a-])", "-"));
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
  EXPECT_TRUE(matches(R"(root ::= "x"{0})", ""));
}

TEST(Grammar, RulesGroupsCommentsAndLines) {
  const char* g = R"(
# a comment line
root ::= greeting " " (name | "world") # trailing comment
greeting ::= "hello" |
             "hi"
name ::= (
  [A-Z]
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
}

TEST(Grammar, JsonAcceptsJsonAndRejectsTheRest) {
  for (const char* ok : {R"({"a": 1, "b": [true, false, null], "c": {"d": "e\n\u00e9\"x"}})",
                         R"([])", R"(-0.5e+3)", R"("str")", "{\n  \"k\": 12}", R"({})"}) {
    EXPECT_TRUE(matches(kJson, ok)) << ok;
  }
  for (const char* bad : {R"({"a": 1,})", R"({'a': 1})", R"([1 2])", R"(012)", R"({"a" 1})",
                          R"("\x")", "\"a\nb\"", R"(tru)", R"({"a": 1}})"}) {
    EXPECT_FALSE(matches(kJson, bad)) << bad;
  }
  EXPECT_TRUE(prefix(kJson, R"({"a": [1, "x)"));
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
  // Not complete in the middle of a character, even where the grammar could end.
  GrammarState any(Grammar::parse(R"(root ::= .*)"));
  ASSERT_TRUE(any.accept("\xC3"));
  EXPECT_FALSE(any.complete());
  for (const char* bad : {"\xC0\x80", "\xC3\x28", "\xED\xA0\x80", "\xF5\x80", "\xE0\x80\x80",
                          "\xF4\x90\x80\x80", "\x80"}) {
    GrammarState t(Grammar::parse(R"(root ::= .*)"));
    EXPECT_FALSE(t.accept(bad)) << "bytes " << static_cast<int>(static_cast<unsigned char>(bad[0]));
  }
  // A lead byte no allowed character can start is refused at once.
  GrammarState ascii(Grammar::parse(R"(root ::= [a-z]*)"));
  EXPECT_FALSE(ascii.accept("\xE4"));
  for (const char* lead : {"\xC2", "\xE0", "\xF0"}) {  // smallest leads: no ASCII either
    GrammarState t(Grammar::parse(R"(root ::= [a-z]*)"));
    EXPECT_FALSE(t.accept(lead));
  }
}

TEST(Grammar, KeysIdentifyEqualFutures) {
  const auto g = Grammar::parse(kJson);
  GrammarState a(g), b(g), c(g);
  ASSERT_TRUE(a.accept(R"({"k": "ab)"));
  ASSERT_TRUE(b.accept(R"({"k": "abcdef)"));
  ASSERT_TRUE(c.accept(R"({"k": "ab")"));
  EXPECT_EQ(a.key(), b.key());  // inside the same string
  EXPECT_NE(a.key(), c.key());  // after it
  GrammarState p(g), q(g);
  ASSERT_TRUE(p.accept("\"\xC3"));
  ASSERT_TRUE(q.accept("\""));
  EXPECT_NE(p.key(), q.key());  // an unfinished character is part of the state
}

TEST(Grammar, ErrorsNameWhereAndWhat) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("# only a comment\n").find("empty"), std::string::npos);
  EXPECT_NE(error_of(R"(root ::= "a)").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root ::= x").find("'x' is used"), std::string::npos);
  EXPECT_NE(error_of("a ::= \"x\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n  x y ::= z").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("'::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{10001}").find("10000"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("below"), std::string::npos);
  EXPECT_NE(error_of("root ::= * \"a\"").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of(R"(root ::= "\q")").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= ( \"a\"").find("')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("backwards"), std::string::npos);
  EXPECT_NE(error_of(std::string(2 << 20, ' ')).find("limit"), std::string::npos);
  // Groups are rules, so nesting them costs nothing; a long literal repeated often does.
  EXPECT_EQ(error_of("root ::= (((\"a\"){100}){100}){100}"), "");
  EXPECT_NE(error_of("root ::= \"" + std::string(500, 'a') + "\"{10000}").find("too large"),
            std::string::npos);
}

TEST(Grammar, LeftRecursionIsRefused) {
  EXPECT_NE(error_of(R"(root ::= root "a" | "b")").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"").find("left-recursive"),
            std::string::npos);
  // Through a prefix that can match nothing.
  EXPECT_NE(error_of("root ::= b root \"x\" | \"z\"\nb ::= \"y\"?").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(error_of(R"(root ::= ("a"? root)*)").find("left-recursive"), std::string::npos);
  // Right recursion and recursion after a character are fine.
  EXPECT_TRUE(matches(R"g(root ::= "(" root ")" | "")g", "((()))"));
  EXPECT_TRUE(matches(R"(root ::= "a" root | "b")", "aaab"));
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
  try {
    for (int i = 0; i < 40 && s.accept("a"); ++i) {
      EXPECT_LE(s.n_stacks(), GrammarState::kMaxStacks);
    }
  } catch (const Error& e) {
    threw = std::string(e.what()).find("ambiguous") != std::string::npos;
  }
  EXPECT_TRUE(threw);
}

}  // namespace
}  // namespace specdec
