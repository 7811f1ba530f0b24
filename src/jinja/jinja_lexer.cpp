#include "jinja/jinja_lexer.h"
#include "core/hex_escape.h"

#include <algorithm>
#include <cstring>

#include "jinja/unicode_text.h"

namespace minfer::jinja {

std::string position_message(const SourcePos& pos, std::string_view message) {
    return concat("line ", pos.line, ", column ", pos.column, ": ", message);
}

namespace {

constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};

// Source with every \r\n and \r turned into \n, and one trailing newline dropped.
std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
    std::string out;
    out.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
    return is_name_start(c) || is_digit(c);
}

class Lexer {
  public:
    Lexer(std::string source, const LexerOptions& options)
        : src_(std::move(source)), options_(options) {
        line_starts_.push_back(0);
        for (std::size_t i = 0; i < src_.size(); ++i)
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }

    std::vector<Token> run() {
        bool line_starting = true;
        while (pos_ < src_.size()) {
            const std::size_t tag = find_tag(pos_);
            std::string text = src_.substr(pos_, tag - pos_);
            const std::size_t text_start = pos_;
            if (tag == src_.size()) {
                emit_text(std::move(text), text_start);
                break;
            }
            const char kind = src_[tag + 1];  // '{', '%' or '#'
            std::size_t after = tag + 2;
            char sign = 0;
            if (after < src_.size() && (src_[after] == '-' || src_[after] == '+'))
                sign = src_[after++];
            const bool raw = kind == '%' && is_raw_begin(after);
            if (sign == '-') {
                text = rstrip(text);
            } else if (sign != '+' && options_.lstrip_blocks && kind != '{') {
                const std::size_t newline = text.rfind('\n');
                const std::size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
                if ((line_begin > 0 || line_starting) &&
                    is_blank(std::string_view(text).substr(line_begin)))
                    text.resize(line_begin);
            }
            emit_text(std::move(text), text_start);
            if (raw) {
                line_starting = lex_raw(tag, after);
            } else if (kind == '#') {
                line_starting = lex_comment(tag, after);
            } else {
                line_starting = lex_tag(tag, after, kind == '%');
            }
        }
        tokens_.push_back(Token{TokenType::End, "", pos_at(src_.size())});
        return std::move(tokens_);
    }

  private:
    SourcePos pos_at(std::size_t offset) const {
        const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
        const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
        const std::size_t begin = line_starts_[line - 1];
        return SourcePos{static_cast<int>(line),
                         static_cast<int>(unicode::length(
                             std::string_view(src_).substr(begin, offset - begin))) +
                             1};
    }

    [[noreturn]] void fail(std::size_t offset, std::string_view message) const {
        throw FormatError(position_message(pos_at(offset), message));
    }

    std::size_t find_tag(std::size_t from) const {
        for (std::size_t i = from; i + 1 < src_.size(); ++i)
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
                return i;
        return src_.size();
    }

    // Unicode whitespace starting at byte `i`: its length in bytes (0 if none).
    std::size_t space_at(std::size_t i) const {
        if (i >= src_.size()) return 0;
        const unsigned char c = static_cast<unsigned char>(src_[i]);
        if (c < 0x80) return unicode::is_space(c) ? 1 : 0;
        std::size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        if (i + len > src_.size()) return 0;
        const auto cps = unicode::decode(std::string_view(src_).substr(i, len));
        return cps.size() == 1 && unicode::is_space(cps[0]) ? len : 0;
    }

    std::size_t skip_spaces(std::size_t i) const {
        for (std::size_t n; (n = space_at(i)) > 0;) i += n;
        return i;
    }

    static bool is_blank(std::string_view s) {
        for (char32_t cp : unicode::decode(s))
            if (!unicode::is_space(cp)) return false;
        return true;
    }

    static std::string rstrip(const std::string& s) {
        return unicode::strip(s, nullptr, false, true);
    }

    bool is_raw_begin(std::size_t after) const {
        std::size_t i = skip_spaces(after);
        if (src_.compare(i, 3, "raw") != 0) return false;
        i = skip_spaces(i + 3);
        return src_.compare(i, 2, "%}") == 0 || src_.compare(i, 3, "-%}") == 0;
    }

    void emit_text(std::string text, std::size_t offset) {
        if (!text.empty())
            tokens_.push_back(Token{TokenType::Text, std::move(text), pos_at(offset)});
    }

    // After a closing "%}" / "#}": trim_blocks eats one newline; "-" eats all whitespace; "+"
    // keeps everything. Returns whether the consumed text ended with a newline.
    bool finish_block_end(std::size_t end_pos, char sign, bool trim_allowed) {
        pos_ = end_pos;
        if (sign == '-') {
            const std::size_t start = pos_;
            pos_ = skip_spaces(pos_);
            return pos_ > start && src_[pos_ - 1] == '\n';
        }
        if (sign != '+' && trim_allowed && options_.trim_blocks && pos_ < src_.size() &&
            src_[pos_] == '\n') {
            ++pos_;
            return true;
        }
        return false;
    }

