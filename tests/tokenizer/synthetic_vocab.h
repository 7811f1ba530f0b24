#pragma once
// Small vocabularies built in memory (GgufMetadata, no file) for tests that need exact control
// over tokens, types and keys.

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_metadata.h"

namespace minfer::test {

struct SyntheticToken {
    std::string text;
    int32_t type = 1;  // tokenizer.ggml.token_type
    float score = 0.0f;
};

// A SentencePiece ("llama") vocabulary: <unk> <s> </s>, the 256 byte tokens, then `extra`.
std::vector<SyntheticToken> spm_base_tokens();

GgufMetadata make_metadata(const std::string& model, const std::vector<SyntheticToken>& tokens);

}  // namespace minfer::test
