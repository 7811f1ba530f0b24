#include "gguf/gguf_parser.h"

#include <bit>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/error.h"
#include "core/hex_escape.h"

namespace minfer {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; so must the host be");

std::string TensorInfo::shape_string() const {
    std::string out = "[";
    for (uint32_t i = 0; i < std::max<uint32_t>(n_dims, 1); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(ne[i]);
    }
    return out + "]";
}

namespace {

// Smallest encodings, used to reject counts that the remaining bytes cannot hold before
// anything is allocated.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;          // key length, 1-byte key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

uint64_t min_encoded_size(GgufType type) {
    switch (type) {
        case GgufType::String:
            return 8;
        case GgufType::Array:
            return 4 + 8;
        default:
            return gguf_scalar_size(type);
    }
}

std::string printable_magic(std::span<const std::byte> bytes) {
    std::string out;
    for (std::byte b : bytes) {
        const auto c = static_cast<unsigned char>(b);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            append_hex(out, c, 2);
        }
    }
    return out;
}

class Cursor {
  public:
    Cursor(std::span<const std::byte> bytes, const std::string& file_name)
        : bytes_(bytes), file_name_(file_name) {}

    uint64_t position() const { return pos_; }
    uint64_t remaining() const { return bytes_.size() - pos_; }

    [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const {
        throw FormatError(concat(file_name_, ": at offset ", offset, ": ", what));
    }

    // Makes sure n more bytes exist; `what` says what was being read.
    void need(uint64_t n, std::string_view what) const {
        if (n > remaining()) {
            fail_at(pos_, concat("truncated while reading ", what, ": need ", n, " bytes, only ",
                                 remaining(), " left in the file"));
        }
    }

    template <class T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::span<const std::byte> take(uint64_t n, std::string_view what) {
        need(n, what);
        auto out = bytes_.subspan(pos_, n);
        pos_ += n;
        return out;
    }

    // A GGUF string: u64 length + bytes, bounded by the file and by 1 GiB.
    std::string_view read_string(std::string_view what) {
        const uint64_t start = pos_;
        const auto length = read<uint64_t>(what);
        if (length > kGgufMaxStringLength) {
            fail_at(start, concat(what, " has length ", length, ", more than the limit of ",
                                  kGgufMaxStringLength, " bytes"));
        }
        if (length > remaining()) {
            fail_at(start, concat(what, " has length ", length, " but only ", remaining(),
                                  " bytes remain in the file"));
        }
        auto bytes = take(length, what);
        return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
    }

  private:
    std::span<const std::byte> bytes_;
    const std::string& file_name_;
    uint64_t pos_ = 0;
};

class Parser {
  public:
    Parser(std::span<const std::byte> file, const std::string& file_name)
        : file_(file), name_(file_name), in_(file, file_name) {}

    GgufContents parse() {
        read_header();
        read_metadata();
        read_tensor_infos();
        lay_out_data_section();
        return std::move(out_);
    }

  private:
    void read_header() {
        if (file_.size() < 4) {
            throw FormatError(concat(name_, ": not a GGUF file: ", file_.size(),
                                     " bytes is too short for the 24-byte header"));
        }
        auto magic = file_.first(4);
        if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
            throw FormatError(concat(name_, ": not a GGUF file: magic is '", printable_magic(magic),
                                     "', expected 'GGUF'"));
        }
        in_.take(4, "magic");
        const uint64_t version_at = in_.position();
        const auto version = in_.read<uint32_t>("version");
        if (version == 0) in_.fail_at(version_at, "bad GGUF version 0");
        if ((version & 0xFFFF) == 0) {
            in_.fail_at(version_at,
                        concat("GGUF version ", version,
                               " is impossibly large: the file was written with the "
                               "other byte order (big-endian), which minfer does not read"));
        }
        if (version == 1)
            in_.fail_at(version_at,
                        "GGUF version 1 is no longer supported; convert the file again");
        if (version > kGgufVersion) {
            in_.fail_at(version_at,
                        concat("GGUF version ", version,
                               " is newer than this software supports (up to ", kGgufVersion, ")"));
        }
        out_.version = version;

