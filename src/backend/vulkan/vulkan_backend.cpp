// The Vulkan backend: see vulkan_backend.h. One kernel (shader) per op type, chosen and fed by
// record(); everything else (validation, shapes, which buffers an op reads and writes) comes
// from the graph and its op definitions (model/op_def.h).

#include "backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/vulkan/vulkan_commands.h"
#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_shaders.h"
#include "core/error.h"
#include "core/log.h"
#include "model/op_def.h"

namespace minfer {
namespace {

using vulkan::Buffer;

// Whether the shaders read weights of `type`: cmake/vulkan_shaders.cmake builds a get_rows,
// matmul and expert matmul shader for each type it lists (weight_types.glsl), so the embedded
// table is the list.
bool shader_reads(GgmlType type) {
    const std::string name = concat("get_rows_", type_name(type));
    const auto blobs = vulkan::shader_blobs();
    return std::any_of(blobs.begin(), blobs.end(),
                       [&](const vulkan::ShaderBlob& b) { return name == b.name; });
}

// Limits of the shaders (attention.comp, moe_route.comp).
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kMaxExperts = 256;

// Attention's splits (attention_common.glsl): positions per split unless
// MINFER_VULKAN_ATTENTION_SPAN says otherwise (the same for every pass: a token's bits depend on
// it). On a GPU a pass with fewer (token, head) pairs than kSplitBelowPairs (a decode step: a
// handful of workgroups that would each walk the whole context) runs a workgroup per split, if
// the splits' states take at most kMaxPartialBytes; the bits are those of the single pass.
constexpr uint32_t kDefaultAttentionSpan = 256;
constexpr uint64_t kSplitBelowPairs = 1024;
constexpr uint64_t kMaxPartialBytes = uint64_t{64} << 20;

template <class T>
std::span<const std::byte> bytes_of(const T& push) {
    return std::as_bytes(std::span(&push, 1));
}

// "3.2 MiB", for messages about memory.
std::string mib(uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return text;
}

uint32_t u32(int64_t v) {
    return static_cast<uint32_t>(v);
}

// The batch's per-token inputs in one int32 array, each at its offset (in values). The block
// tables, whose length grows with the sequences, come last: the other offsets (which the push
// constants carry) stay put from one decode step to the next, so their recorded pass is reused.
struct InputLayout {
    uint32_t tokens, positions, kv_slots, sequence, table_begin, output_rows, table_blocks;
    std::vector<int32_t> values;
};

InputLayout pack_inputs(const BatchInputs& in) {
    InputLayout l{};
    const auto append = [&l](const std::vector<int32_t>& v) {
        const auto at = static_cast<uint32_t>(l.values.size());
        l.values.insert(l.values.end(), v.begin(), v.end());
        return at;
    };
    l.tokens = append(in.tokens);
    l.positions = append(in.positions);
    l.kv_slots = append(in.kv_slots);
    l.sequence = append(in.sequence);
    l.table_begin = append(in.table_begin);
    l.output_rows = append(in.output_rows);
    l.table_blocks = append(in.table_blocks);
    return l;
}

class VulkanBackend final : public Backend {
  public:
    VulkanBackend(const BackendOptions& options, int device_index)
        : options_(options), context_(vulkan::Context::open(device_index)) {
        if (options_.n_vocab < 1) throw UsageError("the Vulkan backend needs the vocabulary size");
        options_.kv.check();
        const GgmlType kv_type = options_.kv.type;
        if (kv_type != GgmlType::F16 && kv_type != GgmlType::F32 && kv_type != GgmlType::Q8_0) {
            throw UnsupportedError(
                concat("the Vulkan backend stores the KV cache as f16, f32 or "
                       "q8_0, not ",
                       type_name(kv_type), ": use --cache-type f16"));
        }
        cache_type_ = std::string(type_name(kv_type));
        // A q8_0 row is stored a pair of 34-byte blocks (17 words) at a time (store_kv.comp).
        const int64_t unit = kv_type == GgmlType::Q8_0 ? 64 : 2;
        const uint64_t n_slots = static_cast<uint64_t>(options_.kv.n_slots());
        const uint64_t kv_bytes = options_.kv.bytes();
        if (kv_bytes > context_->memory_budget()) {
            throw LimitError(concat("a KV cache of ", mib(kv_bytes), " does not fit in ",
                                    context_->info().name, " (", mib(context_->memory_budget()),
                                    "): lower --ctx, or put fewer layers on it with -ngl"));
        }
        for (const KvLayerShape& s : options_.kv.layers) {
            CacheLayer l;
            l.k_width = s.n_head_kv * s.head_dim_k;
            l.v_width = s.n_head_kv * s.head_dim_v;
            if (l.k_width % unit != 0 || l.v_width % unit != 0) {
                throw UnsupportedError(concat("the Vulkan backend stores a ", cache_type_,
                                              " cache in rows of multiples of ", unit,
                                              " values, not ", l.k_width, " and ", l.v_width,
                                              ": use --cache-type f16"));
            }
            l.k = context_->device_buffer(n_slots * row_bytes(l.k_width));
            l.v = context_->device_buffer(n_slots * row_bytes(l.v_width));
            cache_bytes_ += l.k.bytes() + l.v.bytes();
            cache_.push_back(std::move(l));
        }
        dummy_ = context_->device_buffer(16);
        log_info(concat("minfer: running on vulkan:", device_index, " (", context_->info().name,
                        ", ", mib(context_->memory_budget()), ")"));
        // MINFER_VULKAN_PRODUCTS=workgroup|invocation overrides the choice by device type (the
        // tests run the GPUs' products on lavapipe too).
        row_per_invocation_ = context_->info().is_cpu();
        if (const char* products = std::getenv("MINFER_VULKAN_PRODUCTS")) {
            const std::string_view p(products);
            if (p != "workgroup" && p != "invocation")
                throw UsageError(
                    concat("MINFER_VULKAN_PRODUCTS='", p, "': expected workgroup or invocation"));
            row_per_invocation_ = p == "invocation";
        }
        // MINFER_VULKAN_ATTENTION_SPLIT=auto|always|never and MINFER_VULKAN_ATTENTION_SPAN=N
        // override attention's split (the tests run the split pass on lavapipe, in short spans).
        if (const char* split = std::getenv("MINFER_VULKAN_ATTENTION_SPLIT")) {
            const std::string_view v(split);
            if (v != "auto" && v != "always" && v != "never")
                throw UsageError(concat("MINFER_VULKAN_ATTENTION_SPLIT='", v,
                                        "': expected auto, always or never"));
            attention_split_ = v == "auto"     ? SplitChoice::kAuto
                               : v == "always" ? SplitChoice::kAlways
                                               : SplitChoice::kNever;
        }
        if (const char* span = std::getenv("MINFER_VULKAN_ATTENTION_SPAN")) {
            char* end = nullptr;
            const unsigned long v = std::strtoul(span, &end, 10);
            if (end == span || *end != '\0' || v < 64 || v > 65536 || v % 64 != 0)
                throw UsageError(concat("MINFER_VULKAN_ATTENTION_SPAN='", span,
                                        "': expected a multiple of 64 from 64 to 65536"));
            attention_span_ = static_cast<uint32_t>(v);
        }
        // The mapped file's pages imported as device memory instead of copies, on a device whose
        // memory is the host's (lavapipe, integrated GPUs; a discrete GPU would read them over
        // the bus). MINFER_VULKAN_IMPORT=0|1 overrides the choice.
        const std::string& type = context_->info().type;
        import_weights_ = context_->can_import_host() && (type == "cpu" || type == "integrated");
        if (const char* import = std::getenv("MINFER_VULKAN_IMPORT")) {
            const std::string_view v(import);
            if (v != "0" && v != "1")
                throw UsageError(concat("MINFER_VULKAN_IMPORT='", v, "': expected 0 or 1"));
            import_weights_ = v == "1" && context_->can_import_host();
        }
    }

