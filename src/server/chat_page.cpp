#include "server/chat_page.h"

namespace minfer::server {

const ChatAsset* find_chat_asset(std::string_view path) {
    static const ChatAsset kAssets[] = {
        {"/assets/marked.js", "text/javascript; charset=utf-8", &kMarkedJs},
        {"/assets/purify.js", "text/javascript; charset=utf-8", &kPurifyJs},
        {"/assets/highlight.js", "text/javascript; charset=utf-8", &kHighlightJs},
        {"/assets/highlight.css", "text/css; charset=utf-8", &kHighlightCss},
    };
    for (const ChatAsset& a : kAssets) {
        if (a.path == path) return &a;
    }
    return nullptr;
}

}  // namespace minfer::server
