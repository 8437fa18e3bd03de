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
// Elements after expanding repetitions (16 MiB of code): a 1 MiB grammar of x{10000} items
// would otherwise compile to billions.
constexpr size_t kMaxElements = size_t{1} << 22;
constexpr int kMaxNesting = 256;  // parentheses (the parser recurses on them)
constexpr size_t kMaxStacks = 4096;
constexpr size_t kMaxStateEntries = size_t{1} << 20;  // positions over all stacks of a state
// Positions copied while expanding stacks for one code point (GrammarState) or stacks visited
// (StackSetMachine): bounds the time of one step on a pathological grammar.
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
  std::vector<std::string> rule_names;

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
    std::string name;
    std::string owner;  // for a helper rule: the rule it was written in
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
    fail("grammar syntax error at ", where(at), ": ", std::forward<Args>(args)...);
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
      syms_.push_back({name, name});
      rules_.emplace_back();
    }
    return it->second;
  }

  uint32_t new_helper(const std::string& owner) {
    const auto id = static_cast<uint32_t>(syms_.size());
    Symbol s{str_cat(owner, "-", id), owner};
    s.defined = true;
    s.helper = true;
    syms_.push_back(std::move(s));
    rules_.emplace_back();
    count(1);
    return id;
  }

  void count(size_t n) {
    n_elements_ += n;
    if (n_elements_ > kMaxElements) {
      error_at(pos_, "grammar too large: its repetitions expand to over ", kMaxElements,
               " elements");
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
      error_at(at, "rule '", name, "' is defined twice (first at ", where(s.def_at), ")");
    }
    s.defined = true;
    s.def_at = at;
    parse_alternates(id, name, false, 0);
    if (!eof()) {
      if (peek() == '\r') {
        ++pos_;
        if (peek() == '\n') ++pos_;
      } else if (peek() == '\n') {
        ++pos_;
      } else {
        error_at(pos_, "expected an item, '|' or the end of the line in rule '", name,
                 "', found ", describe_byte(peek()));
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

  void parse_alternates(uint32_t id, const std::string& rule_name, bool nested, int depth) {
    std::vector<uint32_t> out;
    parse_sequence(rule_name, out, nested, depth);
    while (peek() == '|' || (!nested && continuation_line())) {
      ++pos_;
      skip_space(true);
      emit(out, kAlt);
      parse_sequence(rule_name, out, nested, depth);
    }
    count(1);  // the end marker
    rules_[id] = std::move(out);
  }

  uint32_t parse_hex(int digits, size_t esc_at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) {
        error_at(pos_, "expected ", digits, " hex digits in the escape at ", where(esc_at),
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
              const std::string& rule_name, const char* what) {
    if (last >= out.size()) error_at(at, "'", what, "' has nothing before it to repeat");
    if (out.size() - last > 1) {  // a literal of several characters: one rule, one reference
      const uint32_t h = new_helper(rule_name);
      rules_[h].assign(out.begin() + static_cast<std::ptrdiff_t>(last), out.end());
      out.resize(last);
      out.push_back(kRef | h);
    }
    const uint32_t item = out[last];
    out.resize(last);
    for (uint32_t i = 0; i < min; ++i) emit(out, item);
    if (max < 0) {
      const uint32_t r = new_helper(rule_name);
      count(3);
      rules_[r] = {item, kRef | r, kAlt};
      emit(out, kRef | r);
      return;
    }
    uint32_t prev = 0;
    for (int64_t i = 0; i < max - static_cast<int64_t>(min); ++i) {
      const uint32_t r = new_helper(rule_name);
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
      error_at(pos_, "expected a number in the repetition at ", where(brace_at), ", found ",
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

  void parse_sequence(const std::string& rule_name, std::vector<uint32_t>& out, bool nested,
                      int depth) {
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
            if (hi < lo) error_at(lo_at, "character range whose end comes before its start");
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
        const uint32_t sub = new_helper(rule_name);
        parse_alternates(sub, rule_name, true, depth + 1);
        if (peek() != ')') {
          error_at(pos_, "expected ')' to close the group opened at ", where(at), ", found ",
                   describe_byte(peek()));
        }
        ++pos_;
        last = out.size();
        emit(out, kRef | sub);
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        const char what[2] = {static_cast<char>(c), 0};
        repeat(out, last, c == '+' ? 1 : 0, c == '?' ? 1 : -1, at, rule_name, what);
      } else if (c == '{') {
        ++pos_;
        skip_space(nested);
        const uint32_t min = parse_count(at);
        int64_t max = min;
        skip_space(nested);
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          max = peek() >= '0' && peek() <= '9' ? static_cast<int64_t>(parse_count(at)) : -1;
          skip_space(nested);
        }
        if (peek() != '}') {
          error_at(pos_, "expected '}' to close the repetition at ", where(at), ", found ",
                   describe_byte(peek()));
        }
        ++pos_;
        if (max >= 0 && max < static_cast<int64_t>(min)) {
          error_at(at, "repetition {", min, ",", max, "} whose maximum is below its minimum");
        }
        repeat(out, last, min, max, at, rule_name, "{");
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
    if (bad != nullptr) fail("grammar: undefined rule '", bad->name, "' (used at ", where(first), ")");
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
        for (uint32_t cp = r[i]; cp <= r[i + 1] && cp < 128; ++cp) bits[cp >> 6] |= 1ull << (cp & 63);
      }
    }
    g->cs_begin.push_back(static_cast<uint32_t>(g->ranges.size() / 2));
    g->rule_names.reserve(syms_.size());
    for (const Symbol& s : syms_) g->rule_names.push_back(s.name);
    return g;
  }

  // Rejects a rule that can reach itself through references each preceded only by items that
  // may match the empty text: expanding it would never end.
  void check_left_recursion(const Grammar::Impl& g, uint32_t root) const {
    const size_t n_rules = g.alt_begin.size() - 1;
    // Nullable rules, by counting down each alternative's references (linear time).
    std::vector<uint32_t> alt_rule(g.alts.size()), pending(g.alts.size(), 0);
    std::vector<uint8_t> blocked(g.alts.size(), 0), nullable(n_rules, 0);
    std::vector<std::vector<uint32_t>> uses(n_rules);
    std::vector<uint32_t> queue;
    for (uint32_t r = 0; r < n_rules; ++r) {
      for (uint32_t a = g.alt_begin[r]; a < g.alt_begin[r + 1]; ++a) {
        alt_rule[a] = r;
        for (uint32_t p = g.alts[a]; !g.is_end(p); ++p) {
          if (g.is_chars(p)) {
            blocked[a] = 1;
            break;
          }
          ++pending[a];
        }
        if (blocked[a]) continue;
        for (uint32_t p = g.alts[a]; !g.is_end(p); ++p) uses[g.payload(p)].push_back(a);
        if (pending[a] == 0 && !nullable[r]) {
          nullable[r] = 1;
          queue.push_back(r);
        }
      }
    }
    while (!queue.empty()) {
      const uint32_t r = queue.back();
      queue.pop_back();
      for (const uint32_t a : uses[r]) {
        if (--pending[a] == 0 && !nullable[alt_rule[a]]) {
          nullable[alt_rule[a]] = 1;
          queue.push_back(alt_rule[a]);
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
    for (size_t k = 0; k < cycle.size() && k < 12; ++k) trail += syms_[cycle[k]].name + " -> ";
    trail += cycle.size() > 12 ? "..." : syms_[cycle[0]].name;
    const Symbol& head = syms_[cycle[0]];
    fail("grammar: left recursion: rule '", head.owner, "' can reach itself without consuming a ",
         "character (", trail, ")",
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

}  // namespace specdec