    std::string_view name() const override { return "vulkan"; }
    std::span<const float> logits() const override { return logits_; }
    std::size_t kv_cache_bytes() const override { return cache_bytes_; }
    std::size_t scratch_bytes() const override {
        std::size_t n = inputs_.bytes() + readback_.bytes() + carried_.bytes() + partials_.bytes();
        for (const Buffer& b : buffers_) n += b.bytes();
        return n;
    }
    std::size_t weight_copy_bytes() const override { return weight_bytes_; }
    std::optional<DeviceTransfers> device_transfers() const override {
        const vulkan::TransferStats& s = context_->stats();
        DeviceTransfers t;
        t.submissions = s.submissions;
        t.dispatches = s.dispatches;
        t.recordings = s.recordings;
        t.host_waits = s.host_waits;
        t.bytes_up = s.bytes_up + inputs_bytes_up_;
        t.bytes_down = s.bytes_down + logits_bytes_down_;
        t.weight_bytes_up = weight_bytes_;
        t.weight_bytes_imported = weight_bytes_imported_;
        t.validation_errors = context_->instance().validation_errors();
        t.first_validation_error = context_->instance().first_validation_error();
        return t;
    }

    // At the engine's start: what the shaders cannot run is refused then, before any upload.
    void prepare(const Graph& g) override {
        check_supported(g);
        upload_weights(g);
    }

