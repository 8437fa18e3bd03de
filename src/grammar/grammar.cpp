// GBNF compiler and parse state (grammar.h).
//
// Compiled form, as in llama.cpp's sampler: every rule is a list of alternatives, each a run of
// elements in one flat array `code` ending with an end marker. An element is a character set
// (a terminal: one code point), a reference to a rule, or the end. Repetitions and groups are
// rewritten into helper rules while parsing (x* -> r ::= x r | ; x{m,n} -> m copies of x, then
// n - m nested optional rules). Position 0 holds a reference to the root rule, so that the
// initial state is the expansion of the stack [0].
//
// A state is a set of stacks of positions (the top is the next element to match). Expanding a
// stack replaces a rule reference on top by one stack per alternative (first pushing the
// position after the reference unless it is the end of its alternative, so right recursion
// does not grow the stack), until the top is a character set or the stack is empty. Left
// recursion is rejected at compile time, so expansion terminates.
#include "grammar/grammar.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/error.h"

namespace specdec {

namespace {

constexpr size_t kMaxGrammarBytes = size_t{1} << 20;
constexpr uint32_t kMaxRepetition = 10000;
// Elements after expanding repetitions (8 MiB of code): a 1 MiB grammar of x{10000} items
// would otherwise compile to billions.
constexpr size_t kMaxElements = size_t{1} << 21;
constexpr int kMaxNesting = 256;  // parentheses (the parser recurses on them)
constexpr size_t kMaxStacks = GrammarState::kMaxStacks;
constexpr size_t kMaxStateEntries = size_t{1} << 20;  // positions over all stacks of a state
// Positions copied while expanding the stacks for one code point in GrammarState: bounds the
// time of one step on a pathological grammar (the StackSetMachine has its own budget).
constexpr size_t kMaxStepWork = size_t{1} << 22;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

constexpr uint32_t kEnd = 0;
constexpr uint32_t kChars = 1u << 30;
constexpr uint32_t kRef = 2u << 30;
constexpr uint32_t kAlt = 3u << 30;  // only while parsing: separates alternatives
constexpr uint32_t kPayload = (1u << 30) - 1;

[[noreturn]] void too_ambiguous(size_t n) {
  fail("grammar too ambiguous: more than ", n,
       " ways to continue the text at once (simplify alternatives that overlap, or optional "
       "items that may all be empty)");
}

}  // namespace

struct Grammar::Impl {
  std::vector<uint32_t> code;       // the elements; code[0] = root reference, code[1] = end
  std::vector<uint32_t> alt_begin;  // rule r's alternatives: alts[alt_begin[r] .. alt_begin[r+1])
  std::vector<uint32_t> alts;       // the position where each alternative starts
  std::vector<uint32_t> cs_begin;   // charset c's ranges: pairs cs_begin[c] .. cs_begin[c+1]
  std::vector<uint32_t> ranges;     // lo, hi, lo, hi, ... (sorted, disjoint, inclusive)
  std::vector<std::array<uint64_t, 2>> ascii;  // per charset: which code points < 128 it holds

  bool is_end(uint32_t pos) const { return code[pos] == kEnd; }
  bool is_chars(uint32_t pos) const { return (code[pos] & ~kPayload) == kChars; }
  uint32_t payload(uint32_t pos) const { return code[pos] & kPayload; }

  // The first range of charset cs whose end is >= cp (its index, or the charset's end).
  uint32_t first_range_ending_at_or_after(uint32_t cs, uint32_t cp) const {
    uint32_t lo = cs_begin[cs], hi = cs_begin[cs + 1];
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (ranges[2 * mid + 1] < cp) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  bool matches(uint32_t pos, uint32_t cp) const {
    const uint32_t cs = payload(pos);
    if (cp < 128) return ((ascii[cs][cp >> 6] >> (cp & 63)) & 1) != 0;
    const uint32_t i = first_range_ending_at_or_after(cs, cp);
    return i < cs_begin[cs + 1] && ranges[2 * i] <= cp;
  }
  bool intersects(uint32_t pos, uint32_t lo, uint32_t hi) const {
    const uint32_t cs = payload(pos);
    const uint32_t i = first_range_ending_at_or_after(cs, lo);
    return i < cs_begin[cs + 1] && ranges[2 * i] <= hi;
  }
};

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;

namespace {

// ---------------------------------------------------------------------------------------------
// Parser

std::string describe_byte(int c) {
  if (c < 0) return "the end of the input";
  if (c == '\n') return "the end of the line";
  if (c >= 0x20 && c < 0x7F) return str_cat("'", static_cast<char>(c), "'");
  static constexpr char kHex[] = "0123456789ABCDEF";
  return str_cat("byte 0x", kHex[c >> 4], kHex[c & 15]);
}

bool is_word_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  std::unique_ptr<Grammar::Impl> run(std::string_view root) {
    skip_space(true);
    if (eof()) fail("grammar is empty: no rules");
    while (!eof()) parse_rule();
    check_defined();
    const auto it = by_name_.find(std::string(root));
    if (it == by_name_.end() || !syms_[it->second].defined) {
      fail("grammar has no rule named '", root, "' (the start symbol)");
    }
    auto g = flatten(it->second);
    check_left_recursion(*g, it->second);
    return g;
  }