    bool lex_comment(std::size_t tag, std::size_t after) {
        const std::size_t close = src_.find("#}", after);
        if (close == std::string::npos) fail(tag, "missing end of comment tag");
        char sign = 0;
        if (close > after && (src_[close - 1] == '-' || src_[close - 1] == '+'))
            sign = src_[close - 1];
        return finish_block_end(close + 2, sign, true);
    }

    bool lex_raw(std::size_t tag, std::size_t after) {
        std::size_t i = skip_spaces(skip_spaces(after) + 3);
        char sign = 0;
        if (src_[i] == '-') sign = '-', ++i;
        pos_ = i + 2;  // past "%}"
        if (sign == '-') pos_ = skip_spaces(pos_);
        // Find "{%[-+]? endraw [-+]?%}".
        for (std::size_t at = src_.find("{%", pos_); at != std::string::npos;
             at = src_.find("{%", at + 2)) {
            std::size_t j = at + 2;
            char open_sign = 0;
            if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) open_sign = src_[j++];
            j = skip_spaces(j);
            if (src_.compare(j, 6, "endraw") != 0) continue;
            j = skip_spaces(j + 6);
            char close_sign = 0;
            if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) close_sign = src_[j++];
            if (src_.compare(j, 2, "%}") != 0) continue;
            std::string text = src_.substr(pos_, at - pos_);
            if (open_sign == '-') {
                text = rstrip(text);
            } else if (open_sign != '+' && options_.lstrip_blocks) {
                const std::size_t newline = text.rfind('\n');
                if (newline != std::string::npos &&
                    is_blank(std::string_view(text).substr(newline + 1)))
                    text.resize(newline + 1);
            }
            emit_text(std::move(text), pos_);
            return finish_block_end(j + 2, close_sign, true);
        }
        fail(tag, "missing end of raw directive");
    }

    bool lex_tag(std::size_t tag, std::size_t after, bool block) {
        tokens_.push_back(
            Token{block ? TokenType::BlockBegin : TokenType::VariableBegin, "", pos_at(tag)});
        std::vector<char> brackets;
        std::size_t i = after;
        while (true) {
            i = skip_spaces(i);
            if (i >= src_.size())
                fail(tag, block ? "unclosed block tag '{%'" : "unclosed variable tag '{{'");
            if (brackets.empty()) {
                const char* close = block ? "%}" : "}}";
                char sign = 0;
                std::size_t j = i;
                if ((src_[j] == '-' || (block && src_[j] == '+')) &&
                    src_.compare(j + 1, 2, close) == 0)
                    sign = src_[j++];
                if (src_.compare(j, 2, close) == 0) {
                    tokens_.push_back(
                        Token{block ? TokenType::BlockEnd : TokenType::VariableEnd, "", pos_at(i)});
                    return finish_block_end(j + 2, sign, block);
                }
            }
            i = lex_token(i, brackets);
        }
    }

    std::size_t lex_token(std::size_t i, std::vector<char>& brackets) {
        const char c = src_[i];
        const SourcePos pos = pos_at(i);
        if (is_digit(c)) return lex_number(i, pos);
        if (is_name_start(c)) {
            std::size_t j = i;
            while (j < src_.size() && is_name_char(src_[j])) ++j;
            tokens_.push_back(Token{TokenType::Name, src_.substr(i, j - i), pos});
            return j;
        }
        if (c == '\'' || c == '"') return lex_string(i, pos);
        for (std::string_view op : kOperators) {
            if (src_.compare(i, op.size(), op) != 0) continue;
            if (op == "(" || op == "[" || op == "{") {
                brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
            } else if (op == ")" || op == "]" || op == "}") {
                if (brackets.empty()) fail(i, concat("unexpected '", op, "'"));
                if (brackets.back() != op[0])
                    fail(i, concat("unexpected '", op, "', expected '", brackets.back(), "'"));
                brackets.pop_back();
            }
            if (brackets.size() > 256) fail(i, "brackets nested too deeply");
            tokens_.push_back(Token{TokenType::Operator, std::string(op), pos});
            return i + op.size();
        }
        fail(i, concat("unexpected character '", std::string(1, c), "'"));
    }

    // Digits with single underscores between them, starting at i; returns the end.
    std::size_t digits_end(std::size_t i, bool (*digit)(char)) const {
        if (i >= src_.size() || !digit(src_[i])) return i;
        ++i;
        while (i < src_.size()) {
            if (digit(src_[i]))
                ++i;
            else if (src_[i] == '_' && i + 1 < src_.size() && digit(src_[i + 1]))
                i += 2;
            else
                break;
        }
        return i;
    }

    std::size_t lex_number(std::size_t i, const SourcePos& pos) {
        const auto dec = [](char ch) { return is_digit(ch); };
        std::size_t j = digits_end(i, dec);
        // Python has no leading zeros: "05" is the integer 0 followed by the integer 5.
        if (src_[i] == '0' && j > i + 1 && src_.find_first_not_of("0_", i) < j &&
            !(j < src_.size() && (src_[j] == '.' || src_[j] == 'e' || src_[j] == 'E'))) {
            j = i + 1;
            while (j + 1 < src_.size() &&
                   (src_[j] == '0' || (src_[j] == '_' && src_[j + 1] == '0')))
                ++j;
            if (j > i + 1 && src_[j - 1] == '_') --j;
        }
        bool is_float = false;
        if (j + 1 < src_.size() && src_[j] == '.' && is_digit(src_[j + 1]) &&
            !(i > 0 && src_[i - 1] == '.')) {
            j = digits_end(j + 1, dec);
            is_float = true;
        }
        if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E') &&
            !(i > 0 && src_[i - 1] == '.')) {
            std::size_t k = j + 1;
            if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
            if (k < src_.size() && is_digit(src_[k])) {
                j = digits_end(k, dec);
                is_float = true;
            }
        }
        if (!is_float && src_[i] == '0' && j == i + 1 && i + 1 < src_.size()) {
            const char base = static_cast<char>(src_[i + 1] | 0x20);
            bool (*digit)(char) = nullptr;
            if (base == 'x')
                digit = [](char ch) {
                    return std::strchr("0123456789abcdefABCDEF", ch) != nullptr && ch != 0;
                };
            if (base == 'o') digit = [](char ch) { return ch >= '0' && ch <= '7'; };
            if (base == 'b') digit = [](char ch) { return ch == '0' || ch == '1'; };
            if (digit) {
                std::size_t k = i + 2;
                if (k < src_.size() && src_[k] == '_') ++k;
                const std::size_t end = digits_end(k, digit);
                if (end > k) j = end;
            }
        }
        std::string text = src_.substr(i, j - i);
        text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
        tokens_.push_back(
            Token{is_float ? TokenType::Float : TokenType::Integer, std::move(text), pos});
        return j;
    }

    // A quoted literal with Python's unicode-escape decoding.
    std::size_t lex_string(std::size_t i, const SourcePos& pos) {
        const char quote = src_[i];
        std::string value;
        std::size_t j = i + 1;
        while (true) {
            if (j >= src_.size()) fail(i, "unterminated string literal");
            const char c = src_[j];
            if (c == quote) break;
            if (c != '\\') {
                value += c;
                ++j;
                continue;
            }
            if (j + 1 >= src_.size()) fail(i, "unterminated string literal");
            const char e = src_[j + 1];
            j += 2;
            switch (e) {
                case '\n':
                    break;
                case '\\':
                    value += '\\';
                    break;
                case '\'':
                    value += '\'';
                    break;
                case '"':
                    value += '"';
                    break;
                case 'a':
                    value += '\a';
                    break;
                case 'b':
                    value += '\b';
                    break;
                case 'f':
                    value += '\f';
                    break;
                case 'n':
                    value += '\n';
                    break;
                case 'r':
                    value += '\r';
                    break;
                case 't':
                    value += '\t';
                    break;
                case 'v':
                    value += '\v';
                    break;
                case 'x':
                case 'u':
                case 'U': {
                    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    const std::optional<uint32_t> read = read_hex(src_, j, digits);
                    if (!read)
                        fail(i, concat("truncated \\", std::string(1, e),
                                       " escape in string literal"));
                    j += static_cast<std::size_t>(digits);
                    const char32_t cp = *read;
                    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                        fail(i, "invalid code point escape in string literal");
                    unicode::append_utf8(value, cp);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        char32_t cp = static_cast<char32_t>(e - '0');
                        for (int k = 0;
                             k < 2 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7'; ++k)
                            cp = cp * 8 + static_cast<char32_t>(src_[j++] - '0');
                        unicode::append_utf8(value, cp);
                    } else {
                        value += '\\';
                        value += e;
                    }
            }
        }
        tokens_.push_back(Token{TokenType::String, std::move(value), pos});
        return j + 1;
    }

    std::string src_;
    LexerOptions options_;
    std::vector<std::size_t> line_starts_;
    std::size_t pos_ = 0;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
    if (!unicode::is_valid_utf8(source)) throw FormatError("template is not valid UTF-8");
    return Lexer(normalize_newlines(source, options.keep_trailing_newline), options).run();
}

}  // namespace minfer::jinja
