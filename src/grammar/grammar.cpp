// The GBNF compiler and the matcher. A compiled grammar is one flat array of elements: every
// alternative of every rule is a run of terminals (character sets) and rule references ending in
// an End element. A position in that array is "the next thing to match"; a stack of positions
// is one way the text so far can continue (the top is matched first, the rest are the callers'
// continuations), and a state is the set of all such stacks. Repetitions become helper rules
// (x* is R ::= x R | ε), so matching needs nothing but rules, alternatives and sets.
#include "grammar/grammar.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"

namespace specdec {

namespace {

constexpr size_t kMaxGrammarBytes = 1 << 20;
constexpr int64_t kMaxRepetition = 10000;
constexpr size_t kMaxElements = size_t{1} << 22;
constexpr size_t kMaxStackDepth = 1 << 16;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

enum class Kind : uint8_t { End, Set, Rule };

struct Element {
  Kind kind;
  uint32_t index;  // Set: into sets; Rule: into rules
};

struct CharSet {
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive
  bool contains(uint32_t c) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges) {
      if (c >= lo && c <= hi) {
        in = true;
        break;
      }
    }
    return in != negated;
  }
  bool intersects(uint32_t lo, uint32_t hi) const {
    if (negated) return true;  // conservative: only used to prune early
    for (const auto& [a, b] : ranges) {
      if (a <= hi && b >= lo) return true;
    }
    return false;
  }
};

}  // namespace

struct Grammar::Impl {
  std::vector<Element> elements;
  std::vector<CharSet> sets;
  // rules[r]: the positions where its alternatives start (an End there: the empty one).
  std::vector<std::vector<uint32_t>> rules;
  uint32_t root = 0;
};

namespace {

using Stack = std::vector<uint32_t>;

// ---------------------------------------------------------------------------------------------
// Parsing

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  const std::vector<std::string>& names() const { return names_; }

