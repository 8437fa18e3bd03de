#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "grammar/grammar.h"

namespace specdec {
namespace {

using json = nlohmann::ordered_json;

bool valid(const std::string& gbnf, std::string_view text) {
  GrammarState s(Grammar::parse(gbnf));
  return s.accept(text) && s.complete();
}

std::string gbnf_of(const char* schema) { return json_schema_gbnf(json::parse(schema)); }

std::string error_of(const char* schema) {
  try {
    json_schema_gbnf(json::parse(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, AnyJsonObject) {
  const std::string g = json_object_gbnf();
  for (const char* ok : {"{}", R"({"a": 1})", R"({"a": [1, {"b": null}], "c": "d\u00e9\n"})",
                         "{\n  \"k\": true\n}", R"({"x":-1.5e10})"}) {
    EXPECT_TRUE(valid(g, ok)) << ok;
  }
  for (const char* bad : {"[]", "1", R"("s")", R"({"a": 1,})", R"({"a": 01})", R"({a: 1})",
                          R"({"a": 1} {})", R"({"a": "\q"})", " {}", "{}   "}) {
    EXPECT_FALSE(valid(g, bad)) << bad;
  }
  // Whitespace is bounded: a model cannot pad forever.
  EXPECT_FALSE(valid(g, "{\n" + std::string(21, ' ') + "}"));
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const std::string g = gbnf_of(R"({"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
      "required": ["b"]})");
  // Properties come in the schema's order.
  for (const char* ok : {R"({"b": "x"})", R"({"a": 1, "b": "x"})", R"({"b": "x", "c": true})",
                         R"({"a": -3, "b": "", "c": false})"}) {
    EXPECT_TRUE(valid(g, ok)) << ok;
  }
  for (const char* bad : {R"({})", R"({"a": 1})", R"({"b": 1})", R"({"b": "x", "d": 1})",
                          R"({"a": 1.5, "b": "x"})", R"({"b": "x",})", R"({, "b": "x"})",
                          R"({"c": true, "b": "x"})", R"({"b": "x", "b": "y"})"}) {
    EXPECT_FALSE(valid(g, bad)) << bad;
  }
}

TEST(JsonSchema, PropertiesKeepTheSchemasOrder) {
  const std::string g = gbnf_of(R"({"properties": {"z": {"type": "null"}, "a": {"type": "null"}},
                                    "required": ["z", "a"]})");
  EXPECT_TRUE(valid(g, R"({"z": null, "a": null})"));
  EXPECT_FALSE(valid(g, R"({"a": null, "z": null})"));
}

TEST(JsonSchema, AdditionalProperties) {
  const std::string open = gbnf_of(R"({"type": "object", "properties": {"a": {"type": "null"}},
                                       "additionalProperties": {"type": "number"}})");
  EXPECT_TRUE(valid(open, R"({"a": null, "z": 2})"));
  EXPECT_TRUE(valid(open, R"({"z": 2, "y": 3})"));
  EXPECT_FALSE(valid(open, R"({"z": "2"})"));
  const std::string closed = gbnf_of(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(valid(closed, "{}"));
  EXPECT_FALSE(valid(closed, R"({"a": 1})"));
  const std::string any = gbnf_of(R"({"type": "object"})");
  EXPECT_TRUE(valid(any, R"({"a": [1]})"));
}

TEST(JsonSchema, ArraysStringsEnumsConstAndUnions) {
  const std::string arr =
      gbnf_of(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  EXPECT_TRUE(valid(arr, "[1]"));
  EXPECT_TRUE(valid(arr, "[1, 2, 3]"));
  EXPECT_FALSE(valid(arr, "[]"));
  EXPECT_FALSE(valid(arr, "[1, 2, 3, 4]"));
  EXPECT_FALSE(valid(arr, "[1, \"a\"]"));
  const std::string tuple =
      gbnf_of(R"({"prefixItems": [{"type": "string"}, {"type": "number"}], "items": false})");
  EXPECT_TRUE(valid(tuple, R"(["a", 1])"));
  EXPECT_FALSE(valid(tuple, R"(["a"])"));
  const std::string str = gbnf_of(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(valid(str, R"("ab")"));
  EXPECT_TRUE(valid(str, R"("a\n")"));  // an escape is one character
  EXPECT_FALSE(valid(str, R"("a")"));
  EXPECT_FALSE(valid(str, R"("abcd")"));
  const std::string e = gbnf_of(R"({"enum": ["red", 2, null, {"k": [1]}, "q\"uote"]})");
  for (const char* ok : {R"("red")", "2", "null", R"({"k":[1]})", R"("q\"uote")"}) {
    EXPECT_TRUE(valid(e, ok)) << ok;
  }
  EXPECT_FALSE(valid(e, R"("blue")"));
  EXPECT_TRUE(valid(gbnf_of(R"({"const": "x"})"), R"("x")"));
  EXPECT_FALSE(valid(gbnf_of(R"({"const": "x"})"), R"("y")"));
  const std::string u = gbnf_of(R"({"anyOf": [{"type": "integer"}, {"type": "array",
                                   "items": {"type": "boolean"}}]})");
  EXPECT_TRUE(valid(u, "7"));
  EXPECT_TRUE(valid(u, "[true, false]"));
  EXPECT_FALSE(valid(u, "\"7\""));
  const std::string t = gbnf_of(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(valid(t, "null"));
  EXPECT_TRUE(valid(t, R"("s")"));
  EXPECT_FALSE(valid(t, "1"));
}

TEST(JsonSchema, FormatsRefsAndRecursion) {
  EXPECT_TRUE(valid(gbnf_of(R"({"type": "string", "format": "date"})"), R"("2026-12-05")"));
  EXPECT_FALSE(valid(gbnf_of(R"({"type": "string", "format": "date"})"), R"("2026-13-05")"));
  EXPECT_TRUE(valid(gbnf_of(R"({"format": "date-time"})"), R"("2026-12-05T03:04:05.123Z")"));
  EXPECT_TRUE(valid(gbnf_of(R"({"format": "uuid"})"), R"("0a1b2c3d-0000-4000-8000-00000000abcd")"));
  EXPECT_TRUE(valid(gbnf_of(R"({"type": "string", "format": "email"})"), R"("anything")"));
  const std::string tree = gbnf_of(R"({"$ref": "#/$defs/node", "$defs": {"node": {
      "type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
      "v": {"type": "integer"}}, "required": ["v"]}}})");
  EXPECT_TRUE(valid(tree, R"({"kids": [{"v": 1}, {"kids": [], "v": 2}], "v": 0})"));
  EXPECT_FALSE(valid(tree, R"({"kids": [{}], "v": 0})"));
  EXPECT_TRUE(valid(gbnf_of(R"({"definitions": {"a/b": {"type": "null"}},
                                "$ref": "#/definitions/a~1b"})"),
                    "null"));
  EXPECT_TRUE(valid(gbnf_of("{}"), R"([1, {"a": "b"}])"));
  EXPECT_TRUE(valid(gbnf_of("true"), "false"));
  EXPECT_TRUE(
      valid(gbnf_of(R"({"title": "t", "description": "d", "allOf": [{"type": "null"}]})"), "null"));
}

TEST(JsonSchema, UnsupportedKeywordsAndBadSchemasAreErrorsThatSayWhere) {
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "a+"})").find("/pattern: unsupported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"properties": {"n": {"type": "integer", "minimum": 0}}})")
                .find("/properties/n/minimum"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "strin"})").find("unknown type"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/missing"})").find("points nowhere"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "http://x/y.json"})").find("not in this document"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"properties": {"a": {}}, "required": ["b"]})").find("'b' is required"),
            std::string::npos);
  EXPECT_NE(error_of("false").find("allows nothing"), std::string::npos);
  EXPECT_NE(error_of("3").find("object or a boolean"), std::string::npos);
  EXPECT_NE(error_of(R"({"allOf": [{}, {}]})").find("allOf"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "array", "maxItems": 100000})").find("maxItems"),
            std::string::npos);
  std::string deep = "{}";
  for (int i = 0; i < 70; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_NE(error_of(deep.c_str()).find("deeper"), std::string::npos);
}

}  // namespace
}  // namespace specdec
