#pragma once
// Splits text at the texts of special tokens before tokenizing, as llama.cpp's
// tokenizer_st_partition does: special tokens are taken longest text first, each cutting every
// remaining raw fragment at all its occurrences (left to right). User-defined tokens are always
// cut out; control and unknown tokens only when parse_special is set.

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace minfer {

struct Fragment {
    int32_t token = kNoToken;  // the special token, or kNoToken for raw text
    uint32_t begin = 0;        // raw text: byte range in the input
    uint32_t end = 0;
    bool is_text() const { return token == kNoToken; }
};

std::vector<Fragment> split_special(const Vocabulary& vocab, std::string_view text,
                                    bool parse_special);

}  // namespace minfer