  std::unique_ptr<Grammar::Impl> run(std::string_view root_name) {
    skip_space(true);
    if (at_end()) fail("grammar: empty grammar (no rules)");
    while (!at_end()) {
      parse_rule();
      skip_space(true);
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_[id]) {
        fail("grammar: rule '", name, "' is used (first at ", where(first_use_[id]),
             ") but never defined");
      }
    }
    auto it = ids_.find(std::string(root_name));
    if (it == ids_.end()) fail("grammar: no rule named '", root_name, "' (the start symbol)");
    // Flatten: rule bodies are alternatives of element sequences.
    auto impl = std::make_unique<Grammar::Impl>();
    impl->sets = std::move(sets_);
    impl->rules.resize(bodies_.size());
    for (size_t r = 0; r < bodies_.size(); ++r) {
      for (const auto& alt : bodies_[r]) {
        impl->rules[r].push_back(static_cast<uint32_t>(impl->elements.size()));
        impl->elements.insert(impl->elements.end(), alt.begin(), alt.end());
        impl->elements.push_back({Kind::End, 0});
        if (impl->elements.size() > kMaxElements) fail("grammar: too large once compiled");
      }
    }
    impl->root = it->second;
    return impl;
  }

 private:
  using Seq = std::vector<Element>;

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  std::string where(size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return str_cat("line ", line, ", column ", col);
  }
  [[noreturn]] void error(const std::string& what) const {
    fail("grammar: ", what, " at ", where(pos_));
  }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newline_ok && c == '\n')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && word_char(peek())) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto [it, added] = ids_.emplace(name, static_cast<uint32_t>(bodies_.size()));
    if (added) {
      bodies_.emplace_back();
      defined_.push_back(false);
      first_use_.push_back(at);
      names_.push_back(name);
    }
    return it->second;
  }

  uint32_t new_rule() {
    const auto id = static_cast<uint32_t>(bodies_.size());
    bodies_.emplace_back();
    defined_.push_back(true);
    first_use_.push_back(pos_);
    names_.push_back(str_cat("a group or repetition in ", current_));
    return id;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        error(str_cat("expected ", digits, " hex digits"));
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) error("code point out of range");
    return v;
  }

  // One character of a literal or a class: an escape or a UTF-8 sequence.
  uint32_t parse_char() {
    if (at_end()) error("unexpected end of grammar");
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'x':
          return hex(2);
        case 'u':
          return hex(4);
        case 'U':
          return hex(8);
        case 't':
          return '\t';
        case 'r':
          return '\r';
        case 'n':
          return '\n';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '.':
        case '/':
          return static_cast<unsigned char>(e);
        default:
          --pos_;
          error(str_cat("unknown escape '\\", e == '\0' ? std::string("end") : std::string(1, e),
                        "'"));
      }
    }
    // UTF-8: the grammar's own text must be valid.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0) error("invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    ++pos_;
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(peek());
      if (at_end() || (b & 0xC0) != 0x80) error("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (b & 0x3F);
      ++pos_;
    }
    if (cp > kMaxCodePoint) error("invalid UTF-8 in the grammar");
    return cp;
  }

  Element set_of(CharSet set) {
    sets_.push_back(std::move(set));
    return {Kind::Set, static_cast<uint32_t>(sets_.size() - 1)};
  }

  void check_size(size_t n) {
    total_ += n;
    if (total_ > kMaxElements) error("the grammar is too large once repetitions are expanded");
  }

  // Appends the repetition of out[start..) with bounds [lo, hi] (hi < 0: unbounded).
  void repeat(Seq& out, size_t start, int64_t lo, int64_t hi) {
    const Seq item(out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
    out.resize(start);
    check_size(item.size() * static_cast<size_t>(std::max<int64_t>(lo, hi < 0 ? 1 : hi) + 1));
    for (int64_t i = 0; i < lo; ++i) out.insert(out.end(), item.begin(), item.end());
    if (hi < 0) {
      // R ::= item R | ε
      const uint32_t r = new_rule();
      Seq loop = item;
      loop.push_back({Kind::Rule, r});
      bodies_[r] = {loop, {}};
      out.push_back({Kind::Rule, r});
      return;
    }
    // hi - lo nested optionals: R1 ::= item R2 | ε, ..., Rk ::= item | ε.
    uint32_t next = 0;
    bool have_next = false;
    for (int64_t i = hi - lo; i > 0; --i) {
      const uint32_t r = new_rule();
      Seq body = item;
      if (have_next) body.push_back({Kind::Rule, next});
      bodies_[r] = {body, {}};
      next = r;
      have_next = true;
    }
    if (have_next) out.push_back({Kind::Rule, next});
  }

  void parse_sequence(Seq& out, bool nested) {
    size_t last_start = out.size();
    bool have_last = false;
    while (!at_end()) {
      const char c = peek();
      if (c == '"') {
        ++pos_;
        last_start = out.size();
        while (peek() != '"') {
          if (at_end()) error("unterminated string literal");
          const uint32_t ch = parse_char();
          out.push_back(set_of({false, {{ch, ch}}}));
        }
        ++pos_;
        check_size(out.size() - last_start);
        have_last = out.size() > last_start;  // "" matches the empty text: nothing to repeat
      } else if (c == '[') {
        ++pos_;
        CharSet set;
        if (peek() == '^') {
          set.negated = true;
          ++pos_;
        }
        while (peek() != ']') {
          if (at_end()) error("unterminated character class");
          const uint32_t a = parse_char();
          uint32_t b = a;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
            ++pos_;
            b = parse_char();
            if (b < a) error("character range is backwards");
          }
          set.ranges.emplace_back(a, b);
        }
        ++pos_;
        last_start = out.size();
        out.push_back(set_of(std::move(set)));
        have_last = true;
      } else if (c == '.') {
        ++pos_;
        last_start = out.size();
        out.push_back(set_of({true, {}}));
        have_last = true;
      } else if (word_char(c)) {
        const size_t at = pos_;
        const std::string name = parse_name();
        last_start = out.size();
        out.push_back({Kind::Rule, rule_id(name, at)});
        have_last = true;
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        const uint32_t r = new_rule();
        bodies_[r] = parse_alternates(true);
        if (peek() != ')') error("expected ')'");
        ++pos_;
        last_start = out.size();
        out.push_back({Kind::Rule, r});
        have_last = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) error(str_cat("'", c, "' has nothing to repeat"));
        int64_t lo = 0, hi = -1;
        ++pos_;
        if (c == '+') {
          lo = 1;
        } else if (c == '?') {
          hi = 1;
        } else if (c == '{') {
          skip_space(nested);
          lo = peek() == ',' ? 0 : parse_count();
          skip_space(nested);
          if (peek() == ',') {
            ++pos_;
            skip_space(nested);
            hi = peek() == '}' ? -1 : parse_count();
            skip_space(nested);
          } else {
            hi = lo;
          }
          if (peek() != '}') error("expected '}'");
          ++pos_;
          if (hi >= 0 && hi < lo) error("repetition's upper bound is below its lower bound");
        }
        repeat(out, last_start, lo, hi);
        have_last = false;  // x** is not allowed
      } else {
        break;
      }
      skip_space(nested);
    }
  }

  int64_t parse_count() {
    const size_t start = pos_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepetition) error(str_cat("repetition bound over ", kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) error("expected a number");
    return v;
  }

  std::vector<Seq> parse_alternates(bool nested) {
    if (++depth_ > 256) error("groups nested too deeply");
    std::vector<Seq> alts(1);
    parse_sequence(alts.back(), nested);
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.emplace_back();
      parse_sequence(alts.back(), nested);
    }
    --depth_;
    return alts;
  }

  void parse_rule() {
    const size_t at = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") error("expected '::=' after the rule name");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, at);
    current_ = name;
    if (defined_[id]) fail("grammar: rule '", name, "' is defined twice (", where(at), ")");
    defined_[id] = true;
    bodies_[id] = parse_alternates(false);
    skip_space(false);
    if (!at_end() && peek() != '\n') error("unexpected character");
  }

  std::string_view src_;
  size_t pos_ = 0;
  int depth_ = 0;
  size_t total_ = 0;
  std::string current_;             // the rule being parsed
  std::vector<std::string> names_;  // per rule id
  std::map<std::string, uint32_t> ids_;
  std::vector<std::vector<Seq>> bodies_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::vector<CharSet> sets_;
};

