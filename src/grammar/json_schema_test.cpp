#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "grammar/grammar.h"

namespace specdec {
namespace {

using json = nlohmann::ordered_json;

std::string gbnf_of(const std::string& schema) { return json_schema_gbnf(json::parse(schema)); }

std::string error_of(const std::string& schema) {
  try {
    json_schema_gbnf(json::parse(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The rule names a grammar defines, in order.
std::vector<std::string> rule_names(const std::string& gbnf) {
  std::vector<std::string> names;
  std::istringstream in(gbnf);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(" ::= ");
    EXPECT_NE(at, std::string::npos) << line;
    if (at != std::string::npos) names.push_back(line.substr(0, at));
  }
  return names;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------------------------------------
// (a) The GBNF text and the errors: no grammar engine involved.

TEST(JsonSchemaText, AnyObjectIsTheSharedObjectRuleWithBoundedWhitespace) {
  const std::string g = json_object_gbnf();
  EXPECT_EQ(g.rfind("root ::= object\n", 0), 0u) << g;
  EXPECT_NE(g.find("ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"), std::string::npos) << g;
  EXPECT_EQ(gbnf_of("{}").rfind("root ::= value\n", 0), 0u);
  EXPECT_EQ(gbnf_of("true").rfind("root ::= value\n", 0), 0u);
  EXPECT_EQ(gbnf_of(R"({"title": "x", "description": "y"})").rfind("root ::= value\n", 0), 0u);
}

TEST(JsonSchemaText, RuleNamesAreSanitizedUniqueAndNeverShadowPrimitives) {
  const std::string g = gbnf_of(R"({"type": "object", "properties": {
      "a b": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
      "a-b": {"type": "array", "items": {"type": "boolean"}, "minItems": 1},
      "a/b": {"type": "array", "items": {"type": "null"}, "minItems": 1},
      "string": {"type": "string", "minLength": 1}, "root": {"type": "string", "maxLength": 2},
      "value": {"enum": [1, 2]}, "ünï": {"const": 3}, "": {"const": 4},
      "-": {"const": 5}, "s": {"type": "string"}, "very long name that goes on and on and on and on and on": {"const": 6}},
      "required": ["a b"]})");
  const std::vector<std::string> names = rule_names(g);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "root");
  const std::regex ok("[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*");
  std::set<std::string> seen;
  for (const std::string& n : names) {
    EXPECT_TRUE(std::regex_match(n, ok)) << n;
    EXPECT_LE(n.size(), 48u) << n;
    EXPECT_TRUE(seen.insert(n).second) << "defined twice: " << n;
  }
  EXPECT_EQ(occurrences(g, "\nroot ::="), 0u);
  // The primitive rules keep their meaning: "string" is still any string.
  EXPECT_NE(g.find("\nstring ::= \"\\\"\" char* \"\\\"\"\n"), std::string::npos) << g;
}

TEST(JsonSchemaText, PropertyNamesAreJsonStringLiterals) {
  const std::string g =
      gbnf_of(R"({"properties": {"a\"b\\c": {"type": "null"}, "tab\there": {"type": "null"},
                 "é": {"type": "null"}}, "required": ["a\"b\\c", "tab\there", "é"]})");
  // The JSON text "a\"b\\c" as a GBNF literal: every quote and backslash escaped once more.
  EXPECT_NE(g.find(R"("\"a\\\"b\\\\c\"")"), std::string::npos) << g;
  EXPECT_NE(g.find(R"("\"tab\\there\"")"), std::string::npos) << g;
  EXPECT_NE(g.find("\"\\\"é\\\"\""), std::string::npos) << g;
}

TEST(JsonSchemaText, IdenticalRulesAreSharedAndBoundsAreEmitted) {
  const std::string g = gbnf_of(R"({"properties": {
      "a": {"type": "string", "minLength": 2, "maxLength": 5},
      "b": {"type": "string", "minLength": 2, "maxLength": 5},
      "c": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 5},
      "d": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 5}}})");
  EXPECT_EQ(occurrences(g, "char{2,5}"), 1u) << g;
  EXPECT_EQ(occurrences(g, "{1,4}"), 1u) << g;  // the items after the first
  EXPECT_EQ(occurrences(g, "a-kv ::= \"\\\"a\\\"\" ws \":\" ws a\n"), 1u) << g;
  EXPECT_EQ(occurrences(g, "b-kv ::= \"\\\"b\\\"\" ws \":\" ws a\n"), 1u) << g;  // a's rule
}

