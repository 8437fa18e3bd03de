// JSON Schema -> GBNF. Every schema becomes one rule whose text is a JSON value without leading
// or trailing whitespace; objects and arrays put the (bounded) whitespace between their parts.
// Shared pieces (string, number, any value, ...) are rules added on first use.
#include "grammar/json_schema.h"

#include <map>
#include <set>
#include <vector>

#include "common/error.h"

namespace specdec {

namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;
constexpr size_t kMaxRules = 20000;
constexpr int64_t kMaxBound = 10000;

// Whitespace between tokens, bounded as in llama.cpp so that a model cannot pad forever.
constexpr const char* kWs = R"(ws ::= | " " | "\n" [ \t]{0,20})";

const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> rules = {
      {"ws", kWs},
      {"value", "value ::= object | array | string | number | boolean | null"},
      {"object",
       R"(object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}")"},
      {"array", R"(array ::= "[" ws ( value ws ( "," ws value ws )* )? "]")"},
      {"char", R"(char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))"},
      {"string", R"(string ::= "\"" char* "\"")"},
      {"integer", R"(integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} ))"},
      {"number",
       R"(number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)"},
      {"boolean", R"(boolean ::= "true" | "false")"},
      {"null", R"(null ::= "null")"},
      {"date",
       R"(date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
      {"time",
       R"(time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"hex", R"(hex ::= [0-9a-fA-F])"},
  };
  return rules;
}

// What each primitive rule uses.
const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> deps = {
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"ws", "string", "value"}},
      {"array", {"ws", "value"}},
      {"string", {"char"}},
  };
  return deps;
}