 private:
  struct Symbol {
    std::string name;    // empty for a helper rule (see name_of)
    uint32_t owner = 0;  // for a helper rule: the rule it was written in
    bool defined = false;
    bool helper = false;
    size_t def_at = 0;
    size_t first_use = std::string_view::npos;
  };

  int peek(size_t k = 0) const {
    return pos_ + k < src_.size() ? static_cast<uint8_t>(src_[pos_ + k]) : -1;
  }
  bool eof() const { return pos_ >= src_.size(); }

  std::string where(size_t at) const {
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return str_cat(line, ":", at - line_start + 1);
  }

  template <typename... Args>
  [[noreturn]] void error_at(size_t at, Args&&... args) const {
    fail("grammar syntax error at line ", where(at), ": ", std::forward<Args>(args)...);
  }

  void skip_space(bool newline_ok) {
    while (!eof()) {
      const int c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (is_word_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  uint32_t symbol(const std::string& name) {
    const auto [it, inserted] = by_name_.try_emplace(name, static_cast<uint32_t>(syms_.size()));
    if (inserted) {
      syms_.push_back({name, static_cast<uint32_t>(syms_.size())});
      rules_.emplace_back();
    }
    return it->second;
  }

  // A rule for a group or a repetition, named after its owner (a rule the user wrote) when an
  // error names it.
  uint32_t new_helper(uint32_t owner) {
    const auto id = static_cast<uint32_t>(syms_.size());
    Symbol s;
    s.owner = owner;
    s.defined = true;
    s.helper = true;
    syms_.push_back(std::move(s));
    rules_.emplace_back();
    count(4);  // its bookkeeping
    return id;
  }
  std::string name_of(uint32_t id) const {
    const Symbol& s = syms_[id];
    return s.helper ? str_cat(syms_[s.owner].name, "-", id) : s.name;
  }

  void count(size_t n) {
    n_elements_ += n;
    if (n_elements_ > kMaxElements) {
      fail("grammar too large: its repetitions expand to over ", kMaxElements,
           " elements (at line ", where(pos_), ")");
    }
  }
  void emit(std::vector<uint32_t>& out, uint32_t e) {
    count(1);
    out.push_back(e);
  }

  void parse_rule() {
    const size_t at = pos_;
    const std::string name = parse_name();
    if (name.empty()) error_at(pos_, "expected a rule name, found ", describe_byte(peek()));
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") {
      error_at(pos_, "expected '::=' after the rule name '", name, "', found ",
               describe_byte(peek()));
    }
    pos_ += 3;
    skip_space(true);
    const uint32_t id = symbol(name);
    Symbol& s = syms_[id];
    if (s.defined) {
      error_at(at, "rule '", name, "' is defined twice (first at line ", where(s.def_at), ")");
    }
    s.defined = true;
    s.def_at = at;
    parse_alternates(id, id, false, 0);
    if (!eof()) {
      if (peek() == '\r') {
        ++pos_;
        if (peek() == '\n') ++pos_;
      } else if (peek() == '\n') {
        ++pos_;
      } else {
        error_at(pos_, "expected an item, '|' or the end of the line in rule '", name, "', found ",
                 describe_byte(peek()));
      }
    }
    skip_space(true);
  }

  // At a line end outside parentheses: whether the next non-blank line starts with '|' (an
  // extension of llama.cpp's syntax: the alternatives go on); if so, moves there.
  bool continuation_line() {
    if (peek() != '\n' && peek() != '\r') return false;
    const size_t save = pos_;
    skip_space(true);
    if (peek() == '|') return true;
    pos_ = save;
    return false;
  }

  void parse_alternates(uint32_t id, uint32_t owner, bool nested, int depth) {
    std::vector<uint32_t> out;
    parse_sequence(owner, out, nested, depth);
    while (peek() == '|' || (!nested && continuation_line())) {
      ++pos_;
      skip_space(true);
      emit(out, kAlt);
      parse_sequence(owner, out, nested, depth);
    }
    count(1);  // the end marker
    rules_[id] = std::move(out);
  }

  uint32_t parse_hex(int digits, size_t esc_at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) {
        error_at(pos_, "expected ", digits, " hex digits in the escape at line ", where(esc_at),
                 ", found ", describe_byte(peek()));
      }
      v = (v << 4) | static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > kMaxCodePoint) error_at(esc_at, "code point above U+10FFFF");
    return v;
  }

  // One character of a literal or a class: an escape or a UTF-8 sequence.
  uint32_t parse_char() {
    const size_t at = pos_;
    if (peek() == '\\') {
      ++pos_;
      const int c = peek();
      if (c < 0) error_at(at, "unfinished escape at the end of the input");
      ++pos_;
      switch (c) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '/':
        case '^':
          return static_cast<uint32_t>(c);
        case 'x':
          return parse_hex(2, at);
        case 'u':
          return parse_hex(4, at);
        case 'U':
          return parse_hex(8, at);
        default:
          error_at(at, "unknown escape '\\", describe_byte(c), "'");
      }
    }
    grammar_detail::Utf8Decoder d;
    while (true) {
      const int c = peek();
      if (c < 0) error_at(at, "incomplete UTF-8 character at the end of the input");
      const int r = d.feed(static_cast<uint8_t>(c));
      if (r < 0) error_at(pos_, "invalid UTF-8 (", describe_byte(c), ")");
      ++pos_;
      if (r == 1) return d.cp;
    }
  }