// Rejects left recursion: a rule that can reach itself through references each preceded only
// by what can match the empty text. Matching would expand such a rule forever.
void check_left_recursion(const Grammar::Impl& g, const std::vector<std::string>& names) {
  const size_t n = g.rules.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t p : g.rules[r]) {
        bool all = true;
        for (; g.elements[p].kind != Kind::End; ++p) {
          const Element& e = g.elements[p];
          if (e.kind == Kind::Set || !nullable[e.index]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  // Edges r -> s where s can come first in r; then a cycle search (iterative DFS).
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (uint32_t p : g.rules[r]) {
      for (; g.elements[p].kind == Kind::Rule; ++p) {
        first[r].push_back(g.elements[p].index);
        if (!nullable[g.elements[p].index]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i < first[r].size()) {
        const uint32_t s = first[r][i++];
        if (color[s] == 1) {
          fail("grammar: rule '", names[s],
               "' is left-recursive (it can reach itself before matching any character)");
        }
        if (color[s] == 0) {
          color[s] = 1;
          path.emplace_back(s, 0);
        }
      } else {
        color[r] = 2;
        path.pop_back();
      }
    }
  }
}

}  // namespace

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, std::string_view root) {
  if (gbnf.size() > kMaxGrammarBytes) {
    fail("grammar: ", gbnf.size(), " bytes is over the limit of ", kMaxGrammarBytes);
  }
  Parser parser(gbnf);
  std::unique_ptr<Impl> impl = parser.run(root);
  check_left_recursion(*impl, parser.names());
  return std::make_shared<const Grammar>(std::move(impl));
}

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;

