#include "reference_recognizer.h"

#include <functional>

namespace minfer::grammar::testing {
namespace {

using Next = std::function<bool(std::size_t)>;

class Recognizer {
  public:
    Recognizer(const Grammar& g, std::string_view text, bool prefix)
        : g_(g), s_(text), prefix_(prefix) {}

    bool run() {
        return match(g_.rules[static_cast<std::size_t>(g_.root)].body, 0,
                     [&](std::size_t p) { return p == s_.size(); });
    }

  private:
    // In prefix mode, running out of text where more could follow means "viable".
    bool out_of_text(std::size_t p) const { return prefix_ && p == s_.size(); }

    bool match(const Expr& e, std::size_t p, const Next& k) {
        switch (e.kind) {
            case Expr::Kind::Literal: {
                for (std::size_t i = 0; i < e.text.size(); ++i) {
                    if (p + i == s_.size()) return prefix_;
                    if (s_[p + i] != e.text[i]) return false;
                }
                return k(p + e.text.size());
            }
            case Expr::Kind::CharClass:
                return match_class(e, p, k);
            case Expr::Kind::RuleRef:
                return match(g_.rules[static_cast<std::size_t>(e.rule)].body, p, k);
            case Expr::Kind::Sequence:
                return match_sequence(e, 0, p, k);
            case Expr::Kind::Alternation:
                for (const Expr& c : e.children) {
                    if (match(c, p, k)) return true;
                }
                return false;
            case Expr::Kind::Repeat:
                return match_repeat(e, 0, p, k);
        }
        return false;
    }

    bool match_sequence(const Expr& e, std::size_t i, std::size_t p, const Next& k) {
        if (i == e.children.size()) return k(p);
        return match(e.children[i], p,
                     [&](std::size_t q) { return match_sequence(e, i + 1, q, k); });
    }

    bool match_repeat(const Expr& e, int count, std::size_t p, const Next& k) {
        if (count >= e.min && k(p)) return true;
        if (e.max != Expr::kUnbounded && count >= e.max) return false;
        return match(e.children[0], p, [&](std::size_t q) {
            if (q == p && count >= e.min) return false;  // an empty round adds nothing
            return match_repeat(e, count + 1, q, k);
        });
    }

    bool match_class(const Expr& e, std::size_t p, const Next& k) {
        if (out_of_text(p)) return true;
        if (p >= s_.size()) return false;
        const auto b0 = static_cast<unsigned char>(s_[p]);
        const std::size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
        if (b0 >= 0x80 && b0 < 0xC2) return false;
        char32_t cp = b0 < 0x80   ? b0
                      : b0 < 0xE0 ? (b0 & 0x1F)
                      : b0 < 0xF0 ? (b0 & 0x0F)
                                  : (b0 & 0x07);
        std::size_t have = 1;
        for (; have < n && p + have < s_.size(); ++have) {
            const auto b = static_cast<unsigned char>(s_[p + have]);
            if ((b & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (b & 0x3F);
        }
        if (have < n) {
            if (!prefix_) return false;
            // Truncated at the end of the text: some code point of the class must start so.
            const int missing = static_cast<int>(n - have);
            const char32_t lo = cp << (6 * missing);
            const char32_t hi = lo | ((char32_t{1} << (6 * missing)) - 1);
            for (const auto& r : e.ranges) {
                if (r.lo <= hi && r.hi >= lo) return true;
            }
            return false;
        }
        static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        for (const auto& r : e.ranges) {
            if (cp >= r.lo && cp <= r.hi) return k(p + n);
        }
        return false;
    }

    const Grammar& g_;
    std::string_view s_;
    bool prefix_;
};

}  // namespace

bool viable_prefix(const Grammar& g, std::string_view text) {
    return Recognizer(g, text, true).run();
}

bool is_sentence(const Grammar& g, std::string_view text) {
    return Recognizer(g, text, false).run();
}

}  // namespace minfer::grammar::testing