  uint32_t charset(std::vector<std::pair<uint32_t, uint32_t>> r, bool negated) {
    std::sort(r.begin(), r.end());
    std::vector<uint32_t> merged;
    for (const auto& [lo, hi] : r) {
      if (!merged.empty() && lo <= merged.back() + 1) {
        merged.back() = std::max(merged.back(), hi);
      } else {
        merged.push_back(lo);
        merged.push_back(hi);
      }
    }
    if (negated) {
      std::vector<uint32_t> comp;
      uint32_t next = 0;
      for (size_t i = 0; i < merged.size(); i += 2) {
        if (merged[i] > next) {
          comp.push_back(next);
          comp.push_back(merged[i] - 1);
        }
        next = merged[i + 1] + 1;
      }
      if (next <= kMaxCodePoint) {
        comp.push_back(next);
        comp.push_back(kMaxCodePoint);
      }
      merged = std::move(comp);
    }
    const auto [it, inserted] =
        charset_ids_.try_emplace(merged, static_cast<uint32_t>(charsets_.size()));
    if (inserted) charsets_.push_back(std::move(merged));
    return kChars | it->second;
  }

  // Applies a repetition to the item out[last..]: m copies, then a helper rule (x* and x{m,})
  // or n - m nested optional ones.
  void repeat(std::vector<uint32_t>& out, size_t last, uint32_t min, int64_t max, size_t at,
              uint32_t owner, const char* what) {
    if (last >= out.size()) error_at(at, "'", what, "' with nothing to repeat before it");
    if (out.size() - last > 1) {  // a literal of several characters: one rule, one reference
      const uint32_t h = new_helper(owner);
      rules_[h].assign(out.begin() + static_cast<std::ptrdiff_t>(last), out.end());
      out.resize(last);
      out.push_back(kRef | h);
    }
    const uint32_t item = out[last];
    out.resize(last);
    for (uint32_t i = 0; i < min; ++i) emit(out, item);
    if (max < 0) {
      const uint32_t r = new_helper(owner);
      count(3);
      rules_[r] = {item, kRef | r, kAlt};
      emit(out, kRef | r);
      return;
    }
    uint32_t prev = 0;
    for (int64_t i = 0; i < max - static_cast<int64_t>(min); ++i) {
      const uint32_t r = new_helper(owner);
      count(3);
      std::vector<uint32_t> body = {item};
      if (i > 0) body.push_back(kRef | prev);
      body.push_back(kAlt);
      rules_[r] = std::move(body);
      prev = r;
    }
    if (max > static_cast<int64_t>(min)) emit(out, kRef | prev);
  }

  uint32_t parse_count(size_t brace_at) {
    if (peek() < '0' || peek() > '9') {
      error_at(pos_, "expected a number in the repetition at line ", where(brace_at), ", found ",
               describe_byte(peek()));
    }
    uint32_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint32_t>(peek() - '0');
      if (v > kMaxRepetition) {
        error_at(brace_at, "repetition bound over ", kMaxRepetition);
      }
      ++pos_;
    }
    return v;
  }

