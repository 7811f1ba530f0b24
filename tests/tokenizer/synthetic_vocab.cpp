#include "synthetic_vocab.h"

#include <cstdio>

namespace minfer::test {

std::vector<SyntheticToken> spm_base_tokens() {
    std::vector<SyntheticToken> t = {{"<unk>", 2}, {"<s>", 3}, {"</s>", 3}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        t.push_back({name, 6});
    }
    return t;
}

GgufMetadata make_metadata(const std::string& model, const std::vector<SyntheticToken>& tokens) {
    GgufMetadata meta("synthetic.gguf");
    std::vector<std::string> texts;
    std::vector<int32_t> types;
    std::vector<float> scores;
    for (const SyntheticToken& t : tokens) {
        texts.push_back(t.text);
        types.push_back(t.type);
        scores.push_back(t.score);
    }
    meta.set("tokenizer.ggml.model", GgufValue::string(model));
    meta.set("tokenizer.ggml.tokens", GgufValue::array(GgufArray::of_strings(texts)));
    meta.set("tokenizer.ggml.token_type", GgufValue::array(GgufArray::of(types)));
    meta.set("tokenizer.ggml.scores", GgufValue::array(GgufArray::of(scores)));
    return meta;
}

}  // namespace minfer::test