TEST(JsonSchemaText, EnumAndConstAreExactJsonText) {
  const std::string g = gbnf_of(R"({"enum": ["a\"q", 1.5, null, true, -7, [1, "x"], {}]})");
  for (const char* lit : {R"("\"a\\\"q\"")", R"("1.5")", R"("null")", R"("true")", R"("-7")",
                          R"("[" ws "1" ws "," ws "\"x\"" ws "]")", R"("{" ws "}")"}) {
    EXPECT_NE(g.find(lit), std::string::npos) << lit << "\n" << g;
  }
}

TEST(JsonSchemaText, RecursionIsARuleNamingItselfAndRefsAreNotExpandedTwice) {
  const std::string g = gbnf_of(R"({"$ref": "#/$defs/node", "$defs": {"node": {
      "type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}})");
  EXPECT_EQ(g.rfind("root ::= node\n", 0), 0u) << g;
  EXPECT_NE(g.find("\nnode ::= \"{\" ws"), std::string::npos) << g;  // not an alias
  EXPECT_NE(g.find("ws \":\" ws node\n"), std::string::npos) << g;
  // However a reference spells the pointer, one rule per schema it names.
  EXPECT_EQ(gbnf_of(R"({"$defs": {"big": {"type": "array", "items": {"type": "null"},
                                          "minItems": 3}},
                        "anyOf": [{"$ref": "#/$defs/big"}, {"$ref": "#/%24defs/big"},
                                  {"$ref": "#/$defs/%62ig"}]})")
                .rfind("root ::= big\n", 0),
            0u);
  // Each definition refers to the previous one twice: expanding references would double the
  // output at every level (2^25); one rule per definition keeps it linear.
  json defs = json::object();
  defs["d0"] = {{"type", "integer"}};
  for (int i = 1; i < 26; ++i) {
    const std::string prev = str_cat("#/$defs/d", i - 1);
    defs[str_cat("d", i)] = {{"type", "object"},
                             {"properties", {{"x", {{"$ref", prev}}}, {"y", {{"$ref", prev}}}}},
                             {"required", {"x", "y"}}};
  }
  const json schema = {{"$defs", defs}, {"$ref", "#/$defs/d25"}};
  const auto start = std::chrono::steady_clock::now();
  const std::string big = json_schema_gbnf(schema);
  EXPECT_LT(big.size(), 20000u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(JsonSchemaText, UnsupportedKeywordsAreErrorsNamingTheirPointer) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "string", "pattern": "a+", "maxLength": 3})",
       "JSON Schema /maxLength: is not supported beside pattern"},
      {R"({"properties": {"id": {"pattern": "(a)\\1"}}})",
       "JSON Schema /properties/id/pattern: regex at character 3: backreferences"},
      {R"({"pattern": 7})", "JSON Schema /pattern: must be a string"},
      {R"({"properties": {"age": {"type": "integer", "multipleOf": 5}}})",
       "/properties/age/multipleOf: unsupported keyword"},
      {R"({"type": "number", "minimum": 0.5})",
       "/minimum: a bound that is not an integer is not supported on a number"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})",
       "JSON Schema (root): no integer lies between the bounds"},
      {R"({"type": "integer", "maximum": 1e19})", "/maximum: is beyond +-1e18"},
      {R"({"type": "integer", "exclusiveMinimum": true})",
       "/exclusiveMinimum: is true without minimum"},
      {R"({"type": "integer", "minimum": "3"})", "/minimum: must be a number"},
      {R"({"properties": {"a/b~c": {"multipleOf": 2}}})",
       "/properties/a~1b~0c/multipleOf: unsupported keyword"},
      {R"({"type": "array", "items": {"uniqueItems": true}})", "/items/uniqueItems: unsupported"},
      {R"({"if": {}, "then": {}})", "/if: unsupported keyword"},
      {R"({"not": {"type": "null"}})", "/not: unsupported keyword"},
      {R"({"type": "object", "patternProperties": {}})", "/patternProperties: unsupported"},
      {R"({"$defs": {"a": {"not": 3}}, "$ref": "#/$defs/a"})", "/$defs/a/not: unsupported keyword"},
      {R"({"anyOf": [{"type": "null"}, {"maxProperties": 3}]})",
       "/anyOf/1/maxProperties: unsupported keyword"},
  };
  for (const auto& [schema, want] : cases) {
    EXPECT_NE(error_of(schema).find(want), std::string::npos)
        << schema << " -> " << error_of(schema);
  }
}

