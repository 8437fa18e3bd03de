// JSON Schema -> GBNF. Every schema becomes one rule (or a shared primitive) whose text is a JSON
// value without leading or trailing whitespace; objects and arrays put the bounded whitespace
// rule `ws` between their parts. Shared pieces (string, number, any value, ...) are rules added
// on first use; rules with identical bodies are merged; each $ref target becomes one rule, so
// recursion is a rule naming itself and the output stays linear in the schema.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "grammar/number_range.h"
#include "grammar/regex_gbnf.h"

namespace specdec {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;                     // nested schemas (and nested const/enum values)
constexpr size_t kMaxRules = 20000;               // rules in the output
constexpr size_t kMaxOutputBytes = 1 << 20;       // Grammar::parse's own limit
constexpr int64_t kMaxBound = 10000;              // minItems/maxItems/minLength/maxLength
constexpr int64_t kMaxRepetitionTotal = 1000000;  // the sum of every emitted bound
constexpr size_t kMaxExcludedName = 1000;  // the JSON text of a name additional ones must avoid

struct Primitive {
  const char* body;
  std::vector<const char*> deps;
};

// Whitespace between tokens, bounded as in llama.cpp so that a model cannot pad forever: none,
// one space, or a newline and up to 20 spaces or tabs of indentation. Numbers are bounded too
// (20 integer digits, 20 fraction digits, 4 exponent digits).
const std::map<std::string, Primitive>& primitives() {
  static const std::map<std::string, Primitive> rules = {
      {"ws", {R"(| " " | "\n" [ \t]{0,20})", {}}},
      {"value",
       {"object | array | string | number | boolean | null",
        {"object", "array", "string", "number", "boolean", "null"}}},
      {"object", {R"("{" ws ( member ( "," ws member )* )? "}")", {"ws", "member"}}},
      {"member", {R"(string ws ":" ws value ws)", {"string", "ws", "value"}}},
      {"array", {R"("[" ws ( value ws ( "," ws value ws )* )? "]")", {"ws", "value"}}},
      {"hex", {"[0-9a-fA-F]", {}}},
      // \u escapes: surrogates only as a high-low pair, so that every `char` is one character
      // of the decoded string (minLength and maxLength count those).
      {"escape",
       {R"(["\\/bfnrt] | "u" ( [0-9a-cA-CefEF] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} "\\u" [dD] [c-fC-F] hex{2} ))",
        {"hex"}}},
      {"char", {R"([^"\\\x7F\x00-\x1F] | "\\" escape)", {"escape"}}},
      {"string", {R"("\"" char* "\"")", {"char"}}},
      {"key-char", {R"([^"\\\x7F\x00-\x1F] | "\\" ["\\bfnrt])", {}}},
      {"int-part", {R"("0" | [1-9] [0-9]{0,19})", {}}},
      {"integer", {R"("-"? int-part)", {"int-part"}}},
      {"number",
       {R"("-"? int-part ( "." [0-9]{1,20} )? ( [eE] [-+]? [0-9]{1,4} )?)", {"int-part"}}},
      {"boolean", {R"("true" | "false")", {}}},
      {"null", {R"("null")", {}}},
      // Dates: days by month (February up to 29 in every year).
      {"date",
       {R"([0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | [12] [0-9] ) ))",
        {}}},
      {"time",
       {R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( [zZ] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
        {}}},
      {"date-time", {R"(date [tT] time)", {"date", "time"}}},
      {"uuid", {R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})", {"hex"}}},
  };
  return rules;
}

// Keywords that do not constrain the text: ignored wherever they appear. ("discriminator" is
// OpenAPI's hint beside a oneOf whose branches already say everything.)
const std::set<std::string>& annotations() {
  static const std::set<std::string> words = {
      "title",    "description", "default",       "examples",        "$schema",
      "$id",      "$comment",    "$defs",         "definitions",     "deprecated",
      "readOnly", "writeOnly",   "discriminator", "contentEncoding", "contentMediaType"};
  return words;
}

