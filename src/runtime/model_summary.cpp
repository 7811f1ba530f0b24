#include "runtime/model_summary.h"

#include <cstdio>

#include "quant/quant_mix.h"

namespace minfer {
namespace {

std::string fixed(double v, int digits) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", digits, v);
    return text;
}

}  // namespace

ModelSummary summarize_model(const Model& model) {
    ModelSummary s;
    s.architecture = model.hparams().architecture;
    const double params = static_cast<double>(model.n_params());
    const double billions = params / 1e9;
    s.parameter_size =
        params < 5e7 ? fixed(params / 1e6, 1) + "M" : fixed(billions, billions < 10 ? 1 : 0) + "B";
    if (auto ft = model.metadata().get_int_optional("general.file_type"))
        s.quantization = std::string(quant_mix_name(static_cast<QuantMix>(*ft)));
    if (s.quantization.empty() || s.quantization == "?") {
        const TensorInfo* t = model.file().find_tensor("blk.0.ffn_down.weight");
        s.quantization =
            std::string(type_name(t != nullptr ? t->type : model.file().tensors().front()->type));
    }
    return s;
}

}  // namespace minfer