TEST(JsonSchemaText, MalformedSchemasAreErrorsNamingTheirPointer) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"3", "(root): a schema must be an object or a boolean"},
      {R"({"items": [1]})", "/items/0: a schema must be an object"},
      {"false", "(root): the schema false allows nothing"},
      {R"({"properties": {"a": false}})", "/properties/a: the schema false allows nothing"},
      {R"({"type": "strin"})", "/type: unknown type 'strin'"},
      {R"({"type": ["string", 3]})", "/type: must be a type name"},
      {R"({"type": []})", "/type: must not be an empty list"},
      {R"({"properties": []})", "/properties: must be an object"},
      {R"({"required": "a"})", "/required: must be an array of strings"},
      {R"({"properties": {"a": {}}, "required": ["b"]})",
       "/required: 'b' is required but is not among the properties"},
      {R"({"properties": {"a": {}}, "additionalProperties": 3})",
       "/additionalProperties: must be a schema"},
      {R"({"$ref": "#/$defs/missing"})", "/$ref: '#/$defs/missing' points to nothing"},
      {R"({"$ref": "http://x/y.json"})", "/$ref: 'http://x/y.json' is outside this document"},
      {R"({"$ref": "#anchor"})", "is an anchor"},
      {R"({"$ref": 1})", "/$ref: must be a string"},
      {R"({"$ref": "#"})", "/$ref: '#' refers to itself before any text"},
      {R"({"$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/b"}]},
                     "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})",
       "/$defs/b/allOf/0/$ref: '#/$defs/a' refers to itself before any text"},
      {R"({"$ref": "#/$defs/a", "type": "object"})", "/type: is not supported beside $ref"},
      {R"({"properties": {"a": {}}, "anyOf": [{}]})", "/properties: is not supported beside anyOf"},
      {R"({"enum": [1], "minLength": 2})", "/minLength: is not supported beside enum"},
      {R"({"const": 1, "enum": [1]})", "/enum: is not supported beside const"},
      {R"({"allOf": [{"type": "null"}, {"type": "string"}]})",
       "/allOf: an allOf of more than one constraining schema"},
      {R"({"anyOf": []})", "/anyOf: must be a non-empty array"},
      {R"({"enum": []})", "/enum: must be a non-empty array"},
      {R"({"type": "string", "enum": [1, 2]})", "/enum: no value here has the type"},
      {R"({"type": "array", "maxItems": 100000})", "/maxItems: must be an integer from 0 to 10000"},
      {R"({"type": "array", "minItems": -1})", "/minItems: must be an integer"},
      {R"({"type": "string", "maxLength": 1.5})", "/maxLength: must be an integer"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "/maxLength: is below minLength"},
      {R"({"type": "string", "format": 3})", "/format: must be a string"},
      {R"({"type": "string", "format": "date", "maxLength": 5})",
       "/maxLength: is not supported beside format date"},
      {R"({"prefixItems": [{}, {}], "maxItems": 1})", "/maxItems: below the number of prefixItems"},
      {R"({"prefixItems": [{}], "items": false, "minItems": 2})",
       "/minItems: asks for more items than items allows"},
      {R"({"type": "array", "items": false, "minItems": 1})", "/minItems: asks for more items"},
  };
  for (const auto& [schema, want] : cases) {
    EXPECT_NE(error_of(schema).find(want), std::string::npos)
        << schema << " -> " << error_of(schema);
  }
}

TEST(JsonSchemaText, HostileSchemasAreBounded) {
  std::string deep = "{}";
  for (int i = 0; i < 70; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_NE(error_of(deep).find("nested deeper than 64"), std::string::npos);
  std::string deep_value = "1";
  for (int i = 0; i < 70; ++i) deep_value = "[" + deep_value + "]";
  EXPECT_NE(error_of(R"({"const": )" + deep_value + "}").find("nested deeper than 64"),
            std::string::npos);
  // Bounds add up: each distinct one is expanded by the grammar compiler.
  json props = json::object();
  for (int i = 0; i < 200; ++i) {
    props[str_cat("p", i)] = {{"type", "string"}, {"maxLength", 10000 - i}};
  }
  EXPECT_NE(error_of(json{{"properties", props}}.dump()).find("too large"), std::string::npos);
  // ... but a bound shared by identical rules counts once.
  for (auto& [key, sub] : props.items()) sub["maxLength"] = 10000;
  EXPECT_EQ(error_of(json{{"properties", props}}.dump()), "(no error)");
  // Thousands of names that all sanitize to the same rule name: unique names in linear time.
  json cjk = json::object();
  for (uint32_t i = 0; i < 3000; ++i) {
    const uint32_t cp = 0x4E00 + i;  // three UTF-8 bytes, no letter or digit of ASCII
    cjk[std::string{static_cast<char>(0xE0 | (cp >> 12)),
                    static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                    static_cast<char>(0x80 | (cp & 0x3F))}] = {{"enum", {i}}};
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of(json{{"properties", cjk}}.dump()), "(no error)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // A huge enum: over the grammar's size limit, an error rather than a grammar that fails later.
  json values = json::array();
  for (int i = 0; i < 60000; ++i) values.push_back(str_cat("value number ", i));
  EXPECT_NE(error_of(json{{"enum", values}}.dump()).find("too large"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// (b) End to end: the grammar compiled by Grammar::parse, documents matched byte by byte.

bool valid(const std::string& gbnf, std::string_view text) {
  GrammarState s(Grammar::parse(gbnf));
  return s.accept(text) && s.complete();
}

void expect_matches(const std::string& schema, const std::vector<std::string>& ok,
                    const std::vector<std::string>& bad) {
  const std::string g = gbnf_of(schema);
  ASSERT_NO_THROW(Grammar::parse(g)) << g;
  for (const std::string& t : ok) EXPECT_TRUE(valid(g, t)) << schema << "\nshould accept " << t;
  for (const std::string& t : bad) EXPECT_FALSE(valid(g, t)) << schema << "\nshould reject " << t;
}

TEST(JsonSchemaMatch, AnyJsonObject) {
  const std::string g = json_object_gbnf();
  for (const char* ok : {"{}", R"({"a": 1})", R"({"a": [1, {"b": null}], "c": "d\u00e9\n"})",
                         "{\n  \"k\": true\n}", R"({"x":-1.5e10})", "{ }", "{\n}",
                         R"({"a":{"b":{"c":[[],{}]}}})", "{\"é\": \"ü\xe2\x82\xac\"}"}) {
    EXPECT_TRUE(valid(g, ok)) << ok;
  }
  for (const char* bad : {"[]", "1", R"("s")", R"({"a": 1,})", R"({"a": 01})", R"({a: 1})",
                          R"({"a": 1} {})", R"({"a": "\q"})", " {}", "{}   ", R"({"a" 1})",
                          R"({"a": [1,]})", R"({"a": 'x'})", R"({"a": True})", "{\"a\": \"x\ny\"}",
                          R"({"a": "\u12"})", R"({"a": NaN})", R"({"a": .5})"}) {
    EXPECT_FALSE(valid(g, bad)) << bad;
  }
  // Whitespace is bounded: a model cannot pad forever.
  EXPECT_TRUE(valid(g, "{\n" + std::string(20, ' ') + "}"));
  EXPECT_FALSE(valid(g, "{\n" + std::string(21, ' ') + "}"));
  EXPECT_FALSE(valid(g, "{  }"));
}

TEST(JsonSchemaMatch, NumbersFollowJsonsGrammar) {
  expect_matches(R"({"type": "number"})",
                 {"0", "-0", "1", "-12", "1.5", "0.25", "1e10", "1E+5", "-2.5e-3", "10", "9007"},
                 {"01", "-01", "00", "1.", ".5", "1e", "1e+", "-", "+1", "1.5.2", "0x10", "1,0",
                  "Infinity", "\"1\"", "1 "});
  expect_matches(R"({"type": "integer"})", {"0", "-7", "123456789"},
                 {"1.0", "1e3", "01", "-", "1.5"});
  expect_matches(R"({"type": "boolean"})", {"true", "false"}, {"True", "1", "null"});
  expect_matches(R"({"type": "null"})", {"null"}, {"nul", "None", "\"null\""});
}

TEST(JsonSchemaMatch, StringsAndEscapes) {
  expect_matches(R"({"type": "string"})",
                 {R"("")", R"("abc")", R"("a\"b")", R"("\\\/\b\f\n\r\t")",
                  R"("\u00e9\uD83D\ude00")", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\""},
                 {R"(abc)", R"("abc)", R"("\q")", R"("\u00g0")", R"("\u12")", "\"a\tb\"",
                  "\"a\nb\"", R"("a" "b")", R"('a')",
                  // A surrogate escape only as a high-low pair.
                  R"("\uD83D")", R"("\uDE00")", R"("\ud83dx")", R"("\uDE00\uD83D")"});
  // Lengths count characters: an escape, a surrogate pair or a multi-byte character is one.
  expect_matches(R"({"type": "string", "minLength": 2, "maxLength": 3})",
                 {R"("ab")", R"("abc")", R"("a\n")", R"("\u0041\u0042\u0043")",
                  "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", R"("\uD83D\uDE00\ud83d\ude0a")"},
                 {R"("a")", R"("abcd")", R"("")", "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"",
                  R"("\ud83d\ude0a")"});
  expect_matches(R"({"maxLength": 0})", {R"("")"}, {R"("a")", "1"});
}

TEST(JsonSchemaMatch, RequiredAndOptionalPropertiesInSchemaOrder) {
  // Properties come in the schema's order (b, a, c here), optional ones may be left out.
  expect_matches(
      R"({"type": "object",
      "properties": {"b": {"type": "string"}, "a": {"type": "integer"}, "c": {"type": "boolean"}},
      "required": ["a"]})",
      {R"({"a": 1})", R"({"b": "x", "a": 1})", R"({"a": 1, "c": true})",
       R"({"b": "", "a": -3, "c": false})", "{\n  \"b\": \"x\",\n  \"a\": 2\n}",
       R"({"a":1,"c":false})"},
      {R"({})", R"({"b": "x"})", R"({"a": "1"})", R"({"a": 1, "d": 1})", R"({"a": 1.5})",
       R"({"a": 1,})", R"({, "a": 1})", R"({"a": 1, "b": "x"})", R"({"a": 1, "a": 2})",
       R"({"c": true, "a": 1})", R"({"a": 1 "c": true})", R"({"a": 1, "c": null})", R"({"A": 1})"});
  // Every property optional.
  expect_matches(R"({"properties": {"x": {"type": "null"}, "y": {"type": "null"}}})",
                 {"{}", R"({"x": null})", R"({"y": null})", R"({"x": null, "y": null})"},
                 {R"({,})", R"({"x": null,})", R"({"y": null, "x": null})", R"({"z": null})"});
  // Every property required.
  expect_matches(R"({"properties": {"x": {"type": "null"}, "y": {"type": "null"}},
                     "required": ["y", "x"]})",
                 {R"({"x": null, "y": null})"}, {"{}", R"({"x": null})", R"({"y": null})"});
}

TEST(JsonSchemaMatch, AdditionalProperties) {
  // A schema for the others; a listed name cannot come back as an "additional" one (with a
  // value its own schema forbids, or twice).
  expect_matches(
      R"({"type": "object", "properties": {"a": {"type": "null"}, "ab": {"type": "null"}},
                     "additionalProperties": {"type": "number"}})",
      {R"({"a": null, "z": 2})", R"({"z": 2, "y": 3})", "{}", R"({"ab": null})", R"({"": 1})",
       R"({"abc": 1, "b": 2})", R"({"a\"": 1})", R"({"/": 1})",
       R"({"a": null, "ab": null, "a\\": 5})"},
      {R"({"z": "2"})", R"({"a": 1})", R"({"ab": 1})", R"({"a": null, "a": 3})",
       R"({"z": 1, "a": null})",
       // An additional name has one spelling: no \u escapes, no "\/".
       R"({"\u0061": 1})", R"({"\u0061x": 1})", R"({"\/": 1})"});
  expect_matches(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                     "additionalProperties": true})",
                 {R"({"a": 1, "b": "x"})", R"({"b": [1]})", R"({"a": 1})"},
                 {R"({"a": "str"})", R"({"b": 1, "a": 1})"});
  // Names with escapes, non-ASCII text or a backslash and a 'u' are excluded in every spelling.
  expect_matches(R"({"properties": {"q\"t": {"type": "null"}, "\u00e9": {"type": "null"},
                                    "x\\y": {"type": "null"}, "\u0001": {"type": "null"},
                                    "\\u": {"type": "null"}},
                     "additionalProperties": {"type": "integer"}})",
                 {R"({"q\"t": null, "q\"": 1, "q\"tt": 2, "qt": 3})", "{\"\xc3\xa9\xc3\xa9\": 1}",
                  R"({"x\\z": 1, "x\\": 2, "x\n": 3, "\\v": 4, "\\uu": 5})", R"({"\u0001": null})"},
                 {R"({"q\"t": 1})", "{\"\xc3\xa9\": 1}", R"({"\u00e9": 1})", R"({"\u00E9": 1})",
                  R"({"x\\y": 1})", R"({"x\u005cy": 1})", R"({"\u0001": 1})", R"({"\\u": 1})",
                  R"({"\u0002": 1})"});
  expect_matches(R"({"type": "object", "additionalProperties": false})", {"{}", "{ }"},
                 {R"({"a": 1})"});
  expect_matches(R"({"type": "object"})", {R"({"a": [1]})", "{}"}, {"[]"});
  expect_matches(R"({"additionalProperties": {"type": "string", "maxLength": 1}})",
                 {R"({"a": "x", "b": ""})", "{}"}, {R"({"a": "xy"})", R"({"a": 1})"});
}

