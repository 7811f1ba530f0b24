#pragma once
// The chat page served at / (src/server/chat_page.html) and the libraries it loads from /assets/,
// compiled into the binary by cmake/embed_file.cmake from Debian's packages: marked (Markdown),
// DOMPurify (sanitising the HTML marked makes) and highlight.js (code blocks) with its GitHub
// style. No CDN, no download.

#include <string_view>

namespace minfer::server {

extern const std::string_view kChatPageHtml;
extern const std::string_view kMarkedJs;
extern const std::string_view kPurifyJs;
extern const std::string_view kHighlightJs;
extern const std::string_view kHighlightCss;

struct ChatAsset {
    std::string_view path;          // "/assets/marked.js"
    std::string_view content_type;  // with its charset
    const std::string_view* body;
};

// The asset served at `path`, nullptr when none.
const ChatAsset* find_chat_asset(std::string_view path);

}  // namespace minfer::server