  void parse_sequence(uint32_t owner, std::vector<uint32_t>& out, bool nested, int depth) {
    size_t last = out.size();
    while (!eof()) {
      const int c = peek();
      const size_t at = pos_;
      if (c == '"') {
        ++pos_;
        last = out.size();
        while (peek() != '"') {
          if (eof()) error_at(at, "unterminated string literal");
          const uint32_t cp = parse_char();
          emit(out, charset({{cp, cp}}, false));
        }
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        const bool negated = peek() == '^';
        if (negated) ++pos_;
        std::vector<std::pair<uint32_t, uint32_t>> r;
        while (peek() != ']') {
          if (eof()) error_at(at, "unterminated character class");
          const size_t lo_at = pos_;
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && peek(1) >= 0) {
            ++pos_;
            hi = parse_char();
            if (hi < lo) error_at(lo_at, "backwards character range (its end is below its start)");
          }
          r.emplace_back(lo, hi);
        }
        ++pos_;
        last = out.size();
        emit(out, charset(std::move(r), negated));
      } else if (c == '.') {
        ++pos_;
        last = out.size();
        emit(out, charset({{0, kMaxCodePoint}}, false));
      } else if (is_word_char(c)) {
        const std::string name = parse_name();
        const uint32_t id = symbol(name);
        if (syms_[id].first_use == std::string_view::npos) syms_[id].first_use = at;
        last = out.size();
        emit(out, kRef | id);
      } else if (c == '(') {
        if (depth >= kMaxNesting) error_at(at, "groups nested more than ", kMaxNesting, " deep");
        ++pos_;
        skip_space(true);
        const uint32_t sub = new_helper(owner);
        parse_alternates(sub, owner, true, depth + 1);
        if (peek() != ')') {
          error_at(pos_, "expected ')' to close the group opened at line ", where(at), ", found ",
                   describe_byte(peek()));
        }
        ++pos_;
        last = out.size();
        emit(out, kRef | sub);
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        const char what[2] = {static_cast<char>(c), 0};
        repeat(out, last, c == '+' ? 1 : 0, c == '?' ? 1 : -1, at, owner, what);
      } else if (c == '{') {
        ++pos_;
        skip_space(nested);
        // {,n} (an extension of llama.cpp's syntax) is {0,n}.
        const uint32_t min = peek() == ',' ? 0 : parse_count(at);
        int64_t max = min;
        skip_space(nested);
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          max = peek() >= '0' && peek() <= '9' ? static_cast<int64_t>(parse_count(at)) : -1;
          skip_space(nested);
        }
        if (peek() != '}') {
          error_at(pos_, "expected '}' to close the repetition at line ", where(at), ", found ",
                   describe_byte(peek()));
        }
        ++pos_;
        if (max >= 0 && max < static_cast<int64_t>(min)) {
          error_at(at, "repetition {", min, ",", max, "} whose maximum is below its minimum");
        }
        repeat(out, last, min, max, at, owner, "{");
      } else {
        break;
      }
      skip_space(nested);
    }
  }

  void check_defined() const {
    size_t first = std::string_view::npos;
    const Symbol* bad = nullptr;
    for (const Symbol& s : syms_) {
      if (!s.defined && s.first_use < first) {
        first = s.first_use;
        bad = &s;
      }
    }
    if (bad != nullptr) {
      fail("grammar: rule '", bad->name, "' is used (at line ", where(first),
           ") but never defined");
    }
  }

  std::unique_ptr<Grammar::Impl> flatten(uint32_t root) {
    auto g = std::make_unique<Grammar::Impl>();
    g->code = {kRef | root, kEnd};
    g->code.reserve(n_elements_ + 2);
    g->alt_begin.reserve(rules_.size() + 1);
    for (const auto& rule : rules_) {
      g->alt_begin.push_back(static_cast<uint32_t>(g->alts.size()));
      g->alts.push_back(static_cast<uint32_t>(g->code.size()));
      for (const uint32_t e : rule) {
        if (e == kAlt) {
          g->code.push_back(kEnd);
          g->alts.push_back(static_cast<uint32_t>(g->code.size()));
        } else {
          g->code.push_back(e);
        }
      }
      g->code.push_back(kEnd);
    }
    g->alt_begin.push_back(static_cast<uint32_t>(g->alts.size()));
    g->cs_begin.reserve(charsets_.size() + 1);
    g->ascii.resize(charsets_.size());
    for (size_t c = 0; c < charsets_.size(); ++c) {
      g->cs_begin.push_back(static_cast<uint32_t>(g->ranges.size() / 2));
      const auto& r = charsets_[c];
      g->ranges.insert(g->ranges.end(), r.begin(), r.end());
      auto& bits = g->ascii[c];
      bits = {0, 0};
      for (size_t i = 0; i < r.size(); i += 2) {
        for (uint32_t cp = r[i]; cp <= r[i + 1] && cp < 128; ++cp)
          bits[cp >> 6] |= 1ull << (cp & 63);
      }
    }
    g->cs_begin.push_back(static_cast<uint32_t>(g->ranges.size() / 2));
    return g;
  }

  // Rejects a rule that can reach itself through references each preceded only by items that
  // may match the empty text: expanding it would never end.
  void check_left_recursion(const Grammar::Impl& g, uint32_t root) const {
    const size_t n_rules = g.alt_begin.size() - 1;
    // Nullable rules, by counting down each alternative's references (linear time).
    struct Alt {
      uint32_t rule = 0;
      uint32_t pending = 0;  // references not yet known to be nullable
      bool blocked = false;  // holds a character set: never empty
    };
    std::vector<Alt> alts(g.alts.size());
    std::vector<uint8_t> nullable(n_rules, 0);
    std::vector<std::vector<uint32_t>> uses(n_rules);
    std::vector<uint32_t> queue;
    for (uint32_t r = 0; r < n_rules; ++r) {
      for (uint32_t a = g.alt_begin[r]; a < g.alt_begin[r + 1]; ++a) {
        Alt& alt = alts[a];
        alt.rule = r;
        for (uint32_t p = g.alts[a]; !g.is_end(p) && !alt.blocked; ++p) {
          alt.blocked = g.is_chars(p);
          ++alt.pending;
        }
        if (alt.blocked) continue;
        for (uint32_t p = g.alts[a]; !g.is_end(p); ++p) uses[g.payload(p)].push_back(a);
        if (alt.pending == 0 && !nullable[r]) {
          nullable[r] = 1;
          queue.push_back(r);
        }
      }
    }
    while (!queue.empty()) {
      const uint32_t r = queue.back();
      queue.pop_back();
      for (const uint32_t a : uses[r]) {
        if (--alts[a].pending == 0 && !nullable[alts[a].rule]) {
          nullable[alts[a].rule] = 1;
          queue.push_back(alts[a].rule);
        }
      }
    }
    // Edges r -> s: s is referenced after a prefix that may be empty.
    std::vector<uint32_t> edge_begin(n_rules + 1, 0), edges;
    for (uint32_t r = 0; r < n_rules; ++r) {
      edge_begin[r] = static_cast<uint32_t>(edges.size());
      for (uint32_t a = g.alt_begin[r]; a < g.alt_begin[r + 1]; ++a) {
        for (uint32_t p = g.alts[a]; !g.is_end(p) && !g.is_chars(p); ++p) {
          edges.push_back(g.payload(p));
          if (!nullable[g.payload(p)]) break;
        }
      }
    }
    edge_begin[n_rules] = static_cast<uint32_t>(edges.size());
    // Depth-first search for a cycle, iterative (chains of helper rules can be long).
    std::vector<uint8_t> color(n_rules, 0);  // 0 unseen, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, uint32_t>> path;
    auto visit = [&](uint32_t start) {
      if (color[start]) return;
      color[start] = 1;
      path.emplace_back(start, edge_begin[start]);
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == edge_begin[r + 1]) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t s = edges[next++];
        if (color[s] == 1) report_cycle(path, s);
        if (color[s] == 0) {
          color[s] = 1;
          path.emplace_back(s, edge_begin[s]);
        }
      }
    };
    visit(root);
    for (uint32_t r = 0; r < n_rules; ++r) visit(r);
  }

  [[noreturn]] void report_cycle(const std::vector<std::pair<uint32_t, uint32_t>>& path,
                                 uint32_t s) const {
    size_t i = 0;
    while (path[i].first != s) ++i;
    std::vector<uint32_t> cycle;
    for (; i < path.size(); ++i) cycle.push_back(path[i].first);
    // Name the cycle after a rule the user wrote, when it passes through one.
    size_t lead = 0;
    for (size_t k = 0; k < cycle.size(); ++k) {
      if (!syms_[cycle[k]].helper) {
        lead = k;
        break;
      }
    }
    std::rotate(cycle.begin(), cycle.begin() + static_cast<std::ptrdiff_t>(lead), cycle.end());
    std::string trail;
    for (size_t k = 0; k < cycle.size() && k < 12; ++k) trail += name_of(cycle[k]) + " -> ";
    trail += cycle.size() > 12 ? "..." : name_of(cycle[0]);
    const Symbol& head = syms_[cycle[0]];
    fail("grammar: rule '", syms_[head.owner].name,
         "' is left-recursive: it can reach itself without ", "consuming a character (", trail, ")",
         head.helper ? "; a repetition of something that may be empty, such as (x?)*, does this"
                     : "");
  }

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<Symbol> syms_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<std::vector<uint32_t>> rules_;
  std::map<std::vector<uint32_t>, uint32_t> charset_ids_;
  std::vector<std::vector<uint32_t>> charsets_;
  size_t n_elements_ = 0;
};

}  // namespace

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, std::string_view root) {
  if (gbnf.size() > kMaxGrammarBytes) {
    fail("grammar of ", gbnf.size(), " bytes is over the limit of ", kMaxGrammarBytes, " (1 MiB)");
  }
  return std::make_shared<const Grammar>(Parser(gbnf).run(root));
}

