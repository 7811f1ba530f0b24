#include "quant/model_quantizer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/atomic_output_file.h"
#include "core/cpu_set.h"
#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace minfer {
namespace {

constexpr int64_t kValuesPerChunk = 64 * 1024;  // work unit handed to one thread at a time

bool is_float_source(GgmlType t) {
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

std::vector<int64_t> shape_of(const TensorInfo& t) {
    const std::size_t dims = std::max<std::size_t>(t.n_dims, 1);
    return {t.ne.begin(), t.ne.begin() + static_cast<std::ptrdiff_t>(dims)};
}

// Compares files, not names: a hard link, a symlink or another spelling of the input (or of
// one of its parts) is refused too.
void refuse_overwriting_input(const GgufFile& model, const OutputTarget& output) {
    if (!output.existing) return;  // a file yet to be created is no input
    for (const GgufFile::Part& part : model.parts()) {
        std::error_code ec;
        const bool same = std::filesystem::equivalent(part.path, output.file, ec);
        if (!ec && same) {
            throw UsageError(concat("output ", output.destination.string(), " is the input model (",
                                    part.path.string(), "); choose another output path"));
        }
    }
}

// The input's metadata with the quantization keys updated and split keys dropped (the output is
// one file).
void copy_metadata(const GgufFile& model, QuantMix mix, GgufMetadata& out) {
    for (const auto& [key, value] : model.metadata().entries()) out.add(key, value);
    out.set("general.quantization_version", GgufValue::of<uint32_t>(kQuantizationVersion));
    out.set("general.file_type", GgufValue::of<uint32_t>(static_cast<uint32_t>(mix)));
    for (const char* key : {"split.no", "split.count", "split.tensors.count"}) out.remove(key);
    // Keep the blocks at least 32-byte aligned for the kernels.
    const auto alignment = out.get_optional<uint32_t>("general.alignment");
    if (alignment && *alignment < 32) out.remove("general.alignment");
}

// Runs work(chunk) for chunk = 0..n_chunks-1 on up to `threads` threads (the caller's included);
// after each chunk the caller's thread runs on_caller_chunk(). The first exception stops the
// others and is rethrown once all have finished.
template <class Work, class AfterChunk>
void parallel_chunks(int64_t n_chunks, int threads, Work work, AfterChunk on_caller_chunk) {
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto run = [&](bool is_caller) {
        try {
            while (!failed.load(std::memory_order_relaxed)) {
                const int64_t chunk = next.fetch_add(1);
                if (chunk >= n_chunks) break;
                work(chunk);
                if (is_caller) on_caller_chunk();
            }
        } catch (...) {
            failed = true;
            const std::lock_guard lock(error_mutex);
            if (!error) error = std::current_exception();
        }
    };
    {
        const auto n_helpers = static_cast<std::size_t>(
            std::clamp<int64_t>(std::min<int64_t>(threads, n_chunks) - 1, 0, kMaxThreads));
        std::vector<std::jthread> helpers;
        helpers.reserve(n_helpers);
        for (std::size_t i = 0; i < n_helpers; ++i) helpers.emplace_back([&] { run(false); });
        run(true);
    }  // joins the helpers
    if (error) std::rethrow_exception(error);
}

class ModelWriter {
  public:
    ModelWriter(const GgufFile& model, std::vector<TensorConversion> plan,
                const ModelQuantizeOptions& options)
        : model_(model), plan_(std::move(plan)), options_(options) {
        for (const TensorConversion& c : plan_)
            values_total_ += static_cast<uint64_t>(c.tensor->n_elements());
    }

    void add_tensors(GgufWriter& writer) {
        for (std::size_t i = 0; i < plan_.size(); ++i) {
            const TensorConversion& c = plan_[i];
            writer.add_tensor(c.tensor->name, c.output_type, shape_of(*c.tensor),
                              [this, i](std::span<std::byte> out) { produce(i, out); });
        }
    }

  private:
    void produce(std::size_t index, std::span<std::byte> out) {
        const TensorConversion& c = plan_[index];
        const TensorInfo& t = *c.tensor;
        report(index, 0);
        if (!c.quantized) {
            std::memcpy(out.data(), t.data.data(), out.size());
        } else {
            convert(index, out);
        }
        values_done_ += static_cast<uint64_t>(t.n_elements());
        report(index, 0);
    }

    // Rows of t: source type -> f32 (checked finite) -> output type, in chunks of rows.
    void convert(std::size_t index, std::span<std::byte> out) {
        const TensorConversion& c = plan_[index];
        const TensorInfo& t = *c.tensor;
        const int64_t n_per_row = t.ne[0];
        const int64_t n_rows = t.n_rows();
        if (n_per_row == 0 || n_rows == 0) return;
        const int64_t rows_per_chunk = std::max<int64_t>(1, kValuesPerChunk / n_per_row);
        const int64_t n_chunks = (n_rows + rows_per_chunk - 1) / rows_per_chunk;
        const std::size_t in_row_bytes = row_size(t.type, n_per_row);
        const std::size_t out_row_bytes = row_size(c.output_type, n_per_row);
        std::atomic<int64_t> rows_done{0};

        auto work = [&](int64_t chunk) {
            const int64_t first = chunk * rows_per_chunk;
            const int64_t count = std::min(rows_per_chunk, n_rows - first);
            std::vector<float> values(static_cast<std::size_t>(count * n_per_row));
            for (int64_t r = 0; r < count; ++r) {
                float* row = values.data() + r * n_per_row;
                dequantize_row(t.type, t.data.data() + (first + r) * in_row_bytes, row, n_per_row);
                check_finite(t, first + r,
                             std::span<const float>(row, static_cast<std::size_t>(n_per_row)));
            }
            quantize_rows(c.output_type, values.data(), out.data() + first * out_row_bytes, count,
                          n_per_row);
            rows_done += count;
        };
        auto progress = [&] {
            report(index,
                   static_cast<uint64_t>(rows_done.load()) * static_cast<uint64_t>(n_per_row));
        };
        parallel_chunks(n_chunks, options_.threads, work, progress);
    }

    void check_finite(const TensorInfo& t, int64_t row, std::span<const float> values) const {
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (!std::isfinite(values[i])) {
                throw FormatError(concat(model_.path().string(), ": tensor ", t.name, " holds ",
                                         values[i], " at row ", row, ", column ", i,
                                         "; cannot quantize non-finite weights"));
            }
        }
    }

    void report(std::size_t index, uint64_t values_in_tensor) const {
        if (!options_.on_progress) return;
        QuantizeProgress p;
        p.tensor_index = index;
        p.tensor_count = plan_.size();
        p.tensor_name = plan_[index].tensor->name;
        p.values_done = values_done_ + values_in_tensor;
        p.values_total = values_total_;
        options_.on_progress(p);
    }

    const GgufFile& model_;
    std::vector<TensorConversion> plan_;
    const ModelQuantizeOptions& options_;
    uint64_t values_done_ = 0;
    uint64_t values_total_ = 0;
};

}  // namespace

