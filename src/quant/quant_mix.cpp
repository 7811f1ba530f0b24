#include "quant/quant_mix.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace minfer {
namespace {

struct MixInfo {
    QuantMix mix;
    std::string_view name;
    GgmlType base;
};

constexpr std::array<MixInfo, 18> kMixes = {{
    {QuantMix::Q4_0, "Q4_0", GgmlType::Q4_0},
    {QuantMix::Q4_1, "Q4_1", GgmlType::Q4_1},
    {QuantMix::Q5_0, "Q5_0", GgmlType::Q5_0},
    {QuantMix::Q5_1, "Q5_1", GgmlType::Q5_1},
    {QuantMix::Q8_0, "Q8_0", GgmlType::Q8_0},
    {QuantMix::Q2_K, "Q2_K", GgmlType::Q2_K},
    {QuantMix::Q3_K_S, "Q3_K_S", GgmlType::Q3_K},
    {QuantMix::Q3_K_M, "Q3_K_M", GgmlType::Q3_K},
    {QuantMix::Q3_K_L, "Q3_K_L", GgmlType::Q3_K},
    {QuantMix::Q4_K_S, "Q4_K_S", GgmlType::Q4_K},
    {QuantMix::Q4_K_M, "Q4_K_M", GgmlType::Q4_K},
    {QuantMix::Q5_K_S, "Q5_K_S", GgmlType::Q5_K},
    {QuantMix::Q5_K_M, "Q5_K_M", GgmlType::Q5_K},
    {QuantMix::Q6_K, "Q6_K", GgmlType::Q6_K},
    {QuantMix::IQ4_NL, "IQ4_NL", GgmlType::IQ4_NL},
    {QuantMix::F16, "F16", GgmlType::F16},
    {QuantMix::BF16, "BF16", GgmlType::BF16},
    {QuantMix::F32, "F32", GgmlType::F32},
}};

const MixInfo& info(QuantMix mix) {
    for (const MixInfo& m : kMixes) {
        if (m.mix == mix) return m;
    }
    return kMixes.front();  // unreachable for a valid enum value
}

bool equals_ignore_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::toupper(static_cast<unsigned char>(x)) ==
                      std::toupper(static_cast<unsigned char>(y));
           });
}

bool contains(std::string_view s, std::string_view part) {
    return s.find(part) != std::string_view::npos;
}

// The N of a "blk.N." prefix, or -1.
int block_index(std::string_view name) {
    constexpr std::string_view kPrefix = "blk.";
    if (!name.starts_with(kPrefix)) return -1;
    int n = 0;
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size();
    const auto [end, ec] = std::from_chars(first, last, n);
    if (ec != std::errc{} || end == first || end == last || *end != '.') return -1;
    return n;
}

// ggml_n_dims: 1 + the index of the last dimension above 1.
int effective_dims(const TensorInfo& t) {
    for (int i = static_cast<int>(t.ne.size()) - 1; i >= 1; --i) {
        if (t.ne[i] > 1) return i + 1;
    }
    return 1;
}

// Integer metadata that may be a scalar or a per-layer array (the first layer's value).
int first_int(const GgufMetadata& meta, const std::string& key, int fallback) {
    const GgufValue* v = meta.find(key);
    if (v == nullptr) return fallback;
    if (v->type() == GgufType::Array) {
        const GgufArray& a = v->as_array();
        if (a.size() == 0 || a.element_type() == GgufType::String ||
            a.element_type() == GgufType::Array) {
            return fallback;
        }
        const double first = a.number_at(0);
        return std::isfinite(first) && first >= 0 && first < 1e9 ? static_cast<int>(first)
                                                                 : fallback;
    }
    if (!v->is_integer()) return fallback;
    const int64_t value = meta.get_int(key);
    return value >= 0 && value < 1'000'000'000 ? static_cast<int>(value) : fallback;
}

// llama.cpp's choice of layers that get more bits: the first and last eighth, and every third
// layer in between.
bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
           (i_layer - n_layers / 8) % 3 == 2;
}

}  // namespace

std::optional<QuantMix> quant_mix_from_name(std::string_view name) {
    for (const MixInfo& m : kMixes) {
        if (equals_ignore_case(m.name, name)) return m.mix;
    }
    if (equals_ignore_case(name, "Q3_K")) return QuantMix::Q3_K_M;
    if (equals_ignore_case(name, "Q4_K")) return QuantMix::Q4_K_M;
    if (equals_ignore_case(name, "Q5_K")) return QuantMix::Q5_K_M;
    return std::nullopt;
}