TEST(JsonSchemaMatch, RequiredNamesOutsideThePropertiesAreAdditionalOnes) {
  expect_matches(R"({"required": ["id"]})", {R"({"id": 1})", R"({"id": [], "x": 2})"},
                 {"{}", R"({"x": 2})", "5", R"({"id": 1, "id": 2})"});
  expect_matches(R"({"properties": {"a": {"type": "null"}}, "required": ["a", "b"],
                     "additionalProperties": {"type": "boolean"}})",
                 {R"({"a": null, "b": true})", R"({"a": null, "b": false, "c": true})"},
                 {R"({"a": null})", R"({"a": null, "b": 1})", R"({"b": true})"});
}

TEST(JsonSchemaMatch, Arrays) {
  expect_matches(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
                 {"[1]", "[1, 2, 3]", "[ 1,2 ]", "[\n  1,\n  2\n]"},
                 {"[]", "[1, 2, 3, 4]", "[1, \"a\"]", "[1,]", "[,1]", "[1 2]", "1", "[1.5]"});
  expect_matches(R"({"type": "array", "minItems": 2})", {"[1, \"a\"]", "[null, [], {}]"},
                 {"[]", "[1]"});
  expect_matches(R"({"maxItems": 1})", {"[]", "[{}]"}, {"[1, 2]", "{}"});
  expect_matches(R"({"type": "array", "maxItems": 0})", {"[]", "[ ]"}, {"[1]"});
  expect_matches(R"({"type": "array", "items": false})", {"[]"}, {"[1]"});
  expect_matches(R"({"type": "array", "items": {"type": "string"}, "minItems": 2,
                     "maxItems": 2})",
                 {R"(["a", "b"])"}, {R"(["a"])", R"(["a", "b", "c"])"});
  // Tuples: the whole prefix, then items (none when false).
  expect_matches(R"({"prefixItems": [{"type": "string"}, {"type": "number"}], "items": false})",
                 {R"(["a", 1])", R"([ "a" , 1 ])"}, {R"(["a"])", R"(["a", 1, 2])", R"([1, "a"])"});
  expect_matches(R"({"prefixItems": [{"type": "string"}], "items": {"type": "null"},
                     "maxItems": 3})",
                 {R"(["a"])", R"(["a", null])", R"(["a", null, null])"},
                 {R"(["a", null, null, null])", R"(["a", 1])", "[]"});
  expect_matches(R"({"prefixItems": [{"type": "string"}]})", {R"(["a"])", R"(["a", 1, {}])"},
                 {"[]", "[1]"});
  // Draft 7's tuple: items as an array, additionalItems for the rest.
  expect_matches(R"({"items": [{"type": "boolean"}, {"type": "null"}], "additionalItems": false})",
                 {"[true, null]"}, {"[true]", "[true, null, null]"});
}