        const uint64_t counts_at = in_.position();
        n_tensors_ = in_.read<int64_t>("tensor count");
        n_kv_ = in_.read<int64_t>("metadata key-value count");
        if (n_tensors_ < 0)
            in_.fail_at(counts_at, concat("tensor count is negative: ", n_tensors_));
        if (n_kv_ < 0)
            in_.fail_at(counts_at + 8, concat("metadata key-value count is negative: ", n_kv_));
        const uint64_t remaining = in_.remaining();
        if (static_cast<uint64_t>(n_kv_) > remaining / kMinKvBytes) {
            in_.fail_at(counts_at + 8,
                        concat("metadata key-value count ", n_kv_, " is more than the ", remaining,
                               " remaining bytes could hold"));
        }
        if (static_cast<uint64_t>(n_tensors_) > remaining / kMinTensorInfoBytes ||
            static_cast<uint64_t>(n_kv_) * kMinKvBytes +
                    static_cast<uint64_t>(n_tensors_) * kMinTensorInfoBytes >
                remaining) {
            in_.fail_at(counts_at, concat("tensor count ", n_tensors_, " (with ", n_kv_,
                                          " key-value pairs) is more than the ", remaining,
                                          " remaining bytes could hold"));
        }
        out_.n_kv = static_cast<uint64_t>(n_kv_);
    }

    GgufType read_type(std::string_view what) {
        const uint64_t at = in_.position();
        const auto raw = in_.read<uint32_t>(what);
        if (raw >= kGgufTypeCount) {
            in_.fail_at(at,
                        concat(what, " is ", raw, ", not one of the 13 GGUF value types (0..12)"));
        }
        return static_cast<GgufType>(raw);
    }

    GgufValue read_value(GgufType type, std::string_view key, int depth) {
        const uint64_t at = in_.position();
        switch (type) {
            case GgufType::String:
                return GgufValue::string_view(
                    in_.read_string(concat("string value of key '", key, "'")));
            case GgufType::Array:
                return GgufValue::array(read_array(key, depth + 1));
            case GgufType::Bool: {
                auto bytes = in_.take(1, "bool value");
                const auto b = static_cast<uint8_t>(bytes[0]);
                if (b > 1)
                    in_.fail_at(
                        at, concat("key '", key, "': bool value is ", int(b), ", expected 0 or 1"));
                return GgufValue::scalar_from_bytes(type, bytes.data());
            }
            default: {
                auto bytes = in_.take(gguf_scalar_size(type), "scalar value");
                return GgufValue::scalar_from_bytes(type, bytes.data());
            }
        }
    }

    GgufArray read_array(std::string_view key, int depth) {
        const uint64_t at = in_.position();
        if (depth > kGgufMaxArrayDepth) {
            in_.fail_at(at, concat("key '", key, "': arrays nested deeper than ",
                                   kGgufMaxArrayDepth, " levels"));
        }
        const GgufType element_type = read_type(concat("element type of array '", key, "'"));
        const uint64_t count_at = in_.position();
        const auto count = in_.read<uint64_t>("array length");
        if (count > kGgufMaxArrayElements) {
            in_.fail_at(count_at, concat("key '", key, "': array of ", count,
                                         " elements is over the limit of ", kGgufMaxArrayElements));
        }
        const uint64_t min_size = min_encoded_size(element_type);
        if (count > in_.remaining() / min_size) {
            in_.fail_at(count_at,
                        concat("key '", key, "': array of ", count, " ",
                               gguf_type_name(element_type), " elements needs at least ",
                               count * min_size, " bytes, only ", in_.remaining(), " remain"));
        }
        switch (element_type) {
            case GgufType::String: {
                std::vector<std::string_view> strings(count);
                // Built once: formatting it per element cost more than parsing (300k-token
                // vocabularies).
                const std::string what = concat("string element of array '", key, "'");
                for (auto& s : strings) s = in_.read_string(what);
                return GgufArray::view_strings(std::move(strings));
            }
            case GgufType::Array: {
                std::vector<GgufValue> nested;
                nested.reserve(count);
                for (uint64_t i = 0; i < count; ++i)
                    nested.push_back(GgufValue::array(read_array(key, depth + 1)));
                return GgufArray::of_arrays(std::move(nested));
            }
            case GgufType::Bool: {
                auto bytes = in_.take(count, "bool array");
                for (uint64_t i = 0; i < count; ++i) {
                    if (static_cast<uint8_t>(bytes[i]) > 1) {
                        in_.fail_at(count_at + 8 + i,
                                    concat("key '", key, "': bool element ", i, " is ",
                                           int(bytes[i]), ", expected 0 or 1"));
                    }
                }
                return GgufArray::view_raw(element_type, count, bytes);
            }
            default:
                return GgufArray::view_raw(element_type, count,
                                           in_.take(count * min_size, "array elements"));
        }
    }

