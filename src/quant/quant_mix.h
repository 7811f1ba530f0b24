#pragma once
// Quantization mixes ("Q4_K_M", ...) and the rules that pick each tensor's type in them, after
// llama.cpp's llama-quantize (llama_tensor_get_type): the output matrix gets Q6_K, attn_v and
// ffn_down get more bits in some layers of the _M mixes, rows whose length is not a multiple of
// the block size fall back to a type that fits, and norms, biases and other 1-D tensors are kept.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"

namespace minfer {

// The values are llama.cpp's LLAMA_FTYPE numbers, written to general.file_type.
enum class QuantMix : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q8_0 = 7,
    Q5_0 = 8,
    Q5_1 = 9,
    Q2_K = 10,
    Q3_K_S = 11,
    Q3_K_M = 12,
    Q3_K_L = 13,
    Q4_K_S = 14,
    Q4_K_M = 15,
    Q5_K_S = 16,
    Q5_K_M = 17,
    Q6_K = 18,
    IQ4_NL = 25,
    BF16 = 32,
};

// Case-insensitive: "q4_k_m", "Q8_0"; the aliases Q3_K, Q4_K, Q5_K mean their _M mix.
std::optional<QuantMix> quant_mix_from_name(std::string_view name);
std::string_view quant_mix_name(QuantMix mix);
// Every mix, in llama.cpp's order, for help texts.
const std::vector<QuantMix>& all_quant_mixes();
// The type most tensors get ("Q4_K_M" -> Q4_K).
GgmlType base_type(QuantMix mix);

// Whether llama-quantize would quantize a tensor at all: 2-D and 3-D tensors whose name ends in
// "weight", except norms, MoE routers, positional and token-type embeddings and a few small
// architecture-specific matrices. Everything else is copied unchanged.
bool is_quantizable_tensor(const TensorInfo& t);

// Picks the type of each quantizable tensor of one model. Stateful like llama.cpp's: attn_v and
// ffn_down layers are counted in the order choose() sees them, so call it in file order (sorted
// by layer, then name; see tensor_order_less).
class TensorTypeChooser {
  public:
    // Reads the architecture, block count, head counts and expert count from the metadata. Throws
    // FormatError if general.architecture or ARCH.block_count is missing.
    TensorTypeChooser(const GgufFile& model, QuantMix mix);

    // The type for a tensor with is_quantizable_tensor(t). Throws UnsupportedError when its row
    // length fits no type (e.g. not a multiple of 32 for a Q4_0 mix).
    GgmlType choose(const TensorInfo& t);

    // Tensors that got a substitute type because their rows did not fit the chosen one.
    int fallback_count() const { return n_fallback_; }

  private:
    bool is_quantized_mix() const;
    GgmlType choose_before_fallback(const TensorInfo& t, GgmlType type);
    GgmlType fallback(const TensorInfo& t, GgmlType type);
    // The layer of ffn_* tensor t for the layer rules: a running count in dense models, parsed
    // from "blk.N." in mixture-of-experts models (whose expert tensors are not one per layer).
    int layer_of(const TensorInfo& t, int counter) const;

    QuantMix mix_;
    std::string arch_;
    int n_layer_ = 0;
    int n_head_ = 0;
    int n_head_kv_ = 0;
    int n_expert_ = 0;
    bool is_70b_ = false;
    bool has_output_ = false;  // false: token_embd doubles as the output matrix
    int n_attention_wv_ = 0;
    int i_attention_wv_ = 0;
    int i_ffn_down_ = 0;
    int n_fallback_ = 0;
};

// llama.cpp's tensor order: by the N of "blk.N." (tensors outside blocks first), then by name.
bool tensor_order_less(const TensorInfo& a, const TensorInfo& b);

}  // namespace minfer