    void copy_kv_block(int32_t from, int32_t to, int64_t n_positions) override {
        const int64_t n_blocks = options_.kv.n_blocks, block = options_.kv.block_size;
        if (from < 0 || from >= n_blocks || to < 0 || to >= n_blocks || n_positions < 0 ||
            n_positions > block)
            throw UsageError(concat("cannot copy cache block ", from, " to ", to));
        for (const CacheLayer& l : cache_) {
            for (const auto& [buffer, width] : {std::pair{&l.k, l.k_width}, {&l.v, l.v_width}}) {
                const uint64_t row = row_bytes(width);
                context_->copy(*buffer, *buffer, static_cast<uint64_t>(n_positions) * row,
                               static_cast<uint64_t>(from * block) * row,
                               static_cast<uint64_t>(to * block) * row);
            }
        }
    }

    void execute(const Graph& g) override {
        validate_graph_for(g, options_);
        check_supported(g);
        upload_weights(g);
        allocate(g);
        const InputLayout inputs = pack_inputs(g.in);
        write_inputs(inputs);
        const uint64_t logits_bytes =
            static_cast<uint64_t>(g.in.n_outputs() * options_.n_vocab) * sizeof(float);
        if (readback_.bytes() < logits_bytes) readback_ = context_->host_buffer(logits_bytes);

        vulkan::Commands commands(*context_);
        carry_in(g, commands);
        // MINFER_TRACE: a GPU timestamp before the first op and after each (in the same
        // submission: timing adds no wait).
        const auto n_stamps = static_cast<uint32_t>(g.ops.size() + 1);
        const bool timed = options_.trace && prepare_timestamps(n_stamps);
        if (timed) {
            commands.reset(timestamps_, n_stamps);
            commands.timestamp(timestamps_, 0);
        }
        for (std::size_t i = 0; i < g.ops.size(); ++i) {
            record(commands, g.ops[i], g, inputs);
            commands.barrier();
            if (timed) commands.timestamp(timestamps_, static_cast<uint32_t>(i + 1));
        }
        if (g.logits != kNoBuffer && logits_bytes > 0)
            commands.copy(buffer(g.logits), readback_, logits_bytes);
        // A pass with the commands of one of the last (a decode step after another) is submitted
        // as recorded then; a timed one is recorded anew (its timestamps are read after it).
        commands.submit_and_wait(timed ? nullptr : &recorded_passes_);

        logits_.resize(static_cast<std::size_t>(logits_bytes / sizeof(float)));
        if (logits_bytes > 0) std::memcpy(logits_.data(), readback_.mapped(), logits_bytes);
        logits_bytes_down_ += logits_bytes;
        if (timed) {
            const std::vector<double> ns = timestamps_.read_ns(n_stamps);
            for (std::size_t i = 0; i < g.ops.size(); ++i)
                options_.trace(g.ops[i], (ns[i + 1] - ns[i]) * 1e-3);
        }
    }

  private:
    struct CacheLayer {
        int64_t k_width = 0, v_width = 0;
        Buffer k, v;  // [n_slots][width], f16 pairs or f32
    };

    // Bytes of a cache row of `width` values.
    uint64_t row_bytes(int64_t width) const { return row_size(options_.kv.type, width); }

    // A timestamp pool of at least n slots; false where the device's queue cannot time (the
    // trace then has no per-op lines).
    bool prepare_timestamps(uint32_t n) {
        if (timestamps_.count() < n) timestamps_ = context_->timestamps(n);
        return timestamps_.count() >= n;
    }

