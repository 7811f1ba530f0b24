#pragma once
// The chat page served at / (src/server/chat_page.html, compiled into the binary by
// cmake/embed_file.cmake): one self-contained file, no CDN, no build step.

#include <string_view>

namespace minfer::server {

extern const std::string_view kChatPageHtml;

}  // namespace minfer::server