std::string_view quant_mix_name(QuantMix mix) {
    return info(mix).name;
}

const std::vector<QuantMix>& all_quant_mixes() {
    static const std::vector<QuantMix> mixes = [] {
        std::vector<QuantMix> out;
        for (const MixInfo& m : kMixes) out.push_back(m.mix);
        return out;
    }();
    return mixes;
}

GgmlType base_type(QuantMix mix) {
    return info(mix).base;
}

bool is_quantizable_tensor(const TensorInfo& t) {
    const std::string_view name = t.name;
    if (!name.ends_with("weight") || effective_dims(t) < 2) return false;
    static constexpr std::string_view kKeptParts[] = {
        "_norm.weight",         // norms
        "ffn_gate_inp.weight",  // MoE routers
        "altup",
        "laurel",
        "per_layer_model_proj",  // small Gemma 3n matrices
        "ssm_conv1d.weight",
        "shortconv.conv.weight",  // Mamba / LFM2 convolutions
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",  // RWKV
        "attn_rel_b.weight",           // T5 relative position bias
    };
    for (std::string_view part : kKeptParts) {
        if (contains(name, part)) return false;
    }
    return name != "position_embd.weight" && name != "token_types.weight";
}

bool tensor_order_less(const TensorInfo& a, const TensorInfo& b) {
    const int la = block_index(a.name);
    const int lb = block_index(b.name);
    if (la != lb) return la < lb;
    return a.name < b.name;
}

TensorTypeChooser::TensorTypeChooser(const GgufFile& model, QuantMix mix) : mix_(mix) {
    const GgufMetadata& meta = model.metadata();
    arch_ = std::string(meta.get_string("general.architecture"));
    const int64_t n_layer = meta.get_int(arch_ + ".block_count");
    if (n_layer < 0 || n_layer > 1'000'000) {
        throw FormatError(concat(model.path().string(), ": ", arch_, ".block_count is ", n_layer,
                                 ", expected 0 to 1000000"));
    }
    n_layer_ = static_cast<int>(n_layer);
    n_head_ = first_int(meta, arch_ + ".attention.head_count", 0);
    n_head_kv_ = first_int(meta, arch_ + ".attention.head_count_kv", n_head_);
    n_expert_ = first_int(meta, arch_ + ".expert_count", 0);
    // llama.cpp's LLM_TYPE_70B, the only size its rules look at.
    is_70b_ = n_layer_ == 80 && ((arch_ == "llama" && n_head_ != n_head_kv_) || arch_ == "qwen2");
    for (const TensorInfo* t : model.tensors()) {
        if (contains(t->name, "attn_v.weight") || contains(t->name, "attn_qkv.weight") ||
            contains(t->name, "attn_kv_b.weight")) {
            ++n_attention_wv_;
        } else if (t->name == "output.weight") {
            has_output_ = true;
        }
    }
}

int TensorTypeChooser::layer_of(const TensorInfo& t, int counter) const {
    if (n_expert_ <= 1) return counter;
    const int layer = block_index(t.name);
    if (layer < 0 || layer >= n_layer_) {
        throw FormatError(concat("tensor ", t.name,
                                 ": cannot tell its layer (expected blk.N. with N below ", n_layer_,
                                 ")"));
    }
    return layer;
}

GgmlType TensorTypeChooser::choose(const TensorInfo& t) {
    const GgmlType base = base_type(mix_);
    if (!is_quantized_mix()) return base;
    return fallback(t, choose_before_fallback(t, base));
}

bool TensorTypeChooser::is_quantized_mix() const {
    return mix_ != QuantMix::F32 && mix_ != QuantMix::F16 && mix_ != QuantMix::BF16;
}

