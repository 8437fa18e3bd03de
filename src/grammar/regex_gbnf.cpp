// Regular expression -> GBNF expression. The pattern is parsed into a small tree (characters
// sets, concatenation, alternation, bounded or unbounded repetition), rewritten so that nothing
// that may match the empty text is repeated without bound (GBNF expands x* into a recursive
// rule, and a recursion through an empty x would never end: Grammar::parse refuses it as left
// recursion), then written out. In JSON-string mode a character set becomes the JSON text of its
// characters: those JSON may write as they are, plus the escapes of '"', '\' and controls.
#include "grammar/regex_gbnf.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "common/error.h"
#include "grammar/gbnf_text.h"
#include "grammar/grammar.h"

namespace specdec {
namespace {

constexpr size_t kMaxPatternBytes = size_t{16} << 10;
constexpr size_t kMaxNodes = 50000;    // after the rewrite, which may copy parts of the tree
constexpr int kMaxDepth = 64;          // nested groups (the parser recurses on them)
constexpr uint32_t kMaxCount = 10000;  // a quantifier's bound: Grammar's own repetition limit
constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of code points: sorted, disjoint, non-adjacent inclusive ranges.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

// Everything but `r`, and never a surrogate (UTF-8 cannot carry one).
Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  Ranges clean;
  for (const auto& [lo, hi] : out) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      clean.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) clean.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) clean.emplace_back(0xE000, hi);
  }
  return clean;
}

Ranges intersection(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint32_t lo = std::max(a[i].first, b[j].first);
    const uint32_t hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) out.emplace_back(lo, hi);
    (a[i].second < b[j].second ? i : j)++;
  }
  return out;
}

bool contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(),
                     [cp](const auto& x) { return x.first <= cp && cp <= x.second; });
}