// -------------------------------------------------------------------------------------------
// GrammarState

struct GrammarState::Data {
  // Each stack as its length, then its positions from the bottom to the top; the stacks in
  // lexicographic order (so an empty one comes first) and distinct. key is a function of this
  // and the pending bytes alone.
  std::vector<uint32_t> flat;
  uint32_t n_stacks = 0;
  bool has_empty = false;
  bool has_nonempty = false;
  grammar_detail::Utf8Decoder dec;
  std::string pending;  // the bytes of an unfinished character
  bool dead = false;
  std::string key;
};

namespace {

using Stack = std::vector<uint32_t>;

struct StackHash {
  size_t operator()(const Stack& s) const noexcept {
    uint64_t h = 0xCBF29CE484222325ull ^ s.size();
    for (const uint32_t v : s) h = (h ^ v) * 0x100000001B3ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// The stacks reachable from the ones added by resolving rule references until a character set
// (or nothing) is on top; each once.
class Expander {
 public:
  explicit Expander(const Grammar::Impl& g) : g_(g) {}

  void add(Stack s) {
    work_.push_back(std::move(s));
    while (!work_.empty()) {
      Stack t = std::move(work_.back());
      work_.pop_back();
      work_done_ += t.size() + 1;
      if (work_done_ > kMaxStepWork) {
        fail("grammar too complex: one character needs over ", kMaxStepWork,
             " steps to match (deeply nested or highly ambiguous rules)");
      }
      if (!seen_.insert(t).second) continue;
      if (t.empty() || g_.is_chars(t.back())) {
        entries_ += t.size();
        out_.push_back(std::move(t));
        if (out_.size() > kMaxStacks) too_ambiguous(kMaxStacks);
        if (entries_ > kMaxStateEntries) {
          fail("grammar state too large: over ", kMaxStateEntries,
               " open positions (the text nests too deep)");
        }
        continue;
      }
      const uint32_t pos = t.back();
      t.pop_back();
      if (!g_.is_end(pos + 1)) t.push_back(pos + 1);
      const uint32_t r = g_.payload(pos);
      for (uint32_t a = g_.alt_begin[r]; a < g_.alt_begin[r + 1]; ++a) {
        const uint32_t alt = g_.alts[a];
        Stack u = t;
        if (!g_.is_end(alt)) u.push_back(alt);
        work_.push_back(std::move(u));
      }
    }
  }

  std::vector<Stack> take() {
    std::sort(out_.begin(), out_.end());
    return std::move(out_);
  }

 private:
  const Grammar::Impl& g_;
  std::vector<Stack> work_, out_;
  std::unordered_set<Stack, StackHash> seen_;
  size_t work_done_ = 0, entries_ = 0;
};

std::vector<Stack> unflatten(const std::vector<uint32_t>& flat) {
  std::vector<Stack> out;
  for (size_t i = 0; i < flat.size();) {
    const uint32_t n = flat[i++];
    out.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(i),
                     flat.begin() + static_cast<std::ptrdiff_t>(i + n));
    i += n;
  }
  return out;
}

// The stacks after one code point (sorted, distinct; empty when none accepts it).
std::vector<Stack> step_stacks(const Grammar::Impl& g, const std::vector<Stack>& stacks,
                               uint32_t cp) {
  Expander e(g);
  for (const Stack& s : stacks) {
    if (s.empty() || !g.matches(s.back(), cp)) continue;
    Stack t(s.begin(), s.end() - 1);
    if (!g.is_end(s.back() + 1)) t.push_back(s.back() + 1);
    e.add(std::move(t));
  }
  return e.take();
}

}  // namespace

namespace {

std::shared_ptr<const GrammarState::Data> make_data(const std::vector<Stack>& stacks,
                                                    const grammar_detail::Utf8Decoder& dec,
                                                    std::string pending);

}  // namespace

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  if (!grammar_) fail("GrammarState: no grammar");
  Expander e(grammar_->impl());
  e.add(Stack{0});  // position 0: the reference to the root rule
  data_ = make_data(e.take(), {}, {});
}

