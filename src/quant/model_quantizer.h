#pragma once
// Converting a whole F32/F16/BF16 GGUF model to a quantization mix (`minfer quantize`): keeps all
// metadata, sets general.file_type and general.quantization_version, picks each tensor's type with
// TensorTypeChooser, quantizes tensor by tensor on worker threads (never holding the whole model in
// f32), and writes through a temporary file renamed at the end.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "quant/quant_mix.h"

namespace minfer {

// general.quantization_version written by llama.cpp's current block layouts.
inline constexpr uint32_t kQuantizationVersion = 2;

struct TensorConversion {
    const TensorInfo* tensor;  // in the input model (valid while it lives)
    GgmlType output_type;      // == tensor->type when copied unchanged
    bool quantized;            // converted (rather than copied)
};

struct QuantizationPlan {
    std::vector<TensorConversion> tensors;  // output order (llama.cpp's: by layer, then name)
    int fallback_count = 0;  // tensors given a substitute type because their rows did not fit
};

// The input's tensors with their new types. Throws UnsupportedError for a tensor to quantize whose
// type is not F32/F16/BF16 or whose rows fit no type, FormatError for missing model metadata.
QuantizationPlan plan_model_quantization(const GgufFile& model, QuantMix mix);

struct QuantizeProgress {
    std::size_t tensor_index = 0;  // the tensor being written, 0-based
    std::size_t tensor_count = 0;
    std::string_view tensor_name;
    uint64_t values_done = 0;  // over all tensors
    uint64_t values_total = 0;
};

struct ModelQuantizeOptions {
    int threads = 1;  // 1..1024
    // Called on the calling thread as work advances (may throw to abort the run).
    std::function<void(const QuantizeProgress&)> on_progress = {};
    // Called with the temporary file's path once it exists (e.g. to delete it on a signal).
    std::function<void(const std::filesystem::path&)> on_temporary_file = {};
};

struct ConvertedTensor {
    std::string name;
    GgmlType input_type;
    GgmlType output_type;
};

struct ModelQuantizeResult {
    std::vector<ConvertedTensor> tensors;  // in output order
    std::size_t quantized_count = 0;
    int fallback_count = 0;
    uint64_t input_bytes = 0;
    uint64_t output_bytes = 0;
};

// Reads `input` (a file or the first part of a split model), writes `output` through
// AtomicOutputFile (core/atomic_output_file.h: symlinks written through, the old file's mode
// kept). Refuses (UsageError), before any work, an output that is the input or one of its parts
// (by any name or link), a directory, device, FIFO or socket; throws FormatError for a
// non-finite weight, IoError for file-system failures. On any error `output` is left as it was.
ModelQuantizeResult quantize_model(const std::filesystem::path& input,
                                   const std::filesystem::path& output, QuantMix mix,
                                   const ModelQuantizeOptions& options = {});

}  // namespace minfer