// ECMAScript's classes.
const Ranges& digits() {
  static const Ranges r{{'0', '9'}};
  return r;
}
const Ranges& word() {
  static const Ranges r{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const Ranges& space() {  // WhiteSpace and LineTerminator
  static const Ranges r = normalized({{'\t', '\r'},
                                      {' ', ' '},
                                      {0xA0, 0xA0},
                                      {0x1680, 0x1680},
                                      {0x2000, 0x200A},
                                      {0x2028, 0x2029},
                                      {0x202F, 0x202F},
                                      {0x205F, 0x205F},
                                      {0x3000, 0x3000},
                                      {0xFEFF, 0xFEFF}});
  return r;
}
const Ranges& dot() {  // all but the line terminators
  static const Ranges r = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
  return r;
}
const Ranges& anything() {
  static const Ranges r = complement({});
  return r;
}

struct Node {
  enum Kind { kEmpty, kChars, kConcat, kAlt, kRepeat } kind = kEmpty;
  Ranges chars;             // kChars
  std::vector<int> kids;    // kConcat, kAlt; kRepeat: one
  uint32_t lo = 0, hi = 0;  // kRepeat
};

class Tree {
 public:
  int add(Node n) {
    if (nodes_.size() >= kMaxNodes) fail("regex too complex: over ", kMaxNodes, " parts");
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }
  const Node& at(int i) const { return nodes_[static_cast<size_t>(i)]; }
  Node& at(int i) { return nodes_[static_cast<size_t>(i)]; }
  int empty() { return add(Node{}); }
  int chars(Ranges r) {
    Node n;
    n.kind = Node::kChars;
    n.chars = std::move(r);
    return add(std::move(n));
  }
  int list(Node::Kind kind, std::vector<int> kids) {
    if (kids.empty()) return empty();
    if (kids.size() == 1) return kids[0];
    Node n;
    n.kind = kind;
    n.kids = std::move(kids);
    return add(std::move(n));
  }
  int repeat(int kid, uint32_t lo, uint32_t hi) {
    Node n;
    n.kind = Node::kRepeat;
    n.kids = {kid};
    n.lo = lo;
    n.hi = hi;
    return add(std::move(n));
  }

  bool nullable(int i) const {
    const Node& n = at(i);
    switch (n.kind) {
      case Node::kEmpty:
        return true;
      case Node::kChars:
        return false;
      case Node::kConcat:
        return std::all_of(n.kids.begin(), n.kids.end(), [&](int k) { return nullable(k); });
      case Node::kAlt:
        return std::any_of(n.kids.begin(), n.kids.end(), [&](int k) { return nullable(k); });
      case Node::kRepeat:
        return n.lo == 0 || nullable(n.kids[0]);
    }
    return false;
  }

  // The same language without the empty text; -1 when nothing is left.
  int nonempty(int i) {
    const Node n = at(i);  // a copy: add() may move the nodes
    switch (n.kind) {
      case Node::kEmpty:
        return -1;
      case Node::kChars:
        return i;
      case Node::kAlt: {
        std::vector<int> kids;
        for (const int k : n.kids) {
          if (const int e = nonempty(k); e >= 0) kids.push_back(e);
        }
        return kids.empty() ? -1 : list(Node::kAlt, std::move(kids));
      }
      case Node::kConcat: {
        if (!nullable(i)) return i;
        // Every part may be empty: a nonempty text has a first nonempty part.
        std::vector<int> alts;
        for (size_t first = 0; first < n.kids.size(); ++first) {
          const int e = nonempty(n.kids[first]);
          if (e < 0) continue;
          std::vector<int> seq{e};
          seq.insert(seq.end(), n.kids.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                     n.kids.end());
          alts.push_back(list(Node::kConcat, std::move(seq)));
        }
        return alts.empty() ? -1 : list(Node::kAlt, std::move(alts));
      }
      case Node::kRepeat: {
        if (n.hi == 0) return -1;
        if (!nullable(i)) return i;
        // x{0,m} of a non-empty x, or x{n,m} of an x that may be empty: one to m nonempty x.
        const int e = nonempty(n.kids[0]);
        return e < 0 ? -1 : repeat(e, 1, n.hi);
      }
    }
    return -1;
  }

  // Rewrites every repetition of something that may be empty: x{n,m} -> x'{0,m} with x' the
  // nonempty part of x (the empty copies were never needed).
  int without_empty_repeats(int i) {
    const Node n = at(i);
    if (n.kind == Node::kConcat || n.kind == Node::kAlt) {
      std::vector<int> kids;
      for (const int k : n.kids) kids.push_back(without_empty_repeats(k));
      at(i).kids = std::move(kids);
      return i;
    }
    if (n.kind != Node::kRepeat) return i;
    const int kid = without_empty_repeats(n.kids[0]);
    if (!nullable(kid)) {
      at(i).kids = {kid};
      return i;
    }
    const int e = nonempty(kid);
    if (e < 0 || n.hi == 0) return empty();
    return repeat(e, 0, n.hi);
  }

 private:
  std::vector<Node> nodes_;
};

// The pattern's code points; malformed UTF-8 (overlong forms, surrogates, beyond U+10FFFF, a
// cut sequence) is an error rather than a character no grammar could hold.
std::vector<uint32_t> strict_codepoints(std::string_view text) {
  std::vector<uint32_t> out;
  grammar_detail::Utf8Decoder d;
  for (size_t i = 0; i < text.size(); ++i) {
    const int r = d.feed(static_cast<uint8_t>(text[i]));
    if (r < 0) fail("regex is not valid UTF-8 (at byte ", i, ")");
    if (r == 1) out.push_back(d.cp);
  }
  if (d.need > 0) fail("regex is not valid UTF-8 (it ends inside a character)");
  return out;
}

// The parser, over code points.
class Parser {
 public:
  Parser(std::string_view pattern, Tree& tree) : cps_(strict_codepoints(pattern)), tree_(tree) {}

  // The pattern's top-level alternatives, each with whether it is anchored at either end.
  struct Branch {
    int node;
    bool at_start;
    bool at_end;
  };
  std::vector<Branch> parse() {
    std::vector<Branch> branches;
    while (true) {
      Branch b{-1, false, false};
      if (eat('^') || eat_escape('A')) b.at_start = true;
      b.node = concat(0, &b.at_end);
      branches.push_back(b);
      if (!eat('|')) break;
    }
    if (pos_ < cps_.size()) error(pos_, "unmatched ')'");
    return branches;
  }

 private:
  [[noreturn]] void error(size_t at, std::string_view what) const {
    fail("regex at character ", at, ": ", what);
  }
  bool done() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0xFFFFFFFF;
  }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool eat_escape(uint32_t c) {
    if (peek() != '\\' || peek(1) != c) return false;
    pos_ += 2;
    return true;
  }

  int alternation(int depth) {
    std::vector<int> alts{concat(depth, nullptr)};
    while (eat('|')) alts.push_back(concat(depth, nullptr));
    return tree_.list(Node::kAlt, std::move(alts));
  }

  // Items up to '|', ')' or the end. At the top level (at_end set) a final $ or \Z anchors.
  int concat(int depth, bool* at_end) {
    std::vector<int> items;
    while (!done() && peek() != '|' && peek() != ')') {
      const size_t at = pos_;
      if (peek() == '$' || (peek() == '\\' && (peek(1) == 'Z' || peek(1) == 'z'))) {
        pos_ += peek() == '$' ? 1 : 2;
        if (at_end != nullptr && (done() || peek() == '|')) {
          *at_end = true;
          break;
        }
        error(at, "an anchor ($) is supported only at the end of the pattern");
      }
      if (peek() == '^' || (peek() == '\\' && peek(1) == 'A')) {
        error(at, "an anchor (^) is supported only at the start of the pattern");
      }
      int item = atom(depth);
      item = quantified(item);
      items.push_back(item);
    }
    return tree_.list(Node::kConcat, std::move(items));
  }

  // A quantifier after the item, if any.
  int quantified(int item) {
    uint32_t lo = 0, hi = 0;
    if (eat('*')) {
      lo = 0, hi = kUnbounded;
    } else if (eat('+')) {
      lo = 1, hi = kUnbounded;
    } else if (eat('?')) {
      lo = 0, hi = 1;
    } else if (!braces(lo, hi)) {
      return item;
    }
    eat('?');  // lazy: the same language
    if (peek() == '+') error(pos_, "possessive quantifiers are not supported");
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && looks_like_braces())) {
      error(pos_, "nothing to repeat (a quantifier after a quantifier)");
    }
    return tree_.repeat(item, lo, hi);
  }

  bool looks_like_braces() {
    const size_t save = pos_;
    uint32_t lo = 0, hi = 0;
    const bool ok = braces(lo, hi, /*check_only=*/true);
    pos_ = save;
    return ok;
  }

  // {n} {n,} {n,m} {,m}; anything else after '{' is a literal '{' (as ECMAScript's web
  // compatibility grammar and Python read it).
  bool braces(uint32_t& lo, uint32_t& hi, bool check_only = false) {
    if (peek() != '{') return false;
    const size_t start = pos_;
    size_t p = pos_ + 1;
    const auto number = [&](uint64_t& v) {
      const size_t from = p;
      v = 0;
      while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9') {
        v = std::min<uint64_t>(v * 10 + (cps_[p] - '0'), uint64_t{1} << 40);
        ++p;
      }
      return p > from;
    };
    uint64_t a = 0, b = 0;
    const bool has_a = number(a);
    bool has_comma = false, has_b = false;
    if (p < cps_.size() && cps_[p] == ',') {
      has_comma = true;
      ++p;
      has_b = number(b);
    }
    if (p >= cps_.size() || cps_[p] != '}' || (!has_a && !has_b)) return false;
    pos_ = p + 1;
    if (check_only) return true;
    if (!has_a) a = 0;
    if (!has_comma) b = a;
    if (a > kMaxCount || (has_b && b > kMaxCount) || (!has_comma && b > kMaxCount)) {
      error(start, str_cat("a repetition count over ", kMaxCount));
    }
    if ((has_b || !has_comma) && b < a) error(start, "a repetition {n,m} with m below n");
    lo = static_cast<uint32_t>(a);
    hi = (has_comma && !has_b) ? kUnbounded : static_cast<uint32_t>(b);
    return true;
  }

  int atom(int depth) {
    const size_t at = pos_;
    const uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?' || (c == '{' && looks_like_braces())) {
      error(at, "nothing to repeat");
    }
    ++pos_;
    switch (c) {
      case '(':
        return group(depth, at);
      case '[':
        return tree_.chars(char_class(at));
      case '.':
        return tree_.chars(dot());
      case '\\':
        return tree_.chars(escape(at, /*in_class=*/false));
      default:
        return tree_.chars({{c, c}});
    }
  }

  int group(int depth, size_t at) {
    if (depth + 1 > kMaxDepth) error(at, str_cat("groups nested deeper than ", kMaxDepth));
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '=' || peek() == '!' ||
                 (peek() == '<' && (peek(1) == '=' || peek(1) == '!'))) {
        error(at, "lookaround assertions are not supported");
      } else if (eat('<') || (peek() == 'P' && peek(1) == '<')) {
        if (peek() == 'P') pos_ += 2;  // (?P<name>: its "P<" is still ahead
        const size_t name_at = pos_;
        while (!done() && peek() != '>') {
          const uint32_t n = peek();
          if (!(n == '_' || (n >= '0' && n <= '9') || (n >= 'a' && n <= 'z') ||
                (n >= 'A' && n <= 'Z'))) {
            error(pos_, "a group name holds letters, digits and '_' only");
          }
          ++pos_;
        }
        if (pos_ == name_at || !eat('>')) error(at, "a named group needs <name>");
      } else if (peek() == 'P' && peek(1) == '=') {
        error(at, "backreferences are not supported");
      } else {
        error(at, "inline flags and other (?...) groups are not supported");
      }
    }
    const int inner = alternation(depth + 1);
    if (!eat(')')) error(at, "unclosed '('");
    return inner;
  }

  Ranges char_class(size_t at) {
    const bool negated = eat('^');
    Ranges set;
    bool first = true;
    while (true) {
      if (done()) error(at, "unclosed '['");
      if (peek() == ']' && !first) break;
      if (peek() == ']') error(pos_, "an empty class [] matches nothing (write \\] for ']')");
      first = false;
      const size_t item_at = pos_;
      Ranges lo_set = class_atom();
      const bool single = lo_set.size() == 1 && lo_set[0].first == lo_set[0].second;
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++pos_;
        const Ranges hi_set = class_atom();
        const bool hi_single = hi_set.size() == 1 && hi_set[0].first == hi_set[0].second;
        if (!single || !hi_single) error(item_at, "a range's ends must be single characters");
        if (hi_set[0].first < lo_set[0].first) error(item_at, "a range out of order");
        set.emplace_back(lo_set[0].first, hi_set[0].first);
        continue;
      }
      set.insert(set.end(), lo_set.begin(), lo_set.end());
    }
    ++pos_;  // ']'
    set = normalized(std::move(set));
    return negated ? complement(set) : set;
  }

  Ranges class_atom() {
    const size_t at = pos_;
    const uint32_t c = peek();
    ++pos_;
    if (c == '\\') return escape(at, /*in_class=*/true);
    if (c == '[' && (peek() == ':' || peek() == '=' || peek() == '.')) {
      error(at, "POSIX classes such as [:alpha:] are not supported");
    }
    return {{c, c}};
  }

  uint32_t hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const uint32_t h = peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
      if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
      if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
      if (d < 0) error(at, str_cat("expected ", digits, " hex digits"));
      v = (v << 4) | static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  uint32_t unicode_escape(size_t at) {  // after "\u"
    if (eat('{')) {
      uint64_t v = 0;
      const size_t from = pos_;
      while (peek() != '}') {
        if (done()) error(at, "unclosed \\u{");
        const size_t digit_at = pos_;
        v = std::min<uint64_t>((v << 4) | hex(1, digit_at), uint64_t{1} << 32);
      }
      ++pos_;
      if (pos_ == from + 1 || v > kMaxCodePoint) error(at, "\\u{...} must name a code point");
      return static_cast<uint32_t>(v);
    }
    uint32_t v = hex(4, at);
    if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      const size_t save = pos_;
      pos_ += 2;
      const uint32_t low = hex(4, save);
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
      pos_ = save;
    }
    return v;
  }

  // After a backslash at `at`.
  Ranges escape(size_t at, bool in_class) {
    if (done()) error(at, "a pattern cannot end with '\\'");
    const uint32_t c = peek();
    ++pos_;
    const auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (c) {
      case 'd':
        return digits();
      case 'D':
        return complement(digits());
      case 'w':
        return word();
      case 'W':
        return complement(word());
      case 's':
        return space();
      case 'S':
        return complement(space());
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 't':
        return one('\t');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case 'b':
        if (in_class) return one('\b');
        error(at, "word boundaries (\\b) are not supported");
      case 'B':
        error(at, "word boundaries (\\B) are not supported");
      case '0':
        if (peek() >= '0' && peek() <= '9') error(at, "octal escapes are not supported");
        return one(0);
      case 'x':
        return one(hex(2, at));
      case 'u': {
        const uint32_t cp = unicode_escape(at);
        if (cp >= 0xD800 && cp <= 0xDFFF) error(at, "a lone surrogate is not a character");
        return one(cp);
      }
      case 'c': {
        const uint32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) error(at, "\\c needs a letter");
        ++pos_;
        return one(l & 31);
      }
      case 'p':
      case 'P':
        error(at, "Unicode property escapes (\\p{...}) are not supported");
      case 'k':
        error(at, "backreferences are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') error(at, "backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      error(at, str_cat("unknown escape \\", static_cast<char>(c)));
    }
    return one(c);  // an escaped punctuation character, or any non-ASCII one, is itself
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  Tree& tree_;
};

