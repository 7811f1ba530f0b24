#include "tokenizer/special_split.h"

namespace minfer {
namespace {

bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Cuts one raw fragment at every occurrence of `token`'s text; appends the pieces.
void cut(std::string_view text, const Fragment& raw, int32_t token, std::string_view needle,
         uint16_t attrs, std::vector<Fragment>& out) {
    uint32_t begin = raw.begin;
    const uint32_t end = raw.end;
    while (true) {
        const std::size_t found = text.substr(0, end).find(needle, begin);
        if (found == std::string_view::npos) break;
        const auto match = static_cast<uint32_t>(found);
        uint32_t left_end = match;
        if (attrs & attr::kLstrip) {
            while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) out.push_back(Fragment{kNoToken, begin, left_end});
        out.push_back(Fragment{token, 0, 0});
        begin = match + static_cast<uint32_t>(needle.size());
        if (attrs & attr::kRstrip) {
            while (begin < end && is_ascii_space(text[begin])) ++begin;
        }
    }
    if (begin < end) out.push_back(Fragment{kNoToken, begin, end});
}

}  // namespace

std::vector<Fragment> split_special(const Vocabulary& vocab, std::string_view text,
                                    bool parse_special) {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back(Fragment{kNoToken, 0, static_cast<uint32_t>(text.size())});
    std::vector<Fragment> next;
    for (int32_t id : vocab.special_tokens) {
        const uint16_t attrs = vocab.attrs[id];
        if (!parse_special && (attrs & (attr::kControl | attr::kUnknown))) continue;
        const std::string_view needle = vocab.texts[id];
        if (text.find(needle) == std::string_view::npos) continue;
        next.clear();
        for (const Fragment& f : fragments) {
            if (f.is_text()) {
                cut(text, f, id, needle, attrs, next);
            } else {
                next.push_back(f);
            }
        }
        fragments.swap(next);
    }
    return fragments;
}

}  // namespace minfer
