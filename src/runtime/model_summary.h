#pragma once
// What a model is, in the words model lists use (bench's model_type, ollama's /api/tags and
// /api/show): its architecture, its size in parameters ("494.0M", "1.1B", "70B") and its
// quantization ("Q4_K_M" from general.file_type, else the type of its FFN weights).

#include <string>

#include "model/model.h"

namespace minfer {

struct ModelSummary {
    std::string architecture;
    std::string parameter_size;
    std::string quantization;
};

ModelSummary summarize_model(const Model& model);

}  // namespace minfer