TEST(JsonSchemaMatch, EnumsConstsAndUnions) {
  expect_matches(
      R"({"enum": ["red", 2, null, {"k": [1]}, "q\"uote", false]})",
      {R"("red")", "2", "null", R"({"k":[1]})", R"({ "k": [ 1 ] })", R"("q\"uote")", "false"},
      {R"("blue")", R"("Red")", "3", R"({"k":[2]})", R"({"k":[1],})", R"("red" )", "true",
       R"("q"uote")"});
  expect_matches(R"({"type": "string", "enum": ["a", 1, "b"]})", {R"("a")", R"("b")"}, {"1"});
  expect_matches(R"({"type": "integer", "enum": [1, 2.0, 2.5]})", {"1", "2.0"}, {"2.5", "2"});
  expect_matches(R"({"const": "x"})", {R"("x")"}, {R"("y")", "x"});
  expect_matches(R"({"const": {"a": [true, {"b": null}]}})",
                 {R"({"a":[true,{"b":null}]})", "{\n  \"a\": [true, { \"b\": null }]\n}"},
                 {R"({"a":[true]})", R"({"a":[true,{"b":null}],"c":1})"});
  expect_matches(R"({"anyOf": [{"type": "integer"}, {"type": "array",
                                "items": {"type": "boolean"}}]})",
                 {"7", "[true, false]", "[]"}, {"\"7\"", "[1]", "7.5"});
  expect_matches(R"({"oneOf": [{"type": "string", "maxLength": 1}, {"type": "null"}]})",
                 {R"("a")", "null"}, {R"("ab")", "1"});
  expect_matches(R"({"type": ["string", "null"]})", {"null", R"("s")"}, {"1", "[]"});
  expect_matches(R"({"type": ["number", "integer"]})", {"1", "1.5"}, {"\"1\""});
  expect_matches(R"({"title": "t", "allOf": [{"description": "d"}, {"type": "null"}]})", {"null"},
                 {"1"});
  expect_matches(R"({"allOf": [{}, true]})", {"1", "{}"}, {"x"});
}

