#include "gguf/gguf_value.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/hex_escape.h"

namespace minfer {

std::string_view gguf_type_name(GgufType type) {
    static constexpr std::array<std::string_view, kGgufTypeCount> kNames = {
        "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
        "bool", "string", "array", "u64", "i64", "f64"};
    const auto id = static_cast<uint32_t>(type);
    return id < kGgufTypeCount ? kNames[id] : std::string_view("invalid");
}

std::size_t gguf_scalar_size(GgufType type) {
    switch (type) {
        case GgufType::Uint8:
        case GgufType::Int8:
        case GgufType::Bool:
            return 1;
        case GgufType::Uint16:
        case GgufType::Int16:
            return 2;
        case GgufType::Uint32:
        case GgufType::Int32:
        case GgufType::Float32:
            return 4;
        case GgufType::Uint64:
        case GgufType::Int64:
        case GgufType::Float64:
            return 8;
        case GgufType::String:
        case GgufType::Array:
            return 0;
    }
    return 0;
}

bool gguf_is_integer(GgufType type) {
    switch (type) {
        case GgufType::Uint8:
        case GgufType::Int8:
        case GgufType::Uint16:
        case GgufType::Int16:
        case GgufType::Uint32:
        case GgufType::Int32:
        case GgufType::Uint64:
        case GgufType::Int64:
            return true;
        default:
            return false;
    }
}

namespace {

// Decodes a scalar's bits (zero-extended little-endian) as a double.
double scalar_as_double(GgufType type, uint64_t bits) {
    switch (type) {
        case GgufType::Uint8:
            return static_cast<uint8_t>(bits);
        case GgufType::Int8:
            return static_cast<int8_t>(static_cast<uint8_t>(bits));
        case GgufType::Uint16:
            return static_cast<uint16_t>(bits);
        case GgufType::Int16:
            return static_cast<int16_t>(static_cast<uint16_t>(bits));
        case GgufType::Uint32:
            return static_cast<uint32_t>(bits);
        case GgufType::Int32:
            return static_cast<int32_t>(static_cast<uint32_t>(bits));
        case GgufType::Uint64:
            return static_cast<double>(bits);
        case GgufType::Int64:
            return static_cast<double>(static_cast<int64_t>(bits));
        case GgufType::Bool:
            return bits != 0 ? 1.0 : 0.0;
        case GgufType::Float32: {
            float f;
            const auto b = static_cast<uint32_t>(bits);
            std::memcpy(&f, &b, 4);
            return f;
        }
        case GgufType::Float64: {
            double d;
            std::memcpy(&d, &bits, 8);
            return d;
        }
        default:
            return 0.0;
    }
}

uint64_t load_bits(const std::byte* p, std::size_t n) {
    uint64_t bits = 0;
    std::memcpy(&bits, p, n);  // GGUF is little-endian, and so is every host we build for
    return bits;
}

std::string format_scalar(GgufType type, uint64_t bits) {
    std::ostringstream out;
    switch (type) {
        case GgufType::Bool:
            return bits ? "true" : "false";
        case GgufType::Uint64:
            out << bits;
            break;
        case GgufType::Int64:
            out << static_cast<int64_t>(bits);
            break;
        case GgufType::Float32: {
            // Shortest text that reads back as the same float.
            char buf[32];
            const float f = static_cast<float>(scalar_as_double(type, bits));
            auto r = std::to_chars(buf, buf + sizeof(buf), f);
            return std::string(buf, r.ptr);
        }
        case GgufType::Float64: {
            char buf[40];
            auto r = std::to_chars(buf, buf + sizeof(buf), scalar_as_double(type, bits));
            return std::string(buf, r.ptr);
        }
        default:
            out << static_cast<int64_t>(scalar_as_double(type, bits));
            break;
    }
    return out.str();
}

}  // namespace

std::string quote_string(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (!append_control_escape(out, static_cast<unsigned char>(c))) {
            out += c;
        }
    }
    out += '"';
    return out;
}

// ---- GgufArray ----

double GgufArray::number_at(std::size_t i) const {
    const std::size_t size = gguf_scalar_size(element_type_);
    if (size == 0)
        throw Error(concat("array of ", gguf_type_name(element_type_), " is not numeric"));
    return scalar_as_double(element_type_, load_bits(raw_.data() + i * size, size));
}

void GgufArray::check_element_type(GgufType expected) const {
    if (element_type_ != expected) {
        throw Error(concat("array has elements of type ", gguf_type_name(element_type_),
                           ", expected ", gguf_type_name(expected)));
    }
}

GgufArray GgufArray::of_bools(const std::vector<bool>& values) {
    auto storage = std::make_shared<std::vector<std::byte>>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
        (*storage)[i] = values[i] ? std::byte{1} : std::byte{0};
    GgufArray a = view_raw(GgufType::Bool, values.size(), *storage);
    a.owner_ = std::move(storage);
    return a;
}

