// Weight panels and activation layouts of the GEMM path (see matmul_internal.h). Unpacking is
// scalar: a panel is unpacked once and then multiplied with every token of the batch.

#include <cstring>

#include "core/half.h"
#include "kernels/block_unpack.h"
#include "kernels/matmul_internal.h"
#include "quant/block_types.h"
#include "quant/k_scales.h"

namespace minfer::kernels {
namespace {

constexpr std::size_t align64(std::size_t n) {
    return (n + 63) & ~std::size_t{63};
}

}  // namespace

std::size_t int_panel_bytes(GgmlType type, int64_t n_cols) {
    const UnpackLayout layout = unpack_layout(type);
    const auto n_sub = static_cast<std::size_t>(n_cols / layout.sub_size);
    const std::size_t per_sub = n_sub * kPanelRows * sizeof(float);
    return align64(static_cast<std::size_t>(n_cols) * kPanelRows) + 2 * align64(per_sub);
}

IntPanel int_panel_at(std::byte* memory, GgmlType type, int64_t n_cols) {
    const UnpackLayout layout = unpack_layout(type);
    const int64_t n_sub = n_cols / layout.sub_size;
    const std::size_t per_sub = align64(static_cast<std::size_t>(n_sub) * kPanelRows * 4);
    std::byte* p = memory;
    IntPanel panel{};
    panel.q = reinterpret_cast<uint8_t*>(p);
    p += align64(static_cast<std::size_t>(n_cols) * kPanelRows);
    panel.scale = reinterpret_cast<float*>(p);
    p += per_sub;
    panel.offset = reinterpret_cast<float*>(p);
    panel.n_sub = n_sub;
    panel.sub_size = layout.sub_size;
    panel.has_min = layout.has_min;
    return panel;
}

namespace {

// Writes the 32 panel bytes (value + 128) of one block of 32 values of one row: groups of 4
// values go kPanelRows * 4 bytes apart.
void scatter_values(const uint8_t (&biased)[32], uint8_t* q) {
    for (int g = 0; g < 8; ++g) std::memcpy(q + g * kPanelRows * 4, biased + g * 4, 4);
}

// Fast paths for the commonest types (the generic unpack costs several times more per block):
// they write exactly what unpack_block's decoding would.
void fill_row_q4_0(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        block_q4_0 block;
        std::memcpy(&block, w_row + b * sizeof(block_q4_0), sizeof(block));
        uint8_t biased[32];  // (nibble - 8) + 128
        for (int j = 0; j < 16; ++j) {
            biased[j] = static_cast<uint8_t>((block.qs[j] & 0x0F) + 120);
            biased[j + 16] = static_cast<uint8_t>((block.qs[j] >> 4) + 120);
        }
        scatter_values(biased, panel.q + (b * 8 * kPanelRows + row) * 4);
        panel.scale[b * kPanelRows + row] = f16_to_f32(block.d);
        panel.offset[b * kPanelRows + row] = 0.0f;
    }
}

void fill_row_q8_0(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        block_q8_0 block;
        std::memcpy(&block, w_row + b * sizeof(block_q8_0), sizeof(block));
        uint8_t biased[32];
        for (int j = 0; j < 32; ++j) biased[j] = static_cast<uint8_t>(block.qs[j] + 128);
        scatter_values(biased, panel.q + (b * 8 * kPanelRows + row) * 4);
        panel.scale[b * kPanelRows + row] = f16_to_f32(block.d);
        panel.offset[b * kPanelRows + row] = 0.0f;
    }
}

void fill_row_q4_k(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        block_q4_K block;
        std::memcpy(&block, w_row + b * sizeof(block_q4_K), sizeof(block));
        const float d = f16_to_f32(block.d), dmin = f16_to_f32(block.dmin);
        for (int pair = 0; pair < 4; ++pair) {  // sub-blocks 2*pair (low nibbles), 2*pair+1 (high)
            uint8_t low[32], high[32];
            for (int j = 0; j < 32; ++j) {
                low[j] = static_cast<uint8_t>((block.qs[pair * 32 + j] & 0x0F) + 128);
                high[j] = static_cast<uint8_t>((block.qs[pair * 32 + j] >> 4) + 128);
            }
            const int64_t s = b * 8 + pair * 2;
            scatter_values(low, panel.q + (s * 8 * kPanelRows + row) * 4);
            scatter_values(high, panel.q + ((s + 1) * 8 * kPanelRows + row) * 4);
            for (int k = 0; k < 2; ++k) {
                const ScaleMin sm = unpack_scale_min_k4(pair * 2 + k, block.scales);
                panel.scale[(s + k) * kPanelRows + row] = d * static_cast<float>(sm.scale);
                panel.offset[(s + k) * kPanelRows + row] = -dmin * static_cast<float>(sm.min);
            }
        }
    }
}

}  // namespace