TEST(JsonSchemaMatch, Formats) {
  expect_matches(R"({"type": "string", "format": "date"})",
                 {R"("2026-12-05")", R"("0001-01-31")", R"("2024-02-29")", R"("2026-04-30")"},
                 {R"("2026-13-05")", R"("2026-02-30")", R"("2026-04-31")", R"("2026-00-01")",
                  R"("2026-1-05")", R"("2026-12-32")", R"("2026-12-05T")"});
  expect_matches(R"({"type": "string", "format": "time"})",
                 {R"("03:04:05Z")", R"("23:59:59.5+01:00")"}, {R"("24:00:00Z")", R"("03:04:05")"});
  expect_matches(R"({"format": "date-time"})",
                 {R"("2026-12-05T03:04:05.123Z")", R"("2026-12-05t03:04:05-08:00")"},
                 {R"("2026-12-05 03:04:05Z")", R"("2026-12-05")"});
  expect_matches(
      R"({"format": "uuid"})", {R"("0a1b2c3d-0000-4000-8000-00000000ABCD")"},
      {R"("0a1b2c3d-0000-4000-8000-00000000abc")", R"("0a1b2c3d00004000800000000000abcd")"});
  // Other formats are annotations, as JSON Schema has them by default.
  expect_matches(R"({"type": "string", "format": "email"})", {R"("anything")"}, {"1"});
}

