#include "gguf/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "gguf/gguf_parser.h"

namespace minfer {
namespace {

class Out {
  public:
    explicit Out(std::ostream& out) : out_(out) {}

    template <class T>
    void scalar(T v) {
        bytes(&v, sizeof(T));
    }
    void bytes(const void* p, std::size_t n) {
        out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
        written_ += n;
    }
    void string(std::string_view s) {
        scalar<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    void pad_to(uint64_t alignment) {
        static const char kZeros[256] = {};
        uint64_t n = pad_to_alignment(written_, alignment) - written_;
        while (n > 0) {
            const auto chunk = std::min<uint64_t>(n, sizeof(kZeros));
            bytes(kZeros, chunk);
            n -= chunk;
        }
    }
    uint64_t written() const { return written_; }

  private:
    std::ostream& out_;
    uint64_t written_ = 0;
};

void write_array(Out& out, const GgufArray& a);

void write_value_body(Out& out, const GgufValue& v) {
    switch (v.type()) {
        case GgufType::String:
            out.string(v.as_string());
            break;
        case GgufType::Array:
            write_array(out, v.as_array());
            break;
        case GgufType::Bool:
            out.scalar<uint8_t>(v.get<bool>() ? 1 : 0);
            break;
        case GgufType::Uint8:
            out.scalar(v.get<uint8_t>());
            break;
        case GgufType::Int8:
            out.scalar(v.get<int8_t>());
            break;
        case GgufType::Uint16:
            out.scalar(v.get<uint16_t>());
            break;
        case GgufType::Int16:
            out.scalar(v.get<int16_t>());
            break;
        case GgufType::Uint32:
            out.scalar(v.get<uint32_t>());
            break;
        case GgufType::Int32:
            out.scalar(v.get<int32_t>());
            break;
        case GgufType::Float32:
            out.scalar(v.get<float>());
            break;
        case GgufType::Uint64:
            out.scalar(v.get<uint64_t>());
            break;
        case GgufType::Int64:
            out.scalar(v.get<int64_t>());
            break;
        case GgufType::Float64:
            out.scalar(v.get<double>());
            break;
    }
}

void write_array(Out& out, const GgufArray& a) {
    out.scalar(static_cast<uint32_t>(a.element_type()));
    out.scalar<uint64_t>(a.size());
    switch (a.element_type()) {
        case GgufType::String:
            for (auto s : a.strings()) out.string(s);
            break;
        case GgufType::Array:
            for (const auto& nested : a.arrays()) write_array(out, nested.as_array());
            break;
        default:
            out.bytes(a.raw_bytes().data(), a.raw_bytes().size());
    }
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        throw Error(concat("GGUF alignment must be a non-zero power of two, got ", alignment));
    }
    metadata_.set("general.alignment", GgufValue::of<uint32_t>(alignment));
}

uint32_t GgufWriter::alignment() const {
    return metadata_.get_optional<uint32_t>("general.alignment").value_or(kGgufDefaultAlignment);
}

GgufWriter::PendingTensor GgufWriter::make_pending(std::string name, GgmlType type,
                                                   std::vector<int64_t> shape) {
    if (name.empty() || name.size() >= kGgmlMaxName) {
        throw Error(concat("tensor name '", name, "' must have 1 to ", kGgmlMaxName - 1, " bytes"));
    }
    for (const auto& t : tensors_) {
        if (t.name == name) throw Error(concat("tensor '", name, "' added twice"));
    }
    if (shape.size() > kGgmlMaxDims)
        throw Error(concat("tensor '", name, "' has more than 4 dimensions"));
    if (traits(type).removed)
        throw Error(concat("tensor '", name, "': type id is removed from ggml"));
    uint64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) throw Error(concat("tensor '", name, "' has a negative dimension"));
        n *= static_cast<uint64_t>(d);
    }
    const int64_t row = shape.empty() ? 1 : shape[0];
    if (row % block_size(type) != 0) {
        throw Error(concat("tensor '", name, "': row of ", row,
                           " elements is not a multiple of the ", type_name(type), " block size ",
                           block_size(type)));
    }
    const uint64_t n_bytes = n / static_cast<uint64_t>(block_size(type)) * type_size(type);
    return {std::move(name), type, std::move(shape), n_bytes, {}, {}};
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                            std::span<const std::byte> data) {
    PendingTensor t = make_pending(std::move(name), type, std::move(shape));
    if (data.size() != t.n_bytes) {
        throw Error(concat("tensor '", t.name, "': given ", data.size(), " bytes, its shape needs ",
                           t.n_bytes));
    }
    t.data = data;
    tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                            Producer producer) {
    PendingTensor t = make_pending(std::move(name), type, std::move(shape));
    t.producer = std::move(producer);
    tensors_.push_back(std::move(t));
}

void GgufWriter::write(std::ostream& stream) const {
    Out out(stream);
    const uint32_t align = alignment();
    out.bytes("GGUF", 4);
    out.scalar<uint32_t>(kGgufVersion);
    out.scalar<int64_t>(static_cast<int64_t>(tensors_.size()));
    out.scalar<int64_t>(static_cast<int64_t>(metadata_.size()));
    for (const auto& [key, value] : metadata_.entries()) {
        out.string(key);
        out.scalar(static_cast<uint32_t>(value.type()));
        write_value_body(out, value);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        out.string(t.name);
        out.scalar<uint32_t>(static_cast<uint32_t>(t.shape.size()));
        for (int64_t d : t.shape) out.scalar<int64_t>(d);
        out.scalar(static_cast<uint32_t>(t.type));
        out.scalar<uint64_t>(offset);
        offset += pad_to_alignment(t.n_bytes, align);
    }
    if (!tensors_.empty()) out.pad_to(align);

    std::vector<std::byte> buffer;
    for (const auto& t : tensors_) {
        if (t.producer) {
            buffer.assign(t.n_bytes, std::byte{0});
            t.producer(buffer);
            out.bytes(buffer.data(), buffer.size());
        } else {
            out.bytes(t.data.data(), t.data.size());
        }
        out.pad_to(align);
    }
    if (!stream) throw IoError("writing the GGUF stream failed");
}

std::vector<std::byte> GgufWriter::to_bytes() const {
    std::ostringstream stream;
    write(stream);
    const std::string s = std::move(stream).str();
    std::vector<std::byte> out(s.size());
    std::memcpy(out.data(), s.data(), s.size());
    return out;
}

void GgufWriter::write_file(const std::filesystem::path& path) const {
    std::ofstream stream(path, std::ios::binary | std::ios::trunc);
    if (!stream) throw IoError(concat(path.string(), ": cannot open for writing"));
    write(stream);
    stream.close();
    if (!stream) throw IoError(concat(path.string(), ": write failed (disk full?)"));
}

}  // namespace minfer