void fill_int_panel(const WeightMatrix& w, int64_t row_begin, const IntPanel& panel) {
    const UnpackLayout layout = unpack_layout(w.type);
    const int64_t blocks_per_row = w.n_cols / layout.block_values;
    const int subs_per_block = layout.block_values / layout.sub_size;
    const std::size_t w_row_bytes = row_size(w.type, w.n_cols);
    const std::size_t block_bytes = type_size(w.type);
    const int groups_per_block = layout.block_values / 4;
    UnpackedBlock block;
    for (int row = 0; row < kPanelRows; ++row) {
        const int64_t r = row_begin + row;
        if (r >= w.n_rows) {
            for (int64_t g = 0; g < w.n_cols / 4; ++g) {
                std::memset(panel.q + g * kPanelRows * 4 + row * 4, 128, 4);  // value 0
            }
            for (int64_t s = 0; s < panel.n_sub; ++s) {
                panel.scale[s * kPanelRows + row] = 0.0f;
                panel.offset[s * kPanelRows + row] = 0.0f;
            }
            continue;
        }
        const std::byte* w_row = w.data.data() + static_cast<std::size_t>(r) * w_row_bytes;
        switch (w.type) {
            case GgmlType::Q4_0: fill_row_q4_0(w_row, blocks_per_row, panel, row); continue;
            case GgmlType::Q8_0: fill_row_q8_0(w_row, blocks_per_row, panel, row); continue;
            case GgmlType::Q4_K: fill_row_q4_k(w_row, blocks_per_row, panel, row); continue;
            default: break;
        }
        for (int64_t b = 0; b < blocks_per_row; ++b) {
            unpack_block(w.type, w_row + static_cast<std::size_t>(b) * block_bytes, block);
            uint8_t* q = panel.q + (b * groups_per_block * kPanelRows + row) * 4;
            for (int g = 0; g < groups_per_block; ++g) {
                for (int i = 0; i < 4; ++i) {
                    q[g * kPanelRows * 4 + i] = static_cast<uint8_t>(block.q[g * 4 + i] + 128);
                }
            }
            for (int j = 0; j < subs_per_block; ++j) {
                const int64_t s = b * subs_per_block + j;
                panel.scale[s * kPanelRows + row] = block.d * static_cast<float>(block.scale[j]);
                panel.offset[s * kPanelRows + row] = -block.dmin * static_cast<float>(block.min[j]);
            }
        }
    }
}

std::size_t int_activations_bytes(GgmlType weight_type, int64_t n_cols, int64_t n_tokens) {
    const UnpackLayout layout = unpack_layout(weight_type);
    const auto n_sub = static_cast<std::size_t>(n_cols / layout.sub_size);
    const auto padded =
        static_cast<std::size_t>((n_tokens + kTokenTile - 1) / kTokenTile) * kTokenTile;
    return align64(padded * static_cast<std::size_t>(n_cols)) +
           3 * align64(padded * n_sub * sizeof(float));
}

IntActivations int_activations_at(std::byte* memory, GgmlType weight_type, int64_t n_cols,
                                  int64_t n_tokens) {
    const UnpackLayout layout = unpack_layout(weight_type);
    const int64_t n_sub = n_cols / layout.sub_size;
    const auto padded =
        static_cast<std::size_t>((n_tokens + kTokenTile - 1) / kTokenTile) * kTokenTile;
    const std::size_t per_sub = align64(padded * static_cast<std::size_t>(n_sub) * sizeof(float));
    IntActivations a{};
    a.q = reinterpret_cast<const int8_t*>(memory);
    std::byte* p = memory + align64(padded * static_cast<std::size_t>(n_cols));
    a.corr = reinterpret_cast<const int32_t*>(p);
    p += per_sub;
    a.d = reinterpret_cast<const float*>(p);
    p += per_sub;
    a.sum = layout.has_min ? reinterpret_cast<const float*>(p) : nullptr;
    a.n_cols = n_cols;
    a.n_sub = n_sub;
    return a;
}