TEST(JsonSchemaMatch, PatternsMatchTheDecodedStringAnywhereUnlessAnchored) {
  expect_matches(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"},
                 {R"("AB-1234")", R"("xAB-123")", R"("ab-123")", "AB-123", "null"});
  // Unanchored, as JSON Schema has it: the pattern occurs somewhere in the string.
  expect_matches(R"({"pattern": "\\d\\d"})", {R"("a12b")", R"("99")", R"("x\n12")"},
                 {R"("1a2")", R"("")", "12"});
  // The pattern reads the decoded text: a quote, a backslash and a newline are escapes in JSON.
  expect_matches(R"({"pattern": "^say \"hi\"\\\\\\n$"})", {R"("say \"hi\"\\\n")"},
                 {R"("say "hi"\\\n")", "\"say \\\"hi\\\"\\\\\n\""});
  // Inside an object, beside other properties.
  expect_matches(
      R"({"type": "object", "properties": {"zip": {"type": "string", "pattern": "^\\d{5}$"}},
          "required": ["zip"]})",
      {R"({"zip": "12345"})"}, {R"({"zip": "1234"})", R"({"zip": 12345})"});
}

TEST(JsonSchemaMatch, NumericBounds) {
  expect_matches(R"({"type": "integer", "minimum": 1, "maximum": 5})", {"1", "3", "5"},
                 {"0", "6", "-1", "1.0", "05", "10"});
  expect_matches(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})",
                 {"1", "99", "42"}, {"0", "100", "-5"});
  // A fractional bound on an integer rounds inwards; draft 4's boolean exclusiveMinimum.
  expect_matches(R"({"type": "integer", "minimum": -2.5, "maximum": 2.5})", {"-2", "0", "2"},
                 {"-3", "3"});
  expect_matches(R"({"type": "integer", "minimum": 3, "exclusiveMinimum": true})", {"4"}, {"3"});
  // Numbers: fractions up to the bounds, and at an inclusive upper bound only zeros after it.
  expect_matches(R"({"type": "number", "minimum": -1, "maximum": 1})",
                 {"-1", "-0.5", "0", "0.25", "1", "1.0", "1.00"},
                 {"-1.01", "1.5", "1.01", "2", "1e0", "-2"});
  expect_matches(R"({"type": "number", "exclusiveMinimum": 0})", {"0.001", "7", "12.5"},
                 {"0", "0.0", "-0.5", "-3"});
  // Type inferred from the bounds (number), and several types with bounds on the numeric one.
  expect_matches(R"({"maximum": -10})", {"-10", "-10.0", "-11.5", "-200"}, {"-9.5", "0", "\"a\""});
  expect_matches(R"({"type": ["integer", "null"], "minimum": 0})", {"0", "7", "null"}, {"-1"});
  expect_matches(R"({"type": "object", "properties": {"rating": {"type": "integer", "minimum": 1,
                     "maximum": 5}}, "required": ["rating"]})",
                 {R"({"rating": 4})"}, {R"({"rating": 0})", R"({"rating": 6})"});
}