// ---------------------------------------------------------------------------------------------
// Matching

struct GrammarState::Data {
  std::vector<Stack> stacks;  // sorted, distinct
  std::string key;            // the stacks, serialized
  bool any_empty = false;     // some stack is empty: the text may end here
  // Transitions already computed from this state (weak: states may form cycles), and the code
  // points that lead back to this very state (inside a JSON string: almost all).
  mutable std::unordered_map<uint32_t, std::weak_ptr<const Data>> next;
  mutable std::unordered_set<uint32_t> self;
};

namespace {

struct StackHash {
  size_t operator()(const Stack& s) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t v : s) h = (h ^ v) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};
using StackSet = std::unordered_set<Stack, StackHash>;

// Expands a stack until its top is a character set (or it is empty), into out. Paths through
// rules that match nothing converge on the same stacks (x? x? x? can skip or enter each one);
// `seen` (shared by one step's expansions) expands each stack once, so that the work stays
// proportional to the distinct stacks rather than to the paths.
void expand(const Grammar::Impl& g, Stack stack, std::vector<Stack>& out, StackSet& seen) {
  std::vector<Stack> work{std::move(stack)};
  while (!work.empty()) {
    Stack s = std::move(work.back());
    work.pop_back();
    if (!seen.insert(s).second) continue;
    if (seen.size() > GrammarState::kMaxStacks * 16) {
      fail("grammar: too ambiguous (over ", GrammarState::kMaxStacks,
           " ways to continue the text)");
    }
    if (s.empty() || g.elements[s.back()].kind == Kind::Set) {
      out.push_back(std::move(s));
      if (out.size() > GrammarState::kMaxStacks * 4) {
        fail("grammar: too ambiguous (over ", GrammarState::kMaxStacks,
             " ways to continue the text)");
      }
      continue;
    }
    const uint32_t pos = s.back();
    s.pop_back();
    const Element& e = g.elements[pos];  // a rule reference
    if (g.elements[pos + 1].kind != Kind::End) s.push_back(pos + 1);
    if (s.size() >= kMaxStackDepth) fail("grammar: nesting deeper than ", kMaxStackDepth);
    for (uint32_t alt : g.rules[e.index]) {
      Stack t = s;
      if (g.elements[alt].kind != Kind::End) t.push_back(alt);
      work.push_back(std::move(t));
    }
  }
}

std::shared_ptr<const GrammarState::Data> make_data(std::vector<Stack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > GrammarState::kMaxStacks) {
    fail("grammar: too ambiguous (over ", GrammarState::kMaxStacks, " ways to continue the text)");
  }
  auto d = std::make_shared<GrammarState::Data>();
  for (const Stack& s : stacks) {
    if (s.empty()) d->any_empty = true;
    const auto n = static_cast<uint32_t>(s.size());
    d->key.append(reinterpret_cast<const char*>(&n), sizeof n);
    d->key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
  }
  d->stacks = std::move(stacks);
  return d;
}

}  // namespace

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  const Grammar::Impl& g = grammar_->impl();
  std::vector<Stack> stacks;
  StackSet seen;
  for (uint32_t alt : g.rules[g.root]) {
    expand(g, g.elements[alt].kind == Kind::End ? Stack{} : Stack{alt}, stacks, seen);
  }
  data_ = make_data(std::move(stacks));
}

bool GrammarState::dead() const { return data_ == nullptr; }

bool GrammarState::complete() const {
  return data_ != nullptr && partial_left_ == 0 && data_->any_empty;
}

bool GrammarState::can_continue() const {
  if (data_ == nullptr) return false;
  for (const Stack& s : data_->stacks) {
    if (!s.empty()) return true;
  }
  return false;
}

size_t GrammarState::n_stacks() const { return data_ ? data_->stacks.size() : 0; }

const std::string& GrammarState::key() const {
  key_.clear();
  if (data_ == nullptr) return key_;
  key_ = data_->key;
  const char tail[3] = {static_cast<char>(partial_left_), static_cast<char>(partial_len_), 0};
  key_.append(tail, 2);
  key_.append(reinterpret_cast<const char*>(&partial_), sizeof partial_);
  return key_;
}

