#pragma once
// What a model is, in the words model lists use (bench's model_type, ollama's /api/tags and
// /api/show): its architecture, its size in parameters ("494.0M", "1.1B", "70B") and its
// quantization ("Q4_K_M" from general.file_type, else the type of its FFN weights).

#include <string>

#include "gguf/gguf_file.h"
#include "model/model.h"

namespace minfer {

struct ModelSummary {
    std::string architecture;
    std::string parameter_size;
    std::string quantization;
};

ModelSummary summarize_model(const Model& model);
// The same from the file alone (a model listed but not loaded): reads only the header.
ModelSummary summarize_gguf(const GgufFile& file);

}  // namespace minfer
