#pragma once
// Values that minfer puts into HTTP headers from its command line (serve's --cors-origin,
// bench-serve's --api-key) and keys that clients must send in one (serve's --api-key): Boost 1.74's
// Beast copies a header value as it is, so a line break in one would inject headers, and a key
// holding a control character could never be sent by a client.

#include <string_view>

namespace minfer::server {

// Throws UsageError "<what> must not hold control characters (found \x0d)" for any byte below
// 0x20 other than a tab, or 0x7f.
void require_header_value(std::string_view value, std::string_view what);

}  // namespace minfer::server
