#include "hub/digest.h"

#include <openssl/evp.h>

#include "core/error.h"

namespace minfer::hub {

struct Hasher::State {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~State() { EVP_MD_CTX_free(ctx); }
};

Hasher::Hasher(DigestKind kind, uint64_t size_for_git)
    : state_(std::make_unique<State>()), kind_(kind), size_for_git_(size_for_git) {
    if (state_->ctx == nullptr) throw std::bad_alloc();
    reset();
}

Hasher::~Hasher() = default;

void Hasher::reset() {
    const EVP_MD* md = kind_ == DigestKind::Sha256 ? EVP_sha256() : EVP_sha1();
    if (EVP_DigestInit_ex(state_->ctx, md, nullptr) != 1)
        throw IoError("OpenSSL could not start a digest");
    if (kind_ == DigestKind::GitSha1) {
        const std::string header = "blob " + std::to_string(size_for_git_) + '\0';
        EVP_DigestUpdate(state_->ctx, header.data(), header.size());
    }
}

void Hasher::update(std::span<const std::byte> bytes) {
    if (!bytes.empty() && EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size()) != 1)
        throw IoError("OpenSSL could not update a digest");
}

std::string Hasher::finish() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(state_->ctx, out, &n) != 1)
        throw IoError("OpenSSL could not finish a digest");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * n);
    for (unsigned i = 0; i < n; ++i) {
        hex += kHex[out[i] >> 4];
        hex += kHex[out[i] & 15];
    }
    reset();
    return hex;
}

std::string sha256_hex(std::span<const std::byte> bytes) {
    Hasher h(DigestKind::Sha256);
    h.update(bytes);
    return h.finish();
}

}  // namespace minfer::hub
