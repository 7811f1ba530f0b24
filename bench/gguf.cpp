// GGUF parsing speed: opening (mapping + parsing the header, metadata and tensor table) a file
// with a 150,000-token vocabulary (about 6 MB of metadata), as large models carry.

#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace {

const std::filesystem::path& big_vocab_file() {
    static const std::filesystem::path path = [] {
        auto p = std::filesystem::temp_directory_path() / "minfer-bench-150k-vocab.gguf";
        minfer::GgufWriter w;
        constexpr int kTokens = 150'000;
        std::vector<std::string> tokens, merges;
        std::vector<float> scores;
        std::vector<int32_t> types;
        for (int i = 0; i < kTokens; ++i) {
            tokens.push_back("Ġtoken_" + std::to_string(i));
            merges.push_back("Ġtok en_" + std::to_string(i));
            scores.push_back(-static_cast<float>(i));
            types.push_back(1);
        }
        auto& m = w.metadata();
        m.set("general.architecture", minfer::GgufValue::string("qwen2"));
        m.set("tokenizer.ggml.model", minfer::GgufValue::string("gpt2"));
        m.set("tokenizer.ggml.tokens",
              minfer::GgufValue::array(minfer::GgufArray::of_strings(tokens)));
        m.set("tokenizer.ggml.scores", minfer::GgufValue::array(minfer::GgufArray::of(scores)));
        m.set("tokenizer.ggml.token_type", minfer::GgufValue::array(minfer::GgufArray::of(types)));
        m.set("tokenizer.ggml.merges",
              minfer::GgufValue::array(minfer::GgufArray::of_strings(merges)));
        static std::vector<float> weights(896 * 4);
        for (int i = 0; i < 290; ++i) {
            w.add_tensor("blk." + std::to_string(i) + ".weight", minfer::GgmlType::F32, {896, 4},
                         std::as_bytes(std::span(weights)));
        }
        w.write_file(p);
        return p;
    }();
    return path;
}

void BM_OpenVocab150k(benchmark::State& state) {
    const auto& path = big_vocab_file();
    uint64_t metadata_bytes = 0;
    for (auto _ : state) {
        const minfer::GgufFile file = minfer::GgufFile::open(path);
        metadata_bytes = file.first_part().data_offset;
        benchmark::DoNotOptimize(file.metadata().size());
    }
    state.counters["metadata_MB"] = static_cast<double>(metadata_bytes) / 1e6;
}
BENCHMARK(BM_OpenVocab150k)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