namespace {

std::shared_ptr<const GrammarState::Data> dead_data() {
  static const std::shared_ptr<const GrammarState::Data> kDeadData = [] {
    auto d = std::make_shared<GrammarState::Data>();
    d->dead = true;
    d->key =
        "\xFF"
        "dead";
    return d;
  }();
  return kDeadData;
}

std::shared_ptr<const GrammarState::Data> make_data(const std::vector<Stack>& stacks,
                                                    const grammar_detail::Utf8Decoder& dec,
                                                    std::string pending) {
  auto d = std::make_shared<GrammarState::Data>();
  size_t total = 0;
  for (const Stack& s : stacks) total += s.size() + 1;
  d->flat.reserve(total);
  for (const Stack& s : stacks) {
    d->flat.push_back(static_cast<uint32_t>(s.size()));
    d->flat.insert(d->flat.end(), s.begin(), s.end());
    (s.empty() ? d->has_empty : d->has_nonempty) = true;
  }
  d->n_stacks = static_cast<uint32_t>(stacks.size());
  d->dec = dec;
  d->key.reserve(1 + pending.size() + total * sizeof(uint32_t));
  d->key.push_back(static_cast<char>(pending.size()));
  d->key += pending;
  d->key.append(reinterpret_cast<const char*>(d->flat.data()), d->flat.size() * sizeof(uint32_t));
  d->pending = std::move(pending);
  return d;
}

}  // namespace

bool GrammarState::accept(std::string_view bytes) {
  if (data_->dead) return false;
  if (bytes.empty()) return true;
  const Grammar::Impl& g = grammar_->impl();
  grammar_detail::Utf8Decoder dec = data_->dec;
  std::string pending = data_->pending;
  std::vector<Stack> stacks = unflatten(data_->flat);
  for (const char ch : bytes) {
    const int r = dec.feed(static_cast<uint8_t>(ch));
    if (r < 0) {
      data_ = dead_data();
      return false;
    }
    if (r == 0) {
      pending.push_back(ch);
      continue;
    }
    pending.clear();
    stacks = step_stacks(g, stacks, dec.cp);
    if (stacks.empty()) {
      data_ = dead_data();
      return false;
    }
  }
  if (dec.need > 0) {
    // Refuse an unfinished character at once when nothing it may become fits.
    const uint32_t lo = dec.min_cp(), hi = dec.max_cp();
    const bool fits = std::any_of(stacks.begin(), stacks.end(), [&](const Stack& s) {
      return !s.empty() && g.intersects(s.back(), lo, hi);
    });
    if (!fits) {
      data_ = dead_data();
      return false;
    }
  }
  data_ = make_data(stacks, dec, std::move(pending));
  return true;
}

bool GrammarState::complete() const {
  return !data_->dead && data_->pending.empty() && data_->has_empty;
}
bool GrammarState::can_continue() const { return !data_->dead && data_->has_nonempty; }
bool GrammarState::dead() const { return data_->dead; }
const std::string& GrammarState::key() const { return data_->key; }
size_t GrammarState::n_stacks() const { return data_->n_stacks; }

// -------------------------------------------------------------------------------------------
// StackSetMachine

