#pragma once
// Token ids on the command line (`run --tokens`, `score --tokens`, `detokenize`), in every form
// minfer prints them: "1,2,3", "1 2 3" and tokenize --ids' JSON "[1, 2, 3]".

#include <cstdint>
#include <string_view>
#include <vector>

namespace minfer::cli {

// Throws UsageError naming the item that is not a token id (a non-negative 32-bit integer), or
// saying the list is empty. `flag` names the option in messages ("--tokens").
std::vector<int32_t> parse_token_list(std::string_view text, std::string_view flag);

// Throws UsageError if an id is outside the vocabulary of n_vocab tokens.
void check_token_ids(const std::vector<int32_t>& ids, int64_t n_vocab, std::string_view flag);

}  // namespace minfer::cli
