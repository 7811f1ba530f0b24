#include "quant/supported_types.h"

#include "core/error.h"
#include "quant/dequantize.h"

namespace minfer {

void require_supported_weight_type(const TensorInfo& t) {
    if (can_dequantize(t.type)) return;
    throw UnsupportedError(concat("tensor ", t.name, " has type ", type_name(t.type),
                                  ", which minfer does not support yet"));
}

}  // namespace minfer
