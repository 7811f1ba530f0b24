#pragma once
// The check model loading runs on every weight: a tensor whose type minfer cannot dequantize (the
// IQ1/IQ2/IQ3 families, MXFP4, integer types, ...) is a clear error, never a crash or garbage.

#include "gguf/gguf_parser.h"

namespace minfer {

// Throws UnsupportedError "tensor blk.0.ffn_down.weight has type iq2_xxs, which minfer does not
// support yet" when can_dequantize(t.type) is false.
void require_supported_weight_type(const TensorInfo& t);

}  // namespace minfer