// Keywords that do constrain it and are supported (not everywhere in every combination).
const std::set<std::string>& validations() {
  // clang-format off
  static const std::set<std::string> words = {
      "type", "properties", "required", "additionalProperties",
      "items", "prefixItems", "additionalItems", "minItems", "maxItems",
      "minLength", "maxLength", "format", "pattern",
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
      "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};
  // clang-format on
  return words;
}

const std::set<std::string>& type_names() {
  static const std::set<std::string> names = {"object",  "array",   "string", "number",
                                              "integer", "boolean", "null"};
  return names;
}

// A JSON pointer one level down.
std::string child(const std::string& path, std::string_view key) {
  std::string out = path + "/";
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string hint_of(const std::string& hint, std::string_view part) {
  return hint.empty() ? std::string(part) : str_cat(hint, "-", part);
}

bool has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run() {
    const std::string top = visit(root_, "", "", 0);
    std::string out = "root ::= " + top + "\n";
    for (const std::string& name : order_) out += rules_[name] + "\n";
    if (out.size() > kMaxOutputBytes) {
      fail("JSON Schema: too large (the grammar would be over ", kMaxOutputBytes, " bytes)");
    }
    return out;
  }

 private:
  [[noreturn]] void error(const std::string& path, const std::string& what) const {
    fail("JSON Schema ", path.empty() ? std::string("(root)") : path, ": ", what);
  }

  // --- rules ---------------------------------------------------------------------------------

  std::string use(const std::string& name) {
    if (rules_.count(name) == 0) {
      const Primitive& p = primitives().at(name);
      rules_[name] = name + " ::= " + p.body;
      order_.push_back(name);
      for (const char* d : p.deps) use(d);
    }
    return name;
  }

  // A rule named after `hint` (made unique) with this body; identical bodies share one rule.
  // `weight`: what its repetition bounds cost the grammar compiler, which expands each into that
  // many copies; the total over the rules made is limited.
  std::string add(const std::string& hint, const std::string& body, int64_t weight = 0,
                  const std::string& path = "") {
    if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    repetitions_ += weight;
    if (repetitions_ > kMaxRepetitionTotal) {
      error(path,
            str_cat("too large (item and length bounds add up to over ", kMaxRepetitionTotal, ")"));
    }
    const std::string name = fresh(hint);
    define(name, body);
    by_body_[body] = name;
    return name;
  }

  // A unique rule name from a hint: letters, digits and single dashes, at most 40 characters
  // before a numeric suffix; never "root" or a primitive's name.
  std::string fresh(const std::string& hint) {
    std::string base;
    for (const char c : hint) {
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        base += c;
      } else if (!base.empty() && base.back() != '-') {
        base += '-';
      }
    }
    if (base.size() > 40) base.resize(40);
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty()) base = "schema";
    const auto taken = [&](const std::string& n) {
      return n == "root" || primitives().count(n) != 0 || rules_.count(n) != 0 ||
             reserved_.count(n) != 0;
    };
    std::string name = base;
    for (int& i = suffix_.try_emplace(base, 1).first->second; taken(name);) {
      name = str_cat(base, "-", ++i);
    }
    reserved_.insert(name);
    return name;
  }

  void define(const std::string& name, const std::string& body) {
    if (rules_.size() >= kMaxRules) fail("JSON Schema: too large (over ", kMaxRules, " rules)");
    std::string line = name + " ::= " + body;
    bytes_ += line.size() + 1;
    if (bytes_ > kMaxOutputBytes) {
      fail("JSON Schema: too large (the grammar would be over ", kMaxOutputBytes, " bytes)");
    }
    rules_[name] = std::move(line);
    order_.push_back(name);
  }

  // The repetition suffix for [lo, hi] (hi < 0: unbounded); "" for exactly one. Adds its cost
  // to `weight` (see add()).
  static std::string repeat(int64_t lo, int64_t hi, int64_t& weight) {
    weight += std::max(lo, hi) + 1;
    if (lo == 1 && hi == 1) return "";
    if (hi < 0) return lo == 0 ? "*" : lo == 1 ? "+" : str_cat("{", lo, ",}");
    if (lo == 0 && hi == 1) return "?";
    if (lo == hi) return str_cat("{", lo, "}");
    return str_cat("{", lo, ",", hi, "}");
  }

  std::string dump(const json& v, const std::string& path) const {
    try {
      return v.dump();
    } catch (const json::exception&) {
      error(path, "a string that is not valid UTF-8");
    }
  }

  // --- schemas -------------------------------------------------------------------------------

  // The rule (or primitive, or a short expression naming rules) for schema `s` at `path`.
  std::string visit(const json& s, const std::string& hint, const std::string& path, int depth) {
    if (depth > kMaxDepth) {
      error(path, str_cat("nested deeper than ", kMaxDepth, " schemas (references included)"));
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(path, "the schema false allows nothing");
      return use("value");
    }
    if (!s.is_object()) error(path, "a schema must be an object or a boolean");
    std::vector<std::string> keys;  // the constraining keywords present
    for (const auto& [key, v] : s.items()) {
      if (annotations().count(key) != 0) continue;
      if (validations().count(key) == 0) error(child(path, key), "unsupported keyword");
      keys.push_back(key);
    }
    // A keyword that stands alone (besides annotations and those in `allowed`).
    const auto alone = [&](const std::string& kw, const std::set<std::string>& allowed) {
      for (const std::string& k : keys) {
        if (k != kw && allowed.count(k) == 0) {
          error(child(path, k), str_cat("is not supported beside ", kw));
        }
      }
    };
    if (s.contains("$ref")) {
      alone("$ref", {});
      return ref(s, path, depth);
    }
    for (const char* kw : {"anyOf", "oneOf", "allOf"}) {
      if (s.contains(kw)) {
        alone(kw, {});
        return combination(s, kw, hint, path, depth);
      }
    }
    if (s.contains("const") || s.contains("enum")) {
      alone(s.contains("const") ? "const" : "enum", {"type"});
      return enumeration(s, hint, path);
    }
    std::vector<std::string> types = types_of(s, path);
    if (types.empty()) {
      // No type: what the keywords present imply (stricter than JSON Schema, which would let
      // values of other types through, but never looser).
      const auto any_of = [&](std::initializer_list<const char*> words) {
        for (const char* w : words) {
          if (s.contains(w)) return true;
        }
        return false;
      };
      if (any_of({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (any_of({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) {
        types.push_back("array");
      }
      if (any_of({"minLength", "maxLength", "format", "pattern"})) types.push_back("string");
      if (any_of({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
        types.push_back("number");
      }
      if (types.empty()) return use("value");  // no constraint
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      std::string one;
      if (t == "object") {
        one = object(s, hint, path, depth);
      } else if (t == "array") {
        one = array(s, hint, path, depth);
      } else if (t == "string") {
        one = string(s, hint, path);
      } else if ((t == "integer" || t == "number") && has_bounds(s)) {
        one = bounded_number(s, t == "integer", hint, path);
      } else {
        one = use(t);
      }
      if (std::find(alts.begin(), alts.end(), one) == alts.end()) alts.push_back(one);
    }
    return alternatives(hint, alts);
  }

  std::string alternatives(const std::string& hint, const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    return add(hint, body);
  }

  // "type": a name or a non-empty list of names (repeats dropped); empty when absent.
  std::vector<std::string> types_of(const json& s, const std::string& path) const {
    std::vector<std::string> types;
    const auto it = s.find("type");
    if (it == s.end()) return types;
    const std::string at = child(path, "type");
    const auto take = [&](const json& t) {
      if (!t.is_string()) error(at, "must be a type name or a list of them");
      const std::string name = t.get<std::string>();
      if (type_names().count(name) == 0) {
        error(at, str_cat("unknown type '", name,
                          "' (object, array, string, number, integer, boolean or null)"));
      }
      if (std::find(types.begin(), types.end(), name) == types.end()) types.push_back(name);
    };
    if (it->is_array()) {
      if (it->empty()) error(at, "must not be an empty list");
      for (const json& t : *it) take(t);
    } else {
      take(*it);
    }
    return types;
  }

  // A schema that constrains nothing: true, or an object of annotations only.
  static bool trivial(const json& s) {
    if (s.is_boolean()) return s.get<bool>();
    if (!s.is_object()) return false;
    for (const auto& [key, v] : s.items()) {
      if (annotations().count(key) == 0) return false;
    }
    return true;
  }

  std::string combination(const json& s, const std::string& kw, const std::string& hint,
                          const std::string& path, int depth) {
    const json& list = s[kw];
    const std::string at = child(path, kw);
    if (!list.is_array() || list.empty()) error(at, "must be a non-empty array of schemas");
    if (kw == "allOf") {
      // Only the trivial case: one constraining schema, the rest annotations.
      std::vector<size_t> real;
      for (size_t i = 0; i < list.size(); ++i) {
        if (!trivial(list[i])) real.push_back(i);
      }
      if (real.empty()) return use("value");
      if (real.size() > 1) {
        error(at, "an allOf of more than one constraining schema is not supported");
      }
      return visit(list[real[0]], hint, child(at, std::to_string(real[0])), depth + 1);
    }
    // anyOf, and oneOf as anyOf: a value that two branches accept is let through.
    std::vector<std::string> alts;
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      std::string one =
          visit(list[i], hint_of(hint, std::to_string(i)), child(at, std::to_string(i)), depth + 1);
      if (seen.insert(one).second) alts.push_back(std::move(one));
    }
    return alternatives(hint, alts);
  }

  // --- $ref ----------------------------------------------------------------------------------

  // The schema a "#..." reference names (a JSON pointer, percent-decoded as in a URI fragment).
  const json& resolve(const std::string& ref, const std::string& at) const {
    std::string pointer;
    for (size_t i = 1; i < ref.size(); ++i) {
      const auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
      };
      if (ref[i] == '%' && i + 2 < ref.size() && hex(ref[i + 1]) >= 0 && hex(ref[i + 2]) >= 0) {
        pointer += static_cast<char>(hex(ref[i + 1]) * 16 + hex(ref[i + 2]));
        i += 2;
      } else {
        pointer += ref[i];
      }
    }
    const json* node = &root_;
    for (size_t i = 1; i <= pointer.size() && !pointer.empty();) {
      const size_t j = std::min(pointer.find('/', i), pointer.size());
      std::string part;
      for (size_t k = i; k < j; ++k) {
        if (pointer[k] == '~' && k + 1 < j && (pointer[k + 1] == '0' || pointer[k + 1] == '1')) {
          part += pointer[++k] == '0' ? '~' : '/';
        } else {
          part += pointer[k];
        }
      }
      if (node->is_object() && node->contains(part)) {
        node = &(*node)[part];
      } else if (node->is_array() && !part.empty() &&
                 part.find_first_not_of("0123456789") == std::string::npos && part.size() < 10 &&
                 std::stoul(part) < node->size()) {
        node = &(*node)[std::stoul(part)];
      } else {
        error(at, str_cat("'", ref, "' points to nothing in this document"));
      }
      i = j + 1;
    }
    return *node;
  }

  std::string ref(const json& s, const std::string& path, int depth) {
    const std::string at = child(path, "$ref");
    if (!s["$ref"].is_string()) error(at, "must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') {
      error(at, str_cat("'", ref,
                        "' is outside this document (only references such as "
                        "#/$defs/name are supported)"));
    }
    if (ref.size() > 1 && ref[1] != '/') {
      error(at, str_cat("'", ref, "' is an anchor (only JSON pointers such as #/$defs/name)"));
    }
    // Memoized by the schema it names, however the reference spells it: each is visited once.
    const json& target = resolve(ref, at);
    if (auto it = refs_.find(&target); it != refs_.end()) {
      if (head_.count(&target) != 0) {
        error(at, str_cat("'", ref,
                          "' refers to itself before any text (left recursion, which a grammar "
                          "cannot match)"));
      }
      return it->second;
    }
    const size_t slash = ref.rfind('/');
    const std::string name = fresh(slash == std::string::npos ? "ref" : ref.substr(slash + 1));
    refs_[&target] = name;  // before visiting: the definition may refer to itself
    ref_names_.insert(name);
    head_.insert(&target);
    const size_t start = order_.size();
    const std::string body = visit(target, name, ref.substr(1), depth + 1);
    head_.erase(&target);
    if (order_.size() > start && order_.back() == body && ref_names_.count(body) == 0 &&
        primitives().count(body) == 0) {
      // The target's own rule, made just now and not referred to yet: it takes the reference's
      // name (rather than `name ::= body`).
      const std::string rhs = rules_[body].substr(body.size() + 5);
      rules_.erase(body);
      rules_[name] = name + " ::= " + rhs;
      order_.back() = name;
      by_body_[rhs] = name;
    } else {
      define(name, body);
    }
    return name;
  }

  // While the parts of an object or an array are visited: something ('{' or '[') was matched
  // before them, so a reference back to a definition in progress is not left recursion.
  class Consumed {
   public:
    explicit Consumed(Converter& c) : c_(c) { std::swap(saved_, c_.head_); }
    ~Consumed() { std::swap(saved_, c_.head_); }
    Consumed(const Consumed&) = delete;
    Consumed& operator=(const Consumed&) = delete;

   private:
    Converter& c_;
    std::set<const json*> saved_;
  };

  // --- const and enum ------------------------------------------------------------------------

  std::string enumeration(const json& s, const std::string& hint, const std::string& path) {
    const bool is_const = s.contains("const");
    const std::string kw = is_const ? "const" : "enum";
    const std::string at = child(path, kw);
    if (is_const && s.contains("enum")) error(child(path, "enum"), "is not supported beside const");
    std::vector<std::pair<const json*, std::string>> values;  // (value, its path)
    if (is_const) {
      values.emplace_back(&s["const"], at);
    } else {
      const json& list = s["enum"];
      if (!list.is_array() || list.empty()) error(at, "must be a non-empty array");
      for (size_t i = 0; i < list.size(); ++i) {
        values.emplace_back(&list[i], child(at, std::to_string(i)));
      }
    }
    const std::vector<std::string> types = types_of(s, path);
    std::vector<std::string> alts;
    std::set<std::string> seen;
    for (const auto& [v, vpath] : values) {
      bool typed = types.empty();
      for (const std::string& t : types) typed = typed || has_type(*v, t);
      if (!typed) continue;  // "type" rules it out
      std::string text = value_text(*v, vpath, 0);
      if (seen.insert(text).second) alts.push_back(std::move(text));
    }
    if (alts.empty()) error(at, "no value here has the type that \"type\" asks for");
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    return add(hint_of(hint, kw), body);
  }

  // A JSON value as a GBNF sequence: scalars as their exact JSON text, objects and arrays with
  // the usual whitespace allowed between their tokens.
  std::string value_text(const json& v, const std::string& path, int depth) {
    if (depth > kMaxDepth) error(path, str_cat("a value nested deeper than ", kMaxDepth));
    if (v.is_object() || v.is_array()) {
      use("ws");
      const bool obj = v.is_object();
      std::string out = obj ? R"("{" ws)" : R"("[" ws)";
      bool first = true;
      for (const auto& [key, x] : v.items()) {
        if (!first) out += R"( "," ws)";
        first = false;
        if (obj) out += " " + gbnf_literal(dump(json(key), path)) + R"( ws ":" ws)";
        out += " " + value_text(x, child(path, key), depth + 1) + " ws";
      }
      return out + (obj ? R"( "}")" : R"( "]")");
    }
    return gbnf_literal(dump(v, path));
  }

  // --- strings -------------------------------------------------------------------------------

  int64_t count(const json& s, const char* key, const std::string& path, int64_t fallback) const {
    const auto it = s.find(key);
    if (it == s.end()) return fallback;
    int64_t n = -1;
    if (it->is_number_unsigned() || it->is_number_integer()) {
      n = it->is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
                                         it->get<uint64_t>(), uint64_t{kMaxBound} + 1))
                                   : it->get<int64_t>();
    } else if (it->is_number_float() && has_type(*it, "integer") && it->get<double>() >= 0) {
      n = static_cast<int64_t>(std::min<double>(it->get<double>(), kMaxBound + 1));
    }
    if (n < 0 || n > kMaxBound) {
      error(child(path, key), str_cat("must be an integer from 0 to ", kMaxBound));
    }
    return n;
  }

  std::string string(const json& s, const std::string& hint, const std::string& path) {
    if (const auto it = s.find("pattern"); it != s.end()) {
      // A regular expression that matches somewhere in the string (ECMA-262, unanchored unless
      // it says ^ and $). Its language and a length bound or a format would have to be
      // intersected, which GBNF cannot say: refused rather than one of them ignored.
      const std::string at = child(path, "pattern");
      if (!it->is_string()) error(at, "must be a string");
      for (const char* k : {"minLength", "maxLength", "format"}) {
        if (s.contains(k)) error(child(path, k), "is not supported beside pattern");
      }
      std::string expr;
      try {
        expr = regex_gbnf(it->get<std::string>(), RegexText::kJsonString, RegexMatch::kSearch);
      } catch (const Error& e) {
        error(at, e.what());
      }
      return add(hint, str_cat(R"("\"" )", expr, R"( "\"")"));
    }
    if (const auto it = s.find("format"); it != s.end()) {
      if (!it->is_string()) error(child(path, "format"), "must be a string");
      const std::string f = it->get<std::string>();
      if (f == "date" || f == "time" || f == "date-time" || f == "uuid") {
        for (const char* k : {"minLength", "maxLength"}) {
          if (s.contains(k)) error(child(path, k), str_cat("is not supported beside format ", f));
        }
        return add(hint, str_cat(R"("\"" )", use(f), R"( "\"")"));
      }
      // Any other format is an annotation (JSON Schema's default): a plain string.
    }
    const int64_t lo = count(s, "minLength", path, 0);
    const int64_t hi = count(s, "maxLength", path, -1);
    if (hi >= 0 && hi < lo) error(child(path, "maxLength"), "is below minLength");
    if (lo == 0 && hi < 0) return use("string");
    if (hi == 0) return add(hint, R"("\"\"")");
    int64_t weight = 0;
    const std::string reps = repeat(lo, hi, weight);
    return add(hint, str_cat(R"("\"" )", use("char"), reps, R"( "\"")"), weight, path);
  }

  // --- numbers -------------------------------------------------------------------------------

  static bool has_bounds(const json& s) {
    return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
           s.contains("exclusiveMaximum");
  }

  // The tighter of minimum and exclusiveMinimum (lower) or of maximum and exclusiveMaximum, as
  // an integer bound: for an integer a fractional bound rounds inwards; for a number it must be
  // an integer itself (number_range_gbnf splits at integers only).
  std::optional<NumberBound> bound(const json& s, bool lower, bool integer,
                                   const std::string& path) const {
    const char* plain_key = lower ? "minimum" : "maximum";
    const char* exclusive_key = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    std::optional<NumberBound> out;
    const auto consider = [&](const char* key, const json& v, bool exclusive) {
      const std::string at = child(path, key);
      if (!v.is_number()) error(at, "must be a number");
      const double x = v.get<double>();
      constexpr double kLimit = 1e18;
      if (!(std::fabs(x) <= kLimit)) error(at, "is beyond +-1e18");
      NumberBound b;
      if (std::floor(x) == x) {
        b = {static_cast<int64_t>(x), !exclusive};
      } else if (!integer) {
        error(at, "a bound that is not an integer is not supported on a number");
      } else {
        // The nearest integer inside: both kinds of bound become inclusive.
        b = {static_cast<int64_t>(lower ? std::ceil(x) : std::floor(x)), true};
      }
      if (integer && !b.inclusive) b = {lower ? b.value + 1 : b.value - 1, true};
      const bool tighter = !out || (lower ? b.value > out->value : b.value < out->value) ||
                           (b.value == out->value && !b.inclusive);
      if (tighter) out = b;
    };
    const auto plain = s.find(plain_key);
    const auto exclusive = s.find(exclusive_key);
    // Draft 4 wrote exclusiveMinimum: true beside minimum.
    const bool draft4 = exclusive != s.end() && exclusive->is_boolean();
    if (draft4 && exclusive->get<bool>() && plain == s.end()) {
      error(child(path, exclusive_key), str_cat("is true without ", plain_key));
    }
    if (plain != s.end()) consider(plain_key, *plain, draft4 && exclusive->get<bool>());
    if (exclusive != s.end() && !draft4) consider(exclusive_key, *exclusive, true);
    return out;
  }

  std::string bounded_number(const json& s, bool integer, const std::string& hint,
                             const std::string& path) {
    const std::optional<NumberBound> lo = bound(s, true, integer, path);
    const std::optional<NumberBound> hi = bound(s, false, integer, path);
    std::string body;
    try {
      body = integer ? integer_range_gbnf(lo, hi) : number_range_gbnf(lo, hi);
    } catch (const Error& e) {
      error(path, e.what());
    }
    return add(hint, body);
  }

  // --- arrays --------------------------------------------------------------------------------

  // What a schema-valued keyword allows: a rule, "" for nothing (false); absent or true: any.
  std::string part(const json& s, const char* key, const std::string& hint, const std::string& path,
                   int depth) {
    const auto it = s.find(key);
    if (it == s.end() || trivial(*it)) return use("value");
    if (*it == json(false)) return "";
    if (!it->is_object()) error(child(path, key), "must be a schema (an object or a boolean)");
    return visit(*it, hint, child(path, key), depth + 1);
  }

  std::string array(const json& s, const std::string& hint, const std::string& path, int depth) {
    const int64_t lo = count(s, "minItems", path, 0);
    const int64_t hi = count(s, "maxItems", path, -1);
    if (hi >= 0 && hi < lo) error(child(path, "maxItems"), "is below minItems");
    // A tuple: prefixItems then items (JSON Schema 2020-12), or an array-valued items then
    // additionalItems (draft 7).
    const json* tuple = nullptr;
    const char* tuple_key = nullptr;
    const char* rest_key = "items";
    if (const auto it = s.find("prefixItems"); it != s.end()) {
      if (!it->is_array()) error(child(path, "prefixItems"), "must be an array of schemas");
      if (s.contains("items") && s["items"].is_array()) {
        error(child(path, "items"), "must be a schema when prefixItems is given");
      }
      tuple = &*it;
      tuple_key = "prefixItems";
    } else if (const auto items = s.find("items"); items != s.end() && items->is_array()) {
      tuple = &*items;
      tuple_key = "items";
      rest_key = "additionalItems";
    }
    const auto n = static_cast<int64_t>(tuple ? tuple->size() : 0);
    const auto rest_it = s.find(rest_key);
    if (n == 0 && lo == 0 && hi < 0 && (rest_it == s.end() || trivial(*rest_it))) {
      return use("array");
    }
    Consumed consumed(*this);
    use("ws");
    std::vector<std::string> fixed;
    for (int64_t i = 0; i < n; ++i) {
      const std::string at = child(child(path, tuple_key), std::to_string(i));
      fixed.push_back(visit((*tuple)[i], hint_of(hint, std::to_string(i)), at, depth + 1));
    }
    const std::string rest = part(s, rest_key, hint_of(hint, "item"), path, depth);
    // The whole tuple is asked for (JSON Schema would also allow a prefix of it).
    if (hi >= 0 && hi < n) {
      error(child(path, "maxItems"), str_cat("below the number of ", tuple_key,
                                             " is not supported (the whole tuple is required)"));
    }
    const int64_t least = std::max(lo, n);
    const int64_t most = rest.empty() ? n : hi;
    if (most >= 0 && most < least) {
      error(child(path, "minItems"), str_cat("asks for more items than ", rest_key, " allows"));
    }
    std::string body = R"("[" ws)";
    int64_t weight = 0;
    if (n > 0) {
      for (int64_t i = 0; i < n; ++i) body += str_cat(i > 0 ? R"( "," ws )" : " ", fixed[i], " ws");
      if (most != n) {
        body += str_cat(R"( ( "," ws )", rest, " ws )",
                        repeat(least - n, most < 0 ? -1 : most - n, weight));
      }
    } else if (most != 0) {
      std::string seq = rest + " ws";
      const int64_t more_lo = std::max<int64_t>(least, 1) - 1;
      const int64_t more_hi = most < 0 ? -1 : most - 1;
      if (more_hi != 0) {
        seq += str_cat(R"( ( "," ws )", rest, " ws )", repeat(more_lo, more_hi, weight));
      }
      body += least > 0 ? " " + seq : " ( " + seq + " )?";
    }
    return add(hint, body + R"( "]")", weight, path);
  }

  // --- objects -------------------------------------------------------------------------------

  // The name of an additional property: a JSON string that is none of `names`. Such a name is
  // written in one way only (key-char: no \u escapes and no "\/"), so that a listed name cannot
  // come back spelled differently; JSON's own spelling of a listed name is then its only one
  // (names that need a \u escape cannot be written at all). A trie of the listed names: at each
  // node, a character that leaves every name, a step to a child, or the closing quote where no
  // name ends.
  std::string not_names(const std::vector<std::string>& names, const std::string& hint,
                        const std::string& path) {
    struct Node {
      std::map<uint32_t, size_t> kids;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
      const std::string text = dump(json(name), path);
      const std::vector<uint32_t> cps =
          lenient_codepoints(std::string_view(text).substr(1, text.size() - 2));
      const bool spellable = std::none_of(name.begin(), name.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u == 0x7F ||
               (u < 0x20 && std::string_view("\b\f\n\r\t").find(c) == std::string_view::npos);
      });
      if (!spellable) continue;  // JSON writes it with a \u escape: no key-char sequence is it
      if (cps.size() > kMaxExcludedName) {
        error(child(path, "properties"),
              str_cat("a property name over ", kMaxExcludedName,
                      " characters is not supported beside additional properties"));
      }
      size_t at = 0;
      for (const uint32_t cp : cps) {
        auto it = trie[at].kids.find(cp);
        if (it == trie[at].kids.end()) {
          it = trie[at].kids.emplace(cp, trie.size()).first;
          trie.emplace_back();
        }
        at = it->second;
      }
      trie[at].end = true;
    }
    use("key-char");
    const std::string tail = R"( key-char* "\"")";
    // after_backslash: inside a two-character escape.
    const auto expr = [&](auto&& self, size_t node, bool after_backslash,
                          int level) -> std::string {
      std::vector<std::string> alts;
      const Node& nd = trie[node];
      if (!nd.end && !after_backslash) alts.emplace_back(R"("\"")");
      std::string seen;
      for (const auto& [cp, kid] : nd.kids) {
        seen += gbnf_char(cp);
        std::string sub = self(self, kid, !after_backslash && cp == '\\', level + 1);
        // Name a rule every 32 levels: the grammar compiler limits how deep groups nest.
        if ((level + 1) % 32 == 0) sub = add(hint_of(hint, "key"), sub);
        alts.push_back(str_cat("\"", gbnf_char(cp), "\" ", sub));
      }
      if (!after_backslash) {
        alts.push_back(str_cat(R"([^"\\\x7F\x00-\x1F)", seen, "]", tail));
        if (nd.kids.count('\\') == 0) alts.push_back(str_cat(R"("\\" ["\\bfnrt])", tail));
      } else {
        std::string simple;
        for (const char c : std::string_view("\"\\bfnrt")) {
          if (nd.kids.count(static_cast<unsigned char>(c)) == 0) simple += gbnf_char(c);
        }
        if (!simple.empty()) alts.push_back(str_cat("[", simple, "]", tail));
      }
      std::string out;
      for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
      return alts.size() == 1 ? out : "( " + out + " )";
    };
    return str_cat(R"("\"" )", expr(expr, 0, false, 0));
  }

  std::string object(const json& s, const std::string& hint, const std::string& path, int depth) {
    const auto props = s.find("properties");
    if (props != s.end() && !props->is_object()) {
      error(child(path, "properties"), "must be an object of schemas");
    }
    std::vector<std::string> required;  // in the order given, without repeats
    std::set<std::string> required_set;
    if (const auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) error(child(path, "required"), "must be an array of strings");
      for (const json& r : *it) {
        if (!r.is_string()) error(child(path, "required"), "must be an array of strings");
        if (required_set.insert(r.get<std::string>()).second)
          required.push_back(r.get<std::string>());
      }
    }
    // additionalProperties: false by default when properties are listed (OpenAI's strict mode
    // and llama.cpp), true otherwise.
    const auto extra_it = s.find("additionalProperties");
    const bool extras = extra_it == s.end() ? props == s.end() : *extra_it != json(false);
    if (props == s.end() && required.empty() && extras &&
        (extra_it == s.end() || trivial(*extra_it))) {
      return use("object");
    }
    Consumed consumed(*this);
    use("ws");
    struct Member {
      std::string key;
      std::string value;  // a rule
      bool required;
    };
    std::vector<Member> members;
    std::set<std::string> listed;
    if (props != s.end()) {
      const std::string at = child(path, "properties");
      for (const auto& [key, sub] : props->items()) {
        if (!listed.insert(key).second) continue;  // a repeated key: its first schema counts
        members.push_back({key, visit(sub, hint_of(hint, key), child(at, key), depth + 1),
                           required_set.count(key) != 0});
      }
    }
    const std::string extra =
        extras ? part(s, "additionalProperties", hint_of(hint, "extra"), path, depth) : "";
    // A required name that is not among the properties: an additional property that must be
    // there (after the listed ones), or an error when there may be none.
    for (const std::string& name : required) {
      if (listed.count(name) != 0) continue;
      if (!extras) {
        error(child(path, "required"),
              str_cat("'", name,
                      "' is required but is not among the properties, and additionalProperties "
                      "is false"));
      }
      members.push_back({name, extra, true});
    }
    // Additional properties, under any name but the members' ones.
    std::string kv;
    if (extras) {
      std::vector<std::string> names;
      for (const Member& m : members) names.push_back(m.key);
      const std::string key = names.empty()
                                  ? use("string")
                                  : add(hint_of(hint, "extra-key"), not_names(names, hint, path));
      kv = add(hint_of(hint, "extra-kv"), str_cat(key, R"( ws ":" ws )", extra));
    }
    // Members in order, each optional one may be left out; extras after them. Going backwards:
    // `rest` matches what may follow once something was written (from member k on: each starts
    // with a comma), `first` what may follow the '{' (from member k on).
    std::string rest = kv.empty() ? "" : str_cat(R"(( "," ws )", kv, " ws )*");
    std::string first = kv.empty() ? "" : str_cat("( ", kv, " ws ", rest, " )?");
    for (size_t k = members.size(); k-- > 0;) {
      const Member& m = members[k];
      const std::string member =
          add(hint_of(hint, m.key + "-kv"),
              str_cat(gbnf_literal(dump(json(m.key), path)), R"( ws ":" ws )", m.value)) +
          " ws";
      const std::string tail = rest.empty() ? "" : " " + rest;
      std::string f;
      if (m.required) {
        f = member + tail;
      } else if (first.empty()) {
        f = str_cat("( ", member, tail, " )?");
      } else {
        f = str_cat(member, tail, " | ", first);
      }
      first = add(hint_of(hint, "from-" + m.key), f);
      if (k > 0) {
        rest = add(hint_of(hint, "then-" + m.key),
                   m.required ? str_cat(R"("," ws )", member, tail)
                              : str_cat(R"(( "," ws )", member, " )?", tail));
      }
    }
    return add(hint, str_cat(R"("{" ws )", first.empty() ? "" : first + " ", R"("}")"));
  }

  const json& root_;
  std::map<std::string, std::string> rules_;  // name -> its whole line
  std::vector<std::string> order_;
  std::set<std::string> reserved_;
  std::map<std::string, int> suffix_;  // per name base: the last numeric suffix tried
  std::map<std::string, std::string> by_body_;
  std::map<const json*, std::string> refs_;  // the schema a $ref names -> its rule
  std::set<std::string> ref_names_;          // the rules of references
  std::set<const json*> head_;  // references being defined, reached without matching any text
  size_t bytes_ = 0;
  int64_t repetitions_ = 0;
};

}  // namespace

std::string json_object_gbnf() { return json_schema_gbnf(json{{"type", "object"}}); }

std::string json_schema_gbnf(const nlohmann::ordered_json& schema) {
  return Converter(schema).run();
}

}  // namespace specdec
