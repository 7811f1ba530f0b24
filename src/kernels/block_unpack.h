#pragma once
// Every quantized weight block in one common shape: small integers with integer sub-block scales
// and mins under two float block scales:
//   value[i] = d * scale[s] * q[i] - dmin * min[s],   s = i / sub_size.
// The scalar reference dots and the GEMM panels are built on it, so each type's bit layout is
// decoded in exactly one place.

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "quant/block_types.h"

namespace minfer {

struct UnpackedBlock {
    int8_t q[QK_K];     // block_size values
    int32_t scale[16];  // per sub-block (1 where the type has none)
    int32_t min[16];    // per sub-block (0 where the type has no offset)
    float d = 0.0f;
    float dmin = 0.0f;
    int n_sub = 1;
    int sub_size = 32;
    bool has_min = false;
};

// Layout facts of a quantized weight type, without decoding a block.
struct UnpackLayout {
    int block_values;  // 32 or 256
    int sub_size;      // 16 or 32
    bool has_min;      // has a per-sub-block offset term (needs activation sums)
};
UnpackLayout unpack_layout(GgmlType type);

// Decodes one block of a quantized type (not F32/F16/BF16).
void unpack_block(GgmlType type, const std::byte* block, UnpackedBlock& out);

}  // namespace minfer