class Writer {
 public:
  Writer(const Tree& tree, RegexText text) : tree_(tree), json_(text == RegexText::kJsonString) {}

  std::string expr(int i) const {
    const Node& n = tree_.at(i);
    switch (n.kind) {
      case Node::kEmpty:
        return "\"\"";
      case Node::kChars:
        return chars(n.chars);
      case Node::kConcat:
        return concat(n.kids);
      case Node::kAlt: {
        std::string out = "(";
        for (size_t k = 0; k < n.kids.size(); ++k) out += (k ? " | " : "") + expr(n.kids[k]);
        return out + ")";
      }
      case Node::kRepeat: {
        std::string inner = expr(n.kids[0]);
        if (!atomic(n.kids[0])) inner = str_cat("(", inner, ")");
        if (n.lo == 0 && n.hi == kUnbounded) return inner + "*";
        if (n.lo == 1 && n.hi == kUnbounded) return inner + "+";
        if (n.lo == 0 && n.hi == 1) return inner + "?";
        if (n.hi == kUnbounded) return str_cat(inner, "{", n.lo, ",}");
        if (n.lo == n.hi) return str_cat(inner, "{", n.lo, "}");
        return str_cat(inner, "{", n.lo, ",", n.hi, "}");
      }
    }
    return "\"\"";
  }

