#include "tokenizer_test_util.h"

#include <sstream>
#include <stdexcept>

#include "core/file_io.h"
#include "gguf/gguf_file.h"

namespace minfer::test {

Tokenizer load_tokenizer(const std::filesystem::path& gguf) {
    const GgufFile file = GgufFile::open(gguf);
    return Tokenizer::from_gguf(file.metadata());
}

std::vector<VocabCase> read_vocab_cases(const std::filesystem::path& gguf) {
    const std::string inp = read_file(gguf.string() + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<VocabCase> cases;
    for (std::size_t pos = 0; pos < inp.size();) {
        const std::size_t next = inp.find(sep, pos);
        if (next == std::string::npos) break;
        cases.push_back(VocabCase{inp.substr(pos, next - pos), {}});
        pos = next + sep.size();
    }
    std::istringstream out(read_file(gguf.string() + ".out"));
    std::string line;
    for (VocabCase& c : cases) {
        if (!std::getline(out, line)) throw std::runtime_error("fewer .out lines than strings");
        std::istringstream ids(line);
        int32_t id = 0;
        while (ids >> id) c.ids.push_back(id);
    }
    return cases;
}

std::vector<std::string> vocab_families() {
    return {"llama-spm",       "phi-3",         "gpt-2",          "falcon",       "starcoder",
            "refact",          "mpt",           "deepseek-coder", "deepseek-llm", "bert-bge",
            "gpt2-llama3-pre", "gpt2-qwen2-pre"};
}

}  // namespace minfer::test
