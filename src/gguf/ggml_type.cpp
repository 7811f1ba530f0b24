#include "gguf/ggml_type.h"

#include <array>
#include <cctype>

namespace minfer {
namespace {

// Indexed by id; the numbers are the GGUF specification's table.
constexpr std::array<GgmlTypeTraits, kGgmlTypeCount> kTraits = {{
    {"f32", 1, 4, false},        {"f16", 1, 2, false},        {"q4_0", 32, 18, false},
    {"q4_1", 32, 20, false},     {"q4_2", 0, 0, true},        {"q4_3", 0, 0, true},
    {"q5_0", 32, 22, false},     {"q5_1", 32, 24, false},     {"q8_0", 32, 34, false},
    {"q8_1", 32, 36, false},     {"q2_K", 256, 84, false},    {"q3_K", 256, 110, false},
    {"q4_K", 256, 144, false},   {"q5_K", 256, 176, false},   {"q6_K", 256, 210, false},
    {"q8_K", 256, 292, false},   {"iq2_xxs", 256, 66, false}, {"iq2_xs", 256, 74, false},
    {"iq3_xxs", 256, 98, false}, {"iq1_s", 256, 50, false},   {"iq4_nl", 32, 18, false},
    {"iq3_s", 256, 110, false},  {"iq2_s", 256, 82, false},   {"iq4_xs", 256, 136, false},
    {"i8", 1, 1, false},         {"i16", 1, 2, false},        {"i32", 1, 4, false},
    {"i64", 1, 8, false},        {"f64", 1, 8, false},        {"iq1_m", 256, 56, false},
    {"bf16", 1, 2, false},       {"q4_0_4_4", 0, 0, true},    {"q4_0_4_8", 0, 0, true},
    {"q4_0_8_8", 0, 0, true},    {"tq1_0", 256, 54, false},   {"tq2_0", 256, 66, false},
    {"iq4_nl_4_4", 0, 0, true},  {"iq4_nl_4_8", 0, 0, true},  {"iq4_nl_8_8", 0, 0, true},
    {"mxfp4", 32, 17, false},    {"nvfp4", 64, 36, false},    {"q1_0", 128, 18, false},
    {"q2_0", 64, 18, false},
}};

bool equals_ignore_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    }
    return true;
}

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id) {
    if (id >= kGgmlTypeCount) return std::nullopt;
    return kTraits[id];
}

const GgmlTypeTraits& traits(GgmlType type) {
    return kTraits[static_cast<uint32_t>(type)];
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
    for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
        if (!kTraits[id].removed && equals_ignore_case(kTraits[id].name, name))
            return static_cast<GgmlType>(id);
    }
    return std::nullopt;
}

bool is_float_type(GgmlType type) {
    return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 ||
           type == GgmlType::F64;
}

}  // namespace minfer