void fill_int_activations(GgmlType weight_type, const Activations& act, int64_t n_cols,
                          int64_t t_begin, int64_t t_end, std::byte* memory) {
    const IntActivations a = int_activations_at(memory, weight_type, n_cols, act.n_tokens);
    const int sub = static_cast<int>(n_cols / a.n_sub);
    auto* q_out = const_cast<int8_t*>(a.q);
    auto* corr_out = const_cast<int32_t*>(a.corr);
    auto* d_out = const_cast<float*>(a.d);
    auto* sum_out = const_cast<float*>(a.sum);
    // Padding tokens of the last tile: zeros (their results are never stored).
    const int64_t padded_end = (t_begin < t_end && t_end == act.n_tokens)
                                   ? (act.n_tokens + kTokenTile - 1) / kTokenTile * kTokenTile
                                   : t_end;
    int8_t qs[QK_K];
    for (int64_t t = t_begin; t < padded_end; ++t) {
        const int64_t tile = t / kTokenTile;
        const int slot = static_cast<int>(t % kTokenTile);
        int8_t* q_tile = q_out + tile * n_cols * kTokenTile;
        const int64_t sub_base = a.sub_tile(tile);
        const std::byte* row =
            t < act.n_tokens ? act.data + static_cast<std::size_t>(t) * act.row_bytes : nullptr;
        for (int64_t s = 0; s < a.n_sub; ++s) {
            float d = 0.0f;
            float scaled_sum = 0.0f;
            if (row == nullptr) {
                std::memset(qs, 0, static_cast<std::size_t>(sub));
            } else if (act.type == GgmlType::Q8_K) {
                const auto& b = reinterpret_cast<const block_q8_K*>(row)[s * sub / QK_K];
                const int off = static_cast<int>((s * sub) % QK_K);
                std::memcpy(qs, b.qs + off, static_cast<std::size_t>(sub));
                d = b.d;
                int32_t bsum = 0;
                for (int i = off / 16; i < (off + sub) / 16; ++i) bsum += b.bsums[i];
                scaled_sum = b.d * static_cast<float>(bsum);
            } else if (act.type == GgmlType::Q8_1) {
                const auto& b = reinterpret_cast<const block_q8_1*>(row)[s];
                std::memcpy(qs, b.qs, 32);
                d = f16_to_f32(b.d);
                scaled_sum = f16_to_f32(b.s);
            } else {
                const auto& b = reinterpret_cast<const block_q8_0*>(row)[s];
                std::memcpy(qs, b.qs, 32);
                d = f16_to_f32(b.d);
            }
            int32_t qsum = 0;
            for (int i = 0; i < sub; ++i) qsum += qs[i];
            for (int g = 0; g < sub / 4; ++g) {
                std::memcpy(q_tile + ((s * sub / 4 + g) * kTokenTile + slot) * 4, qs + g * 4, 4);
            }
            const int64_t at = sub_base + s * kTokenTile + slot;
            corr_out[at] = -128 * qsum;
            d_out[at] = d;
            if (sum_out) sum_out[at] = scaled_sum;
        }
    }
}

std::size_t float_panel_bytes(int64_t n_cols) {
    return align64(static_cast<std::size_t>(n_cols) * kPanelRows * sizeof(float));
}

void fill_float_panel(const WeightMatrix& w, int64_t row_begin, float* panel) {
    const std::size_t w_row_bytes = row_size(w.type, w.n_cols);
    for (int row = 0; row < kPanelRows; ++row) {
        const int64_t r = row_begin + row;
        if (r >= w.n_rows) {
            for (int64_t k = 0; k < w.n_cols; ++k) panel[k * kPanelRows + row] = 0.0f;
            continue;
        }
        const std::byte* w_row = w.data.data() + static_cast<std::size_t>(r) * w_row_bytes;
        if (w.type == GgmlType::F32) {
            const auto* src = reinterpret_cast<const float*>(w_row);
            for (int64_t k = 0; k < w.n_cols; ++k) panel[k * kPanelRows + row] = src[k];
        } else {
            const auto* src = reinterpret_cast<const uint16_t*>(w_row);
            const bool is_f16 = w.type == GgmlType::F16;
            for (int64_t k = 0; k < w.n_cols; ++k) {
                panel[k * kPanelRows + row] = is_f16 ? f16_to_f32(src[k]) : bf16_to_f32(src[k]);
            }
        }
    }
}

}  // namespace minfer::kernels
