#include "tiny_model.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/error.h"

namespace minfer::test {

void write_tiny_model(const std::filesystem::path& path, const TinyModelSpec& s) {
    GgufWriter w;
    auto& m = w.metadata();
    const std::string a = s.architecture;
    const auto set_key = [&](const std::string& key, GgufValue v) {
        if (!s.skip_keys.count(key)) m.set(key, std::move(v));
    };
    set_key("general.architecture", GgufValue::string(a));
    set_key(a + ".block_count", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_layer)));
    set_key(a + ".embedding_length", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_embd)));
    set_key(a + ".feed_forward_length", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_ff)));
    set_key(a + ".attention.head_count", GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_head)));
    set_key(a + ".attention.head_count_kv",
            GgufValue::of<uint32_t>(static_cast<uint32_t>(s.n_head_kv)));
    set_key(a + ".context_length", GgufValue::of<uint32_t>(256));
    set_key(a + ".attention.layer_norm_rms_epsilon", GgufValue::of<float>(1e-5f));

    // Tensor storage must outlive write(): keep every buffer here.
    auto storage = std::make_shared<std::vector<std::vector<float>>>();
    std::mt19937 rng(1234);
    const auto add = [&](const std::string& name, std::vector<int64_t> shape, bool is_norm) {
        if (s.skip_tensors.count(name)) return;
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> values(static_cast<std::size_t>(n));
        std::normal_distribution<float> dist(
            is_norm ? 1.0f : 0.0f,
            is_norm ? 0.05f : 1.0f / std::sqrt(static_cast<float>(shape[0])));
        for (auto& v : values) v = dist(rng);
        storage->push_back(std::move(values));
        w.add_tensor(name, GgmlType::F32, std::move(shape),
                     std::as_bytes(std::span(storage->back())));
    };
    const int head_dim = s.n_embd / s.n_head;
    add("token_embd.weight", {s.n_embd, s.n_vocab}, false);
    add("output_norm.weight", {s.n_embd}, true);
    if (!s.tied_output) add("output.weight", {s.n_embd, s.n_vocab}, false);
    for (int i = 0; i < s.n_layer; ++i) {
        const std::string p = "blk." + std::to_string(i) + ".";
        add(p + "attn_norm.weight", {s.n_embd}, true);
        add(p + "attn_q.weight", {s.n_embd, s.n_head * head_dim}, false);
        add(p + "attn_k.weight", {s.n_embd, s.n_head_kv * head_dim}, false);
        add(p + "attn_v.weight", {s.n_embd, s.n_head_kv * head_dim}, false);
        add(p + "attn_output.weight", {s.n_head * head_dim, s.n_embd}, false);
        if (s.qkv_bias) {
            add(p + "attn_q.bias", {s.n_head * head_dim}, false);
            add(p + "attn_k.bias", {s.n_head_kv * head_dim}, false);
            add(p + "attn_v.bias", {s.n_head_kv * head_dim}, false);
        }
        if (s.qk_norm) {
            add(p + "attn_q_norm.weight", {head_dim}, true);
            add(p + "attn_k_norm.weight", {head_dim}, true);
        }
        add(p + "ffn_norm.weight", {s.n_embd}, true);
        add(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, false);
        add(p + "ffn_up.weight", {s.n_embd, s.n_ff}, false);
        add(p + "ffn_down.weight", {s.n_ff, s.n_embd}, false);
    }
    if (s.customize) s.customize(w);
    w.write_file(path);
}

}  // namespace minfer::test
