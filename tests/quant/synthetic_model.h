#pragma once
// Small llama-shaped GGUF models built in memory for the quantization-mix tests: any number of
// layers, chosen widths (to exercise the row-length fallbacks), f16 weights of a fixed
// pseudo-random pattern, f32 norms and biases.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "gguf/gguf_writer.h"

namespace minfer::test {

struct SyntheticModel {
    std::string arch = "llama";
    int n_layer = 4;
    int64_t n_embd = 256;
    int64_t n_ff = 512;  // ffn_down rows have n_ff values
    int64_t n_kv = 64;   // attn_k / attn_v output rows
    int64_t n_vocab = 64;
    uint32_t n_head = 8;
    uint32_t n_head_kv = 2;  // n_gqa = 4
    bool tied_output = false;
    bool v_bias = false;
    GgmlType weight_type = GgmlType::F16;
};

// Deterministic weights in about [-1, 1].
inline float synthetic_value(uint64_t i) {
    return std::sin(0.7311f * static_cast<float>(i % 100003)) *
           (0.25f + 0.75f * std::fabs(std::cos(0.013f * static_cast<float>(i % 977))));
}

inline void fill_weights(GgmlType type, std::span<std::byte> out, uint64_t seed) {
    if (type == GgmlType::F32) {
        for (std::size_t i = 0; i < out.size() / 4; ++i) {
            const float v = synthetic_value(seed + i);
            std::memcpy(out.data() + 4 * i, &v, 4);
        }
        return;
    }
    for (std::size_t i = 0; i < out.size() / 2; ++i) {
        const float v = synthetic_value(seed + i);
        const uint16_t h = type == GgmlType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
    }
}

inline std::vector<std::byte> build_synthetic_model(const SyntheticModel& m) {
    GgufWriter w;
    auto& meta = w.metadata();
    meta.add("general.architecture", GgufValue::string(m.arch));
    meta.add("general.name", GgufValue::string("synthetic"));
    meta.add(m.arch + ".block_count", GgufValue::of<uint32_t>(static_cast<uint32_t>(m.n_layer)));
    meta.add(m.arch + ".embedding_length",
             GgufValue::of<uint32_t>(static_cast<uint32_t>(m.n_embd)));
    meta.add(m.arch + ".attention.head_count", GgufValue::of<uint32_t>(m.n_head));
    meta.add(m.arch + ".attention.head_count_kv", GgufValue::of<uint32_t>(m.n_head_kv));
    meta.add("general.file_type", GgufValue::of<uint32_t>(1));
    uint64_t seed = 1;
    auto weight = [&](const std::string& name, int64_t cols, int64_t rows) {
        const GgmlType type = m.weight_type;
        const uint64_t s = seed;
        seed += static_cast<uint64_t>(cols * rows);
        w.add_tensor(name, type, {cols, rows},
                     [type, s](std::span<std::byte> out) { fill_weights(type, out, s); });
    };
    auto vector = [&](const std::string& name, int64_t n) {
        w.add_tensor(name, GgmlType::F32, {n}, [](std::span<std::byte> out) {
            for (std::size_t i = 0; i < out.size() / 4; ++i) {
                const float one = 1.0f;
                std::memcpy(out.data() + 4 * i, &one, 4);
            }
        });
    };
    weight("token_embd.weight", m.n_embd, m.n_vocab);
    vector("output_norm.weight", m.n_embd);
    if (!m.tied_output) weight("output.weight", m.n_embd, m.n_vocab);
    for (int l = 0; l < m.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        vector(b + "attn_norm.weight", m.n_embd);
        weight(b + "attn_q.weight", m.n_embd, m.n_embd);
        weight(b + "attn_k.weight", m.n_embd, m.n_kv);
        weight(b + "attn_v.weight", m.n_embd, m.n_kv);
        if (m.v_bias) vector(b + "attn_v.bias", m.n_kv);
        weight(b + "attn_output.weight", m.n_embd, m.n_embd);
        vector(b + "ffn_norm.weight", m.n_embd);
        weight(b + "ffn_gate.weight", m.n_embd, m.n_ff);
        weight(b + "ffn_up.weight", m.n_embd, m.n_ff);
        weight(b + "ffn_down.weight", m.n_ff, m.n_embd);
    }
    return w.to_bytes();
}

}  // namespace minfer::test