    // What the shaders cannot run, refused before anything is recorded.
    void check_supported(const Graph& g) const {
        if (g.in.n_tokens() > static_cast<int64_t>(context_->max_groups_x()))
            throw UnsupportedError(concat("a batch of ", g.in.n_tokens(),
                                          " tokens is beyond the Vulkan backend: lower -b"));
        for (const Op& op : g.ops) {
            if (op.type == OpType::Attention &&
                (op.attn.head_dim_k > kMaxHeadDim || op.attn.head_dim_v > kMaxHeadDim))
                throw UnsupportedError("the Vulkan backend's attention takes heads of at most 256");
            if ((op.type == OpType::MoeRoute || op.type == OpType::MoeWeights) &&
                op.moe.n_expert > kMaxExperts)
                throw UnsupportedError("the Vulkan backend routes at most 256 experts");
        }
    }

    // Every weight the graph names, uploaded once in its file layout. A weight the shaders cannot
    // read or bind, or weights that do not fit in the device's memory, are refused before the
    // first byte goes up, with the type or the sizes. (Norm weights and biases are f32, which the
    // graph's validation checked.)
    void upload_weights(const Graph& g) {
        std::vector<const Weight*> missing;
        for (const Op& op : g.ops) {
            if (op.weight == nullptr || !*op.weight || weights_.contains(op.weight->data.data()))
                continue;
            if (std::find_if(missing.begin(), missing.end(), [&](const Weight* w) {
                    return w->data.data() == op.weight->data.data();
                }) != missing.end())
                continue;
            const Weight& w = *op.weight;
            if (!shader_reads(w.type))
                throw UnsupportedError(concat("the Vulkan backend does not read ",
                                              type_name(w.type), " weights (", w.describe(),
                                              "): use --device cpu"));
            if (rows_per_window(w) == 0)
                throw UnsupportedError(concat("weight ", w.describe(), " is larger than ",
                                              context_->info().name,
                                              " binds at once, and not a matrix of rows"));
            missing.push_back(op.weight);
        }
        // Each window imported in place where the device reads host memory as its own (a
        // unified-memory device), else copied: what is copied must fit beside the KV cache,
        // checked before the first byte goes up.
        std::vector<DeviceWeight> made(missing.size());
        std::vector<std::pair<Buffer*, std::span<const std::byte>>> copies;
        uint64_t bytes = 0;
        for (std::size_t i = 0; i < missing.size(); ++i) {
            const Weight& w = *missing[i];
            DeviceWeight& d = made[i];
            d.rows_per_window = rows_per_window(w);
            const uint64_t window_bytes = d.rows_per_window * row_bytes_of(w);
            for (uint64_t at = 0; at < w.data.size(); at += window_bytes) {
                const auto part = w.data.subspan(at, std::min(window_bytes, w.data.size() - at));
                d.windows.push_back(import_weights_ ? context_->import_host(part) : Buffer());
                if (d.windows.back()) {
                    weight_bytes_imported_ += part.size();
                } else {
                    bytes += part.size();
                }
            }
            for (std::size_t k = 0; k < d.windows.size(); ++k) {
                if (d.windows[k]) continue;
                const uint64_t at = k * window_bytes;
                copies.emplace_back(&d.windows[k],
                                    w.data.subspan(at, std::min(window_bytes, w.data.size() - at)));
            }
        }
        const uint64_t free = context_->memory_budget() -
                              std::min(context_->memory_budget(), context_->device_bytes());
        if (bytes > free) {
            throw LimitError(concat(
                "the model's weights (", mib(bytes), ") do not fit in ", context_->info().name,
                ": ", mib(free), " of its ", mib(context_->memory_budget()),
                " are free beside the KV cache; put fewer layers on it with -ngl N, "
                "or use --device cpu"));
        }
        for (auto& [window, part] : copies) {
            *window = context_->device_buffer(part.size());
            context_->upload(*window, part);
            weight_bytes_ += part.size();
        }
        for (std::size_t i = 0; i < missing.size(); ++i)
            weights_.emplace(missing[i]->data.data(), std::move(made[i]));
    }

    static uint64_t row_bytes_of(const Weight& w) {
        return static_cast<uint64_t>(row_size(w.type, w.n_cols()));
    }

    // Rows of `w` each device buffer of it holds: all of them when it fits in one binding, else
    // windows of a multiple of 4 rows (each window then starts on a whole word) that the device
    // binds at once; 0 for a tensor that cannot be split so (a 3-D expert tensor beyond it).
    uint64_t rows_per_window(const Weight& w) const {
        const uint64_t limit = context_->weight_binding_limit();
        const auto rows = static_cast<uint64_t>(w.n_elements() / w.n_cols());
        if (w.data.size() <= limit) return rows;
        if (w.ne[2] != 1 || w.ne[3] != 1) return 0;
        return (limit / row_bytes_of(w)) & ~uint64_t{3};
    }

