// libFuzzer target for the GGUF reader: any bytes must either parse or raise minfer::Error,
// without crashes, hangs or oversized allocations. Seeds are small valid files from the writer.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "seed_dir.h"

namespace {

void write_seed(const std::filesystem::path& dir, const std::string& name,
                const minfer::GgufWriter& w) {
    const auto bytes = w.to_bytes();
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
}

void write_seeds(const std::filesystem::path& dir) {
    using namespace minfer;
    GgufWriter empty;
    write_seed(dir, "empty.gguf", empty);

    GgufWriter meta;
    meta.metadata().set("general.architecture", GgufValue::string("llama"));
    meta.metadata().set("llama.block_count", GgufValue::of<uint32_t>(2));
    meta.metadata().set("eps", GgufValue::of<float>(1e-5f));
    meta.metadata().set("flag", GgufValue::of<bool>(true));
    meta.metadata().set("big", GgufValue::of<uint64_t>(1));
    meta.metadata().set("tokens", GgufValue::array(GgufArray::of_strings({"<s>", "a", "bc"})));
    meta.metadata().set("scores",
                        GgufValue::array(GgufArray::of(std::vector<float>{0.f, -1.f, -2.f})));
    meta.metadata().set("nested", GgufValue::array(GgufArray::of_arrays({GgufValue::array(
                                      GgufArray::of(std::vector<int8_t>{1, 2}))})));
    write_seed(dir, "metadata.gguf", meta);

    static std::vector<std::byte> data(4096, std::byte{1});
    GgufWriter tensors;
    tensors.set_alignment(64);
    tensors.metadata().set("general.name", GgufValue::string("seed"));
    tensors.add_tensor("a", GgmlType::F32, {4, 2}, std::span(data).first(32));
    tensors.add_tensor("b", GgmlType::Q4_0, {64}, std::span(data).first(36));
    tensors.add_tensor("c", GgmlType::Q4_K, {256, 2}, std::span(data).first(288));
    tensors.add_tensor("d", GgmlType::F16, {3, 1, 2, 1}, std::span(data).first(12));
    write_seed(dir, "tensors.gguf", tensors);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const auto dir = minfer::fuzz::empty_seed_dir()) write_seeds(*dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const auto file = minfer::GgufFile::from_bytes(
            std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.gguf");
        // Touch what a consumer would: every tensor view and every value's text.
        std::size_t total = 0;
        for (const auto* t : file.tensors()) total += t->data.size();
        for (const auto& e : file.metadata().entries())
            total += e.value.to_display_string(4).size();
        if (total == static_cast<std::size_t>(-1)) std::abort();
    } catch (const minfer::Error&) {
    }
    return 0;
}
