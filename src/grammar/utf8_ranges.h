#pragma once
// The UTF-8 encodings of a set of code points as byte-range sequences: every code point of the
// set is matched by exactly one sequence, and nothing else is (the split regex engines use to run
// Unicode classes on bytes). [U+0000-U+10FFFF] becomes nine sequences such as
// [E1-EC][80-BF][80-BF].

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace minfer::grammar {

using ByteRange = std::pair<uint8_t, uint8_t>;  // inclusive

// ranges must be normalized (sorted, disjoint, no surrogates). Sequences of one byte come first.
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodepointRange>& ranges);

}  // namespace minfer::grammar
