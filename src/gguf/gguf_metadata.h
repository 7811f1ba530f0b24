#pragma once
// The key-value metadata of a GGUF file, in file order, with typed access that names the key
// (and the file) in every error: get<uint32_t>("llama.block_count").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_value.h"

namespace minfer {

class GgufMetadata {
  public:
    struct Entry {
        std::string key;
        GgufValue value;
    };

    // `source` prefixes error messages, normally the file name.
    explicit GgufMetadata(std::string source = "metadata") : source_(std::move(source)) {}

    // Appends a key; returns false (and changes nothing) if the key is already present.
    bool add(std::string_view key, GgufValue value);
    // Sets a key, replacing the value in place if present, else appending it.
    void set(std::string_view key, GgufValue value);
    // Removes a key if present.
    void remove(std::string_view key);

    std::size_t size() const { return entries_.size(); }
    bool empty() const { return entries_.empty(); }
    const std::vector<Entry>& entries() const { return entries_; }
    const std::string& source() const { return source_; }

    bool contains(std::string_view key) const { return find(key) != nullptr; }
    const GgufValue* find(std::string_view key) const;

    // Exact-type access; Error "<source>: metadata key 'k' is missing" / "... has type f32,
    // expected u32".
    template <class T>
    T get(std::string_view key) const {
        const GgufValue& v = require(key);
        return checked(key, [&] { return v.get<T>(); });
    }
    template <class T>
    std::optional<T> get_optional(std::string_view key) const {
        const GgufValue* v = find(key);
        if (v == nullptr) return std::nullopt;
        return checked(key, [&] { return v->get<T>(); });
    }

    // Any integer type (files disagree on u32 versus i32 for the same key), range-checked.
    int64_t get_int(std::string_view key) const;
    std::optional<int64_t> get_int_optional(std::string_view key) const;
    // Any float or integer type.
    double get_number(std::string_view key) const;
    std::optional<double> get_number_optional(std::string_view key) const;

    std::string_view get_string(std::string_view key) const;
    std::optional<std::string_view> get_string_optional(std::string_view key) const;
    const GgufArray& get_array(std::string_view key) const;
    const GgufArray* get_array_optional(std::string_view key) const;

  private:
    const GgufValue& require(std::string_view key) const;

    // Runs an accessor, prefixing its Error with the source and key.
    template <class F>
    auto checked(std::string_view key, F&& accessor) const -> decltype(accessor()) {
        try {
            return accessor();
        } catch (const Error& e) {
            throw FormatError(concat(source_, ": metadata key '", key, "' ", e.what()));
        }
    }

    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const {
            return std::hash<std::string_view>{}(s);
        }
    };

    std::string source_;
    std::vector<Entry> entries_;
    std::unordered_map<std::string, std::size_t, StringHash, std::equal_to<>> index_;
};

}  // namespace minfer