    // A weight in device memory: rows [i * rows_per_window, (i + 1) * rows_per_window) in
    // windows[i]; one window unless the weight is larger than the device binds at once.
    struct DeviceWeight {
        std::vector<Buffer> windows;
        uint64_t rows_per_window = 0;
    };

    const DeviceWeight& device_weight(const Op& op) const {
        return weights_.at(op.weight->data.data());
    }
    // The weight of an op that reads it whole (vectors, expert tensors): its one window.
    const Buffer& weight(const Op& op) const { return device_weight(op).windows.front(); }

    // The splits of an attention op's split pass (its batch's longest token's), or 0 for the
    // single pass (kSplitBelowPairs says when each is chosen).
    uint32_t attention_splits(const Op& op, const Graph& g) const {
        if (attention_split_ == SplitChoice::kNever) return 0;
        int64_t longest = 1;
        for (const int32_t pos : g.in.positions)
            longest = std::max<int64_t>(longest, pos - op.attn.first_position(pos) + 1);
        const auto splits = static_cast<uint64_t>((longest - 1) / attention_span_ + 1);
        const auto pairs = static_cast<uint64_t>(op.rows * op.attn.n_head);
        if (attention_split_ == SplitChoice::kAuto &&
            (row_per_invocation_ || splits < 2 || pairs >= kSplitBelowPairs))
            return 0;
        if (partial_bytes(op, splits) > kMaxPartialBytes) return 0;
        return static_cast<uint32_t>(splits);
    }

    // Bytes of the split pass's states: m, s and the weighted sum of V per (token, head, split).
    static uint64_t partial_bytes(const Op& op, uint64_t splits) {
        return static_cast<uint64_t>(op.rows * op.attn.n_head) * splits *
               static_cast<uint64_t>(2 + op.attn.head_dim_v) * sizeof(float);
    }

    // The activation buffers of a batch, and the states of its split attention: a batch too
    // large for what the weights and the cache leave is refused naming it.
    void allocate(const Graph& g) {
        if (buffers_.size() < g.buffers.size()) buffers_.resize(g.buffers.size());
        try {
            for (std::size_t b = 0; b < g.buffers.size(); ++b) {
                const auto bytes =
                    static_cast<uint64_t>(g.buffers[b].rows * g.buffers[b].width) * 4;
                if (buffers_[b].bytes() < bytes) buffers_[b] = context_->device_buffer(bytes);
            }
            for (const Op& op : g.ops) {
                if (op.type != OpType::Attention) continue;
                const uint64_t bytes = partial_bytes(op, attention_splits(op, g));
                if (partials_.bytes() < bytes) partials_ = context_->device_buffer(bytes);
            }
        } catch (const LimitError& e) {
            throw LimitError(concat("the activations of a batch of ", g.in.n_tokens(),
                                    " tokens: ", e.what(), "; lower --batch (-b)"));
        }
    }

    void write_inputs(const InputLayout& inputs) {
        const uint64_t bytes = inputs.values.size() * sizeof(int32_t);
        // Grown by whole 4 KiB pages, at least doubling: the block tables grow a value every 16
        // decode steps, and a new buffer is a new pass to record (CommandCache).
        if (inputs_.bytes() < bytes) {
            inputs_ = context_->host_buffer(
                std::max<uint64_t>(2 * inputs_.bytes(), (bytes + 4095) & ~uint64_t{4095}));
        }
        std::memcpy(inputs_.mapped(), inputs.values.data(), bytes);
        inputs_bytes_up_ += bytes;
    }

    // The rows a split pass carries in (Graph::carried_in), written to a host-visible buffer and
    // copied to their activation buffers before the first dispatch.
    void carry_in(const Graph& g, vulkan::Commands& commands) {
        uint64_t bytes = 0;
        for (const CarriedRows& c : g.carried_in) bytes += c.values.size() * sizeof(float);
        if (bytes == 0) return;
        if (carried_.bytes() < bytes) carried_ = context_->host_buffer(bytes);
        uint64_t offset = 0;
        for (const CarriedRows& c : g.carried_in) {
            const uint64_t n = c.values.size() * sizeof(float);
            if (n == 0) continue;
            std::memcpy(static_cast<std::byte*>(carried_.mapped()) + offset, c.values.data(), n);
            commands.copy(carried_, buffer(c.buffer), n, offset, 0);
            offset += n;
        }
        inputs_bytes_up_ += bytes;
    }

