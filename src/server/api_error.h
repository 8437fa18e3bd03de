// An error answered to an HTTP client in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}} with an HTTP status.
// Request validation throws it; the HTTP layer catches it and writes it out, so a bad request
// can never reach the engine.
#pragma once

#include <stdexcept>
#include <string>

namespace specdec::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // "": null in the JSON
  const std::string& code() const { return code_; }    // "": null in the JSON

 private:
  int status_;
  std::string type_, param_, code_;
};

// The common cases, with OpenAI's type strings.
inline ApiError invalid_request(std::string message, std::string param = "",
                                std::string code = "") {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code));
}

}  // namespace specdec::server