 private:
  static bool single(const Ranges& r) { return r.size() == 1 && r[0].first == r[0].second; }
  static std::string quoted(std::string_view spelled) { return str_cat("\"", spelled, "\""); }

  // Written as one GBNF item, which needs no parentheses before a quantifier: an alternation
  // (parenthesized), and a character set (a class, a literal, which GBNF repeats whole, or in
  // JSON a parenthesized choice of spellings).
  bool atomic(int i) const {
    const Node::Kind k = tree_.at(i).kind;
    return k == Node::kAlt || k == Node::kChars;
  }

  // The JSON text of code point cp inside a string literal of GBNF.
  static std::string json_spelling(uint32_t cp) {
    constexpr char kHex[] = "0123456789abcdef";
    switch (cp) {
      case '"':
        return R"(\\\")";
      case '\\':
        return R"(\\\\)";
      case '\b':
        return R"(\\b)";
      case '\f':
        return R"(\\f)";
      case '\n':
        return R"(\\n)";
      case '\r':
        return R"(\\r)";
      case '\t':
        return R"(\\t)";
      default:
        break;
    }
    if (cp < 0x20 || cp == 0x7F) return str_cat(R"(\\u00)", kHex[cp >> 4], kHex[cp & 15]);
    return cp == '[' || cp == ']' || cp == '-' || cp == '^' ? std::string(1, static_cast<char>(cp))
                                                            : gbnf_char(cp);
  }