    const Buffer& buffer(BufferId id) const { return buffers_[static_cast<std::size_t>(id)]; }

    const vulkan::Pipeline& pipeline(const std::string& shader, uint32_t n_buffers,
                                     uint32_t push_bytes) {
        auto it = pipelines_.find(shader);
        if (it == pipelines_.end()) {
            it = pipelines_
                     .emplace(shader,
                              &context_->shared_pipeline(shader, vulkan::shader_spirv(shader),
                                                         n_buffers, push_bytes))
                     .first;
        }
        return *it->second;
    }

    // Workgroups for `count` independent items as an x by y grid (x within the device's limit).
    std::pair<uint32_t, uint32_t> grid(uint64_t count) const {
        const uint64_t x = std::clamp<uint64_t>(count, 1, context_->max_groups_x());
        return {static_cast<uint32_t>(x), static_cast<uint32_t>((count + x - 1) / x)};
    }

    template <class Push>
    void dispatch(vulkan::Commands& c, const std::string& shader,
                  std::initializer_list<const Buffer*> buffers, const Push& push, uint64_t groups) {
        const auto [x, y] = grid(groups);
        c.dispatch(pipeline(shader, static_cast<uint32_t>(buffers.size()), sizeof(Push)),
                   std::span(buffers.begin(), buffers.size()), bytes_of(push), x, y);
    }

    static uint64_t per_64(uint64_t n) { return (n + 63) / 64; }

    void elementwise(vulkan::Commands& c, const Op& op, uint32_t code, const Buffer& other,
                     float factor) {
        const struct {
            uint32_t n, width, op;
            float factor;
        } push{u32(op.rows * op.width), u32(op.width), code, factor};
        dispatch(c, "elementwise", {&buffer(op.dst), &other}, push, per_64(push.n));
    }

    void matmul(vulkan::Commands& c, const Op& op, int64_t n_in, int64_t n_out, int64_t n_rows,
                bool moe) {
        const Weight& w = *op.weight;
        // A CPU device (lavapipe) runs a row per invocation; a GPU a row per workgroup
        // (matmul_vec.comp says why).
        const bool per_invocation = row_per_invocation_;
        const std::string shader = concat(per_invocation ? "matmul_rows_" : "matmul_vec_",
                                          moe ? "moe_" : "", type_name(w.type));
        // One dispatch per window of the matrix's rows (one window but for a matrix larger
        // than the device binds at once).
        const DeviceWeight& d = device_weight(op);
        for (std::size_t i = 0; i < d.windows.size(); ++i) {
            const uint64_t row_base = i * d.rows_per_window;
            const uint64_t rows =
                std::min<uint64_t>(d.rows_per_window, static_cast<uint64_t>(n_out) - row_base);
            const struct {
                uint32_t n_in, n_out, n_rows, row_bytes, k, per_slot, expert_bytes, row_base,
                    y_stride;
            } push{u32(n_in),
                   u32(rows),
                   u32(n_rows),
                   u32(row_size(w.type, n_in)),
                   u32(op.moe.n_used),
                   op.moe.per_slot_input ? 1u : 0u,
                   u32(row_size(w.type, n_in) * static_cast<uint64_t>(n_out)),
                   u32(row_base),
                   u32(n_out)};
            const uint32_t row_groups = per_invocation ? (u32(rows) + 63) / 64 : u32(rows);
            const uint32_t x = std::min<uint32_t>(row_groups, context_->max_groups_x());
            const uint32_t z = (row_groups + x - 1) / x;
            std::vector<const Buffer*> buffers = {&d.windows[i], &buffer(op.src0), &buffer(op.dst)};
            if (moe) buffers.push_back(&buffer(op.src1));
            c.dispatch(pipeline(shader, static_cast<uint32_t>(buffers.size()), sizeof(push)),
                       buffers, bytes_of(push), x, u32(n_rows), z);
        }
    }