QuantizationPlan plan_model_quantization(const GgufFile& model, QuantMix mix) {
    std::vector<const TensorInfo*> ordered = model.tensors();
    std::stable_sort(ordered.begin(), ordered.end(), [](const TensorInfo* a, const TensorInfo* b) {
        return tensor_order_less(*a, *b);
    });
    TensorTypeChooser chooser(model, mix);
    QuantizationPlan plan;
    plan.tensors.reserve(ordered.size());
    for (const TensorInfo* t : ordered) {
        GgmlType type = t->type;
        if (is_quantizable_tensor(*t)) type = chooser.choose(*t);
        const bool quantized = type != t->type;
        if (quantized && !is_float_source(t->type)) {
            throw UnsupportedError(concat("tensor ", t->name, " has type ", type_name(t->type),
                                          "; minfer quantize converts F32, F16 and BF16 weights "
                                          "(requantizing is not supported)"));
        }
        if (quantized && !can_quantize(type)) {
            throw UnsupportedError(concat("tensor ", t->name, ": quantizing to ", type_name(type),
                                          " is not supported"));
        }
        plan.tensors.push_back({t, type, quantized});
    }
    plan.fallback_count = chooser.fallback_count();
    return plan;
}

ModelQuantizeResult quantize_model(const std::filesystem::path& input,
                                   const std::filesystem::path& output, QuantMix mix,
                                   const ModelQuantizeOptions& options) {
    if (options.threads < 1 || options.threads > kMaxThreads) {
        throw UsageError(concat("--threads is ", options.threads, ", expected 1 to ", kMaxThreads));
    }
    // Every check before the work: a FIFO, device or directory as OUT is refused here, not
    // after minutes of quantizing.
    const OutputTarget target = resolve_output_target(output);
    const GgufFile model = GgufFile::open(input);
    refuse_overwriting_input(model, target);

    QuantizationPlan plan = plan_model_quantization(model, mix);
    ModelQuantizeResult result;
    result.input_bytes = model.file_size();
    result.fallback_count = plan.fallback_count;
    for (const TensorConversion& c : plan.tensors) {
        result.tensors.push_back({c.tensor->name, c.tensor->type, c.output_type});
        result.quantized_count += c.quantized ? 1 : 0;
    }

    GgufWriter writer;
    copy_metadata(model, mix, writer.metadata());
    ModelWriter tensors(model, std::move(plan.tensors), options);
    tensors.add_tensors(writer);

    AtomicOutputFile out(output);
    if (options.on_temporary_file) options.on_temporary_file(out.path());
    writer.write(out.stream());
    out.commit();

    std::error_code ec;
    result.output_bytes = std::filesystem::file_size(out.target(), ec);
    return result;
}

}  // namespace minfer
