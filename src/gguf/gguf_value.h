#pragma once
// A GGUF metadata value: a scalar, a string or an array (arrays may nest). Values parsed from a
// file are views into the file's bytes (strings and numeric arrays are never copied); values
// built by code own their storage through a shared pointer.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace minfer {

enum class GgufType : uint32_t {
    Uint8 = 0,
    Int8 = 1,
    Uint16 = 2,
    Int16 = 3,
    Uint32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    Uint64 = 10,
    Int64 = 11,
    Float64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;

std::string_view gguf_type_name(GgufType type);  // "u32", "f32", "string", "array", ...
std::size_t gguf_scalar_size(GgufType type);     // bytes of a scalar; 0 for string and array
bool gguf_is_integer(GgufType type);

// The GgufType of a C++ scalar type (uint32_t -> Uint32, float -> Float32, bool -> Bool).
template <class T>
constexpr GgufType gguf_type_of() {
    if constexpr (std::is_same_v<T, bool>)
        return GgufType::Bool;
    else if constexpr (std::is_same_v<T, uint8_t>)
        return GgufType::Uint8;
    else if constexpr (std::is_same_v<T, int8_t>)
        return GgufType::Int8;
    else if constexpr (std::is_same_v<T, uint16_t>)
        return GgufType::Uint16;
    else if constexpr (std::is_same_v<T, int16_t>)
        return GgufType::Int16;
    else if constexpr (std::is_same_v<T, uint32_t>)
        return GgufType::Uint32;
    else if constexpr (std::is_same_v<T, int32_t>)
        return GgufType::Int32;
    else if constexpr (std::is_same_v<T, float>)
        return GgufType::Float32;
    else if constexpr (std::is_same_v<T, uint64_t>)
        return GgufType::Uint64;
    else if constexpr (std::is_same_v<T, int64_t>)
        return GgufType::Int64;
    else if constexpr (std::is_same_v<T, double>)
        return GgufType::Float64;
    else
        static_assert(sizeof(T) == 0, "not a GGUF scalar type");
}

class GgufValue;

class GgufArray {
  public:
    GgufArray() = default;

    GgufType element_type() const { return element_type_; }
    uint64_t size() const { return count_; }

    // Element i of a numeric or bool array whose element type is exactly T.
    template <class T>
    T at(std::size_t i) const {
        T v;
        std::memcpy(&v, raw_.data() + i * sizeof(T), sizeof(T));
        return v;
    }
    // All elements, converted from the exact type T (throws Error on another element type).
    template <class T>
    std::vector<T> to_vector() const {
        check_element_type(gguf_type_of<T>());
        std::vector<T> out(count_);
        if (count_ > 0) std::memcpy(out.data(), raw_.data(), count_ * sizeof(T));
        return out;
    }
    // Any numeric element, as double / int64 (bools as 0/1).
    double number_at(std::size_t i) const;
    std::span<const std::byte> raw_bytes() const { return raw_; }
    const std::vector<std::string_view>& strings() const { return strings_; }
    const std::vector<GgufValue>& arrays() const { return nested_; }

    // Builders. of_* copy into storage the array owns; view_* keep pointing at the caller's bytes.
    template <class T>
    static GgufArray of(std::span<const T> values) {
        auto storage = std::make_shared<std::vector<std::byte>>(values.size_bytes());
        if (!values.empty()) std::memcpy(storage->data(), values.data(), values.size_bytes());
        GgufArray a = view_raw(gguf_type_of<T>(), values.size(), *storage);
        a.owner_ = std::move(storage);
        return a;
    }
    template <class T>
    static GgufArray of(const std::vector<T>& values) {
        return of(std::span<const T>(values));
    }
    static GgufArray of_bools(const std::vector<bool>& values);
    static GgufArray of_strings(std::vector<std::string> values);
    static GgufArray of_arrays(std::vector<GgufValue> arrays);
    static GgufArray view_raw(GgufType element_type, uint64_t count,
                              std::span<const std::byte> bytes);
    static GgufArray view_strings(std::vector<std::string_view> strings);

  private:
    void check_element_type(GgufType expected) const;

    GgufType element_type_ = GgufType::Uint8;
    uint64_t count_ = 0;
    std::span<const std::byte> raw_;         // numeric and bool elements, little-endian
    std::vector<std::string_view> strings_;  // string elements
    std::vector<GgufValue> nested_;          // array elements
    std::shared_ptr<const void> owner_;      // storage behind raw_ or strings_, when owned
};

class GgufValue {
  public:
    GgufValue() = default;

    template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
    static GgufValue of(T v) {
        GgufValue out;
        out.type_ = gguf_type_of<T>();
        if constexpr (std::is_same_v<T, bool>) {
            out.bits_ = v ? 1 : 0;
        } else {
            std::memcpy(&out.bits_, &v, sizeof(T));
        }
        return out;
    }
    static GgufValue string(std::string s);            // owns a copy
    static GgufValue string_view(std::string_view s);  // views the caller's bytes
    static GgufValue array(GgufArray a);
    // A scalar from its raw little-endian bytes (the parser's path).
    static GgufValue scalar_from_bytes(GgufType type, const std::byte* bytes);

    GgufType type() const { return type_; }
    bool is_integer() const { return gguf_is_integer(type_); }
    bool is_number() const;

    // The value as exactly type T; throws Error("has type X, expected Y") otherwise.
    template <class T>
    T get() const {
        check_type(gguf_type_of<T>());
        if constexpr (std::is_same_v<T, bool>) {
            return bits_ != 0;
        } else {
            T v;
            std::memcpy(&v, &bits_, sizeof(T));
            return v;
        }
    }
    // Any integer type, as int64 / uint64 (throws Error if the value does not fit).
    int64_t to_int64() const;
    uint64_t to_uint64() const;
    // Any numeric type as double.
    double to_double() const;

    std::string_view as_string() const;  // throws Error unless type() == String
    const GgufArray& as_array() const;   // throws Error unless type() == Array

    // Human-readable rendering: numbers plainly, strings quoted and escaped, arrays as
    // [a, b, ... (N items)] with at most max_items elements (0 = all).
    std::string to_display_string(std::size_t max_items = 0) const;

  private:
    void check_type(GgufType expected) const;

    GgufType type_ = GgufType::Uint8;
    uint64_t bits_ = 0;  // scalar bit pattern, zero-extended
    std::string_view str_;
    std::shared_ptr<const std::string> owned_str_;
    std::shared_ptr<const GgufArray> array_;
};

// Quotes and escapes a string for display: "a\nb" (non-printable bytes as \xNN).
std::string quote_string(std::string_view s);

}  // namespace minfer