namespace grammar_detail {

namespace {

// Open addressing with linear probing: 64-bit keys (never ~0) to 32-bit values.
class FlatMap {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  uint32_t find(uint64_t key) const {
    if (keys_.empty()) return kMissing;
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return vals_[i];
      if (keys_[i] == kEmpty) return kMissing;
    }
  }
  void insert(uint64_t key, uint32_t value) {  // key absent
    if ((n_ + 1) * 2 > keys_.size()) grow();
    size_t i = slot(key);
    while (keys_[i] != kEmpty) i = (i + 1) & mask_;
    keys_[i] = key;
    vals_[i] = value;
    ++n_;
  }
  size_t capacity() const { return keys_.size(); }
  void clear() {
    keys_ = {};
    vals_ = {};
    n_ = 0;
    mask_ = 0;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  size_t slot(uint64_t key) const {
    const uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (h >> 31)) & mask_;
  }
  void grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<uint32_t> vals = std::move(vals_);
    const size_t cap = std::max<size_t>(64, keys.size() * 2);
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, 0);
    mask_ = cap - 1;
    n_ = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] != kEmpty) insert(keys[i], vals[i]);
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t n_ = 0, mask_ = 0;
};

constexpr int32_t kUnknown = -2;

}  // namespace

struct StackSetMachine::Impl {
  explicit Impl(std::shared_ptr<const Grammar> grammar)
      : owner(std::move(grammar)), g(owner->impl()) {
    clear();
  }

  void clear() {
    node_pos.assign(1, 0);  // node 0: the empty stack
    node_parent.assign(1, 0);
    mark.assign(1, 0);
    epoch = 1;
    node_ids.clear();
    pool.clear();
    set_begin.clear();
    set_len.clear();
    set_hash.clear();
    set_table.clear();
    ascii_row.clear();
    ascii.clear();
    trans.clear();
    partial.clear();
  }

  size_t size() const {
    return node_pos.size() * 3 + node_ids.capacity() * 3 + pool.size() + set_begin.size() * 6 +
           set_table.size() + ascii.size() + trans.capacity() * 3 + partial.capacity() * 3;
  }
  void check_size() const {
    if (size() > max_size) {
      fail("grammar too complex to compute a token mask: over ", max_size * 4 / (1 << 20),
           " MiB of parse states");
    }
  }

  uint32_t node(uint32_t pos, uint32_t parent) {
    const uint64_t key = (uint64_t{pos} << 32) | parent;
    const uint32_t id = node_ids.find(key);
    if (id != FlatMap::kMissing) return id;
    const auto n = static_cast<uint32_t>(node_pos.size());
    node_pos.push_back(pos);
    node_parent.push_back(parent);
    mark.push_back(0);
    node_ids.insert(key, n);
    check_size();
    return n;
  }

  // `nodes` sorted and distinct.
  int32_t intern_set(const std::vector<uint32_t>& nodes) {
    uint64_t h = 0xCBF29CE484222325ull ^ nodes.size();
    for (const uint32_t v : nodes) h = (h ^ v) * 0x100000001B3ull;
    if (!set_table.empty()) {
      for (size_t i = h & (set_table.size() - 1);; i = (i + 1) & (set_table.size() - 1)) {
        const uint32_t id = set_table[i];
        if (id == UINT32_MAX) break;
        if (set_hash[id] == h && set_len[id] == nodes.size() &&
            std::equal(nodes.begin(), nodes.end(), pool.begin() + set_begin[id])) {
          return static_cast<int32_t>(id);
        }
      }
    }
    const auto id = static_cast<uint32_t>(set_begin.size());
    set_begin.push_back(static_cast<uint32_t>(pool.size()));
    set_len.push_back(static_cast<uint32_t>(nodes.size()));
    set_hash.push_back(h);
    ascii_row.push_back(-1);
    pool.insert(pool.end(), nodes.begin(), nodes.end());
    if ((set_begin.size()) * 2 > set_table.size()) {
      set_table.assign(std::max<size_t>(64, set_table.size() * 2), UINT32_MAX);
      for (uint32_t s = 0; s < set_begin.size(); ++s) place(s);
    } else {
      place(id);
    }
    check_size();
    return static_cast<int32_t>(id);
  }
  void place(uint32_t id) {
    size_t i = set_hash[id] & (set_table.size() - 1);
    while (set_table[i] != UINT32_MAX) i = (i + 1) & (set_table.size() - 1);
    set_table[i] = id;
  }

  void expand(uint32_t n) {
    work.push_back(n);
    while (!work.empty()) {
      n = work.back();
      work.pop_back();
      if (mark[n] == epoch) continue;
      mark[n] = epoch;
      if (++work_done > max_work) {
        fail("grammar too complex to compute a token mask: over ", max_work, " expansion steps");
      }
      if (n == 0 || g.is_chars(node_pos[n])) {
        out.push_back(n);
        if (out.size() > kMaxStacks) too_ambiguous(kMaxStacks);
        continue;
      }
      const uint32_t p = node_pos[n];
      uint32_t rest = node_parent[n];
      if (!g.is_end(p + 1)) rest = node(p + 1, rest);
      const uint32_t r = g.payload(p);
      for (uint32_t a = g.alt_begin[r]; a < g.alt_begin[r + 1]; ++a) {
        const uint32_t alt = g.alts[a];
        work.push_back(g.is_end(alt) ? rest : node(alt, rest));
      }
    }
  }