    void record(vulkan::Commands& c, const Op& op, const Graph& g, const InputLayout& in) {
        switch (op.type) {
            case OpType::GetRows: {
                // One dispatch per window of the table's rows, each looking up the tokens whose
                // rows it holds.
                const DeviceWeight& d = device_weight(op);
                for (std::size_t i = 0; i < d.windows.size(); ++i) {
                    const struct {
                        uint32_t n_tokens, width, row_bytes, tokens, row_base, n_window;
                    } push{u32(op.rows),
                           u32(op.width),
                           u32(row_size(op.weight->type, op.width)),
                           in.tokens,
                           u32(i * d.rows_per_window),
                           u32(d.rows_per_window)};
                    dispatch(c, concat("get_rows_", type_name(op.weight->type)),
                             {&d.windows[i], &inputs_, &buffer(op.dst)}, push, push.n_tokens);
                }
                return;
            }
            case OpType::RmsNorm:
            case OpType::HeadRmsNorm: {
                const bool heads = op.type == OpType::HeadRmsNorm;
                const int64_t n = heads ? op.head_dim : op.width;
                const struct {
                    uint32_t n_groups, n;
                    float eps;
                } push{u32(op.rows * op.width / n), u32(n), op.eps};
                const Buffer& src = heads ? buffer(op.dst) : buffer(op.src0);
                dispatch(c, "rms_norm", {&src, &weight(op), &buffer(op.dst)}, push, push.n_groups);
                return;
            }
            case OpType::MatMul:
                return matmul(c, op, op.weight->n_cols(), op.width, op.rows, false);
            case OpType::MoeMatMul:
                return matmul(c, op, op.weight->ne[0], op.weight->ne[1], op.rows * op.moe.n_used,
                              true);
            case OpType::AddBias:
                return elementwise(c, op, 5, weight(op), 0.0f);
            case OpType::Add:
                return elementwise(c, op, 0, buffer(op.src0), 0.0f);
            case OpType::SwiGlu:
                return elementwise(c, op, 1, buffer(op.src0), 0.0f);
            case OpType::GeGlu:
                return elementwise(c, op, 2, buffer(op.src0), 0.0f);
            case OpType::Scale:
                return elementwise(c, op, 3, dummy_, op.factor);
            case OpType::SoftCap:
                return elementwise(c, op, 4, dummy_, op.factor);
            case OpType::Rope: {
                const bool factors = op.weight != nullptr && *op.weight;
                const struct {
                    uint32_t n_tokens, n_heads, head_dim, n_dims, neox, has_factors, positions;
                    float freq_base, freq_scale, attn_factor;
                } push{u32(op.rows),
                       u32(op.width / op.head_dim),
                       u32(op.head_dim),
                       u32(op.rope.n_dims),
                       op.rope.style == RopeStyle::kNeox ? 1u : 0u,
                       factors ? 1u : 0u,
                       in.positions,
                       op.rope.freq_base,
                       op.rope.freq_scale,
                       op.rope.attn_factor};
                dispatch(c, "rope", {&buffer(op.dst), &inputs_, factors ? &weight(op) : &dummy_},
                         push, per_64(uint64_t{push.n_tokens} * push.n_heads * (push.n_dims / 2)));
                return;
            }
            case OpType::StoreKv: {
                const CacheLayer& l = cache_[static_cast<std::size_t>(op.kv_layer)];
                const struct {
                    uint32_t n_tokens, k_width, v_width, kv_slots;
                } push{u32(op.rows), u32(l.k_width), u32(l.v_width), in.kv_slots};
                dispatch(c, concat("store_kv_", cache_type_),
                         {&buffer(op.src0), &buffer(op.src1), &inputs_, &l.k, &l.v}, push,
                         per_64(uint64_t{push.n_tokens} * (push.k_width + push.v_width) /
                                (cache_type_ == "q8_0" ? 64 : 2)));
                return;
            }
            case OpType::Attention: {
                const CacheLayer& l = cache_[static_cast<std::size_t>(op.kv_layer)];
                const AttentionParams& a = op.attn;
                const uint32_t splits = attention_splits(op, g);
                const struct {
                    uint32_t n_tokens, n_head, n_head_kv, head_dim_k, head_dim_v;
                    float scale, softcap;
                    uint32_t window, block_size, positions, sequence, table_begin, table_blocks,
                        span, n_splits;
                } push{u32(op.rows),      u32(a.n_head),     u32(a.n_head_kv),
                       u32(a.head_dim_k), u32(a.head_dim_v), a.scale,
                       a.softcap,         u32(a.window),     u32(g.kv_block_size),
                       in.positions,      in.sequence,       in.table_begin,
                       in.table_blocks,   attention_span_,   std::max(splits, 1u)};
                const auto pairs = static_cast<uint64_t>(op.rows * a.n_head);
                if (splits == 0) {
                    dispatch(c, concat("attention_", cache_type_),
                             {&buffer(op.src0), &buffer(op.dst), &inputs_, &l.k, &l.v}, push,
                             pairs);
                    return;
                }
                // A workgroup per (token, head, split), then one per (token, head) merging them.
                dispatch(c, concat("attention_split_", cache_type_),
                         {&buffer(op.src0), &partials_, &inputs_, &l.k, &l.v}, push,
                         pairs * splits);
                c.barrier();
                dispatch(c, "attention_combine", {&partials_, &buffer(op.dst), &inputs_}, push,
                         pairs);
                return;
            }
            case OpType::SelectRows: {
                const struct {
                    uint32_t n_rows, width, output_rows;
                } push{u32(op.rows), u32(op.width), in.output_rows};
                dispatch(c, "select_rows", {&buffer(op.src0), &inputs_, &buffer(op.dst)}, push,
                         per_64(uint64_t{push.n_rows} * push.width));
                return;
            }
            case OpType::MoeRoute:
            case OpType::MoeWeights: {
                const bool route = op.type == OpType::MoeRoute;
                const struct {
                    uint32_t n_tokens, n_expert, k, mode;
                } push{u32(op.rows), u32(op.moe.n_expert), u32(op.moe.n_used), route ? 0u : 1u};
                const Buffer& ids = route ? buffer(op.dst) : buffer(op.src1);
                const Buffer& weights = route ? dummy_ : buffer(op.dst);
                dispatch(c, "moe_route", {&buffer(op.src0), &ids, &weights}, push,
                         per_64(push.n_tokens));
                return;
            }
            case OpType::MoeCombine: {
                const struct {
                    uint32_t n_tokens, width, k;
                } push{u32(op.rows), u32(op.width), u32(op.moe.n_used)};
                dispatch(c, "moe_combine", {&buffer(op.src0), &buffer(op.src1), &buffer(op.dst)},
                         push, per_64(uint64_t{push.n_tokens} * push.width));
                return;
            }
        }
        throw UsageError(concat("the Vulkan backend has no kernel for ", op_type_name(op.type)));
    }