GgufArray GgufArray::of_strings(std::vector<std::string> values) {
    auto storage = std::make_shared<std::vector<std::string>>(std::move(values));
    std::vector<std::string_view> views(storage->begin(), storage->end());
    GgufArray a = view_strings(std::move(views));
    a.owner_ = std::move(storage);
    return a;
}

GgufArray GgufArray::of_arrays(std::vector<GgufValue> arrays) {
    for (const auto& v : arrays) {
        if (v.type() != GgufType::Array) throw Error("a nested GGUF array must hold only arrays");
    }
    GgufArray a;
    a.element_type_ = GgufType::Array;
    a.count_ = arrays.size();
    a.nested_ = std::move(arrays);
    return a;
}

GgufArray GgufArray::view_raw(GgufType element_type, uint64_t count,
                              std::span<const std::byte> bytes) {
    GgufArray a;
    a.element_type_ = element_type;
    a.count_ = count;
    a.raw_ = bytes;
    return a;
}

GgufArray GgufArray::view_strings(std::vector<std::string_view> strings) {
    GgufArray a;
    a.element_type_ = GgufType::String;
    a.count_ = strings.size();
    a.strings_ = std::move(strings);
    return a;
}

// ---- GgufValue ----

GgufValue GgufValue::string(std::string s) {
    GgufValue v;
    v.type_ = GgufType::String;
    v.owned_str_ = std::make_shared<const std::string>(std::move(s));
    v.str_ = *v.owned_str_;
    return v;
}

GgufValue GgufValue::string_view(std::string_view s) {
    GgufValue v;
    v.type_ = GgufType::String;
    v.str_ = s;
    return v;
}

GgufValue GgufValue::array(GgufArray a) {
    GgufValue v;
    v.type_ = GgufType::Array;
    v.array_ = std::make_shared<const GgufArray>(std::move(a));
    return v;
}

GgufValue GgufValue::scalar_from_bytes(GgufType type, const std::byte* bytes) {
    GgufValue v;
    v.type_ = type;
    v.bits_ = load_bits(bytes, gguf_scalar_size(type));
    return v;
}

bool GgufValue::is_number() const {
    return is_integer() || type_ == GgufType::Float32 || type_ == GgufType::Float64;
}

void GgufValue::check_type(GgufType expected) const {
    if (type_ != expected) {
        throw Error(
            concat("has type ", gguf_type_name(type_), ", expected ", gguf_type_name(expected)));
    }
}

int64_t GgufValue::to_int64() const {
    if (!is_integer())
        throw Error(concat("has type ", gguf_type_name(type_), ", expected an integer"));
    if (type_ == GgufType::Uint64 &&
        bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error(concat("value ", bits_, " does not fit a signed 64-bit integer"));
    if (type_ == GgufType::Uint64 || type_ == GgufType::Int64) return static_cast<int64_t>(bits_);
    return static_cast<int64_t>(scalar_as_double(type_, bits_));
}

uint64_t GgufValue::to_uint64() const {
    if (!is_integer())
        throw Error(concat("has type ", gguf_type_name(type_), ", expected an integer"));
    if (type_ == GgufType::Uint64) return bits_;
    const int64_t v = to_int64();
    if (v < 0) throw Error(concat("value ", v, " is negative, expected a non-negative integer"));
    return static_cast<uint64_t>(v);
}

double GgufValue::to_double() const {
    if (!is_number())
        throw Error(concat("has type ", gguf_type_name(type_), ", expected a number"));
    return scalar_as_double(type_, bits_);
}

std::string_view GgufValue::as_string() const {
    check_type(GgufType::String);
    return str_;
}

const GgufArray& GgufValue::as_array() const {
    check_type(GgufType::Array);
    return *array_;
}

std::string GgufValue::to_display_string(std::size_t max_items) const {
    if (type_ == GgufType::String) return quote_string(str_);
    if (type_ != GgufType::Array) return format_scalar(type_, bits_);

    const GgufArray& a = *array_;
    const std::size_t shown =
        max_items == 0 ? a.size()
                       : static_cast<std::size_t>(std::min<uint64_t>(a.size(), max_items));
    std::string out = "[";
    for (std::size_t i = 0; i < shown; ++i) {
        if (i > 0) out += ", ";
        switch (a.element_type()) {
            case GgufType::String:
                out += quote_string(a.strings()[i]);
                break;
            case GgufType::Array:
                out += a.arrays()[i].to_display_string(max_items);
                break;
            default: {
                const std::size_t size = gguf_scalar_size(a.element_type());
                out += format_scalar(a.element_type(),
                                     load_bits(a.raw_bytes().data() + i * size, size));
            }
        }
    }
    if (shown < a.size()) out += concat(", ... (", a.size(), " items)");
    out += "]";
    return out;
}

}  // namespace minfer
