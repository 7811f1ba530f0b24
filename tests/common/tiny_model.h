#pragma once
// Writes small random-weight decoder models with GgufWriter, for tests that need a model file
// with a specific defect (a missing key, a wrongly shaped tensor, an unsupported type).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "gguf/gguf_writer.h"

namespace minfer::test {

struct TinyModelSpec {
    std::string architecture = "llama";
    int n_layer = 2;
    int n_embd = 64;
    int n_head = 4;
    int n_head_kv = 2;
    int n_ff = 96;
    int n_vocab = 128;
    bool qkv_bias = false;  // qwen2
    bool qk_norm = false;   // qwen3
    bool tied_output = false;
    std::set<std::string> skip_tensors;  // leave these out
    std::set<std::string> skip_keys;     // leave these metadata keys out
    // Last chance to change the writer (override a key, add a tensor).
    std::function<void(GgufWriter&)> customize;
};

// Writes the model to `path` (F32 weights, normal(0, 1/sqrt(fan_in)), norms near 1).
void write_tiny_model(const std::filesystem::path& path, const TinyModelSpec& spec);

}  // namespace minfer::test
