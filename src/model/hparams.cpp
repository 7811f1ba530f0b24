#include "model/hparams.h"

#include <cmath>

#include "core/error.h"
#include "core/log.h"

namespace minfer {
namespace {

// Generous bounds that only reject nonsense (they protect allocations sized from these numbers).
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxExperts = 4096;
constexpr int64_t kMaxContext = int64_t{1} << 24;

float read_rope_freq_scale(const ArchKeys& keys) {
    const auto type = keys.optional_string("rope.scaling.type");
    // LongRoPE (phi3: "longrope", older files "su") rescales by its factor tensors, not here.
    if (!type || *type == "none" || *type == "longrope" || *type == "su") {
        // Older files: rope.scale_linear.
        const double linear = keys.optional_number("rope.scale_linear", 1.0, 1e-6, 1e6);
        return static_cast<float>(1.0 / linear);
    }
    if (*type == "linear") {
        const double factor = keys.optional_number("rope.scaling.factor", 1.0, 1e-6, 1e6);
        return static_cast<float>(1.0 / factor);
    }
    throw UnsupportedError(concat(keys.metadata().source(), ": RoPE scaling type '", *type,
                                  "' is not supported yet (supported: none, linear, longrope)"));
}

}  // namespace

void ArchKeys::out_of_range(std::string_view suffix, const std::string& value,
                            const std::string& expected) const {
    throw FormatError(concat(meta_.source(), ": metadata key '", key(suffix), "' is ", value,
                             ", expected ", expected));
}

int64_t ArchKeys::required_int(std::string_view suffix, int64_t lo, int64_t hi) const {
    const int64_t v = meta_.get_int(key(suffix));
    if (v < lo || v > hi) out_of_range(suffix, concat(v), concat(lo, "..", hi));
    return v;
}

int64_t ArchKeys::optional_int(std::string_view suffix, int64_t fallback, int64_t lo,
                               int64_t hi) const {
    const auto v = meta_.get_int_optional(key(suffix));
    if (!v) return fallback;
    if (*v < lo || *v > hi) out_of_range(suffix, concat(*v), concat(lo, "..", hi));
    return *v;
}

double ArchKeys::optional_number(std::string_view suffix, double fallback, double lo,
                                 double hi) const {
    const auto v = meta_.get_number_optional(key(suffix));
    if (!v) return fallback;
    if (!std::isfinite(*v) || *v < lo || *v > hi)
        out_of_range(suffix, concat(*v), concat("a number in ", lo, "..", hi));
    return *v;
}

std::optional<std::string_view> ArchKeys::optional_string(std::string_view suffix) const {
    return meta_.get_string_optional(key(suffix));
}

HParams read_hparams(const GgufMetadata& meta, std::string_view arch_name) {
    const ArchKeys keys(meta, arch_name);
    HParams hp;
    hp.architecture = std::string(arch_name);
    hp.n_layer = keys.required_int("block_count", 1, kMaxLayers);
    hp.n_embd = keys.required_int("embedding_length", 1, kMaxWidth);
    hp.n_ff = keys.required_int("feed_forward_length", 1, kMaxWidth);
    hp.n_head = keys.required_int("attention.head_count", 1, kMaxHeads);
    hp.n_head_kv = keys.optional_int("attention.head_count_kv", hp.n_head, 1, hp.n_head);
    if (hp.n_head % hp.n_head_kv != 0) {
        throw FormatError(concat(meta.source(), ": ", hp.n_head,
                                 " attention heads are not divisible by ", hp.n_head_kv,
                                 " KV heads (", keys.key("attention.head_count_kv"), ")"));
    }
    if (hp.n_embd % hp.n_head != 0 && !keys.contains("attention.key_length")) {
        throw FormatError(concat(meta.source(), ": embedding length ", hp.n_embd,
                                 " is not divisible by ", hp.n_head, " heads and ",
                                 keys.key("attention.key_length"), " is missing"));
    }
    hp.head_dim_k = keys.optional_int("attention.key_length", hp.n_embd / hp.n_head, 1, kMaxWidth);
    hp.head_dim_v = keys.optional_int("attention.value_length", hp.head_dim_k, 1, kMaxWidth);
    hp.n_rot = keys.optional_int("rope.dimension_count", hp.head_dim_k, 0, hp.head_dim_k);
    if (hp.n_rot % 2 != 0) {
        throw FormatError(concat(meta.source(), ": ", keys.key("rope.dimension_count"), " is ",
                                 hp.n_rot, ", expected an even number"));
    }
    hp.n_ctx_train = keys.optional_int("context_length", 2048, 1, kMaxContext);
    hp.n_ctx_orig =
        keys.optional_int("rope.scaling.original_context_length", hp.n_ctx_train, 1, kMaxContext);
    hp.rope_freq_base =
        static_cast<float>(keys.optional_number("rope.freq_base", 10000.0, 1e-6, 1e30));
    if (!(hp.rope_freq_base > 0.0f)) {
        throw FormatError(concat(meta.source(), ": ", keys.key("rope.freq_base"), " is ",
                                 hp.rope_freq_base, ", expected a positive number"));
    }
    hp.rope_freq_scale = read_rope_freq_scale(keys);
    if (keys.contains("rope.scaling.attn_factor"))
        hp.rope_attn_factor =
            static_cast<float>(keys.optional_number("rope.scaling.attn_factor", 1.0, 1e-3, 1e3));
    hp.rms_eps = static_cast<float>(
        keys.optional_number("attention.layer_norm_rms_epsilon", 1e-5, 1e-30, 0.5));
    hp.sliding_window = keys.optional_int("attention.sliding_window", 0, 0, kMaxContext);
    hp.n_expert = keys.optional_int("expert_count", 0, 0, kMaxExperts);
    if (hp.n_expert > 0) {
        hp.n_expert_used = keys.required_int("expert_used_count", 1, hp.n_expert);
        hp.n_ff_expert = keys.optional_int("expert_feed_forward_length", hp.n_ff, 1, kMaxWidth);
    }
    return hp;
}

LayerConfig uniform_layer_config(const HParams& hp, RopeStyle style) {
    LayerConfig c;
    c.n_head = hp.n_head;
    c.n_head_kv = hp.n_head_kv;
    c.head_dim_k = hp.head_dim_k;
    c.head_dim_v = hp.head_dim_v;
    c.n_ff = hp.n_expert > 0 ? hp.n_ff_expert : hp.n_ff;
    c.n_expert = hp.n_expert;
    c.n_expert_used = hp.n_expert_used;
    c.rope = RopeParams{style, hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale,
                        hp.rope_attn_factor.value_or(1.0f)};
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
    return c;
}

}  // namespace minfer
