#pragma once
// ggml's tensor type ids and their block arithmetic (the spec's num_elements_per_block and
// len_block, ggml's blck_size and type_size). A tensor row of n elements of type t takes
// n / block_size(t) * type_size(t) bytes.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace minfer {

enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    // 4, 5: Q4_2 and Q4_3, removed before GGUF existed.
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    // 31, 32, 33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8, removed in favour of repacking at load.
    TQ1_0 = 34,
    TQ2_0 = 35,
    // 36, 37, 38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8, never written to files.
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
};

inline constexpr uint32_t kGgmlTypeCount = 43;

struct GgmlTypeTraits {
    std::string_view name;  // ggml's spelling: "q4_0", "q4_K", "iq2_xxs"
    int64_t block_size;     // elements per block; 0 for removed ids
    std::size_t type_size;  // bytes per block; 0 for removed ids
    bool removed;           // an id ggml no longer accepts (4, 5, 31-33, 36-38)
};

// Traits of a raw id as read from a file; nullopt if the id is beyond the table.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id);

// Traits of a valid (non-removed) type.
const GgmlTypeTraits& traits(GgmlType type);
inline std::string_view type_name(GgmlType type) {
    return traits(type).name;
}
inline int64_t block_size(GgmlType type) {
    return traits(type).block_size;
}
inline std::size_t type_size(GgmlType type) {
    return traits(type).type_size;
}

// Bytes taken by a row of n_elements (n_elements must be a multiple of the block size).
inline std::size_t row_size(GgmlType type, int64_t n_elements) {
    return static_cast<std::size_t>(n_elements / block_size(type)) * type_size(type);
}

// Looks a type up by name, case-insensitively ("Q4_K", "q4_k", "f16"). Removed ids never match.
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// True for the types whose values are stored as plain numbers (no blocks, no scales).
bool is_float_type(GgmlType type);

}  // namespace minfer
