#include <gtest/gtest.h>

#include "core/error.h"
#include "quant/supported_types.h"

namespace minfer {
namespace {

TensorInfo tensor_of_type(GgmlType type) {
    TensorInfo t;
    t.name = "blk.0.ffn_down.weight";
    t.type = type;
    return t;
}

TEST(SupportedTypes, NamesTensorAndTypeOfAnUnsupportedWeight) {
    try {
        require_supported_weight_type(tensor_of_type(GgmlType::IQ2_XXS));
        FAIL() << "expected UnsupportedError";
    } catch (const UnsupportedError& e) {
        EXPECT_STREQ(e.what(),
                     "tensor blk.0.ffn_down.weight has type iq2_xxs, which minfer does not support "
                     "yet");
    }
    for (GgmlType t :
         {GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
          GgmlType::IQ3_S, GgmlType::MXFP4, GgmlType::I32, GgmlType::Q8_1}) {
        EXPECT_THROW(require_supported_weight_type(tensor_of_type(t)), UnsupportedError)
            << type_name(t);
    }
}

TEST(SupportedTypes, AcceptsEveryDequantizableType) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                       GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,
                       GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                       GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::TQ1_0, GgmlType::TQ2_0}) {
        EXPECT_NO_THROW(require_supported_weight_type(tensor_of_type(t))) << type_name(t);
    }
}

}  // namespace
}  // namespace minfer
