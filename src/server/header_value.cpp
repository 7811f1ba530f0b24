#include "server/header_value.h"

#include <cstdio>

#include "core/error.h"

namespace minfer::server {

void require_header_value(std::string_view value, std::string_view what) {
    for (const char c : value) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte < 0x20 && byte != '\t') || byte == 0x7f) {
            char shown[8];
            std::snprintf(shown, sizeof shown, "\\x%02x", byte);
            throw UsageError(concat(what, " must not hold control characters (found ", shown, ")"));
        }
    }
}

}  // namespace minfer::server
