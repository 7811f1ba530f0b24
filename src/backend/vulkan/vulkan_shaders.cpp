#include "backend/vulkan/vulkan_shaders.h"

#include "core/error.h"

namespace minfer::vulkan {

std::span<const uint32_t> shader_spirv(std::string_view name) {
    for (const ShaderBlob& s : shader_blobs()) {
        if (name == s.name) return s.words;
    }
    throw UsageError(concat("no Vulkan shader named '", name, "'"));
}

}  // namespace minfer::vulkan
