// Tokenizer speed: MB/s of English text on the gpt-2 and llama-spm vocabularies (single thread),
// and the time to load a 150,000-token vocabulary. The English corpus is ~4 MB of the licence
// and copyright texts every Debian system has (/usr/share/common-licenses, /usr/share/doc).
//
//   ./build/release/bench/bench_tokenizer [--benchmark_filter=Tokenize]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kCorpusBytes = 4 * 1024 * 1024;

const std::string& english_corpus() {
    static const std::string corpus = [] {
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator("/usr/share/common-licenses")) {
            if (e.is_regular_file()) files.push_back(e.path());
        }
        std::vector<fs::path> docs;
        std::error_code ec;
        for (const auto& e : fs::recursive_directory_iterator("/usr/share/doc", ec)) {
            if (e.is_regular_file() && e.path().filename() == "copyright") docs.push_back(e.path());
        }
        std::sort(files.begin(), files.end());
        std::sort(docs.begin(), docs.end());
        files.insert(files.end(), docs.begin(), docs.end());
        std::string text;
        for (const fs::path& f : files) {
            if (text.size() >= kCorpusBytes) break;
            text += minfer::read_file(f);
        }
        text.resize(std::min(text.size(), kCorpusBytes));
        return text;
    }();
    return corpus;
}

fs::path vocab_path(const std::string& name) {
    return fs::path(MINFER_SHARED_DIR) / "fixtures" / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

void tokenize_corpus(benchmark::State& state, const std::string& vocab) {
    const fs::path path = vocab_path(vocab);
    if (!fs::exists(path)) {
        state.SkipWithError(("fixture missing: " + path.string()).c_str());
        return;
    }
    const minfer::GgufFile file = minfer::GgufFile::open(path);
    const minfer::Tokenizer tok = minfer::Tokenizer::from_gguf(file.metadata());
    const std::string& text = english_corpus();
    std::size_t n_tokens = 0;
    for (auto _ : state) {
        const std::vector<int32_t> ids = tok.tokenize(text, false, false);
        n_tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
    state.counters["corpus_MB"] = static_cast<double>(text.size()) / 1e6;
    state.counters["tokens"] = static_cast<double>(n_tokens);
}

void BM_Tokenize_gpt2(benchmark::State& state) {
    tokenize_corpus(state, "gpt-2");
}
void BM_Tokenize_llama_spm(benchmark::State& state) {
    tokenize_corpus(state, "llama-spm");
}
void BM_Tokenize_qwen2_pre(benchmark::State& state) {
    tokenize_corpus(state, "gpt2-qwen2-pre");
}
void BM_Tokenize_llama3_pre(benchmark::State& state) {
    tokenize_corpus(state, "gpt2-llama3-pre");
}
void BM_Tokenize_bert(benchmark::State& state) {
    tokenize_corpus(state, "bert-bge");
}
BENCHMARK(BM_Tokenize_gpt2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Tokenize_llama_spm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Tokenize_qwen2_pre)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Tokenize_llama3_pre)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Tokenize_bert)->Unit(benchmark::kMillisecond);

// A 150,000-token byte-level BPE vocabulary: GPT-2's 50,257 tokens and 50,000 merges padded with
// ~100,000 synthetic tokens and the merges that make them, written once to a temporary GGUF
// file.
const fs::path& large_vocab_path() {
    static const fs::path path = [] {
        const minfer::GgufFile gpt2 = minfer::GgufFile::open(vocab_path("gpt-2"));
        const auto& meta = gpt2.metadata();
        std::vector<std::string> tokens;
        for (auto t : meta.get_array("tokenizer.ggml.tokens").strings()) tokens.emplace_back(t);
        std::vector<std::string> merges;
        for (auto m : meta.get_array("tokenizer.ggml.merges").strings()) merges.emplace_back(m);
        // "Ġsyn" + decimal digits, each made by one merge of a shorter one and a digit, so that
        // both sides of every merge are tokens, as in real vocabularies.
        const std::string stem = "\xC4\xA0syn";
        tokens.push_back(stem);
        for (int i = 0; tokens.size() < 150000; ++i) {
            const std::string parent = i < 10 ? stem : stem + std::to_string(i / 10);
            tokens.push_back(stem + std::to_string(i));
            merges.push_back(parent + " " + std::to_string(i % 10));
        }
        std::vector<int32_t> types(tokens.size(), 1);
        minfer::GgufWriter writer;
        auto& out = writer.metadata();
        out.set("general.architecture", minfer::GgufValue::string("gpt2"));
        out.set("tokenizer.ggml.model", minfer::GgufValue::string("gpt2"));
        out.set("tokenizer.ggml.pre", minfer::GgufValue::string("gpt-2"));
        out.set("tokenizer.ggml.tokens",
                minfer::GgufValue::array(minfer::GgufArray::of_strings(std::move(tokens))));
        out.set("tokenizer.ggml.token_type",
                minfer::GgufValue::array(minfer::GgufArray::of(types)));
        out.set("tokenizer.ggml.merges",
                minfer::GgufValue::array(minfer::GgufArray::of_strings(std::move(merges))));
        out.set("tokenizer.ggml.eos_token_id", minfer::GgufValue::of<uint32_t>(50256));
        const fs::path p = fs::temp_directory_path() / "minfer-bench-vocab-150k.gguf";
        writer.write_file(p);
        return p;
    }();
    return path;
}

// Opening the file (parse + index of 300,000 strings) and building the tokenizer.
void BM_LoadVocab150k_OpenAndBuild(benchmark::State& state) {
    const fs::path& path = large_vocab_path();
    for (auto _ : state) {
        const minfer::GgufFile file = minfer::GgufFile::open(path);
        const minfer::Tokenizer tok = minfer::Tokenizer::from_gguf(file.metadata());
        benchmark::DoNotOptimize(tok.n_vocab());
    }
}
// Building the tokenizer from metadata already parsed (what the engine pays on top of opening
// the model).
void BM_LoadVocab150k_Build(benchmark::State& state) {
    const minfer::GgufFile file = minfer::GgufFile::open(large_vocab_path());
    int32_t n = 0;
    for (auto _ : state) {
        const minfer::Tokenizer tok = minfer::Tokenizer::from_gguf(file.metadata());
        n = tok.n_vocab();
        benchmark::DoNotOptimize(n);
    }
    state.counters["n_vocab"] = n;
}
BENCHMARK(BM_LoadVocab150k_OpenAndBuild)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadVocab150k_Build)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