// A GBNF literal matching `text` exactly.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string bounds(int64_t lo, int64_t hi) {  // hi < 0: unbounded
  if (hi < 0) return str_cat("{", lo, ",}");
  if (lo == hi) return str_cat("{", lo, "}");
  return str_cat("{", lo, ",", hi, "}");
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run() {
    const std::string top = visit(root_, "root-value", "", 0);
    std::string out = "root ::= " + top + "\n";
    for (const std::string& name : order_) out += rules_[name] + "\n";
    return out;
  }

 private:
  [[noreturn]] void error(const std::string& path, const std::string& what) const {
    fail("JSON Schema ", path.empty() ? std::string("(root)") : path, ": ", what);
  }

  std::string use(const std::string& name) {
    if (rules_.count(name) == 0) {
      rules_[name] = primitives().at(name);
      order_.push_back(name);
      if (auto it = primitive_deps().find(name); it != primitive_deps().end()) {
        for (const std::string& d : it->second) use(d);
      }
    }
    return name;
  }

  // A rule named after `hint` (made unique) with this body; identical bodies share one rule.
  std::string add(const std::string& hint, const std::string& body) {
    if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = fresh(hint);
    define(name, body);
    by_body_[body] = name;
    return name;
  }
  std::string fresh(const std::string& hint) {
    std::string base;
    for (const char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      base += ok ? c : '-';
    }
    if (base.empty() || base.size() > 40) base = base.empty() ? "r" : base.substr(0, 40);
    std::string name = "s-" + base;
    for (int i = 2; rules_.count(name) != 0 || reserved_.count(name) != 0; ++i) {
      name = str_cat("s-", base, "-", i);
    }
    reserved_.insert(name);
    return name;
  }
  void define(const std::string& name, const std::string& body) {
    if (rules_.size() >= kMaxRules) fail("JSON Schema: too large (over ", kMaxRules, " rules)");
    rules_[name] = name + " ::= " + body;
    order_.push_back(name);
  }

  const json& resolve(const std::string& ref, const std::string& path) const {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0) error(path, str_cat("$ref '", ref, "' is not in this document"));
    const json* at = &root_;
    size_t i = 2;
    while (i <= ref.size()) {
      const size_t j = std::min(ref.find('/', i), ref.size());
      std::string part;  // JSON pointer escapes: ~1 is '/', ~0 is '~'
      for (size_t k = i; k < j; ++k) {
        if (ref[k] == '~' && k + 1 < j && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
          part += ref[++k] == '1' ? '/' : '~';
        } else {
          part += ref[k];
        }
      }
      if (!at->is_object() || !at->contains(part)) {
        error(path, str_cat("$ref '", ref, "' points nowhere"));
      }
      at = &(*at)[part];
      i = j + 1;
    }
    return *at;
  }

  std::string visit(const json& s, const std::string& hint, const std::string& path, int depth) {
    if (depth > kMaxDepth) error(path, str_cat("nested deeper than ", kMaxDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(path, "the schema false allows nothing");
      return use("value");
    }
    if (!s.is_object()) error(path, "a schema must be an object or a boolean");
    static const std::set<std::string> kKnown = {
        "type",        "properties",  "required",   "additionalProperties",
        "items",       "prefixItems", "minItems",   "maxItems",
        "enum",        "const",       "anyOf",      "oneOf",
        "allOf",       "$ref",        "$defs",      "definitions",
        "minLength",   "maxLength",   "format",     "title",
        "description", "default",     "examples",   "$schema",
        "$id",         "$comment",    "deprecated", "readOnly",
        "writeOnly"};
    for (const auto& [key, v] : s.items()) {
      if (kKnown.count(key) == 0) error(path + "/" + key, "unsupported keyword");
    }
    if (const auto it = s.find("$ref"); it != s.end()) {
      if (!it->is_string()) error(path + "/$ref", "must be a string");
      const std::string ref = it->get<std::string>();
      for (const char* k : {"type", "properties", "items", "enum", "const", "anyOf", "oneOf",
                            "allOf", "minLength", "maxLength", "minItems", "maxItems"}) {
        if (s.contains(k)) error(path + "/" + k, "is not supported beside $ref");
      }
      if (auto r = refs_.find(ref); r != refs_.end()) return r->second;
      const std::string name = fresh(ref.substr(ref.rfind('/') + 1));
      refs_[ref] = name;  // before visiting: the definition may refer to itself
      define(name, visit(resolve(ref, path + "/$ref"), name, ref.substr(1), depth + 1));
      return name;
    }
    if (const auto it = s.find("const"); it != s.end()) return add(hint, literal(it->dump()));
    if (const auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) error(path + "/enum", "must be a non-empty array");
      std::string body;
      for (const json& v : *it) body += (body.empty() ? "" : " | ") + literal(v.dump());
      return add(hint, body);
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (const auto it = s.find(k); it != s.end()) {
        if (!it->is_array() || it->empty()) error(path + "/" + k, "must be a non-empty array");
        std::string body;
        for (size_t i = 0; i < it->size(); ++i) {
          body += (i > 0 ? " | " : "") +
                  visit((*it)[i], str_cat(hint, "-", i), str_cat(path, "/", k, "/", i), depth + 1);
        }
        return add(hint, body);
      }
    }
    if (const auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1) {
        error(path + "/allOf", "only an allOf of one schema is supported");
      }
      return visit((*it)[0], hint, path + "/allOf/0", depth + 1);
    }
    std::vector<std::string> types;
    if (const auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const json& t : *it) {
          if (!t.is_string()) error(path + "/type", "must be a string or a list of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        error(path + "/type", "must be a string or a list of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
      types = {"string"};
    } else {
      return use("value");  // no constraint
    }
    std::string body;
    for (const std::string& t : types) {
      std::string one;
      if (t == "object") {
        one = object(s, hint, path, depth);
      } else if (t == "array") {
        one = array(s, hint, path, depth);
      } else if (t == "string") {
        one = string(s, hint, path);
      } else if (t == "number" || t == "integer" || t == "boolean" || t == "null") {
        one = use(t);
      } else {
        error(path + "/type", str_cat("unknown type '", t, "'"));
      }
      body += (body.empty() ? "" : " | ") + one;
    }
    return types.size() == 1 ? body : add(hint, body);
  }

  int64_t count(const json& s, const char* key, const std::string& path, int64_t fallback) const {
    const auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxBound) {
      error(path + "/" + key, str_cat("must be an integer from 0 to ", kMaxBound));
    }
    return it->get<int64_t>();
  }

  std::string string(const json& s, const std::string& hint, const std::string& path) {
    if (const auto it = s.find("format"); it != s.end() && it->is_string()) {
      const std::string f = it->get<std::string>();
      if (f == "date") return add(hint, "\"\\\"\" " + use("date") + " \"\\\"\"");
      if (f == "time") return add(hint, "\"\\\"\" " + use("time") + " \"\\\"\"");
      if (f == "date-time") {
        return add(hint, "\"\\\"\" " + use("date") + " \"T\" " + use("time") + " \"\\\"\"");
      }
      if (f == "uuid") {
        use("hex");
        return add(hint, R"("\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\"")");
      }
      // Any other format is an annotation (JSON Schema's default): a plain string.
    }
    const int64_t lo = count(s, "minLength", path, 0);
    const int64_t hi = count(s, "maxLength", path, -1);
    if (hi >= 0 && hi < lo) error(path + "/maxLength", "is below minLength");
    if (lo == 0 && hi < 0) return use("string");
    use("char");
    return add(hint, "\"\\\"\" char" + bounds(lo, hi) + " \"\\\"\"");
  }

  std::string array(const json& s, const std::string& hint, const std::string& path, int depth) {
    const int64_t lo = count(s, "minItems", path, 0);
    const int64_t hi = count(s, "maxItems", path, -1);
    if (hi >= 0 && hi < lo) error(path + "/maxItems", "is below minItems");
    use("ws");
    if (const auto pre = s.find("prefixItems"); pre != s.end()) {
      const auto items = s.find("items");
      if (!pre->is_array() || (items != s.end() && *items != json(false)) ||
          s.contains("minItems") || s.contains("maxItems")) {
        error(path + "/prefixItems",
              "only a tuple (an array of schemas, items false) is supported");
      }
      std::string body = "\"[\" ws";
      for (size_t i = 0; i < pre->size(); ++i) {
        body += str_cat(
            i > 0 ? " \",\" ws " : " ",
            visit((*pre)[i], str_cat(hint, "-", i), str_cat(path, "/prefixItems/", i), depth + 1),
            " ws");
      }
      return add(hint, body + " \"]\"");
    }
    std::string item = use("value");
    if (const auto it = s.find("items"); it != s.end()) {
      if (*it == json(false)) {
        if (lo > 0) error(path + "/minItems", "items false allows no items");
        return add(hint, "\"[\" ws \"]\"");
      }
      item = visit(*it, hint + "-item", path + "/items", depth + 1);
    }
    const std::string more =
        str_cat("( \",\" ws ", item, " ws )", bounds(lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1));
    const std::string items = str_cat(item, " ws ", more);
    if (hi == 0) return add(hint, "\"[\" ws \"]\"");
    return add(hint, str_cat("\"[\" ws ", lo > 0 ? items : "( " + items + " )?", " \"]\""));
  }

  std::string object(const json& s, const std::string& hint, const std::string& path, int depth) {
    use("ws");
    std::vector<std::pair<std::string, std::string>> members;  // (key, "key" ws ":" ws value)
    std::set<std::string> required;
    if (const auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) error(path + "/required", "must be an array of strings");
      for (const json& r : *it) {
        if (!r.is_string()) error(path + "/required", "must be an array of strings");
        required.insert(r.get<std::string>());
      }
    }
    const auto props = s.find("properties");
    if (props != s.end()) {
      if (!props->is_object()) error(path + "/properties", "must be an object");
      for (const auto& [key, sub] : props->items()) {
        const std::string value =
            visit(sub, hint + "-" + key, path + "/properties/" + key, depth + 1);
        members.emplace_back(key, str_cat(literal(json(key).dump()), " ws \":\" ws ", value));
      }
    }
    // additionalProperties: false by default when properties are listed (OpenAI's strict mode
    // and llama.cpp), true otherwise.
    std::string extra;
    const auto add_props = s.find("additionalProperties");
    const bool listed = props != s.end();
    if (add_props == s.end() ? !listed : *add_props != json(false)) {
      const std::string value =
          add_props == s.end() || add_props->is_boolean()
              ? use("value")
              : visit(*add_props, hint + "-extra", path + "/additionalProperties", depth + 1);
      extra = add(hint + "-kv", str_cat(use("string"), " ws \":\" ws ", value));
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& m : members) found = found || m.first == r;
      if (!found) {
        error(path + "/required", str_cat("'", r, "' is required but not among the properties"));
      }
    }
    // rest_i: what may follow once some member was written, from property i on; first_i: the
    // first member written is property i or a later one.
    const size_t n = members.size();
    std::string rest = extra.empty() ? "" : str_cat("( \",\" ws ", extra, " ws )*");
    std::string first = extra.empty() ? "" : str_cat("( ", extra, " ws ", rest, " )?");
    for (size_t k = n; k-- > 0;) {
      const auto& [key, member] = members[k];
      const bool req = required.count(key) != 0;
      const std::string after = rest.empty() ? "" : " " + rest;
      const std::string here = str_cat(member, " ws", after);
      const std::string name_rest = add(hint + "-rest", str_cat("\",\" ws ", here));
      const std::string new_rest =
          req ? name_rest : str_cat("( ", name_rest, " | ", rest.empty() ? "\"\"" : rest, " )");
      std::string new_first = req ? here : str_cat(here, " | ", first.empty() ? "\"\"" : first);
      first = add(hint + "-first", new_first);
      rest = new_rest;
    }
    return add(hint, str_cat("\"{\" ws ", first.empty() ? "" : first + " ", "\"}\""));
  }

  const json& root_;
  std::map<std::string, std::string> rules_;  // name -> its whole line
  std::vector<std::string> order_;
  std::set<std::string> reserved_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_object_gbnf() { return json_schema_gbnf(json{{"type", "object"}}); }

std::string json_schema_gbnf(const nlohmann::json& schema) { return Converter(schema).run(); }

}  // namespace specdec
