#pragma once
// The checksums a hub announces for a file, computed with OpenSSL's libcrypto (SHA-NI and AVX2
// code paths: about 1.7 GB/s for SHA-256 on this project's machines, faster than the network):
//   Sha256   an LFS file's oid, an ollama blob's digest
//   GitSha1  a small (non-LFS) file's git blob id: SHA-1 of "blob SIZE\0" then the bytes

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace minfer::hub {

enum class DigestKind { Sha256, GitSha1 };

struct ExpectedDigest {
    DigestKind kind = DigestKind::Sha256;
    std::string hex;  // lowercase; empty: nothing to check
};

class Hasher {
  public:
    // For GitSha1 the size is part of the hashed header, so it must be known up front.
    Hasher(DigestKind kind, uint64_t size_for_git = 0);
    ~Hasher();
    Hasher(const Hasher&) = delete;
    Hasher& operator=(const Hasher&) = delete;

    void update(std::span<const std::byte> bytes);
    void reset();
    // Lowercase hexadecimal; the hasher is reset afterwards.
    std::string finish();

  private:
    struct State;
    std::unique_ptr<State> state_;
    DigestKind kind_;
    uint64_t size_for_git_;
};

std::string sha256_hex(std::span<const std::byte> bytes);

}  // namespace minfer::hub
