#pragma once
// The compute shaders of the Vulkan backend, compiled from shaders/*.comp by glslc at build time
// (CMakeLists.txt: one SPIR-V module per shader and weight type) and compiled into minfer.

#include <cstdint>
#include <span>
#include <string_view>

namespace minfer::vulkan {

struct ShaderBlob {
    const char* name;  // "matmul_vec_q8_0": the source's stem, then its variant
    std::span<const uint32_t> words;
};

std::span<const ShaderBlob> shader_blobs();
// The SPIR-V of shader `name`. Throws UsageError for a name no shader has.
std::span<const uint32_t> shader_spirv(std::string_view name);

}  // namespace minfer::vulkan
