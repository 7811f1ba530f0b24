#pragma once
// An error the API answers with an HTTP status and its error object, in the shape of the API the
// request came through. OpenAI's (and the server's own endpoints'):
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code":
//   null}}
// Anthropic's (/v1/messages):
//   {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace minfer::server {

class ApiError : public Error {
  public:
    ApiError(int status, std::string message, std::string param = {}, std::string code = {})
        : Error(std::move(message)),
          status_(status),
          param_(std::move(param)),
          code_(std::move(code)) {}
    int status() const { return status_; }
    const std::string& param() const { return param_; }  // the request field at fault, if any
    const std::string& code() const { return code_; }    // e.g. "context_length_exceeded"
    // OpenAI's error type for the status: invalid_request_error, authentication_error, ...
    const char* type() const;

  private:
    int status_;
    std::string param_, code_;
};

// The response body of an error.
std::string error_body(int status, const std::string& message, const std::string& param = {},
                       const std::string& code = {});
inline std::string error_body(const ApiError& e) {
    return error_body(e.status(), e.what(), e.param(), e.code());
}

// What a client whose request failed in a forward pass is told (status 500; `what` from the
// engine: out of device memory, a lost device).
inline std::string failed_request_message(const std::string& what) {
    return "the server could not run this request: " + what;
}

// Anthropic's error object, and its type for a status (invalid_request_error,
// authentication_error, not_found_error, request_too_large, overloaded_error, api_error, ...).
nlohmann::ordered_json anthropic_error(int status, const std::string& message);
std::string anthropic_error_body(int status, const std::string& message);

}  // namespace minfer::server
