#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace minfer::server {
namespace {

const char* type_for(int status) {
    switch (status) {
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 429:
        case 503:
            return "server_busy_error";
        default:
            return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

const char* anthropic_type_for(int status) {
    switch (status) {
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 413:
            return "request_too_large";
        case 429:
            return "rate_limit_error";
        case 503:
        case 529:
            return "overloaded_error";
        default:
            return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

std::string dump(const nlohmann::ordered_json& value) {
    // Messages may quote what the client sent: never let invalid UTF-8 break the JSON.
    return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

const char* ApiError::type() const {
    return type_for(status_);
}

std::string error_body(int status, const std::string& message, const std::string& param,
                       const std::string& code) {
    nlohmann::ordered_json e = {
        {"message", message},
        {"type", type_for(status)},
        {"param", param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param)},
        {"code", code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code)}};
    return dump(nlohmann::ordered_json{{"error", e}});
}

nlohmann::ordered_json anthropic_error(int status, const std::string& message) {
    return {{"type", "error"},
            {"error", {{"type", anthropic_type_for(status)}, {"message", message}}}};
}

std::string anthropic_error_body(int status, const std::string& message) {
    return dump(anthropic_error(status, message));
}

}  // namespace minfer::server