  int32_t compute(int32_t set, uint32_t cp) {
    if (++epoch == 0) {
      std::fill(mark.begin(), mark.end(), 0);
      epoch = 1;
    }
    out.clear();
    work.clear();
    const uint32_t begin = set_begin[static_cast<size_t>(set)];
    const uint32_t len = set_len[static_cast<size_t>(set)];
    for (uint32_t k = 0; k < len; ++k) {
      const uint32_t n = pool[begin + k];
      if (n == 0) continue;
      const uint32_t pos = node_pos[n];
      if (!g.matches(pos, cp)) continue;
      uint32_t rest = node_parent[n];
      if (!g.is_end(pos + 1)) rest = node(pos + 1, rest);
      expand(rest);
    }
    if (out.empty()) return kDead;
    std::sort(out.begin(), out.end());
    return intern_set(out);
  }

  int32_t step(int32_t set, uint32_t cp) {
    if (cp < 128) {
      const int32_t row = ascii_row[static_cast<size_t>(set)];
      if (row >= 0) {
        const int32_t v = ascii[static_cast<size_t>(row) * 128 + cp];
        if (v != kUnknown) return v;
      }
      const int32_t next = compute(set, cp);
      int32_t& r = ascii_row[static_cast<size_t>(set)];
      if (r < 0) {
        r = static_cast<int32_t>(ascii.size() / 128);
        ascii.resize(ascii.size() + 128, kUnknown);
      }
      ascii[static_cast<size_t>(r) * 128 + cp] = next;
      return next;
    }
    const uint64_t key = (static_cast<uint64_t>(set) << 21) | cp;
    const uint32_t v = trans.find(key);
    if (v != FlatMap::kMissing) return static_cast<int32_t>(v) - 1;
    const int32_t next = compute(set, cp);
    trans.insert(key, static_cast<uint32_t>(next + 1));
    return next;
  }

  bool accepts_some(int32_t set, const Utf8Decoder& d) {
    const uint32_t packed = ((d.cp & 0x3FFFFu) << 6) | (uint32_t{d.need} << 4) |
                            (((d.lo >> 4) & 3u) << 2) | ((d.hi >> 4) & 3u);
    const uint64_t key = (static_cast<uint64_t>(set) << 32) | packed;
    const uint32_t v = partial.find(key);
    if (v != FlatMap::kMissing) return v != 0;
    const uint32_t lo = d.min_cp(), hi = d.max_cp();
    bool any = false;
    const uint32_t begin = set_begin[static_cast<size_t>(set)];
    for (uint32_t k = 0; k < set_len[static_cast<size_t>(set)] && !any; ++k) {
      const uint32_t n = pool[begin + k];
      any = n != 0 && g.intersects(node_pos[n], lo, hi);
    }
    partial.insert(key, any ? 1 : 0);
    return any;
  }

  std::shared_ptr<const Grammar> owner;
  const Grammar::Impl& g;
  std::vector<uint32_t> node_pos, node_parent, mark;
  uint32_t epoch = 1;
  FlatMap node_ids;
  std::vector<uint32_t> pool, set_begin, set_len;
  std::vector<uint64_t> set_hash;
  std::vector<uint32_t> set_table;
  std::vector<int32_t> ascii_row, ascii;
  FlatMap trans, partial;
  std::vector<uint32_t> work, out;
  size_t work_done = 0;
  size_t max_work = SIZE_MAX, max_size = SIZE_MAX;
};

StackSetMachine::StackSetMachine(std::shared_ptr<const Grammar> grammar) {
  if (!grammar) fail("StackSetMachine: no grammar");
  impl_ = std::make_unique<Impl>(std::move(grammar));
}
StackSetMachine::~StackSetMachine() = default;

const Grammar* StackSetMachine::grammar() const { return impl_->owner.get(); }
const std::shared_ptr<const Grammar>& StackSetMachine::grammar_of(const GrammarState& state) {
  return state.grammar_;
}

int32_t StackSetMachine::set_of(const GrammarState& state, Utf8Decoder* decoder) {
  if (state.grammar_.get() != impl_->owner.get()) fail("StackSetMachine: state of another grammar");
  const GrammarState::Data& d = *state.data_;
  if (d.dead) return kDead;
  if (decoder != nullptr) *decoder = d.dec;
  std::vector<uint32_t> nodes;
  nodes.reserve(d.n_stacks);
  for (size_t i = 0; i < d.flat.size();) {
    const uint32_t len = d.flat[i++];
    uint32_t n = 0;
    for (uint32_t k = 0; k < len; ++k) n = impl_->node(d.flat[i + k], n);
    i += len;
    nodes.push_back(n);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return impl_->intern_set(nodes);
}

int32_t StackSetMachine::step(int32_t set, uint32_t cp) { return impl_->step(set, cp); }

bool StackSetMachine::accepts_some(int32_t set, const Utf8Decoder& decoder) {
  return impl_->accepts_some(set, decoder);
}

bool StackSetMachine::has_empty(int32_t set) const {
  const auto s = static_cast<size_t>(set);
  return impl_->set_len[s] > 0 && impl_->pool[impl_->set_begin[s]] == 0;
}

size_t StackSetMachine::size() const { return impl_->size(); }
void StackSetMachine::clear() { impl_->clear(); }
void StackSetMachine::reset_budget(size_t max_work, size_t max_size) {
  impl_->work_done = 0;
  impl_->max_work = max_work;
  impl_->max_size = max_size;
}

}  // namespace grammar_detail

}  // namespace specdec
