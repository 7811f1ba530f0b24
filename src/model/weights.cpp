#include "model/weights.h"

#include <algorithm>

#include "core/error.h"
#include "quant/supported_types.h"

namespace minfer {

std::string Weight::describe() const {
    std::string shape = "[";
    for (int d = 0; d < std::max(n_dims, 1); ++d) shape += concat(d ? ", " : "", ne[d]);
    shape += "]";
    std::string out = concat(type_name(type), " ", shape);
    if (info != nullptr && data.size() != info->data.size()) {
        const auto begin = static_cast<std::size_t>(data.data() - info->data.data());
        out += concat(" (bytes ", begin, "..", begin + data.size(), " of ", info->name, ")");
    }
    return out;
}

Weight Weight::rows(int64_t begin, int64_t count) const {
    if (n_dims > 2 || begin < 0 || count < 1 || begin + count > ne[1]) {
        throw UsageError(concat("rows ", begin, "..", begin + count, " of ", describe(),
                                " are not a slice of a matrix"));
    }
    const std::size_t row = row_size(type, ne[0]);
    Weight w = *this;
    w.ne[1] = count;
    w.data =
        data.subspan(static_cast<std::size_t>(begin) * row, static_cast<std::size_t>(count) * row);
    return w;
}

Weight Weight::matrix(int64_t index) const {
    if (n_dims != 3 || index < 0 || index >= ne[2])
        throw UsageError(concat("matrix ", index, " of ", describe(), " does not exist"));
    const std::size_t bytes = row_size(type, ne[0]) * static_cast<std::size_t>(ne[1]);
    Weight w = *this;
    w.n_dims = 2;
    w.ne[2] = 1;
    w.data = data.subspan(static_cast<std::size_t>(index) * bytes, bytes);
    return w;
}

const TensorInfo* WeightBinder::find(const std::string& name, bool required,
                                     const std::string& shape) const {
    const TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr && required) {
        throw FormatError(concat(file_.path().string(), ": tensor '", name,
                                 "' is missing (expected shape ", shape, ")"));
    }
    return t;
}

Weight WeightBinder::view(const TensorInfo& t) const {
    Weight w;
    w.info = &t;
    w.type = t.type;
    w.n_dims = static_cast<int>(t.n_dims);
    for (int d = 0; d < 4; ++d)
        w.ne[static_cast<std::size_t>(d)] = t.ne[static_cast<std::size_t>(d)];
    w.data = t.data;
    return w;
}

Weight WeightBinder::tensor(const std::string& name, std::span<const int64_t> shape,
                            bool required) {
    std::string expected = "[";
    for (std::size_t d = 0; d < shape.size(); ++d) expected += concat(d ? ", " : "", shape[d]);
    expected += "]";
    const TensorInfo* t = find(name, required, expected);
    if (t == nullptr) return Weight{};
    bool same = t->n_dims == shape.size();
    for (std::size_t d = 0; same && d < shape.size(); ++d) same = t->ne[d] == shape[d];
    if (!same) {
        throw FormatError(concat(file_.path().string(), ": tensor '", name, "' has shape ",
                                 t->shape_string(), ", expected ", expected));
    }
    require_supported_weight_type(*t);
    if (std::find(read_whole_.begin(), read_whole_.end(), t) == read_whole_.end())
        read_whole_.push_back(t);
    return view(*t);
}

Weight WeightBinder::experts(const std::string& name, int64_t n_cols, int64_t n_rows,
                             int64_t n_expert, int64_t n_used) {
    const int64_t shape[3] = {n_cols, n_rows, n_expert};
    Weight w = tensor(name, shape);
    // Read in part, not whole: tensor() listed it with the whole ones.
    std::erase(read_whole_, w.info);
    experts_.push_back(PartlyRead{w.info, n_used, n_expert});
    return w;
}

Weight WeightBinder::matrix(const std::string& name, int64_t n_cols, int64_t n_rows,
                            bool required) {
    const int64_t shape[2] = {n_cols, n_rows};
    return tensor(name, shape, required);
}

Weight WeightBinder::vector(const std::string& name, int64_t n, bool required) {
    const TensorInfo* t = find(name, required, concat("[", n, "]"));
    if (t == nullptr) return Weight{};
    if (t->n_elements() != n || t->ne[0] != n) {
        throw FormatError(concat(file_.path().string(), ": tensor '", name, "' has shape ",
                                 t->shape_string(), ", expected [", n, "]"));
    }
    if (t->type != GgmlType::F32) {
        throw UnsupportedError(concat(file_.path().string(), ": tensor '", name, "' has type ",
                                      type_name(t->type),
                                      "; minfer expects f32 for norms and biases"));
    }
    if (std::find(read_whole_.begin(), read_whole_.end(), t) == read_whole_.end())
        read_whole_.push_back(t);
    return view(*t);
}

Weight WeightBinder::embeddings(const std::string& name, int64_t n_embd, int64_t n_vocab) {
    const TensorInfo* t = find(name, true, concat("[", n_embd, ", ", n_vocab, "]"));
    if (t->n_dims != 2 || t->ne[0] != n_embd || t->ne[1] != n_vocab) {
        throw FormatError(concat(file_.path().string(), ": tensor '", name, "' has shape ",
                                 t->shape_string(), ", expected [", n_embd, ", ", n_vocab, "]"));
    }
    require_supported_weight_type(*t);
    looked_up_.push_back(t);
    return view(*t);
}

uint64_t WeightBinder::bytes_per_token() const {
    uint64_t n = 0;
    for (const TensorInfo* t : read_whole_) n += t->n_bytes;
    for (const PartlyRead& e : experts_)
        n +=
            e.tensor->n_bytes / static_cast<uint64_t>(e.n_expert) * static_cast<uint64_t>(e.n_used);
    for (const TensorInfo* t : looked_up_) {
        const bool also_whole =
            std::find(read_whole_.begin(), read_whole_.end(), t) != read_whole_.end();
        if (!also_whole) n += t->n_bytes / static_cast<uint64_t>(t->ne[1]);
    }
    return n;
}

}  // namespace minfer
