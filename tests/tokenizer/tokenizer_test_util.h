#pragma once
// Helpers shared by the tokenizer tests: loading fixture vocabularies and llama.cpp's test
// vectors (NAME.gguf.inp / NAME.gguf.out).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace minfer::test {

// Loads the tokenizer of a GGUF file.
Tokenizer load_tokenizer(const std::filesystem::path& gguf);

struct VocabCase {
    std::string text;
    std::vector<int32_t> ids;
};
// The strings of NAME.gguf.inp with the ids of the matching lines of NAME.gguf.out.
std::vector<VocabCase> read_vocab_cases(const std::filesystem::path& gguf);

// Vocabulary files of ../shared/fixtures/vocab that come with test vectors.
std::vector<std::string> vocab_families();

}  // namespace minfer::test
