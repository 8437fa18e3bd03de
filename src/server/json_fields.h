// Reading a request body's fields with the checks every endpoint applies: a field that is absent
// or null takes its default, a wrong type or an out-of-range value is a 400 naming the field.
// Templates over nlohmann's json and ordered_json: the OpenAI-style parser reads a plain parse,
// llama-server's endpoints an ordered one (so that a schema's key order survives).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/error.h"
#include "server/api_error.h"

namespace specdec::server {

template <class Json>
const char* type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

template <class Json>
[[noreturn]] void wrong_type(const std::string& param, const char* expected, const Json& v) {
  throw invalid_request(str_cat("'", param, "' must be ", expected, ", got ", type_name(v)), param,
                        "invalid_type");
}

// A 400 for a field: "'param' <what>".
[[noreturn]] inline void bad_field(const std::string& param, const std::string& what,
                                   const char* code = "invalid_value") {
  throw invalid_request(str_cat("'", param, "' ", what), param, code);
}

// A field that is absent or null means "use the default" (clients send explicit nulls).
template <class Json>
const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// A value that must be an object (a request's element or nested field): itself, or a 400
// naming `param`.
template <class Json>
const Json& require_object(const Json& v, const std::string& param) {
  if (!v.is_object()) wrong_type(param, "an object", v);
  return v;
}

// A field that must be present and hold a string: its value, or a 400 naming
// "<param>.<name>".
template <class Json>
std::string required_string(const Json& object, const char* name, const std::string& param) {
  const auto v = object.find(name);
  if (v == object.end() || !v->is_string()) {
    bad_field(str_cat(param, ".", name), "must be a string", "invalid_type");
  }
  return v->template get<std::string>();
}

// Copies each of `names` that `body` holds (and not as null) into `out` as it came: fields a
// translated request passes on for the chat parser to check.
template <class Json>
void copy_fields(const Json& body, Json& out, std::span<const char* const> names) {
  for (const char* name : names) {
    if (const Json* v = field(body, name)) out[name] = *v;
  }
}

template <class Json>
bool get_bool(const Json& body, const char* name, bool fallback) {
  const Json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
  return v->template get<bool>();
}

template <class Json>
double get_number(const Json& body, const char* name, double fallback, double min, double max) {
  const Json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  const double d = v->template get<double>();
  if (!(d >= min && d <= max)) {
    throw invalid_request(str_cat("'", name, "' must be between ", min, " and ", max, ", got ", d),
                          name, "invalid_value");
  }
  return d;
}

// Integers may arrive as 3 or 3.0; 3.5 is not an integer.
template <class Json>
std::optional<int64_t> get_int(const Json& body, const char* name, int64_t min, int64_t max) {
  const Json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_unsigned() && v->template get<uint64_t>() > uint64_t{1} << 62) {
    throw invalid_request(str_cat("'", name, "' is too large"), name, "invalid_value");
  }
  if (v->is_number_integer()) {
    i = v->template get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->template get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      wrong_type(name, "an integer", *v);
    }
    i = static_cast<int64_t>(d);
  } else {
    wrong_type(name, "an integer", *v);
  }
  if (i < min || i > max) {
    throw invalid_request(str_cat("'", name, "' must be between ", min, " and ", max, ", got ", i),
                          name, "invalid_value");
  }
  return i;
}

}  // namespace specdec::server