  static std::string plain_spelling(uint32_t cp) {
    return cp == '[' || cp == ']' || cp == '-' || cp == '^' ? std::string(1, static_cast<char>(cp))
                                                            : gbnf_char(cp);
  }

  static std::string char_class(const Ranges& r) {
    std::string out = "[";
    for (const auto& [lo, hi] : r) {
      out += gbnf_char(lo);
      if (hi != lo) out.append(hi == lo + 1 ? "" : "-").append(gbnf_char(hi));
    }
    return out + "]";
  }

  // Characters JSON writes as they are inside a string.
  static const Ranges& json_plain() {
    static const Ranges r = complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}});
    return r;
  }

  std::string chars(const Ranges& r) const {
    if (r.empty()) fail("regex: a character set that matches nothing");
    if (single(r)) return quoted(json_ ? json_spelling(r[0].first) : plain_spelling(r[0].first));
    if (!json_) return char_class(r);
    std::vector<std::string> alts;
    const Ranges plain = intersection(r, json_plain());
    if (!plain.empty()) {
      alts.push_back(single(plain) ? quoted(json_spelling(plain[0].first)) : char_class(plain));
    }
    for (const uint32_t cp : {uint32_t{'"'}, uint32_t{'\\'}, uint32_t{0x7F}}) {
      if (contains(r, cp)) alts.push_back(quoted(json_spelling(cp)));
    }
    const Ranges controls = intersection(r, {{0, 0x1F}});
    if (controls == Ranges{{0, 0x1F}}) {
      // All 32: the short escapes a model would write, and \u00XX for any of them.
      alts.push_back(R"(("\\" [bfnrt] | "\\u00" [01] [0-9a-fA-F]))");
    } else {
      for (const auto& [lo, hi] : controls) {
        for (uint32_t cp = lo; cp <= hi; ++cp) alts.push_back(quoted(json_spelling(cp)));
      }
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  // Runs of single characters become one literal.
  std::string concat(const std::vector<int>& kids) const {
    std::string out, run;
    const auto flush = [&] {
      if (run.empty()) return;
      out.append(out.empty() ? "" : " ").append(quoted(run));
      run.clear();
    };
    for (const int k : kids) {
      const Node& n = tree_.at(k);
      if (n.kind == Node::kChars && single(n.chars)) {
        run += json_ ? json_spelling(n.chars[0].first) : plain_spelling(n.chars[0].first);
        continue;
      }
      flush();
      out.append(out.empty() ? "" : " ").append(expr(k));
    }
    flush();
    return out.empty() ? "\"\"" : out;
  }

  const Tree& tree_;
  bool json_;
};

}  // namespace

std::string regex_gbnf(std::string_view pattern, RegexText text, RegexMatch match) {
  if (pattern.size() > kMaxPatternBytes) {
    fail("regex longer than ", kMaxPatternBytes, " bytes");
  }
  Tree tree;
  std::vector<Parser::Branch> branches = Parser(pattern, tree).parse();
  std::vector<int> alts;
  for (const Parser::Branch& b : branches) {
    std::vector<int> seq;
    // Unanchored, JSON Schema's pattern matches anywhere: anything may come before and after.
    const bool search = match == RegexMatch::kSearch;
    if (search && !b.at_start) seq.push_back(tree.repeat(tree.chars(anything()), 0, kUnbounded));
    seq.push_back(b.node);
    if (search && !b.at_end) seq.push_back(tree.repeat(tree.chars(anything()), 0, kUnbounded));
    alts.push_back(tree.list(Node::kConcat, std::move(seq)));
  }
  const int root = tree.without_empty_repeats(tree.list(Node::kAlt, std::move(alts)));
  std::string out = Writer(tree, text).expr(root);
  return out;
}

}  // namespace specdec