    void read_metadata() {
        out_.metadata = GgufMetadata(name_);
        for (int64_t i = 0; i < n_kv_; ++i) {
            const uint64_t at = in_.position();
            const std::string_view key = in_.read_string(concat("key of metadata entry ", i));
            if (key.empty()) in_.fail_at(at, concat("metadata entry ", i, " has an empty key"));
            const GgufType type = read_type(concat("type of key '", key, "'"));
            GgufValue value = read_value(type, key, 0);
            if (key == "general.alignment") check_alignment(value, at);
            if (!out_.metadata.add(key, std::move(value))) {
                in_.fail_at(at, concat("duplicate metadata key '", key, "'"));
            }
        }
    }

    void check_alignment(const GgufValue& value, uint64_t at) {
        if (value.type() != GgufType::Uint32) {
            in_.fail_at(at, concat("general.alignment has type ", gguf_type_name(value.type()),
                                   ", expected u32"));
        }
        const auto alignment = value.get<uint32_t>();
        if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
            in_.fail_at(at, concat("general.alignment is ", alignment,
                                   ", expected a non-zero power of two"));
        }
        out_.alignment = alignment;
    }

    void read_tensor_infos() {
        out_.tensors.reserve(static_cast<std::size_t>(n_tensors_));
        std::unordered_set<std::string_view> names;
        names.reserve(static_cast<std::size_t>(n_tensors_));
        for (int64_t i = 0; i < n_tensors_; ++i) {
            const uint64_t at = in_.position();
            TensorInfo t;
            const std::string_view name = in_.read_string(concat("name of tensor ", i));
            if (name.size() >= kGgmlMaxName) {
                in_.fail_at(at, concat("tensor ", i, " has a name of ", name.size(),
                                       " bytes, the limit is ", kGgmlMaxName - 1));
            }
            if (!names.insert(name).second)
                in_.fail_at(at, concat("duplicate tensor name '", name, "'"));
            t.name = std::string(name);
            const std::string label = concat("tensor '", t.name, "'");

            const uint64_t dims_at = in_.position();
            t.n_dims = in_.read<uint32_t>("number of dimensions");
            if (t.n_dims > kGgmlMaxDims) {
                in_.fail_at(dims_at, concat(label, " has ", t.n_dims, " dimensions, at most ",
                                            kGgmlMaxDims, " allowed"));
            }
            for (uint32_t d = 0; d < t.n_dims; ++d) {
                const auto ne = in_.read<int64_t>("dimension");
                if (ne < 0)
                    in_.fail_at(dims_at + 4 + 8 * d,
                                concat(label, " has negative dimension ", d, ": ", ne));
                t.ne[d] = ne;
            }
            // Element count must fit int64 (ggml's own check: divide rather than multiply).
            constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
            if ((t.ne[1] != 0 && t.ne[0] > kMax / t.ne[1]) ||
                (t.ne[2] != 0 && t.ne[0] * t.ne[1] > kMax / t.ne[2]) ||
                (t.ne[3] != 0 && t.ne[0] * t.ne[1] * t.ne[2] > kMax / t.ne[3])) {
                in_.fail_at(dims_at, concat(label, " with shape ", t.shape_string(),
                                            " has too many elements"));
            }

            const uint64_t type_at = in_.position();
            const auto type_id = in_.read<uint32_t>("tensor type");
            const auto traits = ggml_type_traits(type_id);
            if (!traits) {
                in_.fail_at(type_at, concat(label, " has type id ", type_id,
                                            ", not a ggml type (0..", kGgmlTypeCount - 1, ")"));
            }
            if (traits->removed) {
                in_.fail_at(type_at, concat(label, " has type ", traits->name, " (id ", type_id,
                                            "), which ggml removed and no longer reads"));
            }
            t.type = static_cast<GgmlType>(type_id);
            if (t.ne[0] % traits->block_size != 0) {
                in_.fail_at(type_at, concat(label, " of type ", traits->name, " has ", t.ne[0],
                                            " elements per row, not a multiple of the block size ",
                                            traits->block_size));
            }
            const uint64_t n_blocks = static_cast<uint64_t>(t.n_elements() / traits->block_size);
            if (n_blocks > std::numeric_limits<uint64_t>::max() / traits->type_size) {
                in_.fail_at(type_at, concat(label, " with shape ", t.shape_string(),
                                            " is too large in bytes"));
            }
            t.n_bytes = n_blocks * traits->type_size;
            t.nb[0] = traits->type_size;
            t.nb[1] = t.nb[0] * static_cast<uint64_t>(t.ne[0] / traits->block_size);
            for (std::size_t d = 2; d < kGgmlMaxDims; ++d)
                t.nb[d] = t.nb[d - 1] * static_cast<uint64_t>(t.ne[d - 1]);

            t.offset = in_.read<uint64_t>("tensor data offset");
            out_.tensors.push_back(std::move(t));
        }
    }

