#include "server/translated_request.h"

#include "common/error.h"
#include "server/json_fields.h"

namespace specdec::server {

nlohmann::ordered_json parse_translated_body(std::string_view body) {
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    throw invalid_request(
        str_cat("the request body nests JSON deeper than ", kMaxJsonDepth, " levels"), "",
        "invalid_json");
  }
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw invalid_request("the request body is not valid JSON", "", "invalid_json");
  }
  if (!j.is_object()) wrong_type("body", "a JSON object", j);
  return j;
}

CompletionRequest parse_translated_request(
    Endpoint endpoint, const nlohmann::ordered_json& body,
    const std::function<std::string(const std::string&)>& client_name,
    const RequestDefaults& defaults) {
  try {
    return parse_request(endpoint, body.dump(), defaults);
  } catch (const ApiError& e) {
    const std::string param = client_name(e.param());
    if (param == e.param()) throw;
    std::string message = e.what();
    for (const std::string& form : {str_cat("'", e.param(), "'"), e.param()}) {
      if (const size_t at = message.find(form); at != std::string::npos) {
        message.replace(at, form.size(), form.front() == '\'' ? str_cat("'", param, "'") : param);
        break;
      }
    }
    throw ApiError(e.status(), message, e.type(), param, e.code());
  }
}

std::optional<std::string> renamed_prefix(const std::string& p, std::string_view from,
                                          std::string_view to) {
  if (!p.starts_with(from)) return std::nullopt;
  if (p.size() > from.size() && p[from.size()] != '.' && p[from.size()] != '[') {
    return std::nullopt;
  }
  return str_cat(to, p.substr(from.size()));
}

std::optional<ToolFunctionParam> tool_function_param(const std::string& p) {
  if (!p.starts_with("tools[")) return std::nullopt;
  const size_t close = p.find(']');
  if (close == std::string::npos) return std::nullopt;
  std::optional<std::string> rest = renamed_prefix(p.substr(close + 1), ".function", "");
  if (!rest) return std::nullopt;
  return ToolFunctionParam{p.substr(5, close - 4), std::move(*rest)};
}

}  // namespace specdec::server
