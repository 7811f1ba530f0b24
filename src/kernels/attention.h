#pragma once
// Attention of the query heads that share one K/V head (grouped-query attention) over an f16 or
// f32 paged KV cache, with ggml's arithmetic for attention without flash-attention (what
// llama.cpp's reference outputs used): for an f16 cache the queries are rounded to f16 before the
// Q·K dot products, scores are scaled (and soft-capped when asked), the softmax is taken over all
// keys (ggml's vectorized expf on chunks of 16 keys and expf on the rest, sums in double), and the
// probabilities are rounded to f16 before they weigh V.
// One call handles one token's group of heads, so every K and V value is loaded once per group.
//
// The keys come in tiles of kAttentionKeyTile positions (one block of the paged cache): K stored
// dimension-major (one vector load = one dimension of 16 keys, so Q·K needs no horizontal sums),
// V as rows of head_dim_v per position. The tiles of one call may lie anywhere in memory.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace minfer {

inline constexpr int64_t kAttentionKeyTile = 16;

struct AttentionGroup {
    const float* q = nullptr;  // [group] query heads, head_dim_k values each, q_stride apart
    int64_t q_stride = 0;      // floats
    int64_t group = 1;         // query heads sharing this K/V head
    // [ceil(n_keys / 16)] tiles; key j (counted from the first tile's first key) is in tile j / 16
    // at lane j % 16: K (lane, d) at k_tiles[j / 16][d * 16 + lane], V at v_tiles[j / 16][lane *
    // head_dim_v + d].
    const void* const* k_tiles = nullptr;
    const void* const* v_tiles = nullptr;
    bool f16 = true;     // cache values are f16 (else f32)
    int64_t n_keys = 0;  // keys 0 .. n_keys-1 of the tiles are attended...
    int64_t skip = 0;    // ...except the first `skip` (a window that starts inside a tile)
    int64_t head_dim_k = 0;
    int64_t head_dim_v = 0;
    float scale = 1.0f;    // applied to the Q·K dot products
    float softcap = 0.0f;  // > 0: scaled scores become soft_cap(score, softcap) (kernels/ops.h)
    float* out = nullptr;  // [group] outputs, head_dim_v values each, out_stride apart
    int64_t out_stride = 0;
};

// Working memory, one per thread; grows to the largest call.
class AttentionScratch {
  public:
    float* reserve(std::size_t floats) {
        if (buffer_.size() < floats) buffer_.resize(floats);
        return buffer_.data();
    }

  private:
    std::vector<float> buffer_;
};

void attend_group(const AttentionGroup& a, AttentionScratch& scratch);

// x[n] = softmax(x) in place, computed as ggml's soft_max is (the attention's softmax above,
// without the f16 rounding): also the mixture-of-experts router's, whose top-k choice should
// tie-break like llama.cpp's.
void softmax_like_ggml(float* x, int64_t n);

}  // namespace minfer