    void lay_out_data_section() {
        const uint64_t table_end = in_.position();
        out_.data_offset =
            out_.tensors.empty() ? table_end : pad_to_alignment(table_end, out_.alignment);

        // Each tensor must start where the previous one ended, padded to the alignment.
        uint64_t expected = 0;
        uint64_t needed_end = out_.data_offset;  // end of the last byte any tensor uses
        for (auto& t : out_.tensors) {
            if (t.offset != expected) {
                throw FormatError(concat(
                    name_, ": tensor '", t.name, "' has data offset ", t.offset, ", expected ",
                    expected, " (the previous tensor's end, padded to ", out_.alignment, ")"));
            }
            const uint64_t padded = pad_to_alignment(t.n_bytes, out_.alignment);
            if (padded < t.n_bytes || expected > std::numeric_limits<uint64_t>::max() - padded ||
                out_.data_offset > std::numeric_limits<uint64_t>::max() - expected - padded) {
                throw FormatError(
                    concat(name_, ": tensor '", t.name, "' makes the data section overflow"));
            }
            needed_end = out_.data_offset + t.offset + t.n_bytes;
            expected += padded;
        }
        out_.data_size = expected;

        if (needed_end > file_.size()) {
            throw FormatError(concat(name_, ": truncated: expected ", needed_end, " bytes, found ",
                                     file_.size(), " (the data section starts at ",
                                     out_.data_offset, " and holds ", out_.data_size, " bytes)"));
        }
        for (auto& t : out_.tensors) t.data = file_.subspan(out_.data_offset + t.offset, t.n_bytes);
    }

    std::span<const std::byte> file_;
    const std::string& name_;
    Cursor in_;
    int64_t n_tensors_ = 0;
    int64_t n_kv_ = 0;
    GgufContents out_;
};

}  // namespace

GgufContents parse_gguf(std::span<const std::byte> file, const std::string& file_name) {
    return Parser(file, file_name).parse();
}

}  // namespace minfer