bool GrammarState::may_match(uint32_t lo, uint32_t hi) const {
  const Grammar::Impl& g = grammar_->impl();
  for (const Stack& s : data_->stacks) {
    if (!s.empty() && g.sets[g.elements[s.back()].index].intersects(lo, hi)) return true;
  }
  return false;
}

bool GrammarState::accept_code_point(uint32_t cp) {
  if (data_->self.count(cp) != 0) return true;
  if (auto it = data_->next.find(cp); it != data_->next.end()) {
    if (auto d = it->second.lock()) {
      data_ = std::move(d);
      return true;
    }
  }
  const Grammar::Impl& g = grammar_->impl();
  std::vector<Stack> out;
  StackSet seen;
  for (const Stack& s : data_->stacks) {
    if (s.empty()) continue;
    const uint32_t pos = s.back();
    if (!g.sets[g.elements[pos].index].contains(cp)) continue;
    Stack t(s.begin(), s.end() - 1);
    if (g.elements[pos + 1].kind != Kind::End) t.push_back(pos + 1);
    expand(g, std::move(t), out, seen);
  }
  if (out.empty()) {
    data_ = nullptr;
    return false;
  }
  std::shared_ptr<const Data> next = make_data(std::move(out));
  if (next->key == data_->key) {
    data_->self.insert(cp);
    return true;
  }
  data_->next[cp] = next;
  data_ = std::move(next);
  return true;
}

bool GrammarState::accept_byte(uint8_t b) {
  if (data_ == nullptr) return false;
  if (partial_left_ == 0) {
    if (b < 0x80) return accept_code_point(b);
    // A lead byte: 0xC2-0xDF (2 bytes), 0xE0-0xEF (3), 0xF0-0xF4 (4).
    if (b >= 0xC2 && b <= 0xDF) {
      partial_ = b & 0x1Fu;
      partial_left_ = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      partial_ = b & 0x0Fu;
      partial_left_ = 2;
    } else if (b >= 0xF0 && b <= 0xF4) {
      partial_ = b & 0x07u;
      partial_left_ = 3;
    } else {
      data_ = nullptr;
      return false;
    }
    partial_len_ = 1;
  } else {
    if ((b & 0xC0) != 0x80) {
      data_ = nullptr;
      return false;
    }
    partial_ = (partial_ << 6) | (b & 0x3Fu);
    --partial_left_;
    ++partial_len_;
    // Overlong forms, surrogates and code points past U+10FFFF show after the second byte.
    if (partial_len_ == 2) {
      const uint32_t lo = partial_ << (6 * partial_left_);
      const bool bad = (partial_left_ == 1 && lo < 0x800) ||                    // 3-byte overlong
                       (partial_left_ == 1 && lo >= 0xD800 && lo <= 0xDFFF) ||  // surrogate
                       (partial_left_ == 2 && (lo < 0x10000 || lo > kMaxCodePoint));
      if (bad) {
        data_ = nullptr;
        return false;
      }
    }
  }
  if (partial_left_ == 0) {
    partial_len_ = 0;
    return accept_code_point(partial_);
  }
  // Prune a sequence no stack can finish. Its code point is at least the smallest one its length
  // encodes (shorter forms are overlong).
  const int total = partial_len_ + partial_left_;
  const uint32_t least = total == 2 ? 0x80 : total == 3 ? 0x800 : 0x10000;
  const uint32_t lo = std::max(least, partial_ << (6 * partial_left_));
  const uint32_t hi = lo | ((1u << (6 * partial_left_)) - 1);
  if (!may_match(lo, hi)) {
    data_ = nullptr;
    return false;
  }
  return true;
}

bool GrammarState::accept(std::string_view bytes) {
  for (const char c : bytes) {
    if (!accept_byte(static_cast<uint8_t>(c))) return false;
  }
  return data_ != nullptr;
}

}  // namespace specdec
