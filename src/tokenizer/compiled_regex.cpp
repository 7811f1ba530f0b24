#include "tokenizer/compiled_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

constexpr uint32_t kMatchLimit = 10'000'000;          // backtracking steps per match attempt
constexpr PCRE2_SIZE kJitStackMax = 8 * 1024 * 1024;  // bytes

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(code, buffer, sizeof(buffer));
    return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
    void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
};
struct MatchContextDeleter {
    void operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
};
struct JitStackDeleter {
    void operator()(pcre2_jit_stack* p) const { pcre2_jit_stack_free(p); }
};

}  // namespace

struct CompiledRegex::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

CompiledRegex::CompiledRegex(std::string_view pattern)
    : pattern_(pattern), code_(std::make_unique<Code>()) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    // No PCRE2_UCP: \s is ASCII whitespace only, as in llama.cpp, which replaces every other
    // whitespace code point by \v before matching (split() callers do the same).
    code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &error, &error_offset, nullptr);
    if (code_->code == nullptr) {
        throw Error(concat("pre-tokenizer pattern does not compile at offset ", error_offset, ": ",
                           pcre2_message(error), ": ", pattern_));
    }
    pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
}

CompiledRegex::~CompiledRegex() = default;

namespace {

// Match buffers and the JIT stack, made once per thread (creating a JIT stack maps memory, far
// too slow to do per piece). One pair of offsets suffices: only the whole match is used.
struct MatchScratch {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> data{pcre2_match_data_create(1, nullptr)};
    std::unique_ptr<pcre2_match_context, MatchContextDeleter> context{
        pcre2_match_context_create(nullptr)};
    std::unique_ptr<pcre2_jit_stack, JitStackDeleter> stack{
        pcre2_jit_stack_create(32 * 1024, kJitStackMax, nullptr)};

    MatchScratch() {
        if (!data || !context || !stack) throw Error("pre-tokenizer: out of memory for PCRE2");
        pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
        pcre2_set_match_limit(context.get(), kMatchLimit);
    }
};

}  // namespace

void CompiledRegex::split(std::string_view subject, uint32_t begin, uint32_t end,
                          std::vector<uint32_t>& ends) const {
    thread_local MatchScratch scratch;
    pcre2_match_data* match = scratch.data.get();
    const auto* piece = reinterpret_cast<PCRE2_SPTR>(subject.data() + begin);
    const PCRE2_SIZE length = end - begin;
    PCRE2_SIZE start = 0;     // where the next match attempt starts
    PCRE2_SIZE word_end = 0;  // end of the last word emitted
    while (start < length) {
        // rc == 0: more groups than offsets to hold them, but the whole match is there
        const int rc = pcre2_match(code_->code, piece, length, start, PCRE2_NO_UTF_CHECK, match,
                                   scratch.context.get());
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            throw Error(concat("pre-tokenizer: matching /", pattern_, "/ failed on a piece of ",
                               length, " bytes: ", pcre2_message(rc)));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const PCRE2_SIZE m_begin = ovector[0], m_end = ovector[1];
        if (m_end == m_begin) {  // empty match: move on one code point, emit nothing
            start = m_begin + unicode::sequence_length(piece[m_begin]);
            continue;
        }
        if (m_begin > word_end) ends.push_back(begin + static_cast<uint32_t>(m_begin));
        ends.push_back(begin + static_cast<uint32_t>(m_end));
        word_end = start = m_end;
    }
    if (word_end < length) ends.push_back(end);
}

}  // namespace minfer
