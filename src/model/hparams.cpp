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

class KeyReader {
  public:
    KeyReader(const GgufMetadata& meta, std::string_view prefix) : meta_(meta), prefix_(prefix) {}

    std::string key(std::string_view suffix) const { return concat(prefix_, ".", suffix); }

    int64_t required_int(std::string_view suffix, int64_t lo, int64_t hi) const {
        return checked(suffix, meta_.get_int(key(suffix)), lo, hi);
    }
    int64_t optional_int(std::string_view suffix, int64_t fallback, int64_t lo, int64_t hi) const {
        const auto v = meta_.get_int_optional(key(suffix));
        return v ? checked(suffix, *v, lo, hi) : fallback;
    }
    double optional_number(std::string_view suffix, double fallback) const {
        return meta_.get_number_optional(key(suffix)).value_or(fallback);
    }
    std::optional<std::string_view> optional_string(std::string_view suffix) const {
        return meta_.get_string_optional(key(suffix));
    }

  private:
    int64_t checked(std::string_view suffix, int64_t v, int64_t lo, int64_t hi) const {
        if (v < lo || v > hi) {
            throw FormatError(concat(meta_.source(), ": metadata key '", key(suffix), "' is ", v,
                                     ", expected ", lo, "..", hi));
        }
        return v;
    }

    const GgufMetadata& meta_;
    std::string prefix_;
};

float read_rope_freq_scale(const KeyReader& keys, const GgufMetadata& meta) {
    const auto type = keys.optional_string("rope.scaling.type");
    if (!type || *type == "none") {
        // Older files: rope.scale_linear.
        const double linear = keys.optional_number("rope.scale_linear", 1.0);
        return static_cast<float>(1.0 / linear);
    }
    if (*type == "linear") {
        const double factor = keys.optional_number("rope.scaling.factor", 1.0);
        if (!(factor > 0.0) || !std::isfinite(factor)) {
            throw FormatError(concat(meta.source(), ": metadata key '",
                                     keys.key("rope.scaling.factor"), "' is ", factor,
                                     ", expected a positive number"));
        }
        return static_cast<float>(1.0 / factor);
    }
    throw UnsupportedError(concat(meta.source(), ": RoPE scaling type '", *type,
                                  "' is not supported yet (supported: none, linear)"));
}

}  // namespace

HParams read_hparams(const GgufMetadata& meta, std::string_view arch_name) {
    const KeyReader keys(meta, arch_name);
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
    if (hp.n_embd % hp.n_head != 0 && !meta.contains(keys.key("attention.key_length"))) {
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
    hp.n_ctx_train = keys.optional_int("context_length", 2048, 1, int64_t{1} << 24);
    hp.rope_freq_base = static_cast<float>(keys.optional_number("rope.freq_base", 10000.0));
    if (!(hp.rope_freq_base > 0.0f) || !std::isfinite(hp.rope_freq_base)) {
        throw FormatError(concat(meta.source(), ": ", keys.key("rope.freq_base"), " is ",
                                 hp.rope_freq_base, ", expected a positive number"));
    }
    hp.rope_freq_scale = read_rope_freq_scale(keys, meta);
    hp.rms_eps = static_cast<float>(keys.optional_number("attention.layer_norm_rms_epsilon", 1e-5));
    if (!(hp.rms_eps > 0.0f) || !(hp.rms_eps < 1.0f)) {
        throw FormatError(concat(meta.source(), ": ", keys.key("attention.layer_norm_rms_epsilon"),
                                 " is ", hp.rms_eps, ", expected a small positive number"));
    }
    return hp;
}

LayerConfig uniform_layer_config(const HParams& hp, RopeStyle style) {
    LayerConfig c;
    c.n_head = hp.n_head;
    c.n_head_kv = hp.n_head_kv;
    c.head_dim_k = hp.head_dim_k;
    c.head_dim_v = hp.head_dim_v;
    c.n_ff = hp.n_ff;
    c.rope = RopeParams{style, hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale};
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
    return c;
}

}  // namespace minfer
