// JSON output as a grammar: any JSON value or object (OpenAI's response_format json_object) and
// a JSON Schema compiled to GBNF (response_format json_schema, llama.cpp's json_schema field), so
// that constrained generation emits only text that parses and validates.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace specdec {

// GBNF (grammar/grammar.h) whose root is any JSON object: what response_format
// {"type": "json_object"} promises. Whitespace between tokens is limited (see the .cpp) so that
// a model cannot pad forever.
std::string json_object_gbnf();

// GBNF whose root matches exactly the JSON texts valid under `schema` (within the supported
// subset). Supported: type (a string or a list of them: object, array, string, number, integer,
// boolean, null), properties + required (properties in the schema's order; optional ones may be
// left out), additionalProperties (false, true, or a schema; default false when properties are
// given, as OpenAI's strict mode and llama.cpp do), items, prefixItems, minItems, maxItems,
// enum, const, anyOf, oneOf (as anyOf), allOf of a single schema, $ref to "#/$defs/..." or
// "#/definitions/..." (recursion allowed), minLength/maxLength, pattern-free strings, format
// "date", "time", "date-time" and "uuid", and the empty schema {} / true (any JSON value).
// Annotations (title, description, default, examples, $schema, $id, $comment) are ignored.
// Anything else (pattern, minimum/maximum, multipleOf, uniqueItems, if/then/else, not, a $ref
// outside the document, ...) throws specdec::Error naming the keyword and where it is, rather
// than silently allowing text the schema forbids.
// Properties come in the schema's order, which needs the schema parsed as an ordered_json (a
// plain nlohmann::json sorts its keys).
std::string json_schema_gbnf(const nlohmann::ordered_json& schema);

}  // namespace specdec
