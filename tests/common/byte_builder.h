#pragma once
// Builds raw GGUF bytes by hand, field by field, so tests can write files that the writer
// refuses to produce (bad magic, negative counts, overlapping offsets, ...).

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace minfer::test {

class ByteBuilder {
  public:
    template <class T>
    ByteBuilder& put(T v) {
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        bytes_.insert(bytes_.end(), p, p + sizeof(T));
        return *this;
    }
    ByteBuilder& u32(uint32_t v) { return put(v); }
    ByteBuilder& u64(uint64_t v) { return put(v); }
    ByteBuilder& i64(int64_t v) { return put(v); }
    ByteBuilder& raw(std::string_view s) {
        const auto* p = reinterpret_cast<const std::byte*>(s.data());
        bytes_.insert(bytes_.end(), p, p + s.size());
        return *this;
    }
    ByteBuilder& str(std::string_view s) { return u64(s.size()).raw(s); }
    // magic "GGUF", version, tensor count, KV count
    ByteBuilder& header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
        return raw("GGUF").u32(version).i64(n_tensors).i64(n_kv);
    }
    ByteBuilder& zeros(std::size_t n) {
        bytes_.insert(bytes_.end(), n, std::byte{0});
        return *this;
    }
    ByteBuilder& pad_to(std::size_t alignment) {
        while (bytes_.size() % alignment != 0) bytes_.push_back(std::byte{0});
        return *this;
    }
    std::size_t size() const { return bytes_.size(); }
    const std::vector<std::byte>& bytes() const { return bytes_; }

  private:
    std::vector<std::byte> bytes_;
};

}  // namespace minfer::test