GgmlType TensorTypeChooser::choose_before_fallback(const TensorInfo& t, GgmlType type) {
    using enum QuantMix;
    const std::string_view name = t.name;
    const bool falcon = arch_ == "falcon";
    const int n_gqa = n_head_kv_ > 0 ? n_head_ / n_head_kv_ : 0;

    if (name == "output.weight" || (!has_output_ && name == "token_embd.weight")) {
        // The output matrix (or the embedding that doubles as it) is the most sensitive.
        if (falcon || t.ne[0] % block_size(type) != 0) return GgmlType::Q8_0;
        return type == GgmlType::Q8_0 ? type : GgmlType::Q6_K;
    }
    if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return type;

    if (contains(name, "attn_v.weight")) {
        const int i = i_attention_wv_++;
        if (mix_ == Q2_K) {
            type = n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
        } else if (mix_ == Q3_K_M) {
            type = i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
        } else if (mix_ == Q3_K_L) {
            type = GgmlType::Q5_K;
        } else if (mix_ == IQ4_NL && n_gqa >= 4) {
            type = GgmlType::Q5_K;
        } else if ((mix_ == Q4_K_M || mix_ == Q5_K_M) && use_more_bits(i, n_attention_wv_)) {
            type = GgmlType::Q6_K;
        } else if (mix_ == Q4_K_S && i < 4) {
            type = GgmlType::Q5_K;
        }
        if (is_70b_ && (type == GgmlType::Q3_K || type == GgmlType::Q4_K)) type = GgmlType::Q5_K;
        if (n_expert_ == 8) type = GgmlType::Q8_0;
        return type;
    }
    if (contains(name, "attn_k.weight")) {
        return n_expert_ == 8 ? GgmlType::Q8_0 : type;
    }
    if (contains(name, "attn_q.weight")) return type;
    if (contains(name, "ffn_down")) {
        const int i = layer_of(t, i_ffn_down_++);
        const int n = n_layer_;
        if (mix_ == Q2_K) {
            type = GgmlType::Q3_K;
        } else if (mix_ == Q3_K_M) {
            type = i < n / 16                       ? GgmlType::Q5_K
                   : !falcon || use_more_bits(i, n) ? GgmlType::Q4_K
                                                    : GgmlType::Q3_K;
        } else if (mix_ == Q3_K_L) {
            type = falcon ? GgmlType::Q4_K : GgmlType::Q5_K;
        } else if (mix_ == Q4_K_M) {
            if (falcon) {
                type = i < n / 16            ? GgmlType::Q6_K
                       : use_more_bits(i, n) ? GgmlType::Q5_K
                                             : GgmlType::Q4_K;
            } else if (use_more_bits(i, n)) {
                type = GgmlType::Q6_K;
            }
        } else if (i < n / 8 && mix_ == IQ4_NL) {
            type = GgmlType::Q5_K;
        } else if (mix_ == Q5_K_M && use_more_bits(i, n)) {
            type = GgmlType::Q6_K;
        } else if (mix_ == Q4_K_S && !falcon && i < n / 8) {
            type = GgmlType::Q5_K;
        }
        return type;
    }
    if (contains(name, "attn_output.weight")) {
        if (falcon) return mix_ == Q3_K_L ? GgmlType::Q4_K : type;
        if (n_expert_ == 8) {
            const bool bumped = mix_ == Q2_K || mix_ == Q3_K_S || mix_ == Q3_K_M ||
                                mix_ == IQ4_NL || mix_ == Q4_K_S || mix_ == Q4_K_M;
            return bumped ? GgmlType::Q5_K : type;
        }
        if (mix_ == Q2_K) return GgmlType::Q3_K;
        if (mix_ == Q3_K_M) return GgmlType::Q4_K;
        if (mix_ == Q3_K_L) return GgmlType::Q5_K;
        return type;
    }
    if (contains(name, "attn_qkv.weight")) {
        if (mix_ == Q3_K_M || mix_ == Q3_K_L) return GgmlType::Q4_K;
        if (mix_ == Q4_K_M) return GgmlType::Q5_K;
        if (mix_ == Q5_K_M) return GgmlType::Q6_K;
    }
    return type;
}

GgmlType TensorTypeChooser::fallback(const TensorInfo& t, GgmlType type) {
    const int64_t row = t.ne[0];
    if (row % block_size(type) == 0) return type;
    GgmlType substitute;
    switch (type) {
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::IQ4_XS:
            substitute = GgmlType::IQ4_NL;
            break;
        case GgmlType::Q4_K:
            substitute = GgmlType::Q5_0;
            break;
        case GgmlType::Q5_K:
            substitute = GgmlType::Q5_1;
            break;
        case GgmlType::Q6_K:
            substitute = GgmlType::Q8_0;
            break;
        default:
            throw UnsupportedError(concat("tensor ", t.name, " has rows of ", row,
                                          " values, not a multiple of the ", block_size(type),
                                          "-value blocks of ", type_name(type)));
    }
    if (row % block_size(substitute) != 0) substitute = GgmlType::F16;
    ++n_fallback_;
    return substitute;
}

}  // namespace minfer