    BackendOptions options_;
    std::shared_ptr<vulkan::Context> context_;  // shared by the backends on the device
    std::string cache_type_;           // "f16", "f32", "q8_0": the store_kv and attention variants
    bool row_per_invocation_ = false;  // the products' shader: matmul_rows, else matmul_vec
    enum class SplitChoice { kAuto, kAlways, kNever };
    SplitChoice attention_split_ = SplitChoice::kAuto;  // attention_splits() says how
    uint32_t attention_span_ = kDefaultAttentionSpan;   // positions per split
    std::vector<CacheLayer> cache_;    // per cache layer
    uint64_t cache_bytes_ = 0;
    std::unordered_map<const std::byte*, DeviceWeight> weights_;  // by the weight's first byte
    uint64_t weight_bytes_ = 0;                                   // uploaded, all at load
    uint64_t weight_bytes_imported_ = 0;  // viewed in place in the mapped file
    bool import_weights_ = false;
    uint64_t inputs_bytes_up_ = 0;      // the batches' inputs, through host-visible memory
    uint64_t logits_bytes_down_ = 0;    // the logits, likewise
    std::vector<Buffer> buffers_;       // by BufferId of the graphs executed (grown, never shrunk)
    Buffer inputs_;                     // host-visible: the batch's InputLayout
    Buffer readback_;                   // host-visible: the logits
    Buffer carried_;                    // host-visible: rows a split pass carries in
    Buffer partials_;                   // the states of a split attention (attention.comp)
    Buffer dummy_;                      // bound where a shader's optional input is absent
    vulkan::TimestampPool timestamps_;  // MINFER_TRACE's, grown to the largest graph
    vulkan::CommandCache recorded_passes_;  // the last passes' command buffers, to submit again
    // By shader name: the context's, looked up without its lock.
    std::unordered_map<std::string, const vulkan::Pipeline*> pipelines_;
    std::vector<float> logits_;
};

}  // namespace

std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& options, int device_index) {
    return std::make_unique<VulkanBackend>(options, device_index);
}

}  // namespace minfer
