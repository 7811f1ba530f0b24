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

ModelSummary summarize_gguf(const GgufFile& file) {
    ModelSummary s;
    s.architecture = std::string(file.metadata().get_string_optional("general.architecture")
                                     .value_or("unknown"));
    uint64_t n_params = 0;
    for (const TensorInfo* t : file.tensors()) n_params += static_cast<uint64_t>(t->n_elements());
    const double params = static_cast<double>(n_params);
    const double billions = params / 1e9;
    s.parameter_size =
        params < 5e7 ? fixed(params / 1e6, 1) + "M" : fixed(billions, billions < 10 ? 1 : 0) + "B";
    if (auto ft = file.metadata().get_int_optional("general.file_type"))
        s.quantization = std::string(quant_mix_name(static_cast<QuantMix>(*ft)));
    if ((s.quantization.empty() || s.quantization == "?") && !file.tensors().empty()) {
        const TensorInfo* t = file.find_tensor("blk.0.ffn_down.weight");
        s.quantization = std::string(type_name(t != nullptr ? t->type : file.tensors().front()->type));
    }
    return s;
}

ModelSummary summarize_model(const Model& model) {
    ModelSummary s = summarize_gguf(model.file());
    s.architecture = model.hparams().architecture;
    return s;
}

}  // namespace minfer