TEST(JsonSchemaMatch, RefsAndRecursion) {
  const std::string tree = R"({"$ref": "#/$defs/node", "$defs": {"node": {
      "type": "object", "properties": {"v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}})";
  expect_matches(tree,
                 {R"({"v": 0})", R"({"v": 0, "kids": [{"v": 1}, {"v": 2, "kids": []}]})",
                  R"({"v": 0, "kids": [{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}]})"},
                 {R"({"v": 0, "kids": [{}]})", R"({"kids": []})", R"({"v": 0, "kids": [1]})"});
  expect_matches(R"({"definitions": {"a/b": {"type": "null"}, "c~d": {"type": "boolean"}},
                     "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"},
                     {"$ref": "#/definitions/c~0d"}, {"$ref": "#/definitions/a%7E1b"}],
                     "items": false})",
                 {"[null, true, null]"}, {"[null, null, null]"});
  // A reference to the whole document, reached after a '[': fine.
  expect_matches(R"({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]})",
                 {"1", "[]", "[1, [2, [3, []]]]"}, {"[[\"x\"]]"});
  // A reference into properties (pydantic's older output does this).
  expect_matches(R"({"properties": {"a": {"type": "string", "maxLength": 1},
                                    "b": {"$ref": "#/properties/a"}}, "required": ["a", "b"]})",
                 {R"({"a": "x", "b": "y"})"}, {R"({"a": "x", "b": "yy"})"});
}

TEST(JsonSchemaMatch, APydanticStyleSchema) {
  expect_matches(
      R"({
    "$defs": {
      "Pet": {"properties": {"kind": {"enum": ["cat", "dog"], "title": "Kind", "type": "string"},
                             "name": {"title": "Name", "type": "string"}},
              "required": ["kind", "name"], "title": "Pet", "type": "object"}},
    "properties": {
      "name": {"title": "Name", "type": "string"},
      "age": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "Age"},
      "pets": {"items": {"$ref": "#/$defs/Pet"}, "title": "Pets", "type": "array"},
      "born": {"format": "date", "title": "Born", "type": "string"}},
    "required": ["name", "pets", "born"], "title": "Person", "type": "object"})",
      {R"({"name": "Ann", "pets": [], "born": "1990-01-02"})",
       "{\n  \"name\": \"Ann\",\n  \"age\": null,\n  \"pets\": [\n    {\"kind\": "
       "\"cat\", \"name\": \"Tom\"}\n  ],\n  \"born\": \"1990-01-02\"\n}"},
      {R"({"name": "Ann", "pets": [{"kind": "cow", "name": "x"}], "born": "1990-01-02"})",
       R"({"name": "Ann", "age": "3", "pets": [], "born": "1990-01-02"})",
       R"({"name": "Ann", "pets": []})"});
}

TEST(JsonSchemaMatch, AmbiguityStaysSmall) {
  // Many optional properties: the alternatives at '{' grow with their number, but each key
  // decides at once which one is being written.
  json props = json::object();
  for (int i = 0; i < 300; ++i) props[str_cat("key", i)] = {{"type", "integer"}};
  const std::string g = json_schema_gbnf(json{{"properties", props}});
  GrammarState s(Grammar::parse(g));
  ASSERT_TRUE(s.accept(R"({"key17": 1, "key250")"));
  EXPECT_LE(s.n_stacks(), 4u);
  ASSERT_TRUE(s.accept(R"(: 2})"));
  EXPECT_TRUE(s.complete());
}

}  // namespace
}  // namespace specdec
