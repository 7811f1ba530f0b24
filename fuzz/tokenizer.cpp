// libFuzzer target for the tokenizers: arbitrary bytes (invalid UTF-8, special-token text, long
// runs) through every vocabulary family of ../shared/fixtures/vocab, with differential checks
// (fast pre-tokenizer splitters against PCRE2, ids in range, streaming output valid UTF-8), and
// small hostile vocabularies built from the input itself.
//
// Input: byte 0 picks the vocabulary, byte 1 the flags, the rest is the text.
// Vocabularies come from $MINFER_SHARED (else the MINFER_SHARED_DIR the build was configured
// with); seeds are written into $MINFER_FUZZ_SEED_DIR when it is set and empty.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_metadata.h"
#include "seed_dir.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

const char* const kFamilies[] = {
    "llama-spm", "phi-3",          "gpt-2",        "falcon",   "starcoder",       "refact",
    "mpt",       "deepseek-coder", "deepseek-llm", "bert-bge", "gpt2-llama3-pre", "gpt2-qwen2-pre",
    "gpt-neox"};

std::vector<std::unique_ptr<minfer::Tokenizer>>& tokenizers() {
    static std::vector<std::unique_ptr<minfer::Tokenizer>> t;
    return t;
}

fs::path shared_dir() {
    if (const char* env = std::getenv("MINFER_SHARED")) return env;
#ifdef MINFER_SHARED_DIR
    return MINFER_SHARED_DIR;
#else
    return "../shared";
#endif
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_seeds(const fs::path& dir) {
    int n = 0;
    const auto seed = [&](uint8_t family, uint8_t flags, const std::string& text) {
        std::ofstream(dir / ("seed-" + std::to_string(n++)), std::ios::binary)
            << static_cast<char>(family) << static_cast<char>(flags) << text;
    };
    for (uint8_t f = 0; f < std::size(kFamilies); ++f) {
        const std::string inp =
            read_file(shared_dir() / "fixtures" / "vocab" /
                      (std::string("ggml-vocab-") + kFamilies[f] + ".gguf.inp"));
        const std::string sep = "\n__ggml_vocab_test__\n";
        int taken = 0;
        for (std::size_t pos = 0; pos < inp.size() && taken < 12;) {
            const std::size_t next = inp.find(sep, pos);
            if (next == std::string::npos) break;
            seed(f, static_cast<uint8_t>(taken * 37), inp.substr(pos, next - pos));
            pos = next + sep.size();
            ++taken;
        }
        seed(f, 3, "<|im_start|>user\n<s>[CLS]<|endoftext|>\xFF\xC3 \xE2\x96\x81\xED\xA0\x80");
    }
    // hostile vocabularies: tokens separated by \n, then \x01\x01, then the text
    seed(0, 0x80,
         "\xE2\x96\x81"
         "a\na\nab\n<s>\n\x01\x01"
         "ab ab<s>");
    seed(2, 0x80,
         "a\nb\nab\na b\n\xC4\xA0\n\x01\x01"
         "ab  ab");
    seed(9, 0x80,
         "[UNK]\n\xE2\x96\x81"
         "ab\nc\n\x01\x01"
         "AB c \xC3\xA9");
}

// A vocabulary made from the input: token types come from the first byte of each line.
void fuzz_vocabulary(uint8_t selector, std::string_view rest) {
    const std::size_t split = rest.find("\x01\x01");
    if (split == std::string_view::npos) return;
    const std::string_view vocab = rest.substr(0, split), text = rest.substr(split + 2);
    std::vector<std::string> tokens, merges;
    std::vector<int32_t> types;
    std::vector<float> scores;
    for (std::size_t pos = 0; pos <= vocab.size() && tokens.size() < 512;) {
        std::size_t end = vocab.find('\n', pos);
        if (end == std::string_view::npos) end = vocab.size();
        const std::string_view line = vocab.substr(pos, end - pos);
        tokens.emplace_back(line);
        types.push_back(line.empty() ? 1 : static_cast<uint8_t>(line[0]) % 7);
        scores.push_back(static_cast<float>(tokens.size() % 5) - 2.0f);
        if (line.find(' ') != std::string_view::npos) merges.emplace_back(line);
        pos = end + 1;
    }
    static const char* const kModels[] = {"llama", "gpt2", "bert"};
    minfer::GgufMetadata meta("fuzz.gguf");
    meta.set("tokenizer.ggml.model", minfer::GgufValue::string(kModels[selector % 3]));
    meta.set("tokenizer.ggml.tokens",
             minfer::GgufValue::array(minfer::GgufArray::of_strings(tokens)));
    meta.set("tokenizer.ggml.token_type", minfer::GgufValue::array(minfer::GgufArray::of(types)));
    meta.set("tokenizer.ggml.scores", minfer::GgufValue::array(minfer::GgufArray::of(scores)));
    meta.set("tokenizer.ggml.merges",
             minfer::GgufValue::array(minfer::GgufArray::of_strings(merges)));
    meta.set("tokenizer.ggml.pre", minfer::GgufValue::string(selector & 8 ? "llama-bpe" : "gpt-2"));
    try {
        const minfer::Tokenizer tok = minfer::Tokenizer::from_gguf(meta);
        const std::vector<int32_t> ids = tok.tokenize(text, true, (selector & 16) != 0);
        for (int32_t id : ids) {
            if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
        }
        tok.detokenize(ids, true);
    } catch (const minfer::Error&) {
        // a clear error is a fine answer to a broken vocabulary
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    for (const char* family : kFamilies) {
        const fs::path path =
            shared_dir() / "fixtures" / "vocab" / (std::string("ggml-vocab-") + family + ".gguf");
        const minfer::GgufFile file = minfer::GgufFile::open(path);
        tokenizers().push_back(
            std::make_unique<minfer::Tokenizer>(minfer::Tokenizer::from_gguf(file.metadata())));
    }
    if (const auto dir = minfer::fuzz::empty_seed_dir()) write_seeds(*dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const uint8_t selector = data[0], flags = data[1];
    const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
    if (flags & 0x80) {
        fuzz_vocabulary(selector, text);
        return 0;
    }
    const minfer::Tokenizer& tok = *tokenizers()[selector % tokenizers().size()];
    const bool add_special = flags & 1, parse_special = flags & 2, show_special = flags & 4;
    const std::vector<int32_t> ids = tok.tokenize(text, add_special, parse_special);
    for (int32_t id : ids) {
        if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
    }
    const std::string back = tok.detokenize(ids, show_special);
    if (selector % tokenizers().size() == 0 && !add_special && !show_special) {
        // byte fallback: valid UTF-8 comes back exactly (but U+2581 is SentencePiece's space)
        const bool lossless = minfer::sanitize_utf8(text) == text &&
                              text.find("\xE2\x96\x81") == std::string_view::npos;
        if (lossless && tok.detokenize(tok.tokenize(text, false, false), false) != text) {
            __builtin_trap();
        }
    }
    minfer::StreamingDecoder decoder(tok, show_special);
    std::string streamed;
    for (int32_t id : ids) {
        const std::string part = decoder.feed(id);
        if (minfer::sanitize_utf8(part) != part) __builtin_trap();
        streamed += part;
    }
    streamed += decoder.finish();
    if (flags & 8 && tok.model_name() == "gpt2") {
        if (tok.pre_tokenize(text, false) != tok.pre_tokenize(text, true)) __builtin_trap();
    }
    return 0;
}
