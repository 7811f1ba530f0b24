#pragma once
// A PCRE2 pattern compiled once (UTF mode, JIT when available) that splits text into matches and
// the gaps between them.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class CompiledRegex {
  public:
    // Throws Error if the pattern does not compile (patterns are ours, so that is a bug).
    explicit CompiledRegex(std::string_view pattern);
    ~CompiledRegex();
    CompiledRegex(const CompiledRegex&) = delete;
    CompiledRegex& operator=(const CompiledRegex&) = delete;

    const std::string& pattern() const { return pattern_; }

    // Splits subject[begin, end) into words: every match and every non-empty gap between
    // matches, in order; appends their end offsets (absolute). The subject must be valid UTF-8.
    // The piece is matched on its own: look-arounds and `$` see only [begin, end).
    void split(std::string_view subject, uint32_t begin, uint32_t end,
               std::vector<uint32_t>& ends) const;

  private:
    struct Code;
    std::string pattern_;
    std::unique_ptr<Code> code_;
};

}  // namespace minfer
