// Numbers within bounds as grammars: JSON Schema's minimum, maximum, exclusiveMinimum and
// exclusiveMaximum compiled to GBNF expressions that match exactly the JSON numbers the bounds
// allow, by splitting each range by digit count and leading digits (no arithmetic at match time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace specdec {

// A bound on a value: the integer it is at, and whether the value may equal it.
struct NumberBound {
  int64_t value = 0;
  bool inclusive = true;
};

// GBNF for the JSON integers (an optional '-', no leading zeros, no "-0", at most 20 digits like
// the schema converter's unbounded integers) between the bounds; a missing bound is open.
// Throws specdec::Error when no integer is between them.
std::string integer_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

// The same for JSON numbers with an optional fraction of up to 20 digits and no exponent (a
// subset of JSON's spellings: every text it allows is a number within the bounds, and every such
// number has a spelling in it). Throws specdec::Error when no number is between them.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace specdec
