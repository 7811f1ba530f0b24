#include "gguf/gguf_metadata.h"

namespace minfer {

bool GgufMetadata::add(std::string_view key, GgufValue value) {
    if (index_.find(key) != index_.end()) return false;
    index_.emplace(std::string(key), entries_.size());
    entries_.push_back({std::string(key), std::move(value)});
    return true;
}

void GgufMetadata::set(std::string_view key, GgufValue value) {
    if (auto it = index_.find(key); it != index_.end()) {
        entries_[it->second].value = std::move(value);
        return;
    }
    add(key, std::move(value));
}

void GgufMetadata::remove(std::string_view key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    const std::size_t position = it->second;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(position));
    index_.erase(it);
    for (auto& [name, i] : index_) {
        if (i > position) --i;
    }
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].value;
}

const GgufValue& GgufMetadata::require(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) throw FormatError(concat(source_, ": metadata key '", key, "' is missing"));
    return *v;
}

int64_t GgufMetadata::get_int(std::string_view key) const {
    const GgufValue& v = require(key);
    return checked(key, [&] { return v.to_int64(); });
}

std::optional<int64_t> GgufMetadata::get_int_optional(std::string_view key) const {
    if (!contains(key)) return std::nullopt;
    return get_int(key);
}

double GgufMetadata::get_number(std::string_view key) const {
    const GgufValue& v = require(key);
    return checked(key, [&] { return v.to_double(); });
}

std::optional<double> GgufMetadata::get_number_optional(std::string_view key) const {
    if (!contains(key)) return std::nullopt;
    return get_number(key);
}

std::string_view GgufMetadata::get_string(std::string_view key) const {
    const GgufValue& v = require(key);
    return checked(key, [&] { return v.as_string(); });
}

std::optional<std::string_view> GgufMetadata::get_string_optional(std::string_view key) const {
    if (!contains(key)) return std::nullopt;
    return get_string(key);
}

const GgufArray& GgufMetadata::get_array(std::string_view key) const {
    const GgufValue& v = require(key);
    return checked(key, [&]() -> const GgufArray& { return v.as_array(); });
}

const GgufArray* GgufMetadata::get_array_optional(std::string_view key) const {
    if (!contains(key)) return nullptr;
    return &get_array(key);
}

}  // namespace minfer
