// JSON output as a grammar: any JSON value or object (OpenAI's response_format json_object) and
// a JSON Schema compiled to GBNF (response_format json_schema, llama.cpp's json_schema field), so
// that constrained generation emits only text that parses and validates.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/gbnf_text.h"  // gbnf_literal, which callers of this header use too

namespace specdec {

// GBNF (grammar/grammar.h) whose root is any JSON object: what response_format
// {"type": "json_object"} promises. Whitespace between tokens is limited (see the .cpp) so that
// a model cannot pad forever.
std::string json_object_gbnf();

// GBNF whose root matches JSON texts valid under `schema`, within the supported subset: never
// one the schema forbids (oneOf aside, see below), though it refuses some valid ones (see
// below: property order, type inference, spellings).
// Supported:
// - type: a name or a list of them (object, array, string, number, integer, boolean, null).
//   Without one, the keywords present imply it (properties/required/additionalProperties: an
//   object; items/prefixItems/minItems/maxItems: an array; minLength/maxLength/format/pattern:
//   a string; minimum/maximum and their exclusive forms: a number; none: any JSON value),
//   which is stricter than JSON Schema but never looser.
// - properties + required: properties in the schema's order (hence an ordered_json: a plain
//   nlohmann::json sorts its keys), optional ones may be left out. additionalProperties: false,
//   true or a schema; default false when properties are given (as OpenAI's strict mode and
//   llama.cpp do), true otherwise. Additional properties come after the listed ones, never
//   under a listed name, and their names are written without \u escapes or "\/" (so that a
//   listed name cannot come back spelled differently). A required name that is not among the
//   properties is an additional property that must be there (an error when there may be none).
// - items, minItems, maxItems; prefixItems (then items for the rest), or draft 7's items array
//   (then additionalItems): the whole tuple is required.
// - minLength, maxLength (characters; a \u surrogate pair is one, a lone surrogate is refused);
//   format "date" (February 29 in any year), "time", "date-time" and "uuid" (other formats are
//   annotations, as JSON Schema has them by default: any string); pattern (grammar/regex_gbnf.h:
//   ECMAScript's syntax, matching anywhere in the decoded string unless anchored by ^ and $),
//   alone (not beside a length bound or a format).
// - minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft 4's boolean exclusive forms
//   too), within +-1e18 (grammar/number_range.h): on an integer a fractional bound rounds
//   inwards; on a number the bounds must be integers, and a bounded number is written without
//   an exponent. Alone they imply type number.
// - enum and const: any JSON values, scalars as their exact JSON text (nlohmann's dump()),
//   objects and arrays with whitespace allowed between tokens; "type" beside them filters them.
// - anyOf, oneOf (as anyOf: a value that two branches accept is let through), allOf whose
//   schemas but one are annotations only; $ref to a JSON pointer in the document ("#",
//   "#/$defs/...", "#/definitions/...", ~0 ~1 and %XX escapes), recursion allowed unless it
//   reaches itself before any text (left recursion: an error).
// - {} and true: any JSON value. Annotations (title, description, default, examples, $schema,
//   $id, $comment, $defs, definitions, deprecated, readOnly, writeOnly, discriminator,
//   contentEncoding, contentMediaType) are ignored.
// $ref, anyOf, oneOf and allOf stand alone beside annotations; enum and const beside "type".
// Bounded: whitespace between tokens (none, a space, or a newline and up to 20 spaces or
// tabs), numbers (20 integer digits, 20 fraction digits, 4 exponent digits), nesting (64
// schemas, references included), each length or item bound (10,000) and their total, the
// grammar (1 MiB, 20,000 rules).
// Anything else (multipleOf, uniqueItems, if/then/else, not, a $ref outside the document, a
// keyword beside one that stands alone, ...) throws specdec::Error "JSON Schema <JSON pointer>:
// <what>", naming where the problem is, rather than silently allowing text the schema forbids.
std::string json_schema_gbnf(const nlohmann::ordered_json& schema);

}  // namespace specdec
